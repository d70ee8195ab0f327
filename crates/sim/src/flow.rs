//! The flow-level model: closed-form estimates over the same timed routes the TLP-level
//! network runs, for sweeps and as an independent check of the simulation. Zero-load
//! latency is the sum of a route's serializations, propagations and delays (a memory
//! latency matrix's delay included, once per round trip); a stream's rate is the smallest
//! of its bottlenecks — each wire's payload efficiency × rate, each pacer's rate, each
//! credit loop (credits × payload ÷ loop time), the requester's tags × request size ÷
//! round trip, a splitting root's tags × split size ÷ its round trip and its split size ÷
//! its re-issue gap, and the sink.

use crate::net::{coherent_bytes, Hop, Net};
use crate::pcie::{self, serialize};
use crate::time::Time;

/// Why a stream runs at the rate it does.
#[derive(Clone, Debug, PartialEq)]
pub struct FlowEstimate {
    pub gbps: f64,
    pub bottleneck: String,
}

fn ps(t: Time) -> f64 {
    t.as_ps() as f64
}

impl Net {
    /// Time for one TLP of `payload` bytes (a posted write) to travel `route` at zero load,
    /// to the moment its sink has it (latency of the sink excluded).
    fn one_way(&self, hops: &[Hop], payload: u32, completion: bool, addr64: bool) -> Time {
        let mut t = Time::ZERO;
        for h in hops {
            match *h {
                Hop::Wire(w) => {
                    let w = self.wire(w);
                    let bytes = if w.pcie {
                        pcie::wire_bytes(payload, completion, addr64)
                    } else {
                        coherent_bytes(payload)
                    };
                    t += serialize(bytes, w.ps_per_kib) + w.latency;
                }
                Hop::Delay(d) | Hop::MemoryDelay(d) => t += d,
                Hop::Iommu(i) => t += self.iotlb_hit(i),
                Hop::RootSplit(_) | Hop::Pace(_) | Hop::Sink(..) => {}
            }
        }
        t
    }

    /// Zero-load latency of a posted write of `payload` bytes until it is visible, with a
    /// 4-DW header when `addr64` (the address is above 4 GiB), else 3 DW.
    pub fn zero_load_write(&self, route: u32, payload: u32, addr64: bool) -> Time {
        let hops = self.route_hops(route);
        let sink = match hops.last() {
            Some(Hop::Sink(s, ddio)) => self.sink_write_latency(*s, *ddio),
            _ => Time::ZERO,
        };
        self.one_way(hops, payload, false, addr64) + sink
    }

    /// Zero-load round trip of a read of `bytes`, its request with a 4-DW header when
    /// `addr64`; completions always carry 3 DW.
    pub fn zero_load_read(&self, route: u32, bytes: u32, addr64: bool) -> Time {
        let hops = self.route_hops(route);
        let (sink_lat, rcb) = match hops.last() {
            Some(Hop::Sink(s, _)) => (self.sink(*s).read_latency, self.sink(*s).rcb),
            _ => (Time::ZERO, 64),
        };
        let back = self.route_hops(self.reverse_route(route));
        self.one_way(hops, 0, false, addr64)
            + sink_lat
            + self.one_way(back, bytes.min(rcb), true, addr64)
    }

    /// Steady rate of back-to-back posted writes of `payload` bytes, with a 4-DW header
    /// when `addr64`: each wire, pacer and credit loop, and the sink's bandwidth.
    pub fn flow_write(&self, route: u32, payload: u32, addr64: bool) -> FlowEstimate {
        let hops = self.route_hops(route).to_vec();
        let mut best = self.bottleneck(&hops, payload, false, addr64);
        if let Some(c) = self.sink_limit(&hops, payload) {
            if c.gbps < best.gbps {
                best = c;
            }
        }
        best
    }

    /// The sink's own rate for `payload`-byte accesses (DRAM or device memory).
    fn sink_limit(&self, hops: &[Hop], payload: u32) -> Option<FlowEstimate> {
        let Some(Hop::Sink(s, _)) = hops.last() else {
            return None;
        };
        let sink = self.sink(*s);
        if sink.ps_per_kib == 0 {
            return None;
        }
        let g = payload as f64 / ps(serialize(payload.max(1), sink.ps_per_kib)) * 1000.0;
        Some(FlowEstimate {
            gbps: g,
            bottleneck: format!("{} at {} B per access", sink.name, payload),
        })
    }

    /// Steady rate of reads of `size` bytes with `tags` outstanding, requests with a 4-DW
    /// header when `addr64`; completions of min(`size`, RCB) bytes.
    pub fn flow_read(&self, route: u32, size: u32, tags: u32, addr64: bool) -> FlowEstimate {
        let hops = self.route_hops(route).to_vec();
        let back = self.route_hops(self.reverse_route(route)).to_vec();
        let rcb = match hops.last() {
            Some(Hop::Sink(s, _)) => self.sink(*s).rcb,
            _ => 64,
        };
        let cpl = size.min(rcb).max(1);
        let rtt = ps(self.zero_load_read(route, size, addr64))
            + ps(serialize(
                pcie::wire_bytes(cpl, true, addr64),
                self.slowest(&back),
            )) * (size.div_ceil(cpl) as f64 - 1.0).max(0.0);
        let mut best = FlowEstimate {
            gbps: tags as f64 * size as f64 / rtt * 1000.0,
            bottleneck: format!(
                "{tags} outstanding reads of {size} B over a {:.0} ns round trip",
                rtt / 1000.0
            ),
        };
        // A splitting root: its tags × split size over the round trip from the root.
        if let Some(k) = hops.iter().position(|h| matches!(h, Hop::RootSplit(_))) {
            let Hop::RootSplit(sp) = hops[k] else {
                unreachable!()
            };
            let (split, rtags, gap) = self.splitter_shape(sp);
            let below = &hops[k + 1..];
            let sink_lat = match hops.last() {
                Some(Hop::Sink(s, _)) => self.sink(*s).read_latency,
                _ => Time::ZERO,
            };
            let back_below = &back[..back.len() - k];
            let r = ps(self.one_way(below, 0, false, addr64))
                + ps(sink_lat)
                + ps(self.one_way(back_below, split.min(rcb), true, addr64));
            let g = rtags as f64 * split as f64 / r * 1000.0;
            if g < best.gbps {
                best = FlowEstimate { gbps: g, bottleneck: format!("root re-issues reads as {split} B with {rtags} tags over a {:.0} ns round trip", r / 1000.0) };
            }
            if gap > Time::ZERO {
                let g = split as f64 / ps(gap) * 1000.0;
                if g < best.gbps {
                    best = FlowEstimate {
                        gbps: g,
                        bottleneck: format!(
                            "root re-issues reads as {split} B at most one per {:.1} ns",
                            ps(gap) / 1000.0
                        ),
                    };
                }
            }
        }
        let c = self.bottleneck(&back, cpl, true, addr64);
        if c.gbps < best.gbps {
            best = c;
        }
        // A pacer on the way out reserves each read's bytes as it passes.
        let paced = hops.iter().filter(|h| matches!(h, Hop::Pace(_))).copied();
        let c = self.bottleneck(&paced.collect::<Vec<_>>(), size, false, addr64);
        if c.gbps < best.gbps {
            best = c;
        }
        if let Some(c) = self.sink_limit(&hops, size) {
            if c.gbps < best.gbps {
                best = c;
            }
        }
        best
    }

    fn slowest(&self, hops: &[Hop]) -> u64 {
        hops.iter()
            .filter_map(|h| match h {
                Hop::Wire(w) => Some(self.wire(*w).ps_per_kib),
                _ => None,
            })
            .max()
            .unwrap_or(1)
    }

    /// The tightest wire or credit loop for a stream of `payload`-byte TLPs on `hops`.
    fn bottleneck(
        &self,
        hops: &[Hop],
        payload: u32,
        completion: bool,
        addr64: bool,
    ) -> FlowEstimate {
        let class = if completion { 2 } else { 0 };
        let mut best = FlowEstimate {
            gbps: f64::INFINITY,
            bottleneck: "nothing".into(),
        };
        for (i, h) in hops.iter().enumerate() {
            if let Hop::Pace(p) = *h {
                let pc = self.pacer(p);
                let g = payload as f64 / ps(serialize(payload, pc.ps_per_kib)) * 1000.0;
                if g < best.gbps {
                    best = FlowEstimate {
                        gbps: g,
                        bottleneck: format!("{} at {} B per TLP", pc.name, payload),
                    };
                }
                continue;
            }
            let Hop::Wire(wid) = *h else { continue };
            let w = self.wire(wid);
            let bytes = if w.pcie {
                pcie::wire_bytes(payload, completion, addr64)
            } else {
                coherent_bytes(payload)
            };
            let ser = ps(serialize(bytes, w.ps_per_kib));
            let link = payload as f64 / ser * 1000.0;
            if link < best.gbps {
                best = FlowEstimate {
                    gbps: link,
                    bottleneck: format!("{} at {} B per TLP", w.name, payload),
                };
            }
            let credits = w.credit_cap[class];
            if credits > 0 {
                // Held from transmission until the TLP leaves the receiver: up to the next
                // wire's start (or the route's end), then the credit update comes back.
                let mut hold = ser + ps(w.latency);
                for nh in &hops[i + 1..] {
                    match *nh {
                        Hop::Delay(d) | Hop::MemoryDelay(d) => hold += ps(d),
                        Hop::Iommu(x) => hold += ps(self.iotlb_hit(x)),
                        _ => break,
                    }
                }
                let lp = hold + ps(w.latency) + ps(self.fc_extra());
                let g = credits as f64 * payload as f64 / lp * 1000.0;
                if g < best.gbps {
                    best = FlowEstimate {
                        gbps: g,
                        bottleneck: format!(
                            "{credits} credits on {} over a {:.0} ns loop",
                            w.name,
                            lp / 1000.0
                        ),
                    };
                }
            }
        }
        best
    }
}
