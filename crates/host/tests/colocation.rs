//! Co-located workloads on the IOctopus testbed (docs/hardware.md §1): the PageRank victim
//! advanced inside the stream model's event loop, a late-starting victim, and memcached
//! instances that each keep their own items.

use fabric::{builtin, Fabric, Topology};
use host::net::memcached::{self, MemcachedSpec};
use host::net::stream::{Lane, StreamResult, StreamSpec};
use host::net::{multicore, NetHost};
use host::victim::{self, Background, PageRank, GAP_PAGERANK};
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn host(t: &Topology, name: &str) -> NetHost {
    NetHost::new(t, t.host_by_name(name).unwrap(), "nic", 0, 0, 0).unwrap()
}

const WARM: Time = Time::from_us(1000);
const WIN: Time = Time::from_us(1000);

/// 2 netperf receivers per socket beside the victim (joined 300 µs before the window);
/// each core's queue on its own socket's PF (`local`) or the other's.
fn receive_beside_victim(local: bool) -> (StreamResult, f64) {
    let t = topo();
    let mut server = host(&t, "server");
    let mut client = host(&t, "client");
    client.lro = true;
    let mut v = PageRank::new(GAP_PAGERANK, 2).unwrap();
    v.start_at(WARM - Time::from_us(300));
    let pf = move |s: u32| if local { s as usize } else { 1 - s as usize };
    let spec = StreamSpec {
        msg_bytes: 65536,
        mtu: 1500,
        warmup: WARM,
        window: WIN,
    };
    let r = multicore::run_with(&mut server, &mut client, true, 2, pf, spec, Some(&mut v)).unwrap();
    (r, v.edges_per_s(WIN))
}

#[test]
fn the_stream_loop_advances_the_victim_and_remote_dma_slows_it_more() {
    let t = topo();
    let server = host(&t, "server");
    let mut mem = server.mem.clone();
    let mut v = PageRank::new(GAP_PAGERANK, 2).unwrap();
    let solo = victim::solo(&mut mem, &mut v, Time::from_us(300), WIN);
    let (local, local_v) = receive_beside_victim(true);
    let (remote, remote_v) = receive_beside_victim(false);
    // The victim ran through the window in both (the loop advanced it to the end).
    assert!(
        local_v > 0.5 * solo && remote_v > 0.5 * solo,
        "{local_v:.3e} {remote_v:.3e} of {solo:.3e}"
    );
    // Remote receive writes every frame across QPI into DRAM (no DDIO): more DRAM and
    // interconnect traffic beside the victim, so it slows more than beside local receive.
    assert!(
        remote_v < local_v,
        "victim beside remote {remote_v:.4e} ≥ beside local {local_v:.4e} edges/s"
    );
    assert!(local_v <= solo * 1.001, "{local_v:.4e} > solo {solo:.4e}");
    for r in [&local, &remote] {
        assert_eq!(r.out_of_order, 0);
        assert!(r.throughput_gbps > 0.0 && r.throughput_gbps <= 100.0);
    }
}

#[test]
fn a_victim_started_late_does_no_work_before_its_start() {
    let t = topo();
    let server = host(&t, "server");
    let mut mem = server.mem.clone();
    let mut v = PageRank::new(GAP_PAGERANK, 2).unwrap();
    v.start_at(Time::from_us(500));
    v.advance(&mut mem, Time::from_us(500));
    assert_eq!(v.edges, 0);
    assert_eq!(mem.dram_total(), 0, "no victim reads before its start");
    v.advance(&mut mem, Time::from_us(600));
    assert!(v.edges > 0);
}

#[test]
fn instances_keep_their_own_items_so_no_get_is_stale() {
    // Two instances, two keys, half SETs: a key SET on one instance and read on the other
    // returns that instance's own (older) version — not stale, since it is another server.
    let t = topo();
    let mut server = host(&t, "server");
    let mut client = host(&t, "client");
    let lanes = vec![Lane::of(&server), Lane::of(&server)];
    let spec = MemcachedSpec {
        key_bytes: 256,
        value_bytes: 50_000,
        set_ratio: 0.5,
        clients: 2,
        keys: 2,
        mtu: 1500,
        warmup: Time::from_us(500),
        window: Time::from_us(2000),
        seed: 3,
    };
    let r = memcached::run_instances(&mut server, &mut client, spec, lanes).unwrap();
    assert!(r.values_checked > 20 && r.sets > 0, "{r:?}");
    assert_eq!(r.values_corrupt, 0);
    assert_eq!(r.values_stale, 0);
}
