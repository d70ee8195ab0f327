//! Built-in parts: switch chips and NTB adapters, each with the provenance of its numbers.
//! A scenario may define more under `[chip.NAME]` and `[adapter.NAME]`, or override an
//! adapter's BAR size and LUT window count per NTB.

use crate::basis::Provenance;

/// A switch chip: a motherboard/chassis PCIe switch, the chip inside an adapter, or a
/// cluster switch.
#[derive(Clone, Debug, PartialEq)]
pub struct ChipSpec {
    pub name: String,
    pub description: String,
    pub lanes: u32,
    pub ports: u32,
    /// Added latency of one crossing, carried for the timing layer.
    pub latency_ns: f64,
    /// A cluster switch (sits between NTB adapters of different hosts).
    pub cluster: bool,
    /// Receive-buffer credits each port advertises, in TLPs: posted, non-posted,
    /// completion (0 = enough never to throttle), for the timing layer.
    pub credits: [u16; 3],
    pub source: String,
    /// Per-value basis of a chip defined in a scenario file (built-ins: see `source`).
    pub basis: Provenance,
}

/// An NTB host adapter model.
#[derive(Clone, Debug, PartialEq)]
pub struct AdapterSpec {
    pub name: String,
    pub description: String,
    pub chip: String,
    pub gen: u8,
    pub width: u8,
    /// Size of the BAR whose address-LUT windows reach the far side.
    pub bar_size: u64,
    pub lut_windows: u32,
    pub rid_lut_entries: u32,
    /// Requester-ID LUT entries kept for the host's CPUs (root complex requesters).
    pub rid_reserved: u32,
    /// Cable ports (a three-way ring uses two x8 ports of one adapter).
    pub ports: u32,
    /// Timing of the adapter (NTB translation, DMA engine), carried for the timing layer.
    pub timing: Vec<(String, f64)>,
    pub source: String,
    /// Per-value basis of an adapter defined in a scenario file (built-ins: see `source`).
    pub basis: Provenance,
}

impl AdapterSpec {
    /// A timing parameter of the adapter (validated when the scenario loaded).
    pub fn timing_value(&self, key: &str) -> Option<f64> {
        self.timing.iter().find(|(k, _)| k == key).map(|x| x.1)
    }
}

fn chip(
    name: &str,
    description: &str,
    lanes: u32,
    ports: u32,
    latency_ns: f64,
    cluster: bool,
    source: &str,
) -> ChipSpec {
    ChipSpec {
        name: name.into(),
        description: description.into(),
        lanes,
        ports,
        latency_ns,
        cluster,
        credits: [0; 3],
        source: source.into(),
        basis: Provenance::new(),
    }
}

/// Multicast groups one fabric can hold: the PCIe multicast capability's group table of
/// the chips a multicast TLP crosses (the PXH830's PEX8733, the MXS824's PM8536). A group
/// index must select the same group in every switch on the way, so the fabric-wide table
/// is the smallest chip's. Basis: assumption — Broadcom/PLX Gen3 PEX87xx product briefs
/// give 64 multicast groups; the PM8536's figure is not in docs/hardware.md and is taken to be
/// no smaller. `FabricError::Exhausted { what: "multicast group table", .. }` past it.
pub const MULTICAST_GROUPS: usize = 64;

/// The built-in switch chips.
pub fn builtin_chips() -> Vec<ChipSpec> {
    vec![
        chip(
            "pex8733",
            "Broadcom/PLX PEX8733, Gen3 32 lanes 18 ports (PXH830, PXH810, HIB68)",
            32,
            18,
            132.0,
            false,
            "docs/hardware.md §2: <= 132 ns per crossing (datasheet worst case)",
        ),
        chip(
            "pex8796",
            "Broadcom/PLX PEX8796, Gen3 96 lanes 24 ports (OSS BP-457-ATX chassis)",
            96,
            24,
            150.0,
            false,
            "docs/hardware.md §2: <= 150 ns",
        ),
        chip(
            "pex8747",
            "Broadcom/PLX PEX8747, Gen3 48 lanes 5 ports (motherboard switch)",
            48,
            5,
            100.0,
            false,
            "assumption: PLX Gen3 switches cut through in ~100-150 ns; docs/hardware.md has no figure for motherboard switches",
        ),
        chip(
            "mxs824",
            "Dolphin MXS824 cluster switch (Microsemi PM8536 PFX), 24 x4 Gen3 ports groupable to x8/x16",
            96,
            24,
            170.0,
            true,
            "docs/hardware.md §2: ~170 ns average",
        ),
        ChipSpec {
            credits: [8, 0, 10],
            ..chip(
                "pxh810_switch",
                "the PLX Gen3 switch of the Dolphin PXH810 (not named in docs/hardware.md)",
                32,
                18,
                132.0,
                false,
                "assumption: latency as the PEX8733 (docs/hardware.md §2); 8 posted-header and 10 completion-header credits per port calibrated on the \
                 PXH810 NTB DMA peaks of ≈ 4.8 GB/s writes and ≈ 3.0 GB/s reads (smartio.ntb_dma, docs/hardware.md §2; the completion credits were 11 while \
                 the NTB translation cost 33 ns on top of the chip, which lengthened the completions' credit loop); non-posted credits never throttle",
            )
        },
        chip(
            "generic",
            "a PCIe switch of unknown make (imported machines)",
            96,
            24,
            150.0,
            false,
            "assumption: same as the PEX8796 worst case, docs/hardware.md §2",
        ),
    ]
}

/// The built-in NTB adapters.
pub fn builtin_adapters() -> Vec<AdapterSpec> {
    // NTB translation: 0 ns beyond the adapter chip's crossing. docs/hardware.md §2: an
    // adapter chip adds the same in transparent mode as in NTB mode, so the address-LUT
    // lookup is part of the chip's crossing latency, not a cost on top of it. (It was
    // 33 ns, an assumption chosen to land the published 350–370 ns NTB crossing; the
    // crossing is now a prediction, `smartio.ram_latency` `ntb_added_ns`.) DMA engine: 64
    // outstanding reads of 512 B (docs/hardware.md §2, PXH810 measurements); its setup time
    // is an assumption. The NTB function's registers behave as a register BAR
    // (assumption: 1 GB/s, 200 ns, 64 B completions).
    let timing = || {
        vec![
            ("ntb_translate_ns".to_string(), 0.0),
            ("dma_max_reads".to_string(), 64.0),
            ("dma_mrrs_bytes".to_string(), 512.0),
            ("dma_setup_ns".to_string(), 1000.0),
            ("bar_gbps".to_string(), 1.0),
            ("bar_latency_ns".to_string(), 200.0),
            ("bar_rcb_bytes".to_string(), 64.0),
        ]
    };
    const LUT_SOURCE: &str =
        "BAR size and LUT windows are assumptions (docs/hardware.md gives none): \
        a 64-bit 8 GiB BAR in 256 equal windows of 32 MiB, as PLX Gen3 NTB A-LUTs allow";
    vec![
        AdapterSpec {
            name: "pxh830".into(),
            description: "Dolphin PXH830 NTB host adapter, Gen3 x16 (PEX8733)".into(),
            chip: "pex8733".into(),
            gen: 3,
            width: 16,
            bar_size: 8 << 30,
            lut_windows: 256,
            rid_lut_entries: 32,
            rid_reserved: 2,
            ports: 2,
            timing: timing(),
            basis: Provenance::new(),
            source: format!(
                "docs/hardware.md §2: Gen3 x16 on a PEX8733; requester-ID LUT 32 entries, 2 reserved for CPUs; \
                 two x8 cable ports in the three-way ring; NTB translation inside the chip's crossing (0 ns on top: \
                 transparent and NTB mode add the same). {LUT_SOURCE}"
            ),
        },
        AdapterSpec {
            name: "pxh810".into(),
            description: "Dolphin PXH810 NTB host adapter, Gen3 x8".into(),
            chip: "pxh810_switch".into(),
            gen: 3,
            width: 8,
            bar_size: 8 << 30,
            lut_windows: 256,
            rid_lut_entries: 32,
            rid_reserved: 2,
            ports: 1,
            timing: timing(),
            basis: Provenance::new(),
            source: format!(
                "docs/hardware.md §2: Gen3 x8. assumption: a PLX Gen3 switch (`pxh810_switch`) and the PXH830's \
                 requester-ID LUT (docs/hardware.md names no chip for the PXH810); NTB translation inside the chip's crossing, as the \
                 PXH830's (docs/hardware.md §2). {LUT_SOURCE}"
            ),
        },
    ]
}
