//! Scenario loading: parse the TOML (and its includes), validate every reference and
//! limit with a located error, then enumerate each host — bus numbers and requester IDs,
//! BAR placement (32-bit below 4 GiB, 64-bit above when asked or when large), bridge
//! windows, RAM layout around the 32-bit MMIO hole — and each platform's interconnect
//! paths. A `[cluster]` expands here into its switches, hosts and cables. Ways between
//! NTB adapters are not precomputed: one per pair would grow with the square of the
//! cluster (`Topology::ntb_way` searches when asked).
//!
//! This module holds what a loaded scenario is and the order of the build
//! (`Builder::build`); each concern lives in its own file:
//!
//! - `load`: sources, includes and TOML parsing (the entry points [`load`], [`load_path`]);
//! - `parts`: the catalog a scenario adds to (platforms, chips, adapters, device models)
//!   and the shape checks every part shares (links, LUTs, DMA masks, chip lookups);
//! - `rules`: what each timing parameter may be, and the key lists per table;
//! - `platform`: a platform's packages, I/O hubs, interconnect, memory, timing, netstack;
//! - `host` (with `host::adapters` and `host::devices`): one host's memory map, root
//!   complexes and tree of parts — switches, NTB adapters, devices and their BARs;
//! - `enumerate`: bus numbers, requester IDs, BAR and bridge-window placement;
//! - `cluster`: a `[cluster]`'s tree, cluster switches and cables;
//! - `lending`: `[[lend]]`, `[[borrow]]`, `[[fault]]` and `[[window]]`, checked against
//!   the built topology.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;

use crate::catalog::{builtin_adapters, builtin_chips, AdapterSpec, ChipSpec};
use crate::error::{name_list, LineIndex, ScenarioError};
use crate::raw::*;
use crate::topology::*;

mod base;
mod cluster;
mod enumerate;
mod host;
mod lending;
mod load;
mod parts;
mod platform;
mod rules;

pub use cluster::{cluster_host_name, cluster_makes_host};
pub use load::{load, load_path, read_text, FsResolver, Resolver, Source, MAX_FILE_BYTES};
pub use rules::{
    ADAPTER_TIMING_KEYS, DEVICE_TIMING_KEYS, DMA_ENGINE_KEYS, NETSTACK_KEYS, NIC_TIMING_KEYS,
    NVME_TIMING_KEYS, PLATFORM_TIMING_KEYS, RNIC_TIMING_KEYS,
};

use cluster::ClusterPlan;
use rules::Table;

/// A window the scenario asks to program statically into an NTB's address LUT.
#[derive(Clone, Debug)]
pub struct StaticWindow {
    pub ntb: String,
    pub to: String,
    pub offset: u64,
    pub size: u64,
    /// Where it was written, to locate errors found when it is programmed.
    pub at: ScenarioError,
}

/// A loaded scenario: the topology (with its lending declarations) plus what is to be
/// programmed into it.
#[derive(Clone, Debug)]
pub struct Scenario {
    pub topology: Topology,
    pub windows: Vec<StaticWindow>,
    /// The fault schedule (`[[fault]]`), in file order.
    pub faults: Vec<crate::faults::FaultSpec>,
}

pub fn valid_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 64
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

const MIB: u64 = 1 << 20;

/// A device model as collected: where it was written and its validated timing.
struct DeviceModel {
    file: usize,
    raw: Spanned<RawDeviceModel>,
    timing: Table,
}

struct File {
    name: String,
    text: String,
    lines: LineIndex,
    raw: RawFile,
}

#[derive(Default)]
struct Builder {
    files: Vec<File>,
    /// name -> (file, platform)
    platforms: BTreeMap<String, (usize, Spanned<RawPlatform>)>,
    chips: Vec<ChipSpec>,
    adapters: Vec<Arc<AdapterSpec>>,
    device_models: BTreeMap<String, DeviceModel>,
    /// Device models that name a base, checked once every file's parts are in.
    pending_models: Vec<(usize, String, Spanned<RawDeviceModel>)>,
}

impl Builder {
    /// An error at `span` of file `file` (an empty span at 0: the file as a whole).
    fn err(
        &self,
        file: usize,
        span: Range<usize>,
        key: Option<String>,
        msg: &str,
    ) -> ScenarioError {
        let f = &self.files[file];
        let (line, col) = if span.is_empty() && span.start == 0 {
            (0, 0)
        } else {
            f.lines.locate(&f.text, span.start)
        };
        ScenarioError {
            file: f.name.clone(),
            line,
            col,
            key,
            message: msg.to_string(),
        }
    }

    /// The scenario from the root file, once every include's parts are collected: the
    /// hosts (a cluster's and the written ones) with their platforms, then the cluster's
    /// switches and cables, then what refers to all of them (windows, lending, faults).
    fn build(
        mut self,
        root: usize,
        name: String,
        description: String,
        raw: RawFile,
    ) -> Result<Scenario, ScenarioError> {
        if self.chips.is_empty() {
            self.chips = builtin_chips();
            self.adapters = builtin_adapters().into_iter().map(Arc::new).collect();
        }
        let mut topo = Topology {
            name,
            description,
            chips: self.chips.clone(),
            platforms: Vec::new(),
            hosts: Vec::new(),
            nodes: Vec::new(),
            devices: Vec::new(),
            ntbs: Vec::new(),
            cluster_switches: Vec::new(),
            cables: Vec::new(),
            switch_group: Vec::new(),
            host_ids: HashMap::new(),
            lends: Vec::new(),
            borrows: Vec::new(),
        };
        let cluster = match &raw.cluster {
            Some(c) => Some(self.cluster_plan(root, c)?),
            None => None,
        };
        if raw.host.is_empty() && cluster.is_none() {
            return Err(self.err(
                root,
                0..0,
                Some("host".into()),
                "a scenario needs at least one [[host]] (or a [cluster] of them)",
            ));
        }
        let order = self.host_order(root, &raw, cluster.as_ref())?;
        topo.host_ids.reserve(order.len());
        let mut platform_ids: HashMap<String, u32> = HashMap::new();
        for (written, name) in order {
            let (hr, hkey) = match (written, &cluster) {
                (Some(hi), _) => (raw.host[hi].get_ref(), format!("host[{hi}]")),
                (None, Some(c)) => (c.raw.host.get_ref(), "cluster.host".to_string()),
                (None, None) => unreachable!("only a cluster generates hosts"),
            };
            let pid = self.platform_id(root, &hkey, hr, &mut platform_ids, &mut topo)?;
            self.host(root, &hkey, &name, hr, pid, &mut topo)?;
            let id = HostId::from_index(topo.hosts.len() - 1);
            topo.host_ids.insert(name, id);
        }
        self.cluster(root, &raw, cluster.as_ref(), &mut topo)?;
        let windows = self.windows(root, &raw)?;
        let (lends, borrows) = self.lending(root, &raw, &topo)?;
        topo.lends = lends;
        topo.borrows = borrows;
        let faults = self.faults(root, &raw, &topo)?;
        Ok(Scenario {
            topology: topo,
            windows,
            faults,
        })
    }

    /// The hosts to build, in order: the cluster's hosts by number, then the other
    /// written hosts. Each is `(index of its [[host]], name)`; a written host named like
    /// a generated host takes that host's place.
    fn host_order(
        &self,
        root: usize,
        raw: &RawFile,
        cluster: Option<&ClusterPlan>,
    ) -> Result<Vec<(Option<usize>, String)>, ScenarioError> {
        // Written hosts by name: one named like a generated host takes that host's place.
        let mut written: HashMap<&str, usize> = HashMap::with_capacity(raw.host.len());
        for (hi, h) in raw.host.iter().enumerate() {
            let hkey = format!("host[{hi}]");
            let Some(n) = &h.get_ref().name else {
                return Err(self.err(
                    root,
                    h.span(),
                    Some(format!("{hkey}.name")),
                    "a [[host]] needs `name`",
                ));
            };
            if !valid_name(n.get_ref()) {
                return Err(self.err(
                    root,
                    n.span(),
                    Some(format!("{hkey}.name")),
                    "host names use letters, digits, `_` and `-`",
                ));
            }
            if written.insert(n.get_ref(), hi).is_some() {
                return Err(self.err(
                    root,
                    n.span(),
                    Some(format!("{hkey}.name")),
                    &format!("duplicate host name `{}`", n.get_ref()),
                ));
            }
        }
        // Host order: the cluster's hosts by number, then the other written hosts.
        let mut order: Vec<(Option<usize>, String)> = Vec::new();
        if let Some(c) = cluster {
            order.reserve(c.hosts as usize);
            for i in 0..c.hosts {
                let name = c.host_names.name(i);
                order.push((written.remove(name.as_str()), name));
            }
        }
        for (hi, h) in raw.host.iter().enumerate() {
            let name = h.get_ref().name.as_ref().expect("checked above").get_ref();
            if written.contains_key(name.as_str()) {
                order.push((Some(hi), name.clone()));
            }
        }
        Ok(order)
    }

    /// The id of host `hr`'s platform in `topo`, checking and adding the platform the
    /// first time a host names it.
    fn platform_id(
        &self,
        root: usize,
        hkey: &str,
        hr: &RawHost,
        platform_ids: &mut HashMap<String, u32>,
        topo: &mut Topology,
    ) -> Result<u32, ScenarioError> {
        let pname = hr.platform.get_ref();
        if let Some(&id) = platform_ids.get(pname) {
            return Ok(id);
        }
        if !self.platforms.contains_key(pname) {
            let known: Vec<&String> = self.platforms.keys().collect();
            return Err(self.err(
                root,
                hr.platform.span(),
                Some(format!("{hkey}.platform")),
                &format!("unknown platform `{pname}` (defined: {})", name_list(known)),
            ));
        }
        let p = self.platform(pname)?;
        topo.platforms.push(p);
        let id = topo.platforms.len() as u32 - 1;
        platform_ids.insert(pname.clone(), id);
        Ok(id)
    }
}
