//! One netperf TCP_STREAM per server core, all cores of every socket at once (or some
//! cores of each beside a co-located workload, `run_with`): each connection has its own
//! core on each side, its own rings (RSS/ARFS steer its flow to the queue of its core;
//! XPS sends from that core's queue) and socket buffers, and all of them share the
//! server's memory system (LLC DDIO share, DRAM, interconnect), both PCIe links and the
//! Ethernet port.

use super::stream::{self, Colocated, Lane, Side, StreamResult, StreamSpec};
use super::NetHost;
use crate::victim::Background;

/// Runs `cores_per_socket × sockets` streams between `server` and `client`, the server
/// receiving when `server_receives`. Server core c of socket s has its rings and process
/// memory on node s and its queue on PF `pf_of(s)`; the client side of every connection
/// runs on a core of its own with `client`'s PF and node (the client is not what is
/// measured: assumption, docs/hardware.md §1 names no client limit at line rate).
pub fn run(
    server: &mut NetHost,
    client: &mut NetHost,
    server_receives: bool,
    cores_per_socket: u32,
    pf_of: impl Fn(u32) -> usize,
    spec: StreamSpec,
) -> Result<StreamResult, String> {
    run_with(
        server,
        client,
        server_receives,
        cores_per_socket,
        pf_of,
        spec,
        None,
    )
}

/// As [`run`] on `cores_per_socket` cores of each socket (the rest left to `bg`), with
/// `bg` running on the server's memory system alongside (`stream::run_lanes_with`).
pub fn run_with(
    server: &mut NetHost,
    client: &mut NetHost,
    server_receives: bool,
    cores_per_socket: u32,
    pf_of: impl Fn(u32) -> usize,
    spec: StreamSpec,
    bg: Option<&mut dyn Background>,
) -> Result<StreamResult, String> {
    let sockets = server.mem.params().sockets;
    if cores_per_socket == 0 || cores_per_socket * sockets > 256 {
        return Err(format!(
            "{cores_per_socket} cores per socket × {sockets} sockets: must be 1..=256 cores"
        ));
    }
    let mut lanes = Vec::new();
    for socket in 0..sockets {
        for _ in 0..cores_per_socket {
            let mut core = server.core.clone();
            core.socket = socket;
            let s = Lane {
                core,
                pf: pf_of(socket),
                node: socket,
            };
            let c = Lane::of(client);
            lanes.push(if server_receives { (c, s) } else { (s, c) });
        }
    }
    if server_receives {
        let bg = bg.map(|work| Colocated {
            side: Side::Receiver,
            work,
        });
        stream::run_lanes_with(client, server, spec, lanes, bg)
    } else {
        let bg = bg.map(|work| Colocated {
            side: Side::Sender,
            work,
        });
        stream::run_lanes_with(server, client, spec, lanes, bg)
    }
}
