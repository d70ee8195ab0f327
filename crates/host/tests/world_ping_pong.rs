//! TCP_RR and the UDP ping-pong as models of a `NetWorld`: alone each gives the round
//! trip of its own loop (`rr::run`, `udp::ping_pong`); beside a TCP receive from the same
//! client, the requests queue behind the stream's frames on the client's port.

use devices::nic::CoalesceMode;
use fabric::{builtin, Fabric, Topology};
use host::net::rr::{self, RrResult, Transactions};
use host::net::stream::{Lane, StreamResult, StreamSpec, Streams};
use host::net::udp::{self, PingPongs};
use host::net::world::NetWorld;
use host::net::NetHost;
use sim::component::Sim;
use sim::Time;

fn topo() -> Topology {
    let s = builtin::load_builtin("ioctopus_r730").unwrap().unwrap();
    Fabric::from_scenario(s).unwrap().topo
}

fn view(t: &Topology, name: &str, pf: usize, socket: u32, node: u32) -> NetHost {
    NetHost::new(t, t.host_by_name(name).unwrap(), "nic", pf, socket, node).unwrap()
}

const WARM: Time = Time::from_us(500);
const WIN: Time = Time::from_us(1000);
const MSG: u64 = 64;

/// A TCP_RR of `MSG` bytes with the server's process on `socket` (its buffers there too),
/// through PF `pf`; the client's on its socket 0.
fn transactions(t: &Topology, pf: usize, socket: u32) -> Transactions {
    let (server, client) = ends(t, pf, socket);
    Transactions::new(client, server, MSG, 1500, WARM, WIN).unwrap()
}

/// The server's and client's views of a TCP_RR, coalescing off (as netperf's are run).
fn ends(t: &Topology, pf: usize, socket: u32) -> (NetHost, NetHost) {
    let mut server = view(t, "server", pf, socket, socket);
    let mut client = view(t, "client", 0, 0, 0);
    server.coalescing.mode = CoalesceMode::Off;
    client.coalescing.mode = CoalesceMode::Off;
    (server, client)
}

/// A TCP receive of `connections` on the server's socket 1 (buffers on node 1) through
/// PF `pf`.
fn stream(t: &Topology, pf: usize, connections: usize) -> Streams {
    let rx = view(t, "server", pf, 1, 1);
    let tx = view(t, "client", 0, 0, 0);
    let spec = StreamSpec {
        msg_bytes: 65536,
        mtu: 1500,
        warmup: WARM,
        window: WIN,
    };
    let lanes = vec![(Lane::of(&tx), Lane::of(&rx)); connections];
    Streams::new(tx, rx, spec, lanes).unwrap()
}

/// Runs the models given in one world.
fn run(r: Option<Transactions>, s: Option<Streams>) -> (Option<RrResult>, Option<StreamResult>) {
    let mut world = NetWorld::new(1);
    let mut sim = Sim::new();
    let rid = r.map(|r| sim.add(r));
    let sid = s.map(|s| sim.add(s));
    if let Some(id) = rid {
        sim.with(&mut world, id, |r: &mut Transactions, w| r.start(w, id))
            .unwrap()
            .unwrap();
    }
    if let Some(id) = sid {
        sim.with(&mut world, id, |s: &mut Streams, w| s.start(w, id))
            .unwrap()
            .unwrap();
    }
    world.run_through(&mut sim, WARM + WIN);
    assert_eq!(world.late_reservations(), 0);
    let rr = rid.map(|id| sim.get::<Transactions>(id).unwrap().result().unwrap());
    let sr = sid.map(|id| sim.get::<Streams>(id).unwrap().result(&world));
    (rr, sr)
}

#[test]
fn alone_in_a_world_a_transaction_takes_what_it_takes_in_its_own_run() {
    let t = topo();
    let (world, _) = run(Some(transactions(&t, 0, 0)), None);
    let world = world.unwrap();
    let (mut server, mut client) = ends(&t, 0, 0);
    let spec = rr::RrSpec {
        msg_bytes: MSG,
        mtu: 1500,
        warmup: 2048,
        transactions: 16,
    };
    let own = rr::run(&mut client, &mut server, spec).unwrap();
    // The world's warm-up is shorter than `RrSpec`'s (rings not yet wrapped), which
    // changes no line's cost here: the same round trip to a part in a thousand.
    let rel = (world.latency_us - own.latency_us).abs() / own.latency_us;
    assert!(
        rel < 1e-3,
        "{} in a world, {} alone",
        world.latency_us,
        own.latency_us
    );
    // Back to back over the window: window / round trip transactions.
    let n = WIN.as_secs_f64() * world.transactions_per_s;
    assert!(n > 50.0, "{n}");
}

#[test]
fn a_tcp_receive_from_the_same_client_delays_every_request_and_barely_notices_it() {
    // The stream goes through PF1 into socket 1, the RR through PF0 on socket 0: they
    // share the client's port, where the RR's requests queue behind the stream's frames
    // (the port serves frames in the order their data was fetched).
    let t = topo();
    let (alone, _) = run(Some(transactions(&t, 0, 0)), None);
    let (_, stream_alone) = run(None, Some(stream(&t, 1, 8)));
    let (both, beside) = run(Some(transactions(&t, 0, 0)), Some(stream(&t, 1, 8)));
    let (alone, both) = (alone.unwrap(), both.unwrap());
    let (stream_alone, beside) = (stream_alone.unwrap(), beside.unwrap());
    assert!(
        both.latency_us > 2.0 * alone.latency_us,
        "{} beside the stream, {} alone",
        both.latency_us,
        alone.latency_us
    );
    // Alone every transaction takes the same time; beside, the queue it meets varies.
    assert!((alone.p99_us - alone.latency_us).abs() < 1e-6 * alone.latency_us);
    assert!(both.p99_us > both.latency_us);
    assert!(
        beside.throughput_gbps > 0.95 * stream_alone.throughput_gbps,
        "{} beside the RR, {} alone",
        beside.throughput_gbps,
        stream_alone.throughput_gbps
    );
}

#[test]
fn alone_in_a_world_a_udp_round_trip_takes_what_it_takes_in_its_own_loop() {
    let t = topo();
    let (server, client) = ends(&t, 0, 0);
    let mut world = NetWorld::new(1);
    let mut sim = Sim::new();
    let p = PingPongs::new(client, server, MSG, 1500, WARM, WIN).unwrap();
    let id = sim.add(p);
    sim.with(&mut world, id, |p: &mut PingPongs, w| p.start(w, id))
        .unwrap()
        .unwrap();
    world.run_through(&mut sim, WARM + WIN);
    assert_eq!(world.late_reservations(), 0);
    let p: &PingPongs = sim.get(id).unwrap();
    let in_world = p.result().unwrap();
    let (mut server, mut client) = ends(&t, 0, 0);
    let spec = udp::UdpSpec {
        msg_bytes: MSG,
        mtu: 1500,
        warmup: 2048,
        round_trips: 16,
    };
    let own = udp::ping_pong(&mut client, &mut server, spec).unwrap();
    let rel = (in_world.latency_us - own.latency_us).abs() / own.latency_us;
    assert!(
        rel < 1e-3,
        "{} in a world, {} alone",
        in_world.latency_us,
        own.latency_us
    );
    assert!(p.measured() > 50, "{}", p.measured());
    // A datagram larger than one frame is refused, in a world as alone.
    let (server, client) = ends(&t, 0, 0);
    let e = PingPongs::new(client, server, 1473, 1500, WARM, WIN)
        .err()
        .unwrap();
    assert!(e.contains("must be in 1..=1472"), "{e}");
}
