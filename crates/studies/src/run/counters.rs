//! The TLP-level fabric's counters over a run's window, as `nudma run` reports them:
//! bytes per link direction and memory node, DDIO and IOTLB counts, and each link's
//! utilisation (its wire bytes ÷ what its rate carries in the window).

use serde_json::{json, Value};
use sim::net::{Counters, Net};
use sim::Time;

/// `after − before`, by name (a wire or sink that saw no traffic before counts from zero).
pub(super) fn counters_minus(after: &Counters, before: &Counters) -> Counters {
    let wire0 = |n: &str| {
        before
            .wires
            .iter()
            .find(|w| w.0 == n)
            .map_or((0, 0, 0), |w| (w.1, w.2, w.3))
    };
    let sink0 = |n: &str| {
        before
            .sinks
            .iter()
            .find(|s| s.0 == n)
            .map_or((0, 0), |s| (s.1, s.2))
    };
    let llc0 = |n: &str| {
        before
            .llc
            .iter()
            .find(|s| s.0 == n)
            .map_or((0, 0, 0, 0, 0), |s| (s.1, s.2, s.3, s.4, s.5))
    };
    Counters {
        wires: after
            .wires
            .iter()
            .map(|w| {
                let b = wire0(&w.0);
                (
                    w.0.clone(),
                    w.1.saturating_sub(b.0),
                    w.2.saturating_sub(b.1),
                    w.3.saturating_sub(b.2),
                )
            })
            .filter(|w| w.3 > 0)
            .collect(),
        sinks: after
            .sinks
            .iter()
            .map(|s| {
                let b = sink0(&s.0);
                (
                    s.0.clone(),
                    s.1.saturating_sub(b.0),
                    s.2.saturating_sub(b.1),
                )
            })
            .filter(|s| s.1 + s.2 > 0)
            .collect(),
        iotlb_hits: after.iotlb_hits.saturating_sub(before.iotlb_hits),
        iotlb_misses: after.iotlb_misses.saturating_sub(before.iotlb_misses),
        llc: after
            .llc
            .iter()
            .map(|s| {
                let b = llc0(&s.0);
                (
                    s.0.clone(),
                    s.1.saturating_sub(b.0),
                    s.2.saturating_sub(b.1),
                    s.3.saturating_sub(b.2),
                    s.4.saturating_sub(b.3),
                    s.5.saturating_sub(b.4),
                )
            })
            .collect(),
    }
}

/// Counters as JSON: bytes per link direction and per memory node over the window.
pub fn counters_json(c: &Counters) -> Value {
    json!({
        "links": c.wires.iter().map(|(name, bytes, payload, tlps)| json!({
            "name": name, "wire_bytes": bytes, "payload_bytes": payload, "packets": tlps,
        })).collect::<Vec<_>>(),
        "memory": c.sinks.iter().map(|(name, read, written)| json!({
            "name": name, "read_bytes": read, "written_bytes": written,
        })).collect::<Vec<_>>(),
        "llc": c.llc.iter().map(|(name, hits, misses, allocs, writebacks, invalidations)| json!({
            "name": name, "dma_read_hits": hits, "dma_read_misses": misses,
            "ddio_allocations": allocs, "writebacks": writebacks, "invalidations": invalidations,
        })).collect::<Vec<_>>(),
        "iotlb": { "hits": c.iotlb_hits, "misses": c.iotlb_misses },
    })
}

/// Adds each link's `util` to `counters` (from [`counters_json`]) and `interconnect_util`,
/// the busiest CPU-interconnect direction's (null when no host has an interconnect): a
/// link's wire bytes (headers included) over the window ÷ what its rate carries in it.
pub(super) fn add_utilisation(counters: &mut Value, net: &Net, window: Time) {
    let secs = window.as_secs_f64();
    let mut interconnect = net.wires().any(|w| !w.pcie).then_some(0.0_f64);
    if let Some(links) = counters["links"].as_array_mut() {
        for l in links {
            let (Some(name), Some(bytes)) = (l["name"].as_str(), l["wire_bytes"].as_u64()) else {
                continue;
            };
            let Some(w) = net.wires().find(|w| w.name == name) else {
                continue;
            };
            let util = bytes as f64 / secs / (w.gbytes_per_s() * 1e9);
            if !w.pcie {
                interconnect = interconnect.map(|u| u.max(util));
            }
            l["util"] = json!(round4(util));
        }
    }
    counters["interconnect_util"] = json!(interconnect.map(round4));
}

fn round4(x: f64) -> f64 {
    (x * 1e4).round() / 1e4
}
