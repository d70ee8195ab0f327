//! A request-response protocol with one message outstanding (netperf's TCP_RR, sockperf's
//! UDP ping-pong) as a component of a [`NetWorld`]: the same exchange as the protocol's
//! own loop, one event per side's send and receive, on the world's memory systems and
//! NICs of its hosts, so a TCP_STREAM or memcached on them queues the request and
//! response in the same DRAM, LLC, interconnect, PCIe links and port, in time order.
//! Round trips run back to back from time zero; those that start in the window and end
//! within it are measured. The process's RX queue and interrupt moderation are its own
//! (its flow hashes to its own queue, as a benchmark's does beside other flows).

use sim::component::Component;
use sim::net::{ComponentId, Event};
use sim::timers::Timers;
use sim::Time;

use super::world::{NetWorld, Shared};
use super::NetHost;

/// One message each way per round trip, as a protocol's own loop sends and receives it.
pub trait Exchange: 'static {
    /// One host's rings and receive queue.
    type Side: Default + 'static;
    /// `h`'s process sends its message at `t`: when each segment reaches `peer`'s NIC,
    /// with its payload bytes.
    fn send(
        &mut self,
        h: &mut NetHost,
        side: &mut Self::Side,
        t: Time,
        peer: &NetHost,
    ) -> Vec<(Time, u64)>;
    /// `h` receives the message whose segments arrive as `send` said: when its process
    /// has copied it out.
    fn receive(&mut self, h: &mut NetHost, side: &mut Self::Side, arrivals: &[(Time, u64)])
        -> Time;
    /// The window starts: the counters of the measured round trips restart.
    fn warm(&mut self, server: &mut Self::Side);
    /// The model's buffer namespace in its world.
    fn set_namespace(&mut self, ns: u64);
}

/// What a round trip waits for next.
#[derive(Clone, Copy, Debug)]
enum Ev {
    /// The client's process sends a request.
    Request,
    /// The request's first segment is at the server's NIC.
    ServerReceive,
    /// The server's process sends the response.
    Response,
    /// The response's first segment is at the client's NIC.
    ClientReceive,
    /// The measurement window starts.
    Warm,
}

/// Round trips of exchange `X` between a client and a server (see the module's text).
pub struct RoundTrips<X: Exchange> {
    /// Client, server.
    hosts: [NetHost; 2],
    at: [Shared; 2],
    sides: [X::Side; 2],
    pub(super) x: X,
    warmup: Time,
    window: Time,
    timers: Timers<Ev>,
    /// When the round trip under way started.
    started: Time,
    /// Where the message under way reaches its receiver's NIC.
    arrivals: Vec<(Time, u64)>,
    /// The measured round trips.
    pub(super) lat: Vec<Time>,
    /// Events handled.
    pub events: u64,
}

impl<'b, X: Exchange> Component<NetWorld<'b>> for RoundTrips<X> {
    fn notify(&mut self, w: &mut NetWorld<'b>, me: ComponentId, event: Event) {
        let Event::Timer(key) = event else {
            return;
        };
        let ev = self.timers.take(key);
        let t = w.net.now();
        self.events += 1;
        // The workloads beside first: all reserve DRAM, LLC and interconnect in time order.
        w.before_event(t, matches!(ev, Ev::Warm));
        let [client, server] = &mut self.hosts;
        w.lend(self.at[0], client);
        w.lend(self.at[1], server);
        let next = self.handle(t, ev);
        let [client, server] = &mut self.hosts;
        w.lend(self.at[0], client);
        w.lend(self.at[1], server);
        if let Some((at, ev)) = next {
            self.timers.at(&mut w.net, at.max(t), me, ev);
        }
    }
}

impl<X: Exchange> RoundTrips<X> {
    /// Exchange `x` between `client` and `server` (views of two hosts), measuring `window`
    /// after `warmup`.
    pub(super) fn of(
        x: X,
        client: NetHost,
        server: NetHost,
        warmup: Time,
        window: Time,
    ) -> Result<RoundTrips<X>, String> {
        if client.host == server.host {
            return Err("a ping-pong's client and server are two hosts".into());
        }
        Ok(RoundTrips {
            hosts: [client, server],
            at: [Shared::default(); 2],
            sides: Default::default(),
            x,
            warmup,
            window,
            timers: Timers::new(),
            started: Time::ZERO,
            arrivals: Vec::new(),
            lat: Vec::new(),
            events: 0,
        })
    }

    /// Joins `w` as component `me`: its hosts' memory systems and NICs are the world's
    /// from now on, and the first request leaves at time zero.
    pub fn start(&mut self, w: &mut NetWorld<'_>, me: ComponentId) -> Result<(), String> {
        self.x
            .set_namespace(w.start_model(self.warmup, self.window)?);
        self.at = [w.join(&self.hosts[0]), w.join(&self.hosts[1])];
        self.timers.at(&mut w.net, Time::ZERO, me, Ev::Request);
        self.timers.at(&mut w.net, self.warmup, me, Ev::Warm);
        Ok(())
    }

    /// Where the server shares its memory system and NIC in the world (after `start`).
    pub fn server(&self) -> Shared {
        self.at[1]
    }

    /// How many round trips were measured.
    pub fn measured(&self) -> u32 {
        self.lat.len() as u32
    }

    /// The server's side (its receive queue's counters).
    pub(super) fn server_side(&self) -> &X::Side {
        &self.sides[1]
    }

    /// The measured round trips; an error when the window held none.
    pub(super) fn round_trips(&self) -> Result<Vec<Time>, String> {
        if self.lat.is_empty() {
            return Err(format!(
                "no round trip both started and ended within the {:?} window",
                self.window
            ));
        }
        Ok(self.lat.clone())
    }

    /// One event on the hosts the world has lent: what comes next, and when.
    fn handle(&mut self, t: Time, ev: Ev) -> Option<(Time, Ev)> {
        let [client, server] = &mut self.hosts;
        let [cs, ss] = &mut self.sides;
        match ev {
            Ev::Warm => {
                self.x.warm(ss);
                None
            }
            Ev::Request => {
                self.started = t;
                self.arrivals = self.x.send(client, cs, t, server);
                Some((self.arrivals[0].0, Ev::ServerReceive))
            }
            Ev::ServerReceive => Some((self.x.receive(server, ss, &self.arrivals), Ev::Response)),
            Ev::Response => {
                self.arrivals = self.x.send(server, ss, t, client);
                Some((self.arrivals[0].0, Ev::ClientReceive))
            }
            Ev::ClientReceive => {
                let done = self.x.receive(client, cs, &self.arrivals);
                let end = self.warmup + self.window;
                if self.started >= self.warmup && done <= end {
                    self.lat.push(done - self.started);
                }
                (done < end).then_some((done, Ev::Request))
            }
        }
    }
}
