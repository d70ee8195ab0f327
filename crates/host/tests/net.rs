//! The packet-granular network stack on the IOctopus testbed (docs/hardware.md §1).

use fabric::{builtin, Fabric, Topology};
use host::net::{pktgen, stream, NetHost};
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn server(t: &Topology, pf: usize) -> NetHost {
    NetHost::new(t, t.host_by_name("server").unwrap(), "nic", pf, 0, 0).unwrap()
}

fn client(t: &Topology) -> NetHost {
    NetHost::new(t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap()
}

fn spec(msg: u64) -> stream::StreamSpec {
    stream::StreamSpec {
        msg_bytes: msg,
        mtu: 1500,
        warmup: Time::from_us(2000),
        window: Time::from_us(5000),
    }
}

fn pktgen_run(pf: usize, pkt: u64) -> pktgen::PktgenResult {
    let t = topo();
    let mut s = server(&t, pf);
    let spec = pktgen::PktgenSpec {
        pkt_bytes: pkt,
        warmup: Time::from_us(1000),
        window: Time::from_us(2000),
        fragments: Vec::new(),
    };
    pktgen::run(&mut s, spec).unwrap()
}

#[test]
fn every_segment_arrives_once_and_in_order_local_and_remote() {
    let t = topo();
    for pf in [0, 1] {
        for msg in [256, 65536] {
            let (mut c, mut s) = (client(&t), server(&t, pf));
            let r = stream::run(&mut c, &mut s, spec(msg)).unwrap();
            assert_eq!(r.out_of_order, 0, "pf{pf} msg {msg}");
            assert!(r.bytes_delivered > 1 << 20, "pf{pf} msg {msg}: {r:?}");
            // What was sent and not read is in flight or unread: at most the window.
            assert!(
                r.bytes_sent - r.bytes_delivered <= s.costs.rcvbuf_bytes,
                "{r:?}"
            );
        }
    }
}

#[test]
fn a_local_receive_copies_from_the_llc_and_a_remote_one_reads_dram_three_times() {
    let t = topo();
    let (mut c, mut s) = (client(&t), server(&t, 0));
    let local = stream::run(&mut c, &mut s, spec(65536)).unwrap();
    assert_eq!(local.receiver_mem_gbps, 0.0, "DDIO: the copy hits the LLC");
    let (mut c, mut s) = (client(&t), server(&t, 1));
    let remote = stream::run(&mut c, &mut s, spec(65536)).unwrap();
    // The NIC's write (home-agent read + write) and the copy's read of every frame line,
    // plus the completion entries: ≈ 3 × the payload, a little more for headers and CQEs.
    let ratio = remote.receiver_mem_gbps / remote.throughput_gbps;
    assert!(
        (3.0..3.5).contains(&ratio),
        "remote memory ÷ throughput = {ratio}"
    );
    assert!(
        local.throughput_gbps > remote.throughput_gbps * 1.15,
        "{local:?} {remote:?}"
    );
}

#[test]
fn tx_from_either_pf_runs_at_the_same_rate_and_remote_reads_each_byte_once() {
    let t = topo();
    let (mut c, mut s) = (client(&t), server(&t, 0));
    c.lro = true;
    let local = stream::run(&mut s, &mut c, spec(65536)).unwrap();
    let (mut c, mut s) = (client(&t), server(&t, 1));
    c.lro = true;
    let remote = stream::run(&mut s, &mut c, spec(65536)).unwrap();
    assert_eq!(local.sender_mem_gbps, 0.0);
    let ratio = remote.sender_mem_gbps / remote.throughput_gbps;
    assert!(
        (0.95..1.1).contains(&ratio),
        "remote memory ÷ throughput = {ratio}"
    );
    assert!(
        remote.throughput_gbps > 0.9 * local.throughput_gbps,
        "{local:?} {remote:?}"
    );
    assert_eq!(remote.out_of_order + local.out_of_order, 0);
}

#[test]
fn a_sender_off_its_buffers_node_has_its_skbs_snooped_across_the_processor_link() {
    // The sending core on socket 1; its socket buffers, rings and the PF on node 0. The
    // skbs the core fills are dirty in package 1's LLC, so the PF's payload reads snoop
    // them there: each payload byte crosses 1 → 0 once. With the core on node 0 nothing
    // crosses that way.
    let t = topo();
    let host = t.host_by_name("server").unwrap();
    let window_s = spec(65536).window.as_secs_f64();
    let mut crossing = Vec::new();
    for socket in [0, 1] {
        let mut s = NetHost::new(&t, host, "nic", 0, socket, 0).unwrap();
        let mut c = client(&t);
        c.lro = true;
        let r = stream::run(&mut s, &mut c, spec(65536)).unwrap();
        let link_gbps = s.mem.link_bytes(1, 0).unwrap() as f64 * 8.0 / window_s / 1e9;
        crossing.push(link_gbps / r.throughput_gbps);
    }
    assert_eq!(crossing[0], 0.0, "core on the buffers' node");
    assert!(
        (0.95..1.1).contains(&crossing[1]),
        "link 1 → 0 ÷ throughput = {}",
        crossing[1]
    );
}

#[test]
fn remote_pktgen_pays_one_completion_miss_per_packet() {
    let (local, remote) = (pktgen_run(0, 64), pktgen_run(1, 64));
    assert_eq!(local.cqe_misses_per_packet, 0.0);
    assert_eq!(remote.cqe_misses_per_packet, 1.0);
    // The miss is the difference: DRAM (90 ns) instead of the LLC (20 ns) per packet.
    let extra_ns = 1e3 / remote.mpps - 1e3 / local.mpps;
    assert!((65.0..75.0).contains(&extra_ns), "{extra_ns} ns per packet");
}

#[test]
fn pktgen_memory_counters_add_up_to_the_bytes_dmad_and_read() {
    for pkt in [64u64, 1024] {
        let r = pktgen_run(1, pkt);
        // Per packet on the remote PF: the descriptor's and the packet's home-snoop reads,
        // the CQE write (read + write) and the core's CQE miss.
        let per_packet = 64 + pkt.div_ceil(64) * 64 + 2 * 64 + 64;
        let expected = r.mpps * 1e6 * per_packet as f64 * 8.0 / 1e9;
        assert!(
            (r.mem_gbps - expected).abs() < 0.01 * expected,
            "{pkt}: {r:?} vs {expected}"
        );
        assert_eq!(pktgen_run(0, pkt).mem_gbps, 0.0, "local: all in the LLC");
    }
}

#[test]
fn bad_workload_values_are_errors_not_panics() {
    let t = topo();
    let (mut c, mut s) = (client(&t), server(&t, 0));
    let e = stream::run(&mut c, &mut s, spec(0)).unwrap_err();
    assert!(e.contains("msg_bytes"), "{e}");
    let mut s = server(&t, 0);
    let spec = pktgen::PktgenSpec {
        pkt_bytes: 9000,
        warmup: Time::ZERO,
        window: Time::from_us(1),
        fragments: Vec::new(),
    };
    assert!(pktgen::run(&mut s, spec).unwrap_err().contains("pkt_bytes"));
    let e = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", 2, 0, 0).unwrap_err();
    assert!(e.contains("no pf2"), "{e}");
    let e = NetHost::new(&t, t.host_by_name("server").unwrap(), "nics", 0, 0, 0).unwrap_err();
    assert!(e.contains("no device `nics`"), "{e}");
}
