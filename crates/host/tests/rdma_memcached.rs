//! memcached over one-sided RDMA (`host::rdma::memcached`): real bytes through the
//! protocol, and the placements' relationships.

mod testbed;
use host::rdma::memcached::{self, McSpec, Op, Placement, KEYS};
use sim::Time;
use testbed::{hosts, topo};

fn spec(connections: u32, placement: Placement) -> McSpec {
    McSpec {
        connections,
        get_ratio: 0.9,
        value_bytes: 64,
        keys: KEYS,
        placement,
        mtu: 256,
        max_rd_atomic: 1,
        warmup: Time::from_us(100),
        window: Time::from_us(200),
        windows: 2,
        seed: 1,
    }
}

#[test]
fn a_get_returns_the_bytes_the_last_set_of_its_key_stored() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let a: Vec<u8> = (0..64).map(|i| 200 - i as u8).collect();
    let b: Vec<u8> = (0..64).map(|i| i as u8 ^ 0x5a).collect();
    let ops = vec![
        (0, Op::Set(7, a.clone())),
        (1, Op::Get(7)),
        (1, Op::Set(7, b.clone())),
        (0, Op::Get(7)),
        (0, Op::Get(8)),
    ];
    let (r, got) = memcached::script(&mut c, &mut s, spec(2, Placement::BothRemote), ops).unwrap();
    assert_eq!(got.len(), 3);
    assert_eq!(got[0], a, "another client's GET sees the SET");
    assert_eq!(got[1], b, "the later SET wins");
    // Item 8 was never set: it holds the store's initial pattern (byte i of the store
    // region is i mod 251).
    let initial: Vec<u8> = (8 * 64..9 * 64).map(|i| (i % 251) as u8).collect();
    assert_eq!(got[2], initial);
    // Each SET's value crossed the network once, by the worker's READ.
    assert_eq!(r.set_read_bytes, 2 * 64);
    assert_eq!((r.gets, r.sets), (3, 2));
}

fn kops(connections: u32, placement: Placement) -> (f64, memcached::McResult) {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let r = memcached::run(&mut c, &mut s, spec(connections, placement), None).unwrap();
    (r.throughput.unwrap().ops_per_s / 1e3, r)
}

#[test]
fn remote_placements_are_slower_than_local_at_sixteen_connections() {
    let (local, lr) = kops(16, Placement::BothLocal);
    let (remote, _) = kops(16, Placement::BothRemote);
    let (server_remote, _) = kops(16, Placement::ClientLocalServerRemote);
    assert!(
        remote < local,
        "both_remote {remote} kops, both_local {local}"
    );
    assert!(
        server_remote < local,
        "client_local_server_remote {server_remote} kops, both_local {local}"
    );
    // The mix is the spec's: about one SET in ten.
    let share = lr.sets as f64 / (lr.gets + lr.sets) as f64;
    assert!((0.05..0.15).contains(&share), "SET share {share}");
}

#[test]
fn gets_only_never_involve_the_server_worker_and_scale_with_clients() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let mut sp = spec(8, Placement::BothLocal);
    sp.get_ratio = 1.0;
    let r8 = memcached::run(&mut c, &mut s, sp, None).unwrap();
    assert_eq!(r8.sets, 0);
    assert_eq!(r8.set_read_bytes, 0, "no SET: the worker posts nothing");
    let (mut c, mut s) = hosts(&t);
    sp.connections = 1;
    let r1 = memcached::run(&mut c, &mut s, sp, None).unwrap();
    let (k1, k8) = (
        r1.throughput.unwrap().ops_per_s,
        r8.throughput.unwrap().ops_per_s,
    );
    assert!(k8 > 4.0 * k1, "8 clients {k8}/s, 1 client {k1}/s");
}

#[test]
fn bad_specs_are_refused_with_the_reason() {
    let t = topo();
    let (mut c, mut s) = hosts(&t);
    let e = memcached::run(&mut c, &mut s, spec(0, Placement::BothLocal), None).unwrap_err();
    assert!(e.contains("connections 0"), "{e}");
    assert!(Placement::parse("both").unwrap_err().contains("both_local"));
}
