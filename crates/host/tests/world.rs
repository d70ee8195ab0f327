//! Models that share hosts in one `NetWorld`: a TCP receive and a memcached server on
//! one host take the same memory system, interconnect, PCIe link and port.

use fabric::{builtin, Fabric, Topology};
use host::net::memcached::{Memcached, MemcachedResult, MemcachedSpec};
use host::net::stream::{Lane, StreamResult, StreamSpec, Streams};
use host::net::world::NetWorld;
use host::net::NetHost;
use sim::component::Sim;
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

/// A view of `name` using PF `pf` of its NIC, its workload on socket `socket` with
/// memory on node `node`.
fn view(t: &Topology, name: &str, pf: usize, socket: u32, node: u32) -> NetHost {
    NetHost::new(t, t.host_by_name(name).unwrap(), "nic", pf, socket, node).unwrap()
}

const WARM: Time = Time::from_us(1000);
const WIN: Time = Time::from_us(2000);

/// netperf's 64 KiB messages over the window.
fn spec() -> StreamSpec {
    StreamSpec {
        msg_bytes: 65536,
        mtu: 1500,
        warmup: WARM,
        window: WIN,
    }
}

/// A TCP receive on the server's socket 1, its buffers on node 1, through PF `pf`.
fn stream(t: &Topology, pf: usize) -> Streams {
    let rx = view(t, "server", pf, 1, 1);
    let tx = view(t, "client", 0, 0, 0);
    let spec = spec();
    let lanes = vec![(Lane::of(&tx), Lane::of(&rx))];
    Streams::new(tx, rx, spec, lanes).unwrap()
}

/// memcached instances on the server's socket 0, items on node 0, SETs of 512 KiB values
/// (the NIC writes them into node 0; the cores copy them into items).
fn memcached(t: &Topology, instances: u32) -> Memcached {
    let server = view(t, "server", 0, 0, 0);
    let client = view(t, "client", 0, 0, 0);
    let spec = MemcachedSpec {
        set_ratio: 1.0,
        value_bytes: 512 << 10,
        key_bytes: 64,
        clients: 4,
        keys: 64,
        mtu: 1500,
        warmup: WARM,
        window: WIN,
        seed: 7,
    };
    let lanes = (0..instances).map(|_| Lane::of(&server)).collect();
    Memcached::new(server, client, spec, lanes).unwrap()
}

/// Runs the given models in one world; their results.
fn run(
    s: Option<Streams>,
    m: Option<Memcached>,
) -> (Option<StreamResult>, Option<MemcachedResult>) {
    let mut world = NetWorld::new(1);
    let mut sim = Sim::new();
    let sid = s.map(|s| sim.add(s));
    let mid = m.map(|m| sim.add(m));
    if let Some(id) = sid {
        sim.with(&mut world, id, |s: &mut Streams, w| s.start(w, id))
            .unwrap()
            .unwrap();
    }
    if let Some(id) = mid {
        sim.with(&mut world, id, |m: &mut Memcached, w| m.start(w, id))
            .unwrap()
            .unwrap();
    }
    world.run_through(&mut sim, WARM + WIN);
    assert_eq!(world.late_reservations(), 0);
    let sr = sid.map(|id| sim.get::<Streams>(id).unwrap().result(&world));
    let mr = mid.map(|id| {
        let m: &Memcached = sim.get(id).unwrap();
        m.result(&world)
    });
    (sr, mr)
}

#[test]
fn a_receive_through_the_pf_memcached_loads_loses_most_of_its_throughput_beside_it() {
    let t = topo();
    // PF0 sits on socket 0: the stream's frames cross QPI to node 1, and memcached's
    // 512 KiB SETs (about 38 Gb/s) fill the same PF's PCIe link.
    let (alone, _) = run(Some(stream(&t, 0)), None);
    let (_, mc_alone) = run(None, Some(memcached(&t, 6)));
    let (both, mc) = run(Some(stream(&t, 0)), Some(memcached(&t, 6)));
    let (alone, both, mc, mc_alone) = (
        alone.unwrap(),
        both.unwrap(),
        mc.unwrap(),
        mc_alone.unwrap(),
    );
    assert!(
        both.throughput_gbps < 0.5 * alone.throughput_gbps,
        "{:.2} beside memcached, {:.2} alone",
        both.throughput_gbps,
        alone.throughput_gbps
    );
    assert!(mc.kops <= mc_alone.kops, "{} {}", mc.kops, mc_alone.kops);
    // One memory system: both read the server's DRAM counter, which counts both.
    assert_eq!(both.receiver_mem_gbps, mc.mem_gbps);
    assert!(mc.mem_gbps > mc_alone.mem_gbps.max(alone.receiver_mem_gbps));
}

#[test]
fn a_local_receive_through_the_other_pf_keeps_most_of_its_throughput_beside_memcached() {
    let t = topo();
    // PF1 sits on socket 1 with the stream's core and buffers: the two share only the
    // port, the memory system's LLC and the other socket's traffic.
    let (alone, _) = run(Some(stream(&t, 1)), None);
    let (both, mc) = run(Some(stream(&t, 1)), Some(memcached(&t, 6)));
    let (alone, both, mc) = (alone.unwrap(), both.unwrap(), mc.unwrap());
    assert!(
        both.throughput_gbps > 0.8 * alone.throughput_gbps,
        "{:.2} beside memcached, {:.2} alone",
        both.throughput_gbps,
        alone.throughput_gbps
    );
    assert!(mc.kops > 0.0 && both.out_of_order == 0);
    assert_eq!(both.receiver_mem_gbps, mc.mem_gbps);
}

#[test]
fn a_world_runs_the_same_twice_and_models_alone_in_it_match_their_own_runs() {
    let t = topo();
    let (a, _) = run(Some(stream(&t, 0)), Some(memcached(&t, 2)));
    let (b, _) = run(Some(stream(&t, 0)), Some(memcached(&t, 2)));
    assert_eq!(
        a.unwrap().throughput_gbps.to_bits(),
        b.unwrap().throughput_gbps.to_bits()
    );
    // Alone in a world, a stream gives what `stream::run_lanes` gives on the same views.
    let (alone, _) = run(Some(stream(&t, 0)), None);
    let mut rx = view(&t, "server", 0, 1, 1);
    let mut tx = view(&t, "client", 0, 0, 0);
    let spec = spec();
    let lanes = vec![(Lane::of(&tx), Lane::of(&rx))];
    let own = host::net::stream::run_lanes(&mut tx, &mut rx, spec, lanes).unwrap();
    assert_eq!(alone.unwrap().throughput_gbps, own.throughput_gbps);
}

/// `n` TCP receives through PF `pf` as `n` models of one world, or as one model with `n`
/// connections: throughput and the server's DRAM traffic.
fn receives(t: &Topology, pf: usize, models: usize, each: usize) -> (f64, f64) {
    let mut world = NetWorld::new(1);
    let mut sim = Sim::new();
    let ids: Vec<_> = (0..models)
        .map(|_| {
            let rx = view(t, "server", pf, 1, 1);
            let tx = view(t, "client", 0, 0, 0);
            let spec = spec();
            let lanes = vec![(Lane::of(&tx), Lane::of(&rx)); each];
            sim.add(Streams::new(tx, rx, spec, lanes).unwrap())
        })
        .collect();
    for &id in &ids {
        sim.with(&mut world, id, |s: &mut Streams, w| s.start(w, id))
            .unwrap()
            .unwrap();
    }
    world.run_through(&mut sim, WARM + WIN);
    let rs: Vec<StreamResult> = ids
        .iter()
        .map(|&id| sim.get::<Streams>(id).unwrap().result(&world))
        .collect();
    let gbps = rs.iter().map(|r| r.throughput_gbps).sum();
    (gbps, rs[0].receiver_mem_gbps)
}

#[test]
fn two_models_in_one_world_keep_their_buffers_apart_and_move_what_one_model_moves() {
    // Each model's rings and buffers are its own lines in the shared memory system: two
    // one-connection models give exactly what one two-connection model gives (sharing
    // buffer numbers, they would hit each other's lines in the LLC).
    let t = topo();
    for pf in [0, 1] {
        assert_eq!(receives(&t, pf, 2, 1), receives(&t, pf, 1, 2), "pf{pf}");
    }
}

#[test]
fn models_measuring_different_windows_cannot_share_a_world() {
    let t = topo();
    let mut world = NetWorld::new(1);
    let mut sim = Sim::new();
    let a = sim.add(stream(&t, 0));
    sim.with(&mut world, a, |s: &mut Streams, w| s.start(w, a))
        .unwrap()
        .unwrap();
    let rx = view(&t, "server", 1, 1, 1);
    let tx = view(&t, "client", 0, 0, 0);
    let spec = StreamSpec {
        msg_bytes: 65536,
        mtu: 1500,
        warmup: WARM,
        window: WIN + WIN,
    };
    let lanes = vec![(Lane::of(&tx), Lane::of(&rx))];
    let b = sim.add(Streams::new(tx, rx, spec, lanes).unwrap());
    let e = sim
        .with(&mut world, b, |s: &mut Streams, w| s.start(w, b))
        .unwrap()
        .unwrap_err();
    assert!(e.contains("in a world that measures"), "{e}");
}

#[test]
fn pktgen_alone_in_a_world_sends_what_its_own_loop_sends_and_slows_beside_a_receive() {
    use host::net::pktgen::{self, Generator, PktgenSpec};
    let t = topo();
    let spec = PktgenSpec {
        pkt_bytes: 64,
        warmup: WARM,
        window: WIN,
        fragments: Vec::new(),
    };
    // Remote from its PF (socket 1's core sends through PF0): every descriptor, packet
    // and completion crosses QPI.
    let gen = || Generator::new(view(&t, "server", 0, 1, 1), spec.clone()).unwrap();
    let own = pktgen::run(&mut view(&t, "server", 0, 1, 1), spec.clone()).unwrap();
    let in_world = |s: Option<Streams>| {
        let mut world = NetWorld::new(1);
        let mut sim = Sim::new();
        let gid = sim.add(gen());
        sim.with(&mut world, gid, |g: &mut Generator, w| g.start(w, gid))
            .unwrap()
            .unwrap();
        let sid = s.map(|s| sim.add(s));
        if let Some(id) = sid {
            sim.with(&mut world, id, |s: &mut Streams, w| s.start(w, id))
                .unwrap()
                .unwrap();
        }
        world.run_through(&mut sim, WARM + WIN);
        assert_eq!(world.late_reservations(), 0);
        let g = sim.get::<Generator>(gid).unwrap().result(&world);
        (
            g,
            sid.map(|id| sim.get::<Streams>(id).unwrap().result(&world)),
        )
    };
    let (alone, _) = in_world(None);
    let rel = (alone.mpps - own.mpps).abs() / own.mpps;
    assert!(
        rel < 0.01,
        "{} Mpps in a world, {} alone",
        alone.mpps,
        own.mpps
    );
    // A receive through the same PF into node 1 takes the PF's link and QPI with it.
    let (beside, rx) = in_world(Some(stream(&t, 0)));
    assert!(
        beside.mpps < alone.mpps,
        "{} Mpps beside the receive, {} alone",
        beside.mpps,
        alone.mpps
    );
    assert!(rx.unwrap().throughput_gbps > 1.0);
    assert!(beside.interconnect_gbps > alone.interconnect_gbps);
}
