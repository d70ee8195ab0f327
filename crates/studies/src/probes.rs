//! The registry of probes the built-in experiment files name: one entry per probe, each
//! study's function. The only place that knows every study.

pub use crate::probe::{one, Fields, Probe, ProbeCx, ProbeFn};
use crate::{ioctopus, smartio};

/// The probes of the built-in experiment files.
pub const PROBES: &[Probe] = &[
    Probe {
        name: "colocation",
        fields: &["pagerank_slowdown", "io_throughput_gbps"],
        run: ioctopus::colocation,
    },
    Probe {
        name: "cpu_store_oneway",
        fields: &["ns"],
        run: smartio::probes::cpu_store_oneway,
    },
    Probe {
        name: "cpu_store_ntb_span",
        fields: &["ns"],
        run: smartio::probes::cpu_store_ntb_span,
    },
    Probe {
        name: "ntb_copy",
        fields: &["gbps"],
        run: smartio::probes::ntb_copy,
    },
    Probe {
        name: "gpu_copy",
        fields: &["gbps"],
        run: smartio::probes::gpu_copy,
    },
    Probe {
        name: "p2p_copy",
        fields: &["gbps"],
        run: smartio::probes::p2p_copy,
    },
    Probe {
        name: "pingpong",
        fields: &["ns"],
        run: smartio::probes::pingpong,
    },
    Probe {
        name: "path_shape",
        fields: &["hops", "roots"],
        run: smartio::probes::path_shape,
    },
    Probe {
        name: "borrow_until_full",
        fields: &["borrowed", "error"],
        run: smartio::limits::borrow_until_full,
    },
    Probe {
        name: "map_until_full",
        fields: &["windows", "error"],
        run: smartio::limits::map_until_full,
    },
    Probe {
        name: "lend_dma",
        fields: &["ok", "error"],
        run: smartio::limits::lend_dma,
    },
    Probe {
        name: "nvme_blk_qd1",
        fields: &[
            "median_us",
            "p99_us",
            "control_msgs_per_io",
            "bytes_verified",
        ],
        run: smartio::nvme::nvme_blk_qd1,
    },
    Probe {
        name: "nvme_sq_qd1",
        fields: &[
            "median_us",
            "p99_us",
            "read_hops",
            "read_roots",
            "control_msgs_per_io",
        ],
        run: smartio::nvme::nvme_sq_qd1,
    },
    Probe {
        name: "nvme_sharing",
        fields: &[
            "clients_ok",
            "total_kiops",
            "min_client_kiops",
            "jain_fairness",
            "error",
            "control_msgs_in_window",
            "median_us",
            "p99_us",
        ],
        run: smartio::nvme::nvme_sharing,
    },
    Probe {
        name: "fio_streams",
        fields: &[
            "fio_gbps",
            "fio_norm",
            "stream_gbps",
            "stream_alone_gbps",
            "stream_norm",
            "upi_util",
        ],
        run: crate::nvme_upi::fio_streams,
    },
    Probe {
        name: "multicast_identify",
        fields: &["deliveries", "bytes_identical", "skipped_copies"],
        run: smartio::nvme::multicast_identify,
    },
    Probe {
        name: "nvme_failover",
        fields: &[
            "ios_completed",
            "ios_failed_reported",
            "acked_writes_lost",
            "bytes_corrupted",
            "recovery_us",
            "ios_verified",
            "last_path",
        ],
        run: smartio::nvme::nvme_failover,
    },
    Probe {
        name: "gpu_copy_mdev",
        fields: &["gbps"],
        run: smartio::nvme::gpu_copy_mdev,
    },
];
