//! The flow model and the TLP-level simulation agree within 2 % on every single stream of
//! a grid: PCIe Gen1–5 × x1–x16 × MPS (and MRRS) 128–512 B × operations of 64 B–1 MiB ×
//! reads and writes × IOMMU off and on × buffers below 4 GiB (3-DW headers) and above
//! (4-DW). Each stream is a device DMA to host memory run by `devices::DmaJob`, beside the
//! closed form for the same `DmaSpec::stream`.

use devices::{DmaJob, Op, Ops};
use rayon::prelude::*;
use studies::harness::*;

#[derive(Clone, Copy, Debug)]
struct Case {
    gen: u8,
    width: u8,
    mps: u32,
    op_bytes: u64,
    write: bool,
    iommu: bool,
    high: bool,
    /// Operations under way; `None`: enough to keep the stream busy.
    in_flight: Option<u64>,
    tags: u32,
    /// Target a peer GPU's memory (BAR1) under another root port instead of host RAM:
    /// the root forwards the stream and re-issues reads as 64 B requests.
    peer: bool,
}

fn scenario(c: &Case) -> String {
    format!(
        r#"
include = ["platforms/r730.toml", "platforms/devices.toml"]
[scenario]
name = "grid"
[[host]]
name = "h"
platform = "r730"
iommu = {iommu}
mps_bytes = {mps}
[[host.device]]
name = "dev"
device_model = "connectx4"
parent = "rc0"
link = {{ gen = {gen}, width = {width} }}
timing = {{ dma_max_reads = {{ value = {tags}.0, basis = "assumption", why = "grid" }}, dma_mrrs_bytes = {{ value = {mps}.0, basis = "assumption", why = "grid" }} }}
[[host.device]]
name = "peer"
device_model = "p4000"
parent = "rc0"
timing = {{ bar_latency_ns = {{ value = {peer_ns}.0, basis = "assumption", why = "grid: a peer slow enough for the root's read tags to bind" }} }}
"#,
        iommu = c.iommu,
        mps = c.mps,
        gen = c.gen,
        width = c.width,
        tags = c.tags,
        peer_ns = if c.op_bytes > 4096 { 2000 } else { 500 }
    )
}

/// (simulated GB/s, flow GB/s, the flow model's bottleneck)
fn both(c: &Case) -> (f64, f64, String) {
    let src = fabric::scenario::Source {
        name: "grid.toml".into(),
        text: scenario(c),
    };
    let mut tf = load_source(&src).unwrap();
    let dev = requester(&tf, "h.dev").unwrap();
    // Enough operations under way to keep the stream busy, and enough of them in all for
    // the second half to be steady.
    let in_flight = c.in_flight.unwrap_or((64 * 1024 / c.op_bytes).clamp(2, 64));
    let ops = (in_flight * 4).max((512 * 1024 / c.op_bytes).max(4));
    let offset = if c.high { 8 << 30 } else { 1 << 30 };
    let (target, offset) = match c.peer {
        true => ("h.peer.bar1", 0),
        false => ("h.ram.node0", offset),
    };
    let (bus, spec) = dma_to(&mut tf, dev, target, offset, c.op_bytes * in_flight).unwrap();
    if !c.peer {
        assert_eq!(bus >= 1 << 32, c.high);
    }
    let op = if c.write {
        Op::Write { dst: bus }
    } else {
        Op::Read { src: bus }
    };
    let stream = spec.stream(op, c.op_bytes, Some(in_flight));
    let (route, _) = tf
        .route(&fabric::Request {
            requester: dev,
            addr: bus,
            len: 64,
            access: if c.write {
                fabric::Access::Write
            } else {
                fabric::Access::Read
            },
        })
        .unwrap();
    let flow = tf.net.flow(route, &stream);
    let job = DmaJob::ops(
        &mut tf,
        dev,
        spec,
        op,
        c.op_bytes,
        Ops::Count(ops),
        in_flight,
    )
    .unwrap();
    let (o, stats) = job.run(&mut tf, sim::time::Time::ZERO);
    assert_eq!(stats.faults, 0);
    (o.steady_gbps(), flow.gbps, flow.bottleneck)
}

fn grid() -> Vec<Case> {
    let mut v = Vec::new();
    for gen in 1..=5u8 {
        for width in [1u8, 2, 4, 8, 16] {
            for mps in [128u32, 256, 512] {
                for op_bytes in [64u64, 256, 4096, 64 << 10, 1 << 20] {
                    for write in [false, true] {
                        for iommu in [false, true] {
                            for high in [false, true] {
                                v.push(Case {
                                    gen,
                                    width,
                                    mps,
                                    op_bytes,
                                    write,
                                    iommu,
                                    high,
                                    in_flight: None,
                                    tags: 32,
                                    peer: false,
                                });
                            }
                        }
                    }
                }
            }
        }
    }
    v
}

/// Runs every case both ways and fails listing each that differs by more than 2 %.
fn agree_within_two_percent(cases: &[Case]) {
    let results: Vec<(Case, f64, f64, String)> = cases
        .par_iter()
        .map(|c| {
            let (des, flow, why) = both(c);
            (*c, des, flow, why)
        })
        .collect();
    let mut worst = (0.0, String::new());
    let mut bad = Vec::new();
    for (c, des, flow, why) in &results {
        let err = (des - flow) / flow;
        let line = format!(
            "{c:?}: simulated {des:.4} flow {flow:.4} GB/s ({:+.2} %, {why})",
            err * 100.0
        );
        if err.abs() > worst.0 {
            worst = (err.abs(), line.clone());
        }
        if err.abs() > 0.02 {
            bad.push(line);
        }
    }
    eprintln!("{} cases, worst {}", results.len(), worst.1);
    assert!(
        bad.is_empty(),
        "{} of {} cases differ by more than 2 %:\n{}",
        bad.len(),
        results.len(),
        bad.join("\n")
    );
}

#[test]
fn flow_model_and_simulation_agree_on_every_single_stream_of_the_grid() {
    let cases = grid();
    assert_eq!(cases.len(), 5 * 5 * 3 * 5 * 2 * 2 * 2);
    agree_within_two_percent(&cases);
}

/// Streams bounded by latency rather than a wire: one or four operations under way, few
/// read tags, the IOMMU translating pages it cannot all hold.
fn latency_bound_grid() -> Vec<Case> {
    let mut v = Vec::new();
    for gen in [1u8, 3, 5] {
        for width in [1u8, 16] {
            for op_bytes in [64u64, 512, 4096, 64 << 10] {
                for write in [false, true] {
                    for iommu in [false, true] {
                        for (in_flight, tags) in [(1, 32), (4, 32), (64, 8)] {
                            v.push(Case {
                                gen,
                                width,
                                mps: 256,
                                op_bytes,
                                write,
                                iommu,
                                high: true,
                                in_flight: Some(in_flight),
                                tags,
                                peer: false,
                            });
                        }
                    }
                }
            }
        }
    }
    v
}

#[test]
fn flow_model_and_simulation_agree_on_latency_bound_streams() {
    agree_within_two_percent(&latency_bound_grid());
}

/// Peer-to-peer through the root, which forwards between its ports and re-issues each
/// read as 64 B requests with its own tags and pace: that splitter, not the device's
/// tags or link, bounds the reads, and both models must see it the same way.
#[test]
fn flow_model_and_simulation_agree_through_a_splitting_root() {
    let mut cases = Vec::new();
    for (gen, width) in [(2u8, 4u8), (3, 8), (4, 16)] {
        for op_bytes in [256u64, 4096, 64 << 10] {
            for write in [false, true] {
                for iommu in [false, true] {
                    cases.push(Case {
                        gen,
                        width,
                        mps: 256,
                        op_bytes,
                        write,
                        iommu,
                        high: false,
                        in_flight: None,
                        tags: 32,
                        peer: true,
                    });
                }
            }
        }
    }
    agree_within_two_percent(&cases);
}

/// Where the two differ by design: when the read window and the link bound the stream
/// at nearly the same rate (the knee) and the IOTLB misses on every page, a miss holds one
/// tag while the others bunch up behind it on the link. The flow model takes the smaller
/// of the two averages and is an upper bound there, a few per cent above the packet
/// model (5.3 % at Gen3 x1 since the R730's reads complete in 256 B, under 5 % with 64 B
/// completions); without the misses (IOMMU off) the two agree.
#[test]
fn at_the_knee_iotlb_misses_make_the_packet_model_slower_than_the_flow_bound() {
    for (gen, width, tags) in [(3u8, 1u8, 2u32), (5, 1, 4), (1, 16, 4)] {
        let c = Case {
            gen,
            width,
            mps: 256,
            op_bytes: 64 << 10,
            write: false,
            iommu: true,
            high: true,
            in_flight: Some(64),
            tags,
            peer: false,
        };
        let (des, flow, why) = both(&c);
        let below = (flow - des) / flow;
        assert!(
            (0.0..0.06).contains(&below),
            "{c:?}: simulated {des:.4} vs flow {flow:.4} ({why})"
        );
        let (des, flow, why) = both(&Case { iommu: false, ..c });
        assert!(
            ((des - flow) / flow).abs() < 0.02,
            "{c:?} without IOMMU: simulated {des:.4} vs flow {flow:.4} ({why})"
        );
    }
}
