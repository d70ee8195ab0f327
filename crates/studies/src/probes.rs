//! The probes experiment files name (`probe = "…"` of a `[[metric]]`): one registry entry
//! each — a name, the fields it gives, and a function run on the config's hardware.
//!
//! A probe runs once per (config, sweep point, probe, resolved arguments, metric
//! hardware) and gives a map of fields; every metric naming it takes its `field` from
//! that one run. Adding a probe is one entry in [`PROBES`]:
//!
//! ```ignore
//! Probe {
//!     name: "nvme_sharing",
//!     fields: &["clients_ok", "total_kiops", "min_client_kiops", "jain_fairness", "error"],
//!     run: nvme_sharing, // fn(&mut ProbeCx) -> Result<BTreeMap<String, Value>, RunError>
//! },
//! ```
//!
//! and in the experiment file
//! `[[metric]] name = "total_kiops" probe = "nvme_sharing" field = "total_kiops"
//! args = { clients = "{clients}" }`.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sim::timed::TimedFabric;

use crate::harness::{self, RunError};
use crate::{ioctopus, rdma, smartio, tyche};

/// What a probe's function returns: field name → value (a number, a string, a bool,
/// null, a list or an object; the metrics that name a field report it as given).
pub type Fields = BTreeMap<String, Value>;

/// A probe's function.
pub type ProbeFn = fn(&mut ProbeCx) -> Result<Fields, RunError>;

/// One measurement experiment files can name.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// The name a `[[metric]]`'s `probe` gives.
    pub name: &'static str,
    /// The fields it gives, in the order it documents them; a metric without `field`
    /// takes the only one, so a probe of one field needs none named.
    pub fields: &'static [&'static str],
    pub run: ProbeFn,
}

impl Probe {
    pub fn find(registry: &'static [Probe], name: &str) -> Option<&'static Probe> {
        registry.iter().find(|p| p.name == name)
    }
}

/// What a probe sees: the timed fabric of its config's scenario with every override
/// applied (the config's `set`, the metric's, the user's `--set`), fresh for this run;
/// its arguments with `{var}` and `{swept}` substituted; the sweep point.
pub struct ProbeCx<'a> {
    pub tf: &'a mut TimedFabric,
    args: &'a BTreeMap<String, String>,
    point: &'a [(String, u64)],
    /// "<experiment>: metric `<m>` (probe `<p>`)", for errors.
    what: String,
    counters: Option<Value>,
}

impl<'a> ProbeCx<'a> {
    pub fn new(
        tf: &'a mut TimedFabric,
        args: &'a BTreeMap<String, String>,
        point: &'a [(String, u64)],
        what: String,
    ) -> ProbeCx<'a> {
        ProbeCx {
            tf,
            args,
            point,
            what,
            counters: None,
        }
    }

    /// A resolved argument; an error naming the metric and the probe when it is missing.
    pub fn arg(&self, key: &str) -> Result<String, RunError> {
        self.args.get(key).cloned().ok_or_else(|| {
            self.error(format!(
                "needs argument `{key}` (given: {})",
                names(self.args.keys())
            ))
        })
    }

    /// An argument a probe may go without (it then states its default).
    pub fn arg_opt(&self, key: &str) -> Option<&str> {
        self.args.get(key).map(String::as_str)
    }

    /// The value of a swept parameter at this point, if the experiment sweeps it.
    pub fn swept(&self, name: &str) -> Option<u64> {
        self.point.iter().find(|(k, _)| k == name).map(|p| p.1)
    }

    /// The value of a swept parameter this probe cannot do without.
    pub fn need_swept(&self, name: &str) -> Result<u64, RunError> {
        self.swept(name)
            .ok_or_else(|| self.error(format!("needs a swept `{name}`")))
    }

    /// The swept `bytes`.
    pub fn bytes(&self) -> Result<u64, RunError> {
        self.need_swept("bytes")
    }

    /// Hardware counters of this run (kept per metric in `counters.json`).
    pub fn set_counters(&mut self, counters: Value) {
        self.counters = Some(counters);
    }

    pub fn take_counters(&mut self) -> Option<Value> {
        self.counters.take()
    }

    /// "<experiment>: metric `<m>` (probe `<p>`)": where errors of this run are.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// An error located at this metric and probe.
    pub fn error(&self, msg: impl std::fmt::Display) -> RunError {
        RunError(format!("{}: {msg}", self.what))
    }

    /// An argument that must be one of two words: `Ok(true)` for `yes`, `Ok(false)` for `no`.
    pub fn choice(&self, key: &str, yes: &str, no: &str) -> Result<bool, RunError> {
        let v = self.arg(key)?;
        if v == yes {
            Ok(true)
        } else if v == no {
            Ok(false)
        } else {
            Err(self.error(format!("{key} = `{v}`: use \"{yes}\" or \"{no}\"")))
        }
    }
}

fn names<'s>(it: impl Iterator<Item = &'s String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// One field.
pub fn one(name: &str, v: Value) -> Fields {
    BTreeMap::from([(name.to_string(), v)])
}

/// The probes of the built-in experiment files.
pub const PROBES: &[Probe] = &[
    Probe {
        name: "tyche",
        fields: &[
            "throughput_gbps",
            "qpi_gbps",
            "qpi0_share",
            "requests",
            "frames",
            "cores_busy",
        ],
        run: tyche::tyche,
    },
    Probe {
        name: "rdma_latency",
        fields: &["latency_ns"],
        run: rdma::rdma_latency,
    },
    Probe {
        name: "rdma_throughput",
        fields: &["mops", "std_mops"],
        run: rdma::rdma_throughput,
    },
    Probe {
        name: "rdma_independent_load",
        fields: &["mops", "std_mops"],
        run: rdma::contention::rdma_independent_load,
    },
    Probe {
        name: "rdma_mr_workers",
        fields: &["mops", "std_mops"],
        run: rdma::contention::rdma_mr_workers,
    },
    Probe {
        name: "rdma_memcached",
        fields: &["kops"],
        run: rdma::memcached::rdma_memcached,
    },
    Probe {
        name: "tcp_stream",
        fields: &["throughput_gbps", "mem_bw_gbps", "cpu_util"],
        run: ioctopus::tcp_stream,
    },
    Probe {
        name: "tcp_multicore",
        fields: &["throughput_gbps", "mem_bw_gbps"],
        run: ioctopus::tcp_multicore,
    },
    Probe {
        name: "tcp_rr",
        fields: &["latency_us", "p99_us"],
        run: ioctopus::tcp_rr,
    },
    Probe {
        name: "qpi_congestion",
        fields: &["rx_gbps", "udp_latency_us", "stream_gbps"],
        run: ioctopus::qpi::qpi_congestion,
    },
    Probe {
        name: "memcached",
        fields: &["kops", "mem_bw_gbps"],
        run: ioctopus::memcached,
    },
    Probe {
        name: "colocation",
        fields: &["pagerank_slowdown", "io_throughput_gbps"],
        run: ioctopus::colocation,
    },
    Probe {
        name: "pktgen",
        fields: &["mpps", "throughput_gbps", "mem_bw_gbps"],
        run: ioctopus::pktgen,
    },
    Probe {
        name: "coalescing",
        fields: &[
            "rr_64_latency_us",
            "rr_16k_latency_us",
            "rr_64_irqs_per_s",
            "rx_gbps",
            "rx_cpu_util",
            "rx_irqs_per_s",
        ],
        run: ioctopus::coalescing::coalescing,
    },
    Probe {
        name: "pktgen_fragments",
        fields: &["mpps", "mem_bw_gbps", "interconnect_gbps"],
        run: ioctopus::ioctosg::pktgen_fragments,
    },
    Probe {
        name: "tcp_migration",
        fields: &[
            "before_gbps",
            "after_gbps",
            "t_ms",
            "pf0_gbps",
            "pf1_gbps",
            "reordered",
            "lost",
        ],
        run: ioctopus::migration::tcp_migration,
    },
    Probe {
        name: "cpu_store_oneway",
        fields: &["ns"],
        run: cpu_store_oneway,
    },
    Probe {
        name: "cpu_store_ntb_span",
        fields: &["ns"],
        run: cpu_store_ntb_span,
    },
    Probe {
        name: "ntb_copy",
        fields: &["gbps"],
        run: ntb_copy,
    },
    Probe {
        name: "gpu_copy",
        fields: &["gbps"],
        run: gpu_copy,
    },
    Probe {
        name: "p2p_copy",
        fields: &["gbps"],
        run: p2p_copy,
    },
    Probe {
        name: "pingpong",
        fields: &["ns"],
        run: pingpong,
    },
    Probe {
        name: "path_shape",
        fields: &["hops", "roots"],
        run: path_shape,
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

fn cpu_store_oneway(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let t = smartio::cpu_store_oneway(cx.tf, &cx.arg("from")?, &cx.arg("to")?)?;
    Ok(one("ns", json!(t.as_ns_f64())))
}

fn cpu_store_ntb_span(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let t = smartio::cpu_store_ntb_span(cx.tf, &cx.arg("from")?, &cx.arg("to")?)?;
    Ok(one("ns", json!(t.as_ns_f64())))
}

fn ntb_copy(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let b = cx.bytes()?;
    let write = cx.choice("op", "write", "read")?;
    let (engine, local, remote) = (cx.arg("engine")?, cx.arg("local")?, cx.arg("remote")?);
    let t = smartio::ntb_copy(cx.tf, &engine, &local, &remote, b, write)?;
    let counters = harness::counters_json(cx.tf, b);
    cx.set_counters(counters);
    Ok(one("gbps", json!(harness::gbps(b, t))))
}

fn gpu_copy(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    // `through = "mdev"`: the GPU is passed to a VM on the user's host (MDEV).
    if cx.args.get("through").map(String::as_str) == Some("mdev") {
        let mut args = cx.args.clone();
        args.insert("vm_host".into(), cx.arg("user")?);
        let what = cx.what().to_string();
        let point = cx.point.to_vec();
        let mut inner = ProbeCx::new(cx.tf, &args, &point, what);
        let f = smartio::nvme::gpu_copy_mdev(&mut inner)?;
        if let Some(c) = inner.take_counters() {
            cx.set_counters(c);
        }
        return Ok(f);
    }
    let b = cx.bytes()?;
    let write = cx.choice("op", "write", "read")?;
    let (gpu, user) = (cx.arg("gpu")?, cx.arg("user")?);
    let t = smartio::gpu_copy_probe(cx.tf, &gpu, &user, b, write)?;
    let counters = harness::counters_json(cx.tf, b);
    cx.set_counters(counters);
    Ok(one("gbps", json!(harness::gbps(b, t))))
}

fn p2p_copy(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let b = cx.bytes()?;
    let via_ram = cx.choice("via", "ram", "p2p")?;
    let t = smartio::p2p_copy(cx.tf, &cx.arg("a")?, &cx.arg("b")?, via_ram, b)?;
    Ok(one("gbps", json!(harness::gbps(b, t))))
}

fn pingpong(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let via_ram = cx.choice("via", "ram", "p2p")?;
    let t = smartio::gpu_pingpong(cx.tf, &cx.arg("a")?, &cx.arg("b")?, via_ram)?;
    Ok(one("ns", json!(t.as_ns_f64())))
}

fn path_shape(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let via_ram = cx.choice("via", "ram", "p2p")?;
    let (hops, roots) = smartio::path_shape(cx.tf, &cx.arg("a")?, &cx.arg("b")?, via_ram)?;
    Ok(BTreeMap::from([
        ("hops".to_string(), json!(hops)),
        ("roots".to_string(), json!(roots)),
    ]))
}
