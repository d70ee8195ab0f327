//! The unit tests of `spec`: what each kind reads, and where each error is located.

use super::*;

fn src(text: &str) -> Source {
    Source {
        name: "t.toml".into(),
        text: text.into(),
    }
}

const OK: &str = r#"
[[workload]]
name = "rx"
kind = "dma"
device = "srv.nic0"
target = "srv.ram.node1"
op = "write"
transfer_bytes = "4 KiB"
outstanding = 32

[[workload]]
name = "ant"
kind = "cpu_stream"
host = "srv"
cpu_node = 0
mem_node = 1
op = "read"
misses_in_flight = 10

[measure]
warmup = "100 us"
duration = "1 ms"
"#;

#[test]
fn the_design_example_parses() {
    let s = parse(&src(OK)).unwrap();
    assert_eq!(s.workloads.len(), 2);
    assert_eq!(s.window().unwrap().duration, Time::from_ns(1_000_000));
    assert!(matches!(
        s.workloads[0].kind,
        Kind::Dma {
            transfer_bytes: 4096,
            outstanding: 32,
            op: Direction::Write,
            ..
        }
    ));
}

#[test]
fn errors_are_located_and_named() {
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    // An unknown key: at the key, named in its workload.
    assert_eq!(
            msg(&OK.replace("outstanding = 32", "outstandin = 32")),
            "t.toml:9:1: unknown field `outstandin`, expected one of `name`, `kind`, `device`, \
             `target`, `offset`, `op`, `transfer_bytes`, `outstanding` (key `workload.rx.outstandin`)"
        );
    // A missing key: at the table, named.
    assert_eq!(
        msg(&OK.replace("outstanding = 32\n", "")),
        "t.toml:2:1: missing field `outstanding` (key `workload.rx.outstanding`)"
    );
    // Wrong types and overflow: at the value.
    assert_eq!(
        msg(&OK.replace("outstanding = 32", "outstanding = \"32\"")),
        "t.toml:9:15: invalid type: string \"32\", expected u32 (key `workload.rx.outstanding`)"
    );
    assert_eq!(
            msg(&OK.replace("misses_in_flight = 10", "misses_in_flight = 5000000000")),
            "t.toml:18:20: invalid value: integer `5000000000`, expected u32 (key `workload.ant.misses_in_flight`)"
        );
    assert_eq!(
        msg(&OK.replace("\"4 KiB\"", "\"4 KB\"")),
        "t.toml:8:18: `4 KB` is ambiguous: write `4 KiB` (4 × 2^10 bytes) or `4000` \
             (4 × 10^3 bytes) (key `workload.rx.transfer_bytes`)"
    );
    // Out of range: at the value.
    assert_eq!(
        msg(&OK.replace(
            "misses_in_flight = 10",
            "misses_in_flight = 10\ncores = 257"
        )),
        "t.toml:19:9: must be 0 .. 256 cores (0: the workload is idle, so a sweep can start \
         without it) (key `workload.ant.cores`)"
    );
    assert_eq!(
        msg(&OK.replace("outstanding = 32", "outstanding = 0")),
        "t.toml:9:15: must be 1 .. 65536 requests in flight (key `workload.rx.outstanding`)"
    );
    let e = parse(&src(&OK.replace("\"1 ms\"", "\"1 fortnight\""))).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("measure.duration"));
    assert_eq!(e.line, 22);
    assert_eq!(
        msg(&OK.replace("name = \"ant\"", "name = \"rx\"")),
        "t.toml:12:8: two workloads are named `rx`: names must be unique (key `workload.rx.name`)"
    );
    assert_eq!(
        msg(&OK.replace("kind = \"dma\"", "kind = \"dmaa\"")),
        "t.toml:4:8: unknown workload kind `dmaa` (known: dma, pcie_lat, pcie_bw, cpu_stream, ntb_copy, gpu_copy, \
             gpu_p2p, cpu_store, nvme_qd1, nvme_multicast, nvme_share, borrow_all, map_windows, lend_dma, nvme_failover, pingpong, fio, netperf, pktgen, memcached, udp_pingpong, pagerank, tyche_fio, zmio, rdma_bench, \
             rdma_memcached) (key `workload.rx.kind`)"
    );
    // Without a name, a workload is named by its position.
    assert_eq!(
        msg(&OK.replace("kind = \"cpu_stream\"\n", "")),
        "t.toml:11:1: a workload needs `kind` = \"dma\", \"pcie_lat\", \"pcie_bw\", \"cpu_stream\", \"ntb_copy\", \
             \"gpu_copy\", \"gpu_p2p\", \"cpu_store\", \"nvme_qd1\", \"nvme_multicast\", \"nvme_share\", \"borrow_all\", \"map_windows\", \"lend_dma\", \"nvme_failover\", \"pingpong\", \"fio\", \"netperf\", \"pktgen\", \"memcached\", \"udp_pingpong\", \
             \"pagerank\", \"tyche_fio\", \"zmio\", \"rdma_bench\" or \"rdma_memcached\" (key \
             `workload.ant.kind`)"
    );
    assert_eq!(
        msg(&OK.replace("name = \"rx\"\n", "")),
        "t.toml:2:1: missing field `name` (key `workload[0].name`)"
    );
}

const FIO: &str = r#"
[[workload]]
name = "fio"
kind = "fio"
device = "server.nvme0"
cpu_node = 1
mem_node = 1
threads = 8
iodepth = 32
block_bytes = "128 KiB"
op = "read"

[measure]
warmup = "200 us"
duration = "1 ms"
"#;

#[test]
fn a_fio_workload_parses_with_random_offsets_by_default() {
    let s = parse(&src(FIO)).unwrap();
    assert_eq!(
        s.workloads[0].kind,
        Kind::Fio {
            device: "server.nvme0".into(),
            cpu_node: 1,
            mem_node: 1,
            threads: 8,
            iodepth: 32,
            block_bytes: 128 << 10,
            op: Direction::Read,
            pattern: Pattern::Random,
            seed: None,
        }
    );
    let seq = parse(&src(
        &FIO.replace("op = \"read\"", "op = \"read\"\npattern = \"sequential\"")
    ))
    .unwrap();
    assert!(matches!(
        seq.workloads[0].kind,
        Kind::Fio {
            pattern: Pattern::Sequential,
            ..
        }
    ));
}

#[test]
fn fio_fields_out_of_range_are_located() {
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    assert_eq!(
        msg(&FIO.replace("iodepth = 32", "iodepth = 0")),
        "t.toml:9:11: must be at least 1 request in flight (key `workload.fio.iodepth`)"
    );
    assert_eq!(
        msg(&FIO.replace("threads = 8", "threads = 0")),
        "t.toml:8:11: must be at least 1 thread (key `workload.fio.threads`)"
    );
    assert_eq!(
        msg(&FIO.replace("\"128 KiB\"", "\"1000\"")),
        "t.toml:10:15: must be a whole number of 4 KiB blocks (key `workload.fio.block_bytes`)"
    );
    assert_eq!(
        msg(&FIO.replace("iodepth = 32", "iodepth = 70000")),
        "t.toml:9:11: invalid value: integer `70000`, expected u16 (key `workload.fio.iodepth`)"
    );
    assert!(
        msg(&FIO.replace("op = \"read\"", "op = \"read\"\npattern = \"zigzag\""))
            .contains("unknown variant `zigzag`, expected `random` or `sequential`")
    );
}

#[test]
fn inline_workloads_are_located_too() {
    let text = "workload = [{ name = \"rx\", kind = \"dma\", device = \"d\", target = \"t\", \
                    op = \"read\", transfer_bytes = \"1 MB\", outstanding = 1 }]\n\
                    [measure]\nwarmup = \"1 us\"\nduration = \"1 us\"\n";
    let e = parse(&src(text)).unwrap_err();
    assert_eq!(e.key.as_deref(), Some("workload.rx.transfer_bytes"), "{e}");
    assert_eq!((e.line, e.col), (1, 100), "{e}");
    assert!(e.message.starts_with("`1 MB` is ambiguous"), "{e}");
}

const NET: &str = r#"
[[workload]]
name = "rx"
kind = "netperf"
test = "TCP_STREAM"
msg_bytes = "64 KiB"
server = "srv"
client = "cli"
nic = "nic"
cpu_node = 0
mem_node = 0
nic_mode = "standard"
netdev_pf = "pf1"

[[workload]]
name = "gen"
kind = "pktgen"
host = "srv"
nic = "nic"
cpu_node = 1
mem_node = 1
pkt_bytes = 64
nic_mode = "octonic"

[measure]
warmup = "1 ms"
duration = "2 ms"
"#;

#[test]
fn network_workloads_parse_with_their_defaults() {
    let s = parse(&src(NET)).unwrap();
    assert_eq!(
        s.workloads[0].kind,
        Kind::Netperf {
            test: NetTest::TcpStream {
                server_receives: true
            },
            msg_bytes: 65536,
            connections: 1,
            server: "srv".into(),
            client: "cli".into(),
            nic: "nic".into(),
            client_nic: "nic".into(),
            cpu_node: 0,
            mem_node: 0,
            nic_mode: NicMode::Standard,
            netdev_pf: 1,
            coalescing: None,
            streams: None,
            migration: None,
            client_remote: false,
        }
    );
    assert!(matches!(
        s.workloads[1].kind,
        Kind::Pktgen {
            pkt_bytes: 64,
            nic_mode: NicMode::Octonic,
            netdev_pf: 0,
            ..
        }
    ));
    let tx = parse(&src(
        &NET.replace("\"TCP_STREAM\"", "\"TCP_STREAM\"\ndirection = \"tx\"")
    ))
    .unwrap();
    assert!(matches!(
        tx.workloads[0].kind,
        Kind::Netperf {
            test: NetTest::TcpStream {
                server_receives: false
            },
            ..
        }
    ));
}

#[test]
fn network_fields_out_of_range_are_located() {
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    assert_eq!(
        msg(&NET.replace("\"64 KiB\"", "0")),
        "t.toml:6:13: must be at least 1 byte (key `workload.rx.msg_bytes`)"
    );
    assert_eq!(
            msg(&NET.replace("pkt_bytes = 64", "pkt_bytes = 63")),
            "t.toml:22:13: must be an Ethernet frame size, 64 .. 1518 bytes (key `workload.gen.pkt_bytes`)"
        );
    assert_eq!(
        msg(&NET
            .replace("pkt_bytes = 64", "pkt_bytes = 64\nioctosg = true")
            .replace("nic_mode = \"octonic\"", "nic_mode = \"standard\"")),
        "t.toml:23:11: IOctoSG is the octoNIC's (nic_mode = \"octonic\") (key \
             `workload.gen.ioctosg`)"
    );
    assert_eq!(
        msg(&NET.replace("pkt_bytes = 64", "pkt_bytes = 64\nfragment_nodes = []")),
        "t.toml:23:18: must name 1 .. 16 fragments' nodes (key `workload.gen.fragment_nodes`)"
    );
    assert_eq!(
            msg(&NET.replace("\"pf1\"", "\"port1\"")),
            "t.toml:13:13: `port1` is not a PF: write its index (1) or its name (\"pf1\") (key `workload.rx.netdev_pf`)"
        );
    assert!(msg(&NET.replace("cpu_node = 0", "cpu_core = 0"))
        .starts_with("t.toml:10:1: unknown field `cpu_core`"));
    let rr = NET.replace("\"TCP_STREAM\"", "\"TCP_RR\"");
    assert_eq!(
        msg(&rr.replace("\"TCP_RR\"", "\"TCP_RR\"\ndirection = \"rx\"")),
        "t.toml:6:13: `direction` is for TCP_STREAM: a TCP_RR transaction goes both ways \
             (key `workload.rx.direction`)"
    );
    assert_eq!(
        msg(&rr.replace("netdev_pf", "connections = 2\nnetdev_pf")),
        "t.toml:13:15: TCP_RR runs one connection (one transaction outstanding) (key \
             `workload.rx.connections`)"
    );
    assert!(matches!(
        parse(&src(&rr.replace(
            "netdev_pf",
            "client_placement = \"remote\"\nnetdev_pf"
        )))
        .unwrap()
        .workloads[0]
            .kind,
        Kind::Netperf {
            client_remote: true,
            ..
        }
    ));
    assert_eq!(
        msg(&rr.replace("netdev_pf", "client_placement = \"far\"\nnetdev_pf")),
        "t.toml:13:20: client_placement `far`: use \"local\" or \"remote\" (to the client's \
             NIC) (key `workload.rx.client_placement`)"
    );
    assert!(
        msg(&NET.replace("netdev_pf", "client_placement = \"remote\"\nnetdev_pf"))
            .contains("`client_placement` is for TCP_RR")
    );
    assert!(msg(&NET.replace("\"TCP_STREAM\"", "\"UDP_STREAM\""))
        .contains("unknown variant `UDP_STREAM`, expected `TCP_STREAM` or `TCP_RR`"));
}

const MC: &str = r#"
[[workload]]
name = "mc"
kind = "memcached"
server = "srv"
client = "cli"
nic = "nic"
cpu_node = 0
mem_node = 0
nic_mode = "octonic"

[[workload]]
name = "udp"
kind = "udp_pingpong"
msg_bytes = 64
server = "srv"
client = "cli"
nic = "nic"
cpu_node = 1
mem_node = 1
nic_mode = "standard"

[[workload]]
name = "pr"
kind = "pagerank"
host = "srv"
threads_per_socket = 8

[measure]
warmup = "1 ms"
duration = "2 ms"
"#;

#[test]
fn memcached_takes_memaslaps_defaults_and_the_others_parse() {
    let s = parse(&src(MC)).unwrap();
    let ends = |cpu_node, mem_node, nic_mode| NetEnds {
        server: "srv".into(),
        client: "cli".into(),
        nic: "nic".into(),
        client_nic: "nic".into(),
        cpu_node,
        mem_node,
        nic_mode,
        netdev_pf: 0,
    };
    assert_eq!(
        s.workloads[0].kind,
        Kind::Memcached {
            ends: ends(0, 0, NicMode::Octonic),
            key_bytes: 64,
            value_bytes: 1024,
            set_ratio: 0.1,
            clients: 16,
            keys: 10_000,
            seed: None,
            instances: 1,
        }
    );
    assert_eq!(
        s.workloads[1].kind,
        Kind::UdpPingPong {
            ends: ends(1, 1, NicMode::Standard),
            msg_bytes: 64,
            streams: None,
        }
    );
    assert_eq!(
        s.workloads[2].kind,
        Kind::PageRank {
            host: "srv".into(),
            threads_per_socket: 8,
            warmup: None,
            seed: None,
        }
    );
    let loaded = parse(&src(&MC.replace(
        "msg_bytes = 64",
        "msg_bytes = 64\nstream_pairs = 3\nstream_node = 1",
    )))
    .unwrap();
    assert!(matches!(
        loaded.workloads[1].kind,
        Kind::UdpPingPong {
            streams: Some(Antagonists { pairs: 3, node: 1 }),
            ..
        }
    ));
}

#[test]
fn new_kinds_errors_are_located() {
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    assert_eq!(
        msg(&MC.replace(
            "nic_mode = \"octonic\"",
            "nic_mode = \"octonic\"\nkey_bytes = 8"
        )),
        "t.toml:11:13: must be 16 .. 256 bytes (memaslap's shortest key; memcached's 250 \
             bytes and the client's prefix) (key `workload.mc.key_bytes`)"
    );
    assert_eq!(
        msg(&MC.replace(
            "nic_mode = \"octonic\"",
            "nic_mode = \"octonic\"\nset_ratio = 1.5"
        )),
        "t.toml:11:13: must be a share of SETs in 0 .. 1 (key `workload.mc.set_ratio`)"
    );
    assert!(msg(&MC.replace(
        "nic_mode = \"octonic\"",
        "nic_mode = \"octonic\"\nvalue = 5"
    ))
    .starts_with("t.toml:11:1: unknown field `value`, expected one of"),);
    assert_eq!(
        msg(&MC.replace("msg_bytes = 64", "msg_bytes = 2000")),
        "t.toml:15:13: must be 1 .. 1472 bytes (one datagram in one 1500-byte MTU frame) \
             (key `workload.udp.msg_bytes`)"
    );
    assert_eq!(
        msg(&MC.replace("msg_bytes = 64", "msg_bytes = 64\nstream_pairs = 2")),
        "t.toml:16:16: STREAM antagonists need `stream_node` too: the memory node they \
             load (key `workload.udp.stream_pairs`)"
    );
    assert_eq!(
        msg(&MC.replace("threads_per_socket = 8", "threads_per_socket = 0")),
        "t.toml:27:22: must be 1 .. 64 threads (key `workload.pr.threads_per_socket`)"
    );
    assert!(msg(&MC.replace("host = \"srv\"\n", ""))
        .starts_with("t.toml:23:1: missing field `host` (key `workload.pr.host`)"));
}

const TY: &str = r#"
[[workload]]
name = "ty"
kind = "zmio"
initiator = "initiator"
target = "target"
nics = 6
threads = 8
op = "write"

[measure]
warmup = "1 ms"
duration = "2 ms"
"#;

#[test]
fn tyche_kinds_parse_with_their_applications_placement_and_errors_are_located() {
    let spec = parse(&src(TY)).unwrap();
    let Kind::Tyche {
        app,
        block_bytes,
        scheduler,
        initiator_place,
        ..
    } = &spec.workloads[0].kind
    else {
        panic!("{:?}", spec.workloads[0].kind)
    };
    assert_eq!(spec.workloads[0].kind.name(), "zmio");
    // zmIO's own skew for writes (docs/hardware.md §3), Tyche's NUMA defaults.
    assert_eq!(
        app.placement,
        tyche::BufferPlacement::Skewed {
            node0: tyche::app::ZMIO_WRITE_NODE0
        }
    );
    assert_eq!(*block_bytes, 128 << 10);
    assert_eq!(*scheduler, tyche::Scheduler::Numa);
    assert_eq!(*initiator_place, tyche::Place::NicLocal);
    let fio = parse(&src(&TY.replace("\"zmio\"", "\"tyche_fio\""))).unwrap();
    assert_eq!(fio.workloads[0].kind.name(), "tyche_fio");
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    assert_eq!(
        msg(&TY.replace("op = \"write\"", "op = \"write\"\nscheduler = \"fastest\"")),
        "t.toml:10:13: scheduler `fastest`: use \"round_robin\", \"numa\" or \"numa_spill\" \
             (key `workload.ty.scheduler`)"
    );
    assert_eq!(
        msg(&TY.replace("op = \"write\"", "op = \"write\"\nblock_bytes = \"1 MiB\"")),
        "t.toml:10:15: must be a whole number of 4 KiB blocks, at most 512 KiB (Tyche's \
             largest request) (key `workload.ty.block_bytes`)"
    );
    assert_eq!(
        msg(&TY.replace("threads = 8", "threads = 0")),
        "t.toml:8:11: must be 1 .. 1024 threads (key `workload.ty.threads`)"
    );
}

#[test]
fn tyche_takes_its_receive_path_interrupt_moderation_and_any_node_by_name() {
    let spec = parse(&src(&TY.replace(
        "op = \"write\"",
        "op = \"write\"\nrx_path = \"softirq\"\ncoalescing = \"off\"\ntarget_place = \"node3\"",
    )))
    .unwrap();
    let Kind::Tyche {
        rx,
        coalescing,
        target_place,
        ..
    } = &spec.workloads[0].kind
    else {
        panic!("{:?}", spec.workloads[0].kind)
    };
    assert_eq!(*rx, tyche::RxPath::Softirq);
    assert_eq!(*coalescing, devices::nic::CoalesceMode::Off);
    // Any node by name; the run checks it against the host.
    assert_eq!(*target_place, tyche::Place::Node(3));
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    let e = msg(&TY.replace("op = \"write\"", "op = \"write\"\nrx_path = \"napi\""));
    assert!(
        e.contains("rx_path `napi`") && e.contains("workload.ty.rx_path"),
        "{e}"
    );
    let e = msg(&TY.replace(
        "op = \"write\"",
        "op = \"write\"\ninitiator_place = \"nodeX\"",
    ));
    assert!(e.contains("a node (\"node0\", \"node1\", …)"), "{e}");
}

#[test]
fn a_migration_is_a_tcp_stream_rx_inside_the_run() {
    let msg = |text: &str| parse(&src(text)).unwrap_err().to_string();
    let mig = NET.replace(
        "netdev_pf = \"pf1\"",
        "netdev_pf = \"pf1\"\nmigrate_at_ms = 1.5",
    );
    let s = parse(&src(&mig)).unwrap();
    assert!(matches!(
        s.workloads[0].kind,
        Kind::Netperf {
            migration: Some(Migration { at, sample, .. }),
            ..
        } if at == Time::from_us(1500) && sample == Time::from_us(50_000)
    ));
    assert_eq!(
        msg(&mig.replace("1.5", "3")),
        "t.toml:14:17: must be a time inside the run, 0 .. 3 ms (warm-up and window) \
             (key `workload.rx.migrate_at_ms`)"
    );
    assert_eq!(
        msg(&mig.replace("\"TCP_STREAM\"", "\"TCP_STREAM\"\ndirection = \"tx\"")),
        "t.toml:15:17: a migration moves the receiver of one TCP_STREAM rx connection \
             (key `workload.rx.migrate_at_ms`)"
    );
    assert_eq!(
        msg(&NET.replace("netdev_pf = \"pf1\"", "netdev_pf = \"pf1\"\nsample_ms = 1")),
        "t.toml:14:13: `sample_ms` samples a migration: give `migrate_at_ms` too (key \
             `workload.rx.sample_ms`)"
    );
    let windows = mig.replace(
        "migrate_at_ms = 1.5",
        "migrate_at_ms = 1.5\nsample_ms = 0.5\nbefore_ms = [0.5, 1.5]\nafter_ms = [2, 3]",
    );
    assert!(matches!(
        parse(&src(&windows)).unwrap().workloads[0].kind,
        Kind::Netperf {
            migration: Some(Migration { before: Some((b0, b1)), after: Some(_), .. }),
            ..
        } if b0 == Time::from_us(500) && b1 == Time::from_us(1500)
    ));
    assert!(msg(&windows.replace("[2, 3]", "[2, 4]")).ends_with(
        "must be [from, to] ms inside the run (0 .. 3 ms), whole samples of 0.5 ms, from < \
         to (key `workload.rx.after_ms`)"
    ));
    assert!(msg(&windows.replace("[0.5, 1.5]", "[0.7, 1.5]")).contains("whole samples"));
}

#[test]
fn netperf_coalescing_is_a_driver_mode_and_a_bad_one_is_located() {
    let with = |v: &str| {
        NET.replace(
            "netdev_pf = \"pf1\"",
            &format!("netdev_pf = \"pf1\"\ncoalescing = {v}"),
        )
    };
    let s = parse(&src(&with("\"adaptive\""))).unwrap();
    assert!(matches!(
        s.workloads[0].kind,
        Kind::Netperf {
            coalescing: Some(CoalesceMode::Adaptive),
            ..
        }
    ));
    assert_eq!(
        parse(&src(&with("\"dynamic\""))).unwrap_err().to_string(),
        "t.toml:14:14: coalescing = \"dynamic\": use \"off\", \"static\" or \"adaptive\" \
             (key `workload.rx.coalescing`)"
    );
}

#[test]
fn durations_need_units_and_stay_in_range() {
    assert_eq!(parse_duration("250ns").unwrap(), Time::from_ns(250));
    assert_eq!(parse_duration("1.5 us").unwrap(), Time::from_ns(1500));
    assert!(parse_duration("100").is_err());
    assert!(parse_duration("5 s").is_err());
}
