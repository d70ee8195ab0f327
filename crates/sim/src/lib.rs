//! `sim`: nudma's discrete-event kernel.
//!
//! * [`time`] — [`Time`], integer picoseconds (the engine tick);
//! * [`queue`] — [`Queue`], the pending-event set (a ladder queue, FIFO among equal
//!   times, generic over the event type);
//! * [`engine`] — [`Engine`], clock + queue + seeded generator + counters, the API
//!   hardware models build on;
//! * [`dist`] — platform-independent random variates (uniform index, exponential);
//! * [`phold`] — the PHOLD benchmark (the catalog's `engine.phold`) on the engine and
//!   on a binary-heap baseline.
//!
//! Models never read the wall clock: same inputs and seed, same results, bit for bit.

pub mod dist;
pub mod engine;
pub mod phold;
pub mod queue;
pub mod time;

pub use engine::{Engine, EngineStats, SimError};
pub use queue::Queue;
pub use time::Time;
pub mod component;
pub mod cpu_stream;
pub mod faults;
pub mod flow;
pub mod memsys;
pub mod net;
pub mod pcie;
pub mod stats;
pub mod timed;
pub mod timers;
