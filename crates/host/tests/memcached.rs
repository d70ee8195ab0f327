//! memcached under memslap and the PageRank victim on the IOctopus testbed
//! (docs/hardware.md §1).

use fabric::{builtin, Fabric, Topology};
use host::net::memcached::{self, check_value, value_bytes, MemcachedSpec};
use host::net::NetHost;
use host::victim::{self, Background, PageRank, GAP_PAGERANK};
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn spec(set_ratio: f64) -> MemcachedSpec {
    MemcachedSpec {
        key_bytes: 256,
        value_bytes: 512 * 1024,
        set_ratio,
        clients: 14,
        keys: memcached::MEMSLAP_KEYS,
        mtu: 1500,
        warmup: Time::from_us(3000),
        window: Time::from_us(8000),
        seed: 11,
    }
}

/// One instance on socket 0 with its items on node 0, its queue on `pf`.
fn run(pf: usize, s: MemcachedSpec) -> memcached::MemcachedResult {
    let t = topo();
    let mut server = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", pf, 0, 0).unwrap();
    let mut client = NetHost::new(&t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap();
    memcached::run(&mut server, &mut client, s).unwrap()
}

#[test]
fn values_round_trip_whole_and_a_flipped_byte_is_caught() {
    let v = value_bytes(42, 7, 1000);
    assert_eq!(check_value(42, &v), Some(7));
    assert_eq!(check_value(43, &v), None, "another key's bytes");
    let mut bad = v.clone();
    bad[600] ^= 1;
    assert_eq!(check_value(42, &bad), None);
    assert_ne!(
        value_bytes(42, 8, 1000),
        v,
        "versions differ in their bytes"
    );
}

#[test]
fn a_get_returns_exactly_the_bytes_the_last_set_stored() {
    // Two keys, one client, half SETs: every GET follows SETs of its key, in order, so a
    // reply older than the last acknowledged SET or with any wrong byte is counted.
    let mut s = spec(0.5);
    s.keys = 2;
    s.clients = 1;
    s.value_bytes = 100_000;
    let r = run(0, s);
    assert!(r.values_checked > 20, "{} GETs checked", r.values_checked);
    assert_eq!(r.values_corrupt, 0);
    assert_eq!(r.values_stale, 0);
    assert!(r.gets > 0 && r.sets > 0);
}

#[test]
fn remote_loses_most_on_sets_and_uses_more_memory_bandwidth() {
    let mut ratio = Vec::new();
    for set in [0.0, 1.0] {
        let local = run(0, spec(set));
        let remote = run(1, spec(set));
        assert!(
            local.server_util > 0.95,
            "the server core binds: {:.2}",
            local.server_util
        );
        assert!(
            remote.kops < local.kops,
            "set {set}: remote {:.2} ≥ local {:.2} kops",
            remote.kops,
            local.kops
        );
        assert!(
            remote.mem_gbps > local.mem_gbps,
            "set {set}: remote {:.1} ≤ local {:.1} Gb/s of DRAM",
            remote.mem_gbps,
            local.mem_gbps
        );
        assert_eq!(local.values_corrupt + remote.values_corrupt, 0);
        ratio.push(local.kops / remote.kops);
    }
    assert!(
        ratio[1] > ratio[0],
        "local ÷ remote: GETs {:.3}, SETs {:.3}",
        ratio[0],
        ratio[1]
    );
}

#[test]
fn gets_read_items_from_dram_because_the_working_set_exceeds_the_llc() {
    // Local GETs: the frames and completions stay in the DDIO share, but every item is
    // read from DRAM (10,000 × 512 KiB ≫ 35 MB): at least the values' bytes in DRAM reads.
    let r = run(0, spec(0.0));
    assert!(
        r.mem_gbps >= 0.9 * r.value_gbps,
        "{:.1} Gb/s DRAM for {:.1} Gb/s of values",
        r.mem_gbps,
        r.value_gbps
    );
    // The same mix over 10 keys (5 MB of items) fits the LLC: far less DRAM.
    let mut few = spec(0.0);
    few.keys = 10;
    let hot = run(0, few);
    assert!(
        hot.mem_gbps < 0.2 * r.mem_gbps,
        "{:.1} vs {:.1}",
        hot.mem_gbps,
        r.mem_gbps
    );
}

#[test]
fn same_seed_same_result_and_bad_specs_are_refused() {
    let a = run(0, spec(0.25));
    let b = run(0, spec(0.25));
    assert_eq!((a.gets, a.sets, a.events), (b.gets, b.sets, b.events));
    let t = topo();
    let mut server = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", 0, 0, 0).unwrap();
    let mut client = NetHost::new(&t, t.host_by_name("client").unwrap(), "nic", 0, 0, 0).unwrap();
    let mut s = spec(1.5);
    let e = memcached::run(&mut server, &mut client, s).unwrap_err();
    assert!(e.contains("set_ratio 1.5"), "{e}");
    s = spec(0.5);
    s.value_bytes = 2 << 20;
    let e = memcached::run(&mut server, &mut client, s).unwrap_err();
    assert!(e.contains("value_bytes"), "{e}");
}

#[test]
fn the_victim_slows_down_when_io_shares_its_memory() {
    let t = topo();
    let server = NetHost::new(&t, t.host_by_name("server").unwrap(), "nic", 0, 0, 0).unwrap();
    let (warm, win) = (Time::from_us(300), Time::from_us(1000));
    let mut mem = server.mem.clone();
    let mut v = PageRank::new(GAP_PAGERANK, 2).unwrap();
    let solo = victim::solo(&mut mem, &mut v, warm, win);
    // Same victim, with a second copy of itself's traffic on node 0 (another 8 threads).
    let mut mem2 = server.mem.clone();
    let mut a = PageRank::new(GAP_PAGERANK, 2).unwrap();
    let mut b = PageRank::new(
        victim::PageRankSpec {
            seed: 99,
            ..GAP_PAGERANK
        },
        1,
    )
    .unwrap();
    b.advance(&mut mem2, warm);
    a.advance(&mut mem2, warm);
    a.reset_counters();
    for k in 1..=100u64 {
        let at = warm + Time::from_ps(win.as_ps() * k / 100);
        b.advance(&mut mem2, at);
        a.advance(&mut mem2, at);
    }
    let shared = a.edges_per_s(win);
    assert!(solo > 0.0);
    assert!(shared < solo, "{shared:.3e} ≥ {solo:.3e} edges/s");
    assert!(PageRank::new(
        victim::PageRankSpec {
            threads_per_socket: 0,
            ..GAP_PAGERANK
        },
        2
    )
    .unwrap_err()
    .contains("threads_per_socket 0"));
}
