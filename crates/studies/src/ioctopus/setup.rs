//! One host's side of a network workload, set up from a scenario: the host's NIC, the
//! PF its queue is on — picked by the NIC's steering mode and, for a standard NIC, the
//! netdev's PF — and the core and node its workload runs on. The IOctopus probes and
//! `nudma run`'s network workloads both set hosts up here, so a config and a workload
//! naming the same hardware get the same PF.

use devices::nic::{CoalesceMode, FiveTuple, Steering, SteeringMode};
use fabric::Topology;
use host::net::NetHost;

/// The netperf data connection (client → server port 12865's data port).
pub const FLOW: FiveTuple = FiveTuple {
    src_ip: 0x0a00_0002,
    dst_ip: 0x0a00_0001,
    src_port: 40000,
    dst_port: 50000,
    proto: 6,
};

/// IP MTU of every network workload: standard Ethernet (docs/hardware.md §1 names no jumbo
/// frames).
pub const MTU: u32 = 1500;

/// TCP_RR transactions before the measured ones: every ring (1,024 entries) has wrapped
/// twice, so every steady-state transaction takes the same time.
pub const RR_WARMUP: u32 = 2100;

/// Which NIC netdev a workload uses: the steering mode and, for a standard NIC, the PF
/// of the netdev (the octoNIC falls back to it when no PF is on the thread's socket).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NicChoice {
    pub mode: SteeringMode,
    pub netdev_pf: usize,
}

/// Host `name` of `topo` with its NIC `nic` on PF `pf`, the workload on a core of `socket`
/// with its memory on `node`. A missing host or NIC is named with what the host has.
pub fn host(
    topo: &Topology,
    name: &str,
    nic: &str,
    pf: usize,
    socket: u32,
    node: u32,
) -> Result<NetHost, String> {
    let h = topo
        .host_by_name(name)
        .ok_or_else(|| format!("no host `{name}`"))?;
    if topo.device_by_name(h, nic).is_none() {
        let nics: Vec<String> = topo
            .host(h)
            .devices
            .iter()
            .map(|&d| &topo.devices[d.index()])
            .filter(|d| matches!(d.kind, fabric::raw::DeviceKind::Nic))
            .map(|d| format!("`{}`", d.name))
            .collect();
        let has = if nics.is_empty() {
            "it has no NIC".to_string()
        } else {
            format!("its NICs: {}", nics.join(", "))
        };
        return Err(format!(
            "host `{name}` has no device `{nic}` ({has}): a network workload needs a NIC on each host"
        ));
    }
    NetHost::new(topo, h, nic, pf, socket, node)
}

/// The socket of each PF of `h`'s NIC.
pub fn pf_sockets(h: &NetHost) -> Vec<u32> {
    h.nic.pfs.iter().map(|p| p.socket).collect()
}

/// The PF a flow of a thread on `socket` uses: on receive the driver's steering rules
/// (the octoNIC's multi-PF switch, then the PF's ARFS), on transmit the team driver's
/// choice. Both name the same PF for a thread that stays on its core.
pub fn flow_pf(choice: NicChoice, flow: FiveTuple, socket: u32, sockets: &[u32]) -> usize {
    let mut steering = Steering::new(choice.mode, sockets.len() as u8, 1);
    let rx_pf =
        systems::ioctopus::steer_flow(&mut steering, flow, socket, 0, choice.netdev_pf, sockets);
    let (pf, _) = steering.steer(&flow, choice.netdev_pf as u8);
    debug_assert_eq!(pf as usize, rx_pf);
    let tx_pf = systems::ioctopus::tx_pf(choice.mode, choice.netdev_pf, socket, sockets);
    debug_assert_eq!(tx_pf, rx_pf);
    rx_pf
}

/// The server of a workload on a core of `socket` with its memory on `node`: its queue on
/// the PF `choice` gives the netperf flow; returns the host and that PF. A multi-PF
/// steering mode on a NIC with a single PF is refused (there is no local PF to steer to:
/// the workload would silently run as a standard NIC's).
pub fn server(
    topo: &Topology,
    name: &str,
    nic: &str,
    choice: NicChoice,
    socket: u32,
    node: u32,
) -> Result<(NetHost, usize), String> {
    let probe = host(topo, name, nic, 0, socket, node)?;
    let sockets = pf_sockets(&probe);
    if choice.netdev_pf >= sockets.len() {
        return Err(format!(
            "netdev_pf {}: `{name}.{nic}` has {} PF(s)",
            choice.netdev_pf,
            sockets.len()
        ));
    }
    if choice.mode != SteeringMode::Standard && sockets.len() < 2 {
        return Err(format!(
            "nic_mode {}: `{name}.{nic}` has one PF, and the octoNIC and Linux's multi-PF \
             netdev need a PF on each socket (use nic_mode = \"standard\")",
            match choice.mode {
                SteeringMode::OctoNic => "octonic",
                _ => "linux_multipf",
            }
        ));
    }
    let pf = flow_pf(choice, FLOW, socket, &sockets);
    Ok((host(topo, name, nic, pf, socket, node)?, pf))
}

/// The socket of PF 0 of host `name`'s NIC `nic` (where its client runs), or with
/// `away` the next socket (a client whose process and memory are remote from its NIC).
pub fn nic_socket(topo: &Topology, name: &str, nic: &str, away: bool) -> Result<u32, String> {
    let h = host(topo, name, nic, 0, 0, 0)?;
    let socket = h.nic.pfs[0].socket;
    Ok(if away {
        (socket + 1) % h.mem.params().sockets
    } else {
        socket
    })
}

/// A bulk-transfer client: its NIC's first PF, a core and memory on that PF's socket,
/// hardware LRO on (docs/hardware.md §1's client is a stock R730 with a ConnectX-4, whose
/// receive is not what the server experiments measure).
pub fn stream_client(topo: &Topology, name: &str, nic: &str) -> Result<NetHost, String> {
    let socket = nic_socket(topo, name, nic, false)?;
    let mut h = host(topo, name, nic, 0, socket, socket)?;
    h.lro = true;
    Ok(h)
}

/// Interrupt coalescing off, as latency tests run (docs/hardware.md §1).
pub fn coalescing_off(h: &mut NetHost) {
    h.coalescing.mode = CoalesceMode::Off;
}
