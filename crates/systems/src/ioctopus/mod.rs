//! The IOctopus driver side (REFERENCE.md §1): which PF of a multi-PF NIC a workload's
//! traffic uses. A standard NIC shows each PF as its own netdev, so a socket bound to a
//! netdev receives and transmits through that PF wherever its thread runs. The octoNIC
//! (the team driver's IOctopus mode) transmits through the PF local to the current CPU
//! and fills the NIC's multi-PF switch so a flow is steered to the PF local to the
//! thread that receives it; that PF's ARFS table then picks the thread's queue.

pub mod team;

use devices::nic::{FiveTuple, Steering, SteeringMode};

/// The PF a transmit from a core on `core_socket` goes through.
pub fn tx_pf(mode: SteeringMode, netdev_pf: usize, core_socket: u32, pf_sockets: &[u32]) -> usize {
    match mode {
        SteeringMode::Standard => netdev_pf,
        SteeringMode::OctoNic => local_pf(core_socket, pf_sockets).unwrap_or(netdev_pf),
    }
}

/// The first PF whose link is on `socket`.
pub fn local_pf(socket: u32, pf_sockets: &[u32]) -> Option<usize> {
    pf_sockets.iter().position(|&s| s == socket)
}

/// The flow's thread runs on `thread_socket` and reads queue `queue`: the octoNIC's
/// MPFS rule (flow → the PF local to the thread) and that PF's ARFS rule (flow → queue).
/// A standard NIC's only rule is ARFS on the netdev's PF.
pub fn steer_flow(
    s: &mut Steering,
    flow: FiveTuple,
    thread_socket: u32,
    queue: u16,
    netdev_pf: usize,
    pf_sockets: &[u32],
) -> usize {
    let pf = match s.mode {
        SteeringMode::Standard => netdev_pf,
        SteeringMode::OctoNic => {
            let pf = local_pf(thread_socket, pf_sockets).unwrap_or(netdev_pf);
            s.mpfs.insert(flow, pf as u8);
            pf
        }
    };
    s.pfs[pf].arfs.insert(flow, queue);
    pf
}

#[cfg(test)]
mod tests {
    use super::*;

    const FLOW: FiveTuple = FiveTuple {
        src_ip: 0x0a00_0002,
        dst_ip: 0x0a00_0001,
        src_port: 40000,
        dst_port: 12865,
        proto: 6,
    };

    #[test]
    fn octonic_steers_a_flow_to_the_pf_local_to_its_thread() {
        let sockets = [0, 1];
        for thread in [0u32, 1] {
            let mut s = Steering::new(SteeringMode::OctoNic, 2, 14);
            let pf = steer_flow(&mut s, FLOW, thread, 3, 0, &sockets);
            assert_eq!(pf, thread as usize);
            // The NIC then steers the flow's frames there, whatever MAC/netdev they name.
            assert_eq!(s.steer(&FLOW, 0), (thread as u8, 3));
            assert_eq!(
                tx_pf(SteeringMode::OctoNic, 0, thread, &sockets),
                thread as usize
            );
        }
    }

    #[test]
    fn a_standard_nic_keeps_the_netdev_pf_even_when_it_is_remote() {
        let sockets = [0, 1];
        let mut s = Steering::new(SteeringMode::Standard, 2, 14);
        assert_eq!(steer_flow(&mut s, FLOW, 0, 3, 1, &sockets), 1);
        assert_eq!(s.steer(&FLOW, 1), (1, 3));
        assert_eq!(tx_pf(SteeringMode::Standard, 1, 0, &sockets), 1);
    }
}
