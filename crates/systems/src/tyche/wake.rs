//! Interrupt delivery and thread wake-ups, the control path between Tyche's threads
//! (Linux 2.6.32 on Nehalem-EP, docs/hardware.md §3), on the interrupt receive paths
//! (`rx::RxPath`; when interrupts fire is `rx`'s).
//!
//! A NIC's MSI-X interrupt runs on the core its IRQ is bound to, on the NIC's node: the
//! handler (and the NAPI poll it schedules) reads the completion entry from the ring the
//! NIC wrote, then wakes the channel's network thread. A sleeping thread — a network
//! thread whose ring ran empty, a work-queue thread with nothing queued, an application
//! thread blocked on its I/O — runs again only when another core wakes it:
//! `try_to_wake_up` takes the wakee's runqueue lock and enqueues it (lines homed on the
//! wakee's node, which the wakee's own scheduling dirtied last, so they move to the
//! waker's package), then sends a reschedule IPI; the wakee takes the interrupt and
//! switches to the thread, writing its runqueue back. On one core none of that happens:
//! the waker's work ends and the scheduler switches (`wakeup_cycles`). Across nodes the
//! line transfers and the IPI cross the processor link, priced by the memory system
//! (`mem::control_load`) and the uncore's route latency.
//!
//! What public sources say of the costs (found with the project's search; none on this
//! exact platform and kernel): an IPI round trip on x86 is quoted at ≈ 1–3 µs, and a
//! futex-driven context switch between two threads on a dual E5520 (2.6.28) was measured
//! in the µs range (blog.tsunanet.net, 2010; its table was not in the stored copy). The
//! constants below are therefore assumptions with their reasons; the platform's
//! `wakeup_cycles` (≈ 1.3 µs at 2.26 GHz) stays the switch into the woken thread.

use sim::memsys::LINE;
use sim::Time;

use super::mem::{self, DmaLedger};
use super::TycheHost;

/// Cycles the waker spends sending one reschedule IPI (assumption: Nehalem-EP has no
/// x2APIC, so 2.6.32 writes the xAPIC's ICR by MMIO and spins until its delivery status
/// clears, `safe_apic_wait_icr_idle`: a few hundred cycles, ≈ 0.2 µs).
pub const IPI_SEND_CYCLES: u64 = 500;
/// Cycles the wakee spends taking the IPI: interrupt entry, `smp_reschedule_interrupt`,
/// exit into `schedule` (assumption: an interrupt without a device handler, half the
/// platform's NIC `irq_cycles` of 1000).
pub const IPI_RECEIVE_CYCLES: u64 = 500;
/// Lines of the wakee's runqueue and task a wake-up touches: the runqueue lock, the
/// runqueue's counts and tree, the task's state (assumption: three lines of
/// `struct rq` / `task_struct`).
pub const WAKE_LINES: u64 = 3;

/// Identity of core `core`'s runqueue lines in the memory system.
const RQ: u64 = 8 << 40;

/// How a wake-up went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Woken {
    /// When the waker is free again.
    pub waker_done: Time,
    /// When the woken thread runs (its switch done).
    pub runs: Time,
    /// Whether the IPI crossed between packages.
    pub cross: bool,
}

/// Core `waker` of `h` wakes the thread that sleeps on core `wakee` at `at`. The waker's
/// core is not booked here (the caller ends its task at `waker_done`); the wakee's is.
pub fn wake(
    h: &mut TycheHost,
    ledger: &mut DmaLedger,
    at: Time,
    waker: usize,
    wakee: usize,
) -> Woken {
    let (ws, ts) = (h.cores[waker].socket, h.cores[wakee].socket);
    let rq = RQ | wakee as u64;
    if waker == wakee {
        // The waker's own work ends and the scheduler switches to the woken thread.
        let runs = at + h.cores[waker].cycles(h.costs.wakeup_cycles);
        return Woken {
            waker_done: runs,
            runs,
            cross: false,
        };
    }
    let stall = mem::control_load(&mut h.mem, ledger, at, ws, ts, rq, WAKE_LINES * LINE);
    let waker_done = at + stall + h.cores[waker].cycles(IPI_SEND_CYCLES);
    let arrive = waker_done + h.mem.uncore().latency(ws, ts);
    let core = &h.cores[wakee];
    let start = core.start(arrive);
    let mut runs = start + core.cycles(IPI_RECEIVE_CYCLES + h.costs.wakeup_cycles);
    // The wakee's scheduler writes its runqueue: the lines are dirty on its package again.
    runs += mem::cpu_store(&mut h.mem, runs, ts, ts, rq, WAKE_LINES * LINE);
    h.cores[wakee].finish(start, runs);
    Woken {
        waker_done,
        runs,
        cross: ws != ts,
    }
}

/// A completion entry the NIC wrote: its node and identity.
#[derive(Clone, Copy, Debug)]
pub struct Entry {
    pub node: u32,
    pub buf: u64,
    pub bytes: u64,
}

/// The NIC's interrupt for a frame visible at `at` while the network thread on core
/// `thread` sleeps: the handler on core `irq` reads the completion entry `cqe` and wakes
/// the thread. When the thread runs, and whether the wake-up crossed packages.
pub fn interrupt(
    h: &mut TycheHost,
    ledger: &mut DmaLedger,
    at: Time,
    irq: usize,
    cqe: Entry,
    thread: usize,
) -> Woken {
    let socket = h.cores[irq].socket;
    let start = h.cores[irq].start(at);
    let stall = mem::control_load(
        &mut h.mem, ledger, start, socket, cqe.node, cqe.buf, cqe.bytes,
    );
    let handled = start + stall + h.cores[irq].cycles(h.costs.irq_cycles);
    let w = wake(h, ledger, handled, irq, thread);
    if irq != thread {
        h.cores[irq].finish(start, w.waker_done);
    } else {
        h.cores[irq].finish(start, w.runs);
    }
    w
}
