//! The uncore graph a memory system's traffic crosses: packages (each with its LLC and
//! DRAM node) and I/O hubs (roots without memory) as vertices, interconnect links
//! (QPI/UPI) between them. Each link direction is a bandwidth server in `MemSys`; the
//! routes are the fabric's shortest paths by link weight (`Platform::uncore_paths`), so
//! the memory system and the timed fabric send a byte the same way.

use fabric::Platform;

use crate::time::Time;

/// One interconnect link of the graph: its two ends (vertices), its bandwidth per
/// direction and the latency of one crossing.
#[derive(Clone, Debug, PartialEq)]
pub struct UncoreLink {
    pub a: u32,
    pub b: u32,
    pub gbps: f64,
    pub latency: Time,
}

/// One crossing of a link in a direction: `dir` 0 is `a → b`, 1 is `b → a`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hop {
    pub link: u32,
    pub dir: u8,
}

impl Hop {
    /// Index of the link direction's server (two per link, `a → b` first).
    pub fn server(self) -> usize {
        2 * self.link as usize + self.dir as usize
    }
}

/// Vertices (packages `0..packages`, then I/O hubs), links and the route between every
/// pair of vertices.
#[derive(Clone, Debug, PartialEq)]
pub struct Uncore {
    pub packages: u32,
    /// Vertex names as reports print them (`pkg0`, `ioh1`).
    pub names: Vec<String>,
    pub links: Vec<UncoreLink>,
    /// `routes[from × V + to]`: the hops from `from` to `to` (none when equal).
    routes: Vec<Vec<Hop>>,
}

impl Uncore {
    /// `sockets` packages, no I/O hub, every pair joined by one link of `gbps` per
    /// direction and `latency` (the two-socket shorthand of `MemSysParams`).
    pub fn mesh(sockets: u32, gbps: f64, latency: Time) -> Uncore {
        let n = sockets as usize;
        let mut links = Vec::new();
        let mut routes = vec![Vec::new(); n * n];
        for a in 0..sockets {
            for b in a + 1..sockets {
                let link = links.len() as u32;
                links.push(UncoreLink {
                    a,
                    b,
                    gbps,
                    latency,
                });
                routes[a as usize * n + b as usize] = vec![Hop { link, dir: 0 }];
                routes[b as usize * n + a as usize] = vec![Hop { link, dir: 1 }];
            }
        }
        Uncore {
            packages: sockets,
            names: (0..sockets).map(|s| format!("pkg{s}")).collect(),
            links,
            routes,
        }
    }

    /// The graph of `platform`: each link at its bandwidth (`InterconnectLink::gbps`:
    /// `bandwidth_gbps`, its `gts`, or the timing table's `interconnect_gbps`), and its `latency_ns`,
    /// else `interconnect_latency_ns` — as `timed` prices the same links. An error names
    /// a vertex that cannot reach a package (its memory would be unreachable).
    pub fn of_platform(platform: &Platform) -> Result<Uncore, String> {
        let t = platform
            .timing
            .as_ref()
            .ok_or_else(|| format!("platform `{}` has no timing table", platform.name))?;
        let links = platform
            .interconnect
            .iter()
            .map(|l| UncoreLink {
                a: l.a,
                b: l.b,
                gbps: l.gbps(t.interconnect_gbps),
                latency: Time::from_ps(
                    (l.latency_ns.unwrap_or(t.interconnect_latency_ns) * 1000.0).round() as u64,
                ),
            })
            .collect::<Vec<_>>();
        let v = platform.uncore_vertices();
        let mut routes = Vec::with_capacity((v * v) as usize);
        for from in 0..v {
            for to in 0..v {
                let path = platform.uncore_path(from, to);
                if path.is_empty()
                    && from != to
                    && (from < platform.packages || to < platform.packages)
                {
                    return Err(format!(
                        "platform `{}`: no interconnect path from `{}` to `{}`: the memory system needs one between every package and every vertex",
                        platform.name,
                        platform.vertex_name(from),
                        platform.vertex_name(to)
                    ));
                }
                routes.push(
                    path.iter()
                        .map(|h| Hop {
                            link: h.link,
                            dir: u8::from(links[h.link as usize].a != h.from),
                        })
                        .collect(),
                );
            }
        }
        Ok(Uncore {
            packages: platform.packages,
            names: (0..v).map(|x| platform.vertex_name(x)).collect(),
            links,
            routes,
        })
    }

    /// Vertices: packages, then I/O hubs.
    pub fn vertices(&self) -> u32 {
        self.names.len() as u32
    }

    /// The vertex named `name` (`pkg0`, `ioh1`).
    pub fn vertex(&self, name: &str) -> Option<u32> {
        self.names.iter().position(|n| n == name).map(|v| v as u32)
    }

    /// The hops from vertex `from` to `to` (none when equal).
    pub fn route(&self, from: u32, to: u32) -> &[Hop] {
        &self.routes[(from * self.vertices() + to) as usize]
    }

    /// The zero-load latency of the route from `from` to `to`.
    pub fn latency(&self, from: u32, to: u32) -> Time {
        self.route(from, to)
            .iter()
            .fold(Time::ZERO, |t, h| t + self.links[h.link as usize].latency)
    }

    /// The vertices a hop leaves and enters.
    pub fn ends(&self, hop: Hop) -> (u32, u32) {
        let l = &self.links[hop.link as usize];
        if hop.dir == 0 {
            (l.a, l.b)
        } else {
            (l.b, l.a)
        }
    }
}

/// Bytes on one direction of one link since the last reset of the counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LinkCount {
    pub from: u32,
    pub to: u32,
    /// `from→to` by vertex names (`ioh0→pkg0`).
    pub name: String,
    pub bytes: u64,
}

/// One interconnect port of a package as a per-package monitor (Intel PCM) counts it:
/// the link to `peer` (an I/O hub or another package), bytes in and out. Links between
/// two I/O hubs have no package port, so no `PcmPort` shows them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PcmPort {
    pub package: u32,
    pub peer: u32,
    pub peer_is_ioh: bool,
    /// Bytes that came into the package on this link.
    pub incoming: u64,
    /// Bytes that left the package on this link.
    pub outgoing: u64,
}
