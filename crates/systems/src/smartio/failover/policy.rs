//! What a failover client is given: its mode (what follows the primary's failure), its
//! policy (a driver's choices), and the workload's constants.

use sim::Time;

/// Queue depth of the client (docs/workloads.md: QD 8).
pub const DEPTH: usize = 8;

pub(super) const BLOCK: u64 = 4096;

pub(super) const LBAS: u16 = 8;

/// Attempts of one I/O before it is reported failed.
pub(super) const ATTEMPTS: u32 = 4;

/// What happens to the primary path after its failure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailoverMode {
    /// The link stays down: the client finishes on the backup queue pair.
    FailOver,
    /// The link comes back 1 ms later with its mappings intact: resume the old pair.
    Flap,
    /// The link comes back with its mappings torn down: new queues, new windows.
    Recreate,
}

/// The client's policy (a driver's choices, not hardware timing).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FailoverPolicy {
    /// A command not completed within this is taken as lost with its path.
    pub deadline: Time,
    /// Between two probes of a dead path.
    pub probe_every: Time,
    /// After a resync's doorbells, the first look at whether the controller has
    /// finished what it had (then every `probe_every`, up to the completion timeout).
    pub drain: Time,
    /// At most one new I/O per `pace` (an open workload, so that a long campaign of
    /// faults costs simulated idle time rather than I/Os); zero: closed loop at QD 8.
    pub pace: Time,
}

impl Default for FailoverPolicy {
    fn default() -> Self {
        FailoverPolicy {
            deadline: Time::from_us(100),
            probe_every: Time::from_us(50),
            drain: Time::from_us(100),
            pace: Time::ZERO,
        }
    }
}
