//! The IOctopus study's set-up of the packet-granular stack (`host::net`), the NIC
//! (`devices::nic`) and the octoNIC driver side (`systems::ioctopus`) for `nudma run`'s
//! network workloads: which PF a flow's queue is on (`setup`), and the thread migration's
//! flow driver (`migration`).

pub mod migration;
pub mod setup;
