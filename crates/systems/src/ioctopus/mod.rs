//! The IOctopus driver side (docs/hardware.md §1): which PF of a multi-PF NIC a workload's
//! traffic uses. A standard NIC shows each PF as its own netdev, so a socket bound to a
//! netdev receives and transmits through that PF wherever its thread runs. The octoNIC
//! (the team driver's IOctopus mode) transmits through the PF local to the current CPU
//! and fills the NIC's multi-PF switch so a flow is steered to the PF local to the
//! thread that receives it; that PF's ARFS table then picks the thread's queue.
//! Linux's multi-PF netdev (mlx5 socket direct, upstream since 6.9) reaches the same
//! placement another way: default XPS picks a send queue of the PF on the CPU's node, and
//! an ARFS rule in the primary PF's table names the channel whose interrupt is on the
//! receiving CPU — with the driver's default affinity, a channel of the CPU's local PF.

pub mod team;

use devices::nic::{FiveTuple, Steering, SteeringMode};

/// The PF a transmit from a core on `core_socket` goes through.
pub fn tx_pf(mode: SteeringMode, netdev_pf: usize, core_socket: u32, pf_sockets: &[u32]) -> usize {
    match mode {
        SteeringMode::Standard => netdev_pf,
        SteeringMode::OctoNic | SteeringMode::LinuxMultiPf => {
            local_pf(core_socket, pf_sockets).unwrap_or(netdev_pf)
        }
    }
}

/// The PF that reads a transmit fragment whose page is on `frag_node`, for a queue on
/// `queue_pf`. A NIC reads a packet through the queue's PF; IOctoSG (the IOctopus
/// paper's proposal, which it did not build) lets an octoNIC's driver put a PF hint in
/// each fragment's descriptor, so the NIC reads a fragment through the PF local to its
/// page and no fragment crosses the CPU interconnect.
pub fn fragment_pf(
    mode: SteeringMode,
    ioctosg: bool,
    queue_pf: usize,
    frag_node: u32,
    pf_sockets: &[u32],
) -> usize {
    match mode {
        SteeringMode::OctoNic if ioctosg => local_pf(frag_node, pf_sockets).unwrap_or(queue_pf),
        _ => queue_pf,
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
        SteeringMode::LinuxMultiPf => {
            // The rule lives in the primary's table and names a channel.
            let pf = local_pf(thread_socket, pf_sockets).unwrap_or(netdev_pf);
            let channel = s.pf_channel(pf as u8, queue);
            s.pfs[0].arfs.insert(flow, channel);
            return pf;
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
    fn linux_multipf_places_like_the_octonic_through_the_primary_pfs_tables() {
        let sockets = [0, 1];
        for thread in [0u32, 1] {
            let mut s = Steering::new(SteeringMode::LinuxMultiPf, 2, 14);
            let pf = steer_flow(&mut s, FLOW, thread, 3, 0, &sockets);
            assert_eq!(pf, thread as usize);
            assert_eq!(s.steer(&FLOW, 0), (thread as u8, 3));
            // No MPFS rule and no secondary-PF table is used.
            assert!(s.mpfs.is_empty() && s.pfs[1].arfs.is_empty());
            assert_eq!(
                tx_pf(SteeringMode::LinuxMultiPf, 0, thread, &sockets),
                thread as usize
            );
        }
    }

    #[test]
    fn ioctosg_hints_each_fragment_to_the_pf_of_its_page_only_on_an_octonic() {
        let sockets = [0, 1];
        for node in [0u32, 1] {
            assert_eq!(
                fragment_pf(SteeringMode::OctoNic, true, 0, node, &sockets),
                node as usize
            );
            assert_eq!(
                fragment_pf(SteeringMode::OctoNic, false, 0, node, &sockets),
                0
            );
            assert_eq!(
                fragment_pf(SteeringMode::Standard, true, 0, node, &sockets),
                0
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
