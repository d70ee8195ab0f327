//! nudma's systems layer: the published systems, written against the host layer's DMA,
//! IOMMU and NTB calls (never programming hardware state itself). Today: `smartio`,
//! SmartIO's device pool, Device Lending and device-oriented API. Needs no time: the
//! timing layer prices the paths it sets up.

pub mod smartio;
