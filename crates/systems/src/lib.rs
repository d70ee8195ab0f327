//! nudma's systems layer: the published systems, written against the host layer's DMA,
//! IOMMU and NTB calls (never programming hardware state itself). `smartio`: SmartIO's
//! device pool, Device Lending and device-oriented API, which need no time (the timing
//! layer prices the paths they set up). `drivers`: drivers written once against the
//! device as a host sees it (local, borrowed, passed to a VM), run as simulation
//! components on the timed fabric.

pub mod drivers;
pub mod ioctopus;
pub mod smartio;
pub mod tyche;
