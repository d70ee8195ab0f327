//! Multipath failover of a distributed-driver client (`smartio.failover` in docs/studies.md).
//!
//! A borrower with two NTB adapter pairs to the lender borrows the NVMe controller twice,
//! once through each pair (`BorrowOptions::through`), and gets one I/O queue pair per
//! borrow from the manager: each path has its own SQ/CQ, DMA window, data buffer and
//! doorbells through its own adapter. `FailoverClient` drives both queue pairs itself
//! (stores, doorbells and CQ polls through `TimedFabric::route`, like `NvmeDriver`):
//!
//! * **Submission with a fence.** SQ entries (in lender RAM, by hints) are CPU stores
//!   through the NTB; a dead link drops them silently. After a batch of stores the client
//!   reads CSTS through the same path (a read does not pass posted writes), the way
//!   SISCI's `SCICheckSequence` checks PIO stores: all-ones (Unsupported Request,
//!   docs/hardware.md §2) means the path is dead; otherwise every entry is in place and the
//!   doorbell goes. So the controller never fetches a stale entry from a slot whose store
//!   was dropped.
//! * **Detection.** A fence answered with all-ones, or a command with no completion
//!   within `deadline` (its doorbell or completion dropped). The path is declared dead;
//!   every command not acknowledged on it is abandoned and re-issued on the other path
//!   (a write re-issued writes the same bytes: safe).
//! * **Resync (`flap`).** A dead path is probed with a CSTS read every `probe_every`;
//!   when it answers, the client stores a Flush over every SQ slot it had used and not
//!   seen completed (a stale command must not run), fences, rings both doorbells, waits
//!   `drain` for the controller to finish what it fetched, and then moves its CQ head to
//!   where the controller's is (one completion per SQ entry ever fetched: the lost
//!   completions are skipped). The path is usable again; in `flap` the client goes back
//!   to it.
//! * **Recreate.** When the lender's agent revokes the borrow (windows torn down), the
//!   client asks for a new queue pair: the run loop (`failover_run_with`) has the manager
//!   delete the old I/O queues, borrows again through the same pair (a new DMA window)
//!   and creates a new queue pair, which the client adopts.
//!
//! The workload: 4 KiB blocks written once each (bytes a function of the block) and read
//! back after their write was acknowledged, verified, at queue depth 8.
//!
//! Files: `policy` (the client's mode, policy and workload constants), `client` (the
//! client component: its queue pairs, the workload, submission and polling), `recovery`
//! (fences, declaring a path dead, resync, a crashed or revoked path) and `run` (setting
//! up both paths and running a campaign of faults).

mod client;
mod policy;
mod recovery;
mod run;

pub use client::{FailoverClient, FailoverResult};
pub use policy::{FailoverMode, FailoverPolicy, DEPTH};
pub use run::{failover_run_with, FailoverRig, FailoverSetup, PathSetUp};
