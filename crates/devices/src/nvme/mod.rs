//! An NVMe controller (NVMe 1.3 base specification semantics) and a minimal polling
//! queue-pair driver to drive it: registers (`regs`), queue entries (`command`), the
//! namespace and media timing (`media`), the controller component (`controller`) and the
//! driver side (`queue`).

pub mod command;
pub mod controller;
pub mod media;
pub mod queue;
pub mod regs;

pub use command::{Command, Completion, IdentifyController, IdentifyNamespace, Status};
pub use controller::{Cmb, NvmeController, NvmeError, NvmeParams, NvmeStats};
pub use media::{Media, MediaTiming, Namespace};
pub use queue::{
    build_prps, Buffer, DriverLog, DriverStep, IoCmd, IoJob, NvmeDriver, NvmeDriverConfig,
    QueueMemory, QueuePair,
};
