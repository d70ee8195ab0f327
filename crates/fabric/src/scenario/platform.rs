//! Platforms: a `[platform.X]` checked into a `Platform` — packages, NUMA nodes, cores,
//! caches, I/O hubs, the interconnect between packages and hubs, memory-only nodes, the
//! memory matrices, and the optional timing and network-stack tables (every key
//! required) — plus the shortest interconnect paths between every pair of its vertices,
//! computed once here so that routing never searches.

use std::ops::Range;

use toml::Spanned;

use super::rules::{netstack_rule, platform_rule, Rule, NETSTACK_KEYS, PLATFORM_TIMING_KEYS};
use super::{valid_name, Builder, MIB};
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;

impl Builder {
    /// `[platform.X.timing]`: every key required, each in range.
    fn platform_timing(
        &self,
        file: usize,
        name: &str,
        at: Range<usize>,
        t: &Spanned<RawTiming>,
    ) -> Result<PlatformTiming, ScenarioError> {
        let key = format!("platform.{name}.timing");
        let (v, basis) = self.timing_table(
            file,
            t.get_ref(),
            platform_rule,
            &PLATFORM_TIMING_KEYS,
            &key,
        )?;
        let missing: Vec<&str> = PLATFORM_TIMING_KEYS
            .iter()
            .copied()
            .filter(|k| !v.contains_key(*k))
            .collect();
        if let Some(first) = missing.first() {
            let span = if t.span().is_empty() { at } else { t.span() };
            return Err(self.err(
                file,
                span,
                Some(format!("{key}.{first}")),
                &format!(
                    "platform `{name}` has no timing parameter {} (a timing table gives all {} keys: {})",
                    missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                    PLATFORM_TIMING_KEYS.len(),
                    PLATFORM_TIMING_KEYS.join(", ")
                ),
            ));
        }
        let f = |k: &str| v[k];
        // Whole numbers in range: checked by their rules above.
        let n = |k: &str| v[k] as u32;
        Ok(PlatformTiming {
            dram_latency_ns: f("dram_latency_ns"),
            dram_gbps: f("dram_gbps"),
            llc_latency_ns: f("llc_latency_ns"),
            rc_latency_ns: f("rc_latency_ns"),
            rc_p2p_latency_ns: f("rc_p2p_latency_ns"),
            rc_p2p_read_tags: n("rc_p2p_read_tags"),
            rc_p2p_read_gap_ns: f("rc_p2p_read_gap_ns"),
            rcb_bytes: n("rcb_bytes"),
            read_completion_bytes: n("read_completion_bytes"),
            iotlb_hit_ns: f("iotlb_hit_ns"),
            iotlb_miss_ns: f("iotlb_miss_ns"),
            iotlb_entries: n("iotlb_entries"),
            cpu_mmio_write_ns: f("cpu_mmio_write_ns"),
            cpu_poll_ns: f("cpu_poll_ns"),
            interconnect_latency_ns: f("interconnect_latency_ns"),
            interconnect_gbps: f("interconnect_gbps"),
            pcie_link_ns: f("pcie_link_ns"),
            cable_ns: f("cable_ns"),
            fc_update_ns: f("fc_update_ns"),
            cpu_mmio_write_bytes: n("cpu_mmio_write_bytes"),
            cpu_mmio_read_bytes: n("cpu_mmio_read_bytes"),
            cpu_mmio_reads: n("cpu_mmio_reads"),
            completion_timeout_ns: f("completion_timeout_ns"),
            home_snoop: f("home_snoop") == 1.0,
            basis,
        })
    }

    /// `[platform.X.netstack]`: every key required, each in range.
    fn netstack(
        &self,
        file: usize,
        name: &str,
        t: &Spanned<RawTiming>,
    ) -> Result<NetStackCosts, ScenarioError> {
        let key = format!("platform.{name}.netstack");
        let (v, basis) =
            self.timing_table(file, t.get_ref(), netstack_rule, &NETSTACK_KEYS, &key)?;
        let missing: Vec<&str> = NETSTACK_KEYS
            .iter()
            .copied()
            .filter(|k| !v.contains_key(*k))
            .collect();
        if let Some(first) = missing.first() {
            return Err(self.err(
                file,
                t.span(),
                Some(format!("{key}.{first}")),
                &format!(
                    "platform `{name}` has no network-stack parameter {} (a netstack table gives all {} keys: {})",
                    missing.iter().map(|k| format!("`{k}`")).collect::<Vec<_>>().join(", "),
                    NETSTACK_KEYS.len(),
                    NETSTACK_KEYS.join(", ")
                ),
            ));
        }
        // Whole numbers in range: checked by their rules above.
        let n = |k: &str| v[k] as u64;
        Ok(NetStackCosts {
            rx_segment_cycles: n("rx_segment_cycles"),
            tx_send_cycles: n("tx_send_cycles"),
            tx_packet_cycles: n("tx_packet_cycles"),
            ack_cycles: n("ack_cycles"),
            syscall_cycles: n("syscall_cycles"),
            irq_cycles: n("irq_cycles"),
            copy_line_cycles: n("copy_line_cycles"),
            line_fill_buffers: n("line_fill_buffers") as u32,
            rcvbuf_bytes: n("rcvbuf_bytes"),
            napi_budget: n("napi_budget") as u32,
            wakeup_cycles: n("wakeup_cycles"),
            tsq_bytes: n("tsq_bytes"),
            flow_rule_update_ns: v["flow_rule_update_ns"],
            flow_rule_expiry_ns: v["flow_rule_expiry_ns"],
            basis,
        })
    }

    /// Checks platform `name` (collected, not yet checked) into a `Platform`: a platform
    /// with a `base` is checked with the base's keys where it gives none, after the base
    /// checks alone (its errors are the base's, where the base is written).
    pub(super) fn platform(&self, name: &str) -> Result<Platform, ScenarioError> {
        let (file, sp) = &self.platforms[name];
        let Some(base) = &sp.get_ref().base else {
            return self.check_platform(name, *file, sp);
        };
        let (merged, keys) = self.platform_over_base(name, &mut Vec::new())?;
        self.platform(base.get_ref())?;
        let mut p = self.check_platform(name, *file, &merged).map_err(|e| {
            let prefix = format!("platform.{name}.");
            self.inherited_error(e, *file, &prefix, base, &keys.inherited)
        })?;
        p.base = Some(PlatformBase {
            name: base.get_ref().clone(),
            given: keys.given,
            inherited: keys.inherited,
        });
        Ok(p)
    }

    /// Checks one platform's keys, written at `sp` in `file`, into a `Platform`.
    fn check_platform(
        &self,
        name: &str,
        file: usize,
        sp: &Spanned<RawPlatform>,
    ) -> Result<Platform, ScenarioError> {
        let p = sp.get_ref();
        let at = PlatformAt {
            b: self,
            file,
            name,
        };
        let mut platform = at.shape(p, sp.span())?;
        let packages = platform.packages;
        platform.iohs = at.iohs(p)?;
        platform.interconnect = at.interconnect(p, packages, &platform.iohs)?;
        platform.memory_nodes = at.memory_nodes(p, packages)?;
        // Node numbers are u32 and every node gets a RAM range; keep both far from limits.
        if platform.memory_nodes.len() > 256 {
            return Err(at.err(
                p.memory_node()[256].span(),
                "memory_node",
                "a platform has at most 256 memory-only nodes",
            ));
        }
        let cpu_nodes = packages * platform.nodes_per_package;
        let nodes = cpu_nodes + platform.memory_nodes.len() as u32;
        let matrix = |pick: fn(&RawMemory) -> &Option<Spanned<Matrix>>, what: &str| {
            at.matrix(&p.memory, pick, what, cpu_nodes, nodes)
        };
        platform.latency_ns = matrix(|m| &m.latency_ns, "latency_ns")?;
        platform.bandwidth_gbps = matrix(|m| &m.bandwidth_gbps, "bandwidth_gbps")?;
        platform.timing = match &p.timing {
            Some(t) => Some(self.platform_timing(file, name, sp.span(), t)?),
            None => None,
        };
        platform.netstack = match &p.netstack {
            Some(t) => Some(self.netstack(file, name, t)?),
            None => None,
        };
        // Every package and hub must be reachable from every other.
        let v = platform.uncore_vertices();
        let paths = uncore_paths(&platform);
        if let Some(to) = (1..v).find(|&t| paths[t as usize].is_none()) {
            return Err(self.err(
                file,
                sp.span(),
                Some(format!("platform.{name}.interconnect")),
                &format!(
                    "impossible topology: {} cannot reach {} through the interconnect links",
                    platform.vertex_name(0),
                    platform.vertex_name(to)
                ),
            ));
        }
        platform.uncore_paths = all_pairs_uncore(&platform);
        Ok(platform)
    }
}

/// One platform being checked: where its keys are written, to locate its errors.
struct PlatformAt<'a> {
    b: &'a Builder,
    file: usize,
    name: &'a str,
}

impl PlatformAt<'_> {
    fn key(&self, k: &str) -> Option<String> {
        Some(format!("platform.{}.{k}", self.name))
    }

    fn err(&self, span: Range<usize>, k: &str, msg: &str) -> ScenarioError {
        self.b.err(self.file, span, self.key(k), msg)
    }

    fn range(&self, v: &Spanned<u32>, k: &str, lo: u32, hi: u32) -> Result<u32, ScenarioError> {
        let x = *v.get_ref();
        if x < lo || x > hi {
            Err(self.err(v.span(), k, &format!("{k} must be {lo}..={hi}, not {x}")))
        } else {
            Ok(x)
        }
    }

    /// The platform's sizes (packages, nodes, cores, caches, DRAM, clock), checked; its
    /// hubs, links, memory nodes, matrices and tables are left empty for the next steps.
    fn shape(&self, p: &RawPlatform, at: Range<usize>) -> Result<Platform, ScenarioError> {
        let need = |k: &str| {
            self.err(
                at.clone(),
                k,
                &format!("missing field `{k}` (a platform gives it, or its `base` does)"),
            )
        };
        let packages = p.packages.as_ref().ok_or_else(|| need("packages"))?;
        let cores = p.cores_per_package.as_ref();
        let cores = cores.ok_or_else(|| need("cores_per_package"))?;
        let clock = p.clock_ghz.as_ref().ok_or_else(|| need("clock_ghz"))?;
        let llc = p.llc_bytes.as_ref().ok_or_else(|| need("llc_bytes"))?;
        let llc_ways = p.llc_ways.as_ref().ok_or_else(|| need("llc_ways"))?;
        let ddio_ways = p.ddio_ways.as_ref().ok_or_else(|| need("ddio_ways"))?;
        let dram = p.dram_bytes_per_node.as_ref();
        let dram = dram.ok_or_else(|| need("dram_bytes_per_node"))?;
        // Large NUMA machines (SGI UV, 8-socket servers with sub-NUMA groups) export
        // dozens of packages; CPU requesters keep a package in 8 bits.
        let packages = self.range(packages, "packages", 1, 64)?;
        let npp = match &p.nodes_per_package {
            Some(v) => self.range(v, "nodes_per_package", 1, 8)?,
            None => 1,
        };
        let cores = self.range(cores, "cores_per_package", 1, 1024)?;
        let tpc = match &p.threads_per_core {
            Some(v) => self.range(v, "threads_per_core", 1, 8)?,
            None => 1,
        };
        let llc_ways = self.range(llc_ways, "llc_ways", 1, 64)?;
        let ddio_ways = self.range(ddio_ways, "ddio_ways", 0, llc_ways)?;
        let (clock, clock_span) = (*clock.get_ref(), clock.span());
        if !CLOCK_GHZ.contains(&clock) {
            let (lo, hi) = (CLOCK_GHZ.start(), CLOCK_GHZ.end());
            let msg = match (1e-3..1e6).contains(&clock.abs()) {
                true => format!("clock_ghz must be {lo}..={hi} GHz, not {clock}"),
                false => format!("clock_ghz must be {lo}..={hi} GHz, not {clock:e}"),
            };
            return Err(self.err(clock_span, "clock_ghz", &msg));
        }
        let (llc, llc_span) = (llc.get_ref().0, llc.span());
        if llc == 0 {
            return Err(self.err(llc_span, "llc_bytes", "llc_bytes must be > 0"));
        }
        let (dram, dram_span) = (dram.get_ref().0, dram.span());
        if dram < MIB || !dram.is_multiple_of(MIB) || dram > (1 << 46) {
            return Err(self.err(
                dram_span,
                "dram_bytes_per_node",
                "dram_bytes_per_node must be a whole number of MiB between 1 MiB and 64 TiB",
            ));
        }
        let split = match &p.root_read_split_bytes {
            Some(v) => {
                let x = *v.get_ref();
                if !x.is_power_of_two() || !(64..=4096).contains(&x) {
                    return Err(self.err(
                        v.span(),
                        "root_read_split_bytes",
                        "root_read_split_bytes must be a power of two in 64..=4096",
                    ));
                }
                Some(x)
            }
            None => None,
        };
        Ok(Platform {
            name: self.name.to_string(),
            cpu: p.cpu.clone(),
            packages,
            nodes_per_package: npp,
            cores_per_package: cores,
            threads_per_core: tpc,
            clock_ghz: clock,
            llc_bytes: llc,
            llc_ways,
            ddio_ways,
            dram_bytes_per_node: dram,
            root_read_split_bytes: split,
            root_p2p: p.root_p2p.unwrap_or(true),
            latency_ns: None,
            bandwidth_gbps: None,
            interconnect: Vec::new(),
            iohs: Vec::new(),
            memory_nodes: Vec::new(),
            timing: None,
            netstack: None,
            uncore_paths: Vec::new(),
            base: None,
        })
    }

    /// The I/O hubs' names: valid, unique, and not `pkgN` (the packages').
    fn iohs(&self, p: &RawPlatform) -> Result<Vec<String>, ScenarioError> {
        let mut iohs = Vec::new();
        for (i, ioh) in p.ioh().iter().enumerate() {
            let n = ioh.get_ref().name.get_ref();
            if !valid_name(n) || n.starts_with("pkg") || iohs.contains(n) {
                return Err(self.err(
                    ioh.get_ref().name.span(),
                    &format!("ioh[{i}].name"),
                    &format!("I/O hub name `{n}` is invalid or repeated (names `pkgN` are the packages')"),
                ));
            }
            iohs.push(n.clone());
        }
        Ok(iohs)
    }

    /// The interconnect links between packages (`pkgN`) and I/O hubs, as vertex numbers:
    /// packages first, then hubs.
    fn interconnect(
        &self,
        p: &RawPlatform,
        packages: u32,
        iohs: &[String],
    ) -> Result<Vec<InterconnectLink>, ScenarioError> {
        let vname = |s: &str| -> Option<u32> {
            if let Some(num) = s.strip_prefix("pkg") {
                num.parse::<u32>().ok().filter(|&v| v < packages)
            } else {
                iohs.iter()
                    .position(|x| x == s)
                    .map(|i| packages + i as u32)
            }
        };
        let mut interconnect = Vec::new();
        for (i, ic) in p.interconnect().iter().enumerate() {
            let r = ic.get_ref();
            let k = format!("interconnect[{i}]");
            let ends = r.ends.get_ref();
            if ends.len() != 2 {
                return Err(self.err(
                    r.ends.span(),
                    &format!("{k}.ends"),
                    "an interconnect link has exactly two ends",
                ));
            }
            let mut v = [0u32; 2];
            for (j, e) in ends.iter().enumerate() {
                v[j] = vname(e.get_ref()).ok_or_else(|| {
                    self.err(
                        e.span(),
                        &format!("{k}.ends"),
                        &format!(
                            "unknown interconnect end `{}` (packages are pkg0..pkg{}, I/O hubs: {})",
                            e.get_ref(),
                            packages - 1,
                            name_list(iohs)
                        ),
                    )
                })?;
            }
            if v[0] == v[1] {
                return Err(self.err(
                    r.ends.span(),
                    &format!("{k}.ends"),
                    "an interconnect link cannot join a vertex to itself",
                ));
            }
            let kind = r.kind.get_ref().clone();
            if !["qpi", "upi", "hypertransport", "infinity", "generic"].contains(&kind.as_str()) {
                return Err(self.err(
                    r.kind.span(),
                    &format!("{k}.kind"),
                    "kind must be qpi, upi, hypertransport, infinity or generic",
                ));
            }
            if let Some(gts) = &r.gts {
                let g = *gts.get_ref();
                if !(g > 0.0 && g <= 64.0) {
                    return Err(self.err(
                        gts.span(),
                        &format!("{k}.gts"),
                        "gts must be a transfer rate in (0, 64] GT/s",
                    ));
                }
                if kind == "generic" && r.bandwidth_gbps.is_none() {
                    return Err(self.err(
                        gts.span(),
                        &format!("{k}.gts"),
                        "a generic link's width is unknown, so its gts gives no bandwidth: set its kind (qpi, upi, hypertransport, infinity: 2 bytes per transfer and direction) or its bandwidth_gbps",
                    ));
                }
            }
            for (val, what, rule) in [
                (&r.bandwidth_gbps, "bandwidth_gbps", Rule::Bandwidth),
                (&r.latency_ns, "latency_ns", Rule::Latency),
            ] {
                if let Some(v) = val {
                    rule.check(*v.get_ref()).map_err(|m| {
                        self.err(v.span(), &format!("{k}.{what}"), &format!("{what} {m}"))
                    })?;
                }
            }
            interconnect.push(InterconnectLink {
                a: v[0],
                b: v[1],
                kind,
                gts: r.gts.as_ref().map(|g| *g.get_ref()),
                count: r.count.as_ref().map(|c| *c.get_ref()).unwrap_or(1).max(1),
                bandwidth_gbps: r.bandwidth_gbps.as_ref().map(|x| *x.get_ref()),
                latency_ns: r.latency_ns.as_ref().map(|x| *x.get_ref()),
                weight: r.weight.as_ref().map(|w| *w.get_ref()).unwrap_or(1).max(1),
            });
        }
        Ok(interconnect)
    }

    /// Memory-only nodes (CXL, HBM, …): their package, size, kind and bandwidth.
    fn memory_nodes(
        &self,
        p: &RawPlatform,
        packages: u32,
    ) -> Result<Vec<MemoryNode>, ScenarioError> {
        let mut memory_nodes = Vec::new();
        for (i, mn) in p.memory_node().iter().enumerate() {
            let r = mn.get_ref();
            let k = format!("memory_node[{i}]");
            let package = *r.package.get_ref();
            if package >= packages {
                return Err(self.err(
                    r.package.span(),
                    &format!("{k}.package"),
                    &format!(
                        "package must be one of this platform's packages 0..={}, not {package}",
                        packages - 1
                    ),
                ));
            }
            let bytes = r.bytes.get_ref().0;
            if bytes < MIB || bytes % MIB != 0 || bytes > (1 << 46) {
                return Err(self.err(
                    r.bytes.span(),
                    &format!("{k}.bytes"),
                    "bytes must be a whole number of MiB between 1 MiB and 64 TiB",
                ));
            }
            let kind = match &r.kind {
                Some(kd) if !MEMORY_NODE_KINDS.contains(&kd.get_ref().as_str()) => {
                    return Err(self.err(
                        kd.span(),
                        &format!("{k}.kind"),
                        &format!(
                            "kind must be one of {}, not `{}`",
                            MEMORY_NODE_KINDS.join(", "),
                            kd.get_ref()
                        ),
                    ));
                }
                Some(kd) => kd.get_ref().clone(),
                None => "other".to_string(),
            };
            let gbps = match &r.gbps {
                Some(g) => {
                    self.b.check_param(
                        self.file,
                        g,
                        Rule::Bandwidth,
                        &format!("platform.{}.{k}.gbps", self.name),
                    )?;
                    Some((g.get_ref().value, g.get_ref().basis.clone()))
                }
                None => None,
            };
            memory_nodes.push(MemoryNode {
                package,
                bytes,
                kind,
                gbps,
            });
        }
        Ok(memory_nodes)
    }

    /// `[platform.X.memory]`'s `what` matrix (`pick` finds it), if given: one number, or
    /// a row per CPU node with a column per node (CPU nodes, then memory-only nodes).
    fn matrix(
        &self,
        m: &Option<Spanned<RawMemory>>,
        pick: fn(&RawMemory) -> &Option<Spanned<Matrix>>,
        what: &str,
        cpu_nodes: u32,
        nodes: u32,
    ) -> Result<Option<Vec<Vec<f64>>>, ScenarioError> {
        let Some(mem) = m else { return Ok(None) };
        let Some(v) = pick(mem.get_ref()) else {
            return Ok(None);
        };
        // Rows are the nodes CPUs run on; columns every node memory can be on.
        let (rows_n, cols_n) = (cpu_nodes as usize, nodes as usize);
        let rows = match v.get_ref() {
            Matrix::Scalar(x) => vec![vec![*x; cols_n]; rows_n],
            Matrix::Rows(r) => r.clone(),
        };
        if rows.len() != rows_n || rows.iter().any(|r| r.len() != cols_n) {
            let shape = if rows_n == cols_n {
                format!("a {rows_n} × {cols_n} matrix")
            } else {
                format!(
                    "a {rows_n} × {cols_n} matrix ({rows_n} CPU node rows; columns for those and the {} memory-only node(s))",
                    cols_n - rows_n
                )
            };
            return Err(self.err(
                v.span(),
                &format!("memory.{what}"),
                &format!(
                    "{what} must be {shape} (row = CPU node, column = memory node) or one number"
                ),
            ));
        }
        let rule = if what == "latency_ns" {
            Rule::Latency
        } else {
            Rule::Bandwidth
        };
        if let Some(m) = rows.iter().flatten().find_map(|x| {
            if *x > 0.0 {
                rule.check(*x).err()
            } else {
                Some(format!("must be > 0, not {x}"))
            }
        }) {
            return Err(self.err(
                v.span(),
                &format!("memory.{what}"),
                &format!("{what} entries {m}"),
            ));
        }
        Ok(Some(rows))
    }
}

/// Single-source shortest paths from vertex 0 (used to check connectivity).
fn uncore_paths(p: &Platform) -> Vec<Option<Vec<UncoreHop>>> {
    let all = all_pairs_uncore_opt(p);
    let v = p.uncore_vertices() as usize;
    all.into_iter().take(v).collect()
}

fn all_pairs_uncore(p: &Platform) -> Vec<Vec<UncoreHop>> {
    all_pairs_uncore_opt(p)
        .into_iter()
        .map(|x| x.unwrap_or_default())
        .collect()
}

/// Dijkstra from every vertex; ties keep the path found first (links in declaration order).
fn all_pairs_uncore_opt(p: &Platform) -> Vec<Option<Vec<UncoreHop>>> {
    let v = p.uncore_vertices() as usize;
    let mut out = vec![None; v * v];
    for s in 0..v {
        let mut dist = vec![u64::MAX; v];
        let mut prev: Vec<Option<UncoreHop>> = vec![None; v];
        let mut done = vec![false; v];
        dist[s] = 0;
        for _ in 0..v {
            let Some(u) = (0..v)
                .filter(|&i| !done[i] && dist[i] != u64::MAX)
                .min_by_key(|&i| (dist[i], i))
            else {
                break;
            };
            done[u] = true;
            for (li, l) in p.interconnect.iter().enumerate() {
                let other = if l.a as usize == u {
                    l.b
                } else if l.b as usize == u {
                    l.a
                } else {
                    continue;
                };
                let d = dist[u] + l.weight as u64;
                if d < dist[other as usize] {
                    dist[other as usize] = d;
                    prev[other as usize] = Some(UncoreHop {
                        link: li as u32,
                        from: u as u32,
                        to: other,
                    });
                }
            }
        }
        for t in 0..v {
            if dist[t] == u64::MAX {
                continue;
            }
            let mut path = Vec::new();
            let mut cur = t;
            while let Some(h) = prev[cur] {
                path.push(h);
                cur = h.from as usize;
            }
            path.reverse();
            out[s * v + t] = Some(path);
        }
    }
    out
}
