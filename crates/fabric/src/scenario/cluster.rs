//! Cluster expansion: a `[cluster]` is a tree of cluster switches (PCIe switches in
//! their own boxes, joined by cables) with hosts at its leaves, all made from one host
//! template and two name patterns. Here the tree is checked against its switch chip
//! before any host is built (`cluster_plan`), then its switches and cables are added,
//! with the written `[[cluster_switch]]`s and `[[cable]]`s, each cable checked against
//! the ports and lanes at both its ends.

use std::collections::{HashMap, HashSet};
use std::ops::Range;

use toml::Spanned;

use super::rules::Rule;
use super::{valid_name, Builder};
use crate::catalog::ChipSpec;
use crate::error::ScenarioError;
use crate::raw::*;
use crate::topology::*;

impl Builder {
    /// Checks a `[cluster]` and works out its shape: the tree's switches per level, its
    /// hosts, and the links. Every switch of the tree must have the ports and lanes for
    /// its cables, so an impossible tree is refused here, at the key that makes it so.
    pub(super) fn cluster_plan<'a>(
        &self,
        file: usize,
        c: &'a Spanned<RawCluster>,
    ) -> Result<ClusterPlan<'a>, ScenarioError> {
        let r = c.get_ref();
        let key = |k: &str| Some(format!("cluster.{k}"));
        let chip = self.find_chip(file, &r.switch_chip, "cluster.switch_chip")?;
        let spec = &self.chips[chip as usize];
        if !spec.cluster {
            return Err(self.err(
                file,
                r.switch_chip.span(),
                key("switch_chip"),
                &format!("chip `{}` is not a cluster switch chip", spec.name),
            ));
        }
        let pattern = |p: &Spanned<String>, k: &str| {
            NamePattern::parse(p.get_ref()).map_err(|m| self.err(file, p.span(), key(k), &m))
        };
        let switch_names = pattern(&r.switch_names, "switch_names")?;
        let host_names = pattern(&r.host_names, "host_names")?;
        if let Some(t) = &r.host.get_ref().name {
            return Err(self.err(
                file,
                t.span(),
                key("host.name"),
                "the host template has no `name`: its hosts are named by `cluster.host_names`",
            ));
        }
        let host_ntb = self.cluster_host_ntb(file, r)?;
        let host_link = self.link(file, &r.host_link, "cluster.host_link")?;
        let per_leaf = *r.hosts_per_leaf.get_ref();
        if per_leaf == 0 {
            return Err(self.err(
                file,
                r.hosts_per_leaf.span(),
                key("hosts_per_leaf"),
                "a leaf switch needs at least one host",
            ));
        }
        let mut links = Vec::with_capacity(r.level.len());
        let mut sizes = vec![1u64];
        for (i, l) in r.level.iter().enumerate() {
            let lr = l.get_ref();
            let fanout = *lr.fanout.get_ref();
            if fanout == 0 {
                return Err(self.err(
                    file,
                    lr.fanout.span(),
                    key(&format!("level[{i}].fanout")),
                    "a level needs at least one switch under each switch above it",
                ));
            }
            links.push(self.link(file, &lr.link, &format!("cluster.level[{i}].link"))?);
            // Too large a tree is refused below, with its host count.
            sizes.push(sizes[i].saturating_mul(fanout as u64));
        }
        self.check_tree_ports(file, r, spec, &links, per_leaf, host_link)?;
        let leaves = *sizes.last().expect("the top level");
        let hosts = leaves.saturating_mul(per_leaf as u64);
        if hosts > MAX_CLUSTER_HOSTS {
            return Err(self.err(
                file,
                c.span(),
                Some("cluster".into()),
                &format!("the tree has {hosts} hosts; a cluster has at most {MAX_CLUSTER_HOSTS}"),
            ));
        }
        Ok(ClusterPlan {
            raw: r,
            chip,
            switch_names,
            host_names,
            sizes,
            links,
            per_leaf,
            hosts: hosts as u32,
            host_link,
            host_ntb,
        })
    }

    /// The template's NTB adapter each host's cable plugs into: `host_ntb`, or the only one.
    fn cluster_host_ntb(&self, file: usize, r: &RawCluster) -> Result<String, ScenarioError> {
        let key = |k: &str| Some(format!("cluster.{k}"));
        Ok(match &r.host_ntb {
            Some(n) => {
                if !r.host.get_ref().ntb.iter().any(|x| x.get_ref().name.get_ref() == n.get_ref()) {
                    return Err(self.err(
                        file,
                        n.span(),
                        key("host_ntb"),
                        &format!("the host template has no NTB adapter `{}`", n.get_ref()),
                    ));
                }
                n.get_ref().clone()
            }
            None => match r.host.get_ref().ntb.as_slice() {
                [only] => only.get_ref().name.get_ref().clone(),
                ntbs => {
                    return Err(self.err(
                        file,
                        r.host.span(),
                        key("host_ntb"),
                        &format!(
                            "the host template has {} NTB adapters: `host_ntb` names the one cabled to the leaf switch",
                            ntbs.len()
                        ),
                    ))
                }
            },
        })
    }

    /// Each level's switches: what they cable up and down, against the chip (`spec`).
    fn check_tree_ports(
        &self,
        file: usize,
        r: &RawCluster,
        spec: &ChipSpec,
        links: &[Link],
        per_leaf: u32,
        host_link: Link,
    ) -> Result<(), ScenarioError> {
        let key = |k: &str| Some(format!("cluster.{k}"));
        for (i, down) in (0..=r.level.len()).map(|i| (i, r.level.get(i))) {
            let (children, child_link, at, k) = match down {
                Some(l) => (
                    *l.get_ref().fanout.get_ref(),
                    links[i],
                    l.get_ref().fanout.span(),
                    format!("level[{i}].fanout"),
                ),
                None => (
                    per_leaf,
                    host_link,
                    r.hosts_per_leaf.span(),
                    "hosts_per_leaf".to_string(),
                ),
            };
            let up = i.checked_sub(1).map(|u| links[u]);
            let cables = children as u64 + u64::from(up.is_some());
            let lanes =
                children as u64 * child_link.width as u64 + up.map_or(0, |l| l.width as u64);
            if cables > spec.ports as u64 || lanes > spec.lanes as u64 {
                let which = if i == 0 {
                    "the top switch".to_string()
                } else {
                    format!("each switch of level {i}")
                };
                let below = if down.is_some() { "switches" } else { "hosts" };
                let upward = up.map_or(String::new(), |l| format!(" and x{} up", l.width));
                return Err(self.err(
                    file,
                    at,
                    key(&k),
                    &format!(
                        "impossible tree: {which} would cable {children} {below} at x{}{upward}: {cables} ports and {lanes} lanes; a {} has {} ports and {} lanes",
                        child_link.width, spec.name, spec.ports, spec.lanes
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Cluster switches and cables: a `[cluster]`'s tree first (switches top down, then
    /// each switch's cable up, then each host's cable), then the written ones.
    pub(super) fn cluster(
        &self,
        file: usize,
        raw: &RawFile,
        plan: Option<&ClusterPlan>,
        topo: &mut Topology,
    ) -> Result<(), ScenarioError> {
        let switch_ids = self.cluster_switches(file, raw, plan, topo)?;
        let mut cabled: HashSet<(CableEnd, CableEnd)> = HashSet::new();
        if let Some(p) = plan {
            self.tree_cables(file, raw, p, topo, &mut cabled)?;
        }
        self.written_cables(file, raw, &switch_ids, topo, &mut cabled)?;
        topo.switch_group = switch_groups(topo);
        Ok(())
    }

    /// The tree's switches (numbered top down), then the written `[[cluster_switch]]`s;
    /// returns their ids by name.
    fn cluster_switches(
        &self,
        file: usize,
        raw: &RawFile,
        plan: Option<&ClusterPlan>,
        topo: &mut Topology,
    ) -> Result<HashMap<String, ClusterSwitchId>, ScenarioError> {
        let mut switch_ids: HashMap<String, ClusterSwitchId> = HashMap::new();
        if let Some(p) = plan {
            let total: u64 = p.sizes.iter().sum();
            topo.cluster_switches.reserve(total as usize);
            for s in 0..total as u32 {
                self.add_cluster_switch(
                    file,
                    &mut switch_ids,
                    topo,
                    p.switch_names.name(s),
                    p.chip,
                    p.raw.switch_names.span(),
                    "cluster.switch_names".into(),
                )?;
            }
        }
        for (i, c) in raw.cluster_switch.iter().enumerate() {
            let r = c.get_ref();
            let key = format!("cluster_switch[{i}]");
            let chip = self.find_chip(file, &r.chip, &format!("{key}.chip"))?;
            if !self.chips[chip as usize].cluster {
                return Err(self.err(
                    file,
                    r.chip.span(),
                    Some(format!("{key}.chip")),
                    &format!("chip `{}` is not a cluster switch chip", r.chip.get_ref()),
                ));
            }
            self.add_cluster_switch(
                file,
                &mut switch_ids,
                topo,
                r.name.get_ref().clone(),
                chip,
                r.name.span(),
                format!("{key}.name"),
            )?;
        }
        Ok(switch_ids)
    }

    /// Adds one cluster switch, its name unused by any host or switch.
    #[allow(clippy::too_many_arguments)]
    fn add_cluster_switch(
        &self,
        file: usize,
        switch_ids: &mut HashMap<String, ClusterSwitchId>,
        topo: &mut Topology,
        name: String,
        chip: u32,
        at: Range<usize>,
        key: String,
    ) -> Result<(), ScenarioError> {
        if !valid_name(&name) || switch_ids.contains_key(&name) || topo.host_ids.contains_key(&name)
        {
            return Err(self.err(
                file,
                at,
                Some(key),
                &format!(
                    "cluster switch name `{name}` is invalid or already used by a host or switch"
                ),
            ));
        }
        switch_ids.insert(
            name.clone(),
            ClusterSwitchId::from_index(topo.cluster_switches.len()),
        );
        topo.cluster_switches.push(ClusterSwitch {
            name,
            chip,
            cables: vec![],
        });
        Ok(())
    }

    /// The tree's cables: each switch's cable up to its parent, level by level, then each
    /// host's cable from its NTB adapter to its leaf switch.
    fn tree_cables(
        &self,
        file: usize,
        raw: &RawFile,
        p: &ClusterPlan,
        topo: &mut Topology,
        cabled: &mut HashSet<(CableEnd, CableEnd)>,
    ) -> Result<(), ScenarioError> {
        let r = p.raw;
        // Level l's switches start after all switches above it.
        let mut first = 0u32;
        for (l, level) in r.level.iter().enumerate() {
            let (size, fanout) = (p.sizes[l + 1] as u32, *level.get_ref().fanout.get_ref());
            let at = CableAt::all(
                level.get_ref().link.span(),
                format!("cluster.level[{l}].link"),
            );
            let start = first + p.sizes[l] as u32;
            for j in 0..size {
                let ends = [
                    CableEnd::ClusterSwitch(ClusterSwitchId(start + j)),
                    CableEnd::ClusterSwitch(ClusterSwitchId(first + j / fanout)),
                ];
                self.add_cable(file, topo, cabled, ends, p.links[l], None, &at)?;
            }
            first = start;
        }
        let at = CableAt::all(r.host_link.span(), "cluster.host_link".into());
        for i in 0..p.hosts {
            let host = HostId(i);
            let ntb = topo.ntb_by_name(host, &p.host_ntb).ok_or_else(|| {
                let name = &topo.hosts[i as usize].name;
                // Only a written host in a generated host's place can lack it.
                let (span, k) = raw
                    .host
                    .iter()
                    .enumerate()
                    .find_map(|(hi, h)| {
                        let n = h.get_ref().name.as_ref()?;
                        (n.get_ref() == name).then(|| (n.span(), format!("host[{hi}].name")))
                    })
                    .unwrap_or((r.host_ntb.as_ref().map_or(r.host.span(), |n| n.span()), "cluster.host_ntb".into()));
                self.err(
                    file,
                    span,
                    Some(k),
                    &format!(
                        "host `{name}` takes the place of a host of the cluster, whose cable plugs into its NTB adapter `{}`: it has none of that name",
                        p.host_ntb
                    ),
                )
            })?;
            let leaf = first + i / p.per_leaf;
            let ends = [
                CableEnd::Ntb(ntb),
                CableEnd::ClusterSwitch(ClusterSwitchId(leaf)),
            ];
            self.add_cable(file, topo, cabled, ends, p.host_link, None, &at)?;
        }
        Ok(())
    }

    /// The written `[[cable]]`s: each end `host.ntb` or a cluster switch.
    fn written_cables(
        &self,
        file: usize,
        raw: &RawFile,
        switch_ids: &HashMap<String, ClusterSwitchId>,
        topo: &mut Topology,
        cabled: &mut HashSet<(CableEnd, CableEnd)>,
    ) -> Result<(), ScenarioError> {
        for (i, c) in raw.cable.iter().enumerate() {
            let r = c.get_ref();
            let key = format!("cable[{i}]");
            let ends = r.ends.get_ref();
            if ends.len() != 2 {
                return Err(self.err(
                    file,
                    r.ends.span(),
                    Some(format!("{key}.ends")),
                    "a cable has exactly two ends",
                ));
            }
            let link = self.link(file, &r.link, &format!("{key}.link"))?;
            let mut out = [CableEnd::Ntb(NtbId(0)); 2];
            for (j, e) in ends.iter().enumerate() {
                let s = e.get_ref();
                let bad = |m: String| self.err(file, e.span(), Some(format!("{key}.ends")), &m);
                out[j] = if let Some((h, n)) = s.split_once('.') {
                    let hid = topo
                        .host_by_name(h)
                        .ok_or_else(|| bad(format!("unknown host `{h}`")))?;
                    CableEnd::Ntb(
                        topo.ntb_by_name(hid, n)
                            .ok_or_else(|| bad(format!("host `{h}` has no NTB adapter `{n}`")))?,
                    )
                } else {
                    CableEnd::ClusterSwitch(*switch_ids.get(s).ok_or_else(|| {
                        bad(format!("`{s}` is neither `host.ntb` nor a cluster switch"))
                    })?)
                };
            }
            let cable_ns = match &r.cable_ns {
                Some(v) => {
                    self.check_param(file, v, Rule::Latency, &format!("{key}.cable_ns"))?;
                    Some(v.get_ref().value)
                }
                None => None,
            };
            let at = CableAt {
                span: c.span(),
                key: key.clone(),
                ends_span: r.ends.span(),
                ends_key: format!("{key}.ends"),
            };
            self.add_cable(file, topo, cabled, out, link, cable_ns, &at)?;
        }
        Ok(())
    }

    /// Adds one cable, checking its ends: no loop, no second cable between the same two
    /// ends, an adapter's cable ports and width, a cluster switch's ports and lanes.
    #[allow(clippy::too_many_arguments)]
    fn add_cable(
        &self,
        file: usize,
        topo: &mut Topology,
        cabled: &mut HashSet<(CableEnd, CableEnd)>,
        ends: [CableEnd; 2],
        link: Link,
        cable_ns: Option<f64>,
        at: &CableAt,
    ) -> Result<(), ScenarioError> {
        let ends_err = |m: &str| self.err(file, at.ends_span.clone(), Some(at.ends_key.clone()), m);
        if ends[0] == ends[1] {
            return Err(ends_err("a cable cannot loop back to the same port group"));
        }
        let order = |e: CableEnd| match e {
            CableEnd::Ntb(x) => (0, x.0),
            CableEnd::ClusterSwitch(x) => (1, x.0),
        };
        let pair = if order(ends[0]) <= order(ends[1]) {
            (ends[0], ends[1])
        } else {
            (ends[1], ends[0])
        };
        if !cabled.insert(pair) {
            return Err(ends_err("these two ends are already cabled together"));
        }
        let id = CableId::from_index(topo.cables.len());
        for end in ends {
            match end {
                CableEnd::Ntb(n) => {
                    let ntb = &mut topo.ntbs[n.index()];
                    ntb.cables.push(id);
                    if ntb.cables.len() as u32 > ntb.adapter.ports || link.width > ntb.adapter.width
                    {
                        let msg = format!(
                            "adapter {} ({}) has {} cable port(s) of up to x{}",
                            ntb.name, ntb.adapter.name, ntb.adapter.ports, ntb.adapter.width
                        );
                        return Err(self.err(file, at.span.clone(), Some(at.key.clone()), &msg));
                    }
                }
                CableEnd::ClusterSwitch(s) => {
                    let cs = &mut topo.cluster_switches[s.index()];
                    cs.cables.push(id);
                    let chip = &self.chips[cs.chip as usize];
                    let lanes: u32 = link.width as u32
                        + cs.cables[..cs.cables.len() - 1]
                            .iter()
                            .map(|&c| topo.cables[c.index()].link.width as u32)
                            .sum::<u32>();
                    if cs.cables.len() as u32 > chip.ports || lanes > chip.lanes {
                        let msg = format!(
                            "cluster switch `{}` has {} cables and {lanes} lanes cabled; a {} has {} ports and {} lanes",
                            cs.name,
                            cs.cables.len(),
                            chip.name,
                            chip.ports,
                            chip.lanes
                        );
                        return Err(self.err(file, at.span.clone(), Some(at.key.clone()), &msg));
                    }
                }
            }
        }
        topo.cables.push(Cable {
            ends,
            link,
            cable_ns,
        });
        Ok(())
    }
}

/// Where a cable was written, to locate errors about it and about its ends.
struct CableAt {
    span: Range<usize>,
    key: String,
    ends_span: Range<usize>,
    ends_key: String,
}

impl CableAt {
    /// A generated cable: its errors point at the line that made it.
    fn all(span: Range<usize>, key: String) -> CableAt {
        CableAt {
            span: span.clone(),
            key: key.clone(),
            ends_span: span,
            ends_key: key,
        }
    }
}

/// A cluster's size: more hosts than this is a slip in a fan-out, not a machine.
const MAX_CLUSTER_HOSTS: u64 = 100_000;

/// A `[cluster]`, checked: switch counts per level (top first), links, host count.
pub(super) struct ClusterPlan<'a> {
    pub(super) raw: &'a RawCluster,
    chip: u32,
    switch_names: NamePattern,
    pub(super) host_names: NamePattern,
    /// Switches per level, the top (one) first.
    sizes: Vec<u64>,
    /// The uplink of each level below the top.
    links: Vec<Link>,
    per_leaf: u32,
    pub(super) hosts: u32,
    host_link: Link,
    host_ntb: String,
}

/// A name with one number in it: `h{:02}` names `h00`, `h01`, …
#[derive(Debug)]
pub(super) struct NamePattern {
    prefix: String,
    suffix: String,
    width: usize,
}

impl NamePattern {
    fn parse(p: &str) -> Result<NamePattern, String> {
        let bad = || {
            format!("`{p}` is not a name pattern: letters, digits, `_` and `-` around one number, `{{}}` or zero-padded `{{:0N}}` (`h{{:02}}`)")
        };
        let (prefix, rest) = p.split_once('{').ok_or_else(bad)?;
        let (spec, suffix) = rest.split_once('}').ok_or_else(bad)?;
        let width = match spec.strip_prefix(":0") {
            None if spec.is_empty() => 0,
            Some(w) => w
                .parse::<usize>()
                .ok()
                .filter(|w| (1..=9).contains(w))
                .ok_or_else(bad)?,
            None => return Err(bad()),
        };
        let word = |s: &str| {
            s.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
        };
        if !word(prefix) || !word(suffix) || prefix.len() + suffix.len() + width.max(6) > 64 {
            return Err(bad());
        }
        Ok(NamePattern {
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
            width,
        })
    }

    pub(super) fn name(&self, n: u32) -> String {
        format!("{}{n:0w$}{}", self.prefix, self.suffix, w = self.width)
    }

    /// The number `name` has under this pattern, if it is one the pattern makes.
    fn number_of(&self, name: &str) -> Option<u32> {
        let digits = name
            .strip_prefix(&self.prefix)?
            .strip_suffix(&self.suffix)?;
        let n = digits.parse::<u32>().ok()?;
        (self.name(n) == name).then_some(n)
    }
}

/// Whether a `[cluster]` whose hosts are named by `host_names` and number `hosts` makes
/// a host named `name` (so a written `[[host]]` of that name takes its place).
pub fn cluster_makes_host(host_names: &str, hosts: u64, name: &str) -> bool {
    NamePattern::parse(host_names)
        .ok()
        .and_then(|p| p.number_of(name))
        .is_some_and(|n| u64::from(n) < hosts)
}

/// The name of host `n` of a `[cluster]` whose hosts are named by `host_names`.
pub fn cluster_host_name(host_names: &str, n: u32) -> Option<String> {
    NamePattern::parse(host_names).ok().map(|p| p.name(n))
}

/// Which cluster switches are joined by switch-to-switch cables: per switch, the lowest
/// switch id of its group.
fn switch_groups(topo: &Topology) -> Vec<u32> {
    let n = topo.cluster_switches.len();
    let mut group = vec![u32::MAX; n];
    let mut stack = Vec::new();
    for s in 0..n {
        if group[s] != u32::MAX {
            continue;
        }
        group[s] = s as u32;
        stack.push(ClusterSwitchId::from_index(s));
        while let Some(cur) = stack.pop() {
            for &c in &topo.cluster_switches[cur.index()].cables {
                for e in topo.cables[c.index()].ends {
                    if let CableEnd::ClusterSwitch(o) = e {
                        if group[o.index()] == u32::MAX {
                            group[o.index()] = s as u32;
                            stack.push(o);
                        }
                    }
                }
            }
        }
    }
    group
}
