//! Many connections at once and TCP_RR on the IOctopus testbed (docs/hardware.md §1).

use fabric::{builtin, Fabric, Topology};
use host::net::{multicore, rr, stream, NetHost};
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn host(t: &Topology, name: &str, socket: u32) -> NetHost {
    NetHost::new(t, t.host_by_name(name).unwrap(), "nic", 0, socket, socket).unwrap()
}

fn spec() -> stream::StreamSpec {
    stream::StreamSpec {
        msg_bytes: 65536,
        mtu: 1500,
        warmup: Time::from_us(1500),
        window: Time::from_us(1500),
    }
}

/// `cores` connections per server socket, each core's queue on its own socket's PF
/// (`local`) or the other's.
fn multi(rx: bool, cores: u32, local: bool) -> stream::StreamResult {
    multi_buffered(rx, cores, local, None)
}

/// As `multi`, with the server NIC's port buffer `rx_buffer` bytes instead of its model's.
fn multi_buffered(
    rx: bool,
    cores: u32,
    local: bool,
    rx_buffer: Option<u64>,
) -> stream::StreamResult {
    let t = topo();
    let mut s = host(&t, "server", 0);
    if let Some(bytes) = rx_buffer {
        s.nic.rx_buffer = devices::nic::RxBuffer::new(bytes);
    }
    let mut c = host(&t, "client", 0);
    c.lro = true;
    let pf = move |socket: u32| {
        if local {
            socket as usize
        } else {
            1 - socket as usize
        }
    };
    multicore::run(&mut s, &mut c, rx, cores, pf, spec()).unwrap()
}

/// Payload goodput of a 100 Gb/s port with MTU 1500: 1448 B of each 1538 B on the wire.
const LINE_GOODPUT_GBPS: f64 = 100.0 * 1448.0 / 1538.0;

#[test]
fn all_cores_sending_fill_the_port_local_and_remote_in_order() {
    for local in [true, false] {
        let r = multi(false, 14, local);
        // Goodput is counted as the receivers read it: what sat in the 28 socket queues
        // when the window opened is read in it too, so a short window may show a few
        // tenths of a per cent above the port (94.4 Gb/s since the R730's reads complete
        // in 256 B and the senders keep the port busier).
        assert!(
            r.throughput_gbps >= 0.95 * LINE_GOODPUT_GBPS
                && r.throughput_gbps <= LINE_GOODPUT_GBPS * 1.01,
            "local={local}: {:.1} Gb/s",
            r.throughput_gbps
        );
        assert_eq!(r.out_of_order, 0);
        assert!(r.bytes_delivered > 0 && r.bytes_delivered <= r.bytes_sent);
    }
}

#[test]
fn many_cores_overflow_the_ddio_share_so_local_uses_memory_bandwidth() {
    // One core's rings fit the DDIO share: a local sender touches no DRAM.
    let one = multi(false, 1, true);
    let all = multi(false, 14, true);
    assert!(one.sender_mem_gbps < 1.0, "{:.1}", one.sender_mem_gbps);
    assert!(
        all.sender_mem_gbps > 0.5 * all.throughput_gbps,
        "{:.1} Gb/s of DRAM for {:.1} Gb/s",
        all.sender_mem_gbps,
        all.throughput_gbps
    );
}

fn rr_latency(msg: u64, remote: bool, ddio: bool) -> rr::RrResult {
    let t = topo();
    let (pf, client_socket) = if remote { (1, 1) } else { (0, 0) };
    let mut s = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", pf, 0, 0).unwrap();
    let mut c = host(&t, "client", client_socket);
    if !ddio {
        s.ddio_off();
        c.ddio_off();
    }
    let spec = rr::RrSpec {
        msg_bytes: msg,
        mtu: 1500,
        warmup: 2100,
        transactions: 200,
    };
    rr::run(&mut c, &mut s, spec).unwrap()
}

#[test]
fn tcp_rr_latency_grows_with_size_and_remote_or_no_ddio_costs_more() {
    let mut last = 0.0;
    for msg in [1, 1024, 4096, 65536] {
        let ll = rr_latency(msg, false, true);
        let rr = rr_latency(msg, true, true);
        let llnd = rr_latency(msg, false, false);
        assert!(
            ll.latency_us > last,
            "{msg}: {} after {last}",
            ll.latency_us
        );
        assert!(
            rr.latency_us > ll.latency_us,
            "{msg}: rr {} ll {}",
            rr.latency_us,
            ll.latency_us
        );
        assert!(
            llnd.latency_us > ll.latency_us,
            "{msg}: llnd {} ll {}",
            llnd.latency_us,
            ll.latency_us
        );
        // Completions land in the DDIO share when local: their reads hit.
        assert_eq!(ll.cqe_misses, 0.0, "{msg}");
        assert!(llnd.cqe_misses >= 2.0, "{msg}: {}", llnd.cqe_misses);
        // No variance source: the tail is the mean.
        assert!((ll.p99_us - ll.latency_us).abs() < 1e-6 * ll.latency_us);
        last = ll.latency_us;
    }
}

#[test]
fn bad_rr_and_multicore_values_are_errors() {
    let t = topo();
    let mut s = host(&t, "server", 0);
    let mut c = host(&t, "client", 0);
    let mut spec = rr::RrSpec {
        msg_bytes: 0,
        mtu: 1500,
        warmup: 0,
        transactions: 1,
    };
    assert!(rr::run(&mut c, &mut s, spec)
        .unwrap_err()
        .contains("msg_bytes 0"));
    spec.msg_bytes = 1;
    spec.transactions = 0;
    assert!(rr::run(&mut c, &mut s, spec)
        .unwrap_err()
        .contains("transactions"));
    let e = multicore::run(&mut s, &mut c, true, 0, |_| 0, self::spec()).unwrap_err();
    assert!(e.contains("0 cores per socket"), "{e}");
    let e = multicore::run(&mut s, &mut c, true, 1, |_| 7, self::spec()).unwrap_err();
    assert!(e.contains("pf7"), "{e}");
}

#[test]
fn all_cores_receiving_fill_both_links_and_a_full_port_buffer_pauses_the_client() {
    for local in [true, false] {
        let r = multi(true, 14, local);
        // 28 connections × 6 MiB of socket buffer leave the client's LLC before its NIC
        // reads them: the NIC's reads come from DRAM.
        assert!(
            r.sender_mem_gbps > 0.9 * r.throughput_gbps,
            "local={local}: client DRAM {:.1} Gb/s for {:.1} Gb/s",
            r.sender_mem_gbps,
            r.throughput_gbps
        );
        // Each x8 link carries half the flows at ≈ 98 % of its payload rate, and a
        // connection's 64 KiB burst reaches one PF whole: frames queue for their link in
        // the NIC's 256 KiB port buffer, which fills and pauses the client's whole port.
        assert!(
            r.throughput_gbps >= 0.8 * LINE_GOODPUT_GBPS
                && r.throughput_gbps < 0.95 * LINE_GOODPUT_GBPS
                && r.receiver_pauses > 0,
            "local={local}: {:.1} Gb/s, {} pauses",
            r.throughput_gbps,
            r.receiver_pauses
        );
        assert_eq!(r.out_of_order, 0);
        // With a buffer that never fills, both links stay busy: line rate.
        let unbounded = multi_buffered(true, 14, local, Some(1 << 30));
        assert!(
            unbounded.throughput_gbps >= 0.95 * LINE_GOODPUT_GBPS && unbounded.receiver_pauses == 0,
            "local={local}, unbounded: {:.1} Gb/s",
            unbounded.throughput_gbps
        );
    }
}
