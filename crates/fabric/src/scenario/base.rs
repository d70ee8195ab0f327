//! `base = "NAME"`: a platform or device model that copies another (built in, included,
//! or defined in the same file) and gives only the keys that differ. The base is checked
//! alone first, so its errors are located where it is written; the copy is then checked
//! whole, and an error that comes from a key it took from the base points at its `base`
//! line and names the base. Every key keeps its basis.

use std::collections::BTreeMap;
use std::ops::Range;

use toml::Spanned;

use super::{Builder, DeviceModel};
use crate::error::{name_list, ScenarioError};
use crate::raw::{RawDeviceModel, RawMemory, RawPlatform, RawTiming};

/// The keys of a copy: those it gives itself and those it takes from its base.
#[derive(Default)]
pub(super) struct Keys {
    pub given: Vec<String>,
    pub inherited: Vec<String>,
}

impl Keys {
    fn note(&mut self, key: &str, given: bool) {
        match given {
            true => self.given.push(key.to_string()),
            false => self.inherited.push(key.to_string()),
        }
    }
}

/// Takes `child`'s value when it gives one, else the base's (its span moved to `at`, the
/// child's `base` line, where an error about it is reported), noting the key as inherited.
fn pick<T: Clone>(
    child: &Option<Spanned<T>>,
    base: &Option<Spanned<T>>,
    key: &str,
    at: &Range<usize>,
    keys: &mut Keys,
) -> Option<Spanned<T>> {
    match (child, base) {
        (Some(c), _) => {
            keys.note(key, true);
            Some(c.clone())
        }
        (None, Some(b)) => {
            keys.note(key, false);
            Some(Spanned::new(at.clone(), b.get_ref().clone()))
        }
        (None, None) => None,
    }
}

/// A lists' key (`interconnect`, …): the child's list whole, or the base's.
fn pick_list<T: Clone>(
    child: &Option<Vec<T>>,
    base: &Option<Vec<T>>,
    key: &str,
    keys: &mut Keys,
) -> Option<Vec<T>> {
    if child.is_some() || base.is_some() {
        keys.note(key, child.is_some());
    }
    child.clone().or_else(|| base.clone())
}

/// A parameter table merged key by key: the base's entries the child does not give, then
/// the child's (each entry keeps its own span and basis).
fn pick_table(
    child: &Option<Spanned<RawTiming>>,
    base: &Option<Spanned<RawTiming>>,
    table: &str,
    at: &Range<usize>,
    keys: &mut Keys,
) -> Option<Spanned<RawTiming>> {
    for k in child.iter().flat_map(|c| c.get_ref().keys()) {
        keys.note(&format!("{table}.{k}"), true);
    }
    let Some(b) = base else {
        return child.clone();
    };
    let mut merged: RawTiming = BTreeMap::new();
    for (k, v) in b.get_ref() {
        if child.as_ref().is_none_or(|c| !c.get_ref().contains_key(k)) {
            keys.note(&format!("{table}.{k}"), false);
            merged.insert(k.clone(), v.clone());
        }
    }
    let span = match child {
        Some(c) => {
            merged.extend(c.get_ref().clone());
            c.span()
        }
        None => at.clone(),
    };
    Some(Spanned::new(span, merged))
}

/// Platform `child` over `base`, and which keys it gave and took.
fn platform_over(child: &RawPlatform, base: &RawPlatform, at: Range<usize>) -> (RawPlatform, Keys) {
    let mut inh = Keys::default();
    let memory = match (&child.memory, &base.memory) {
        (Some(c), Some(b)) => {
            let (c, b) = (c.get_ref(), b.get_ref());
            let m = RawMemory {
                latency_ns: pick(
                    &c.latency_ns,
                    &b.latency_ns,
                    "memory.latency_ns",
                    &at,
                    &mut inh,
                ),
                bandwidth_gbps: pick(
                    &c.bandwidth_gbps,
                    &b.bandwidth_gbps,
                    "memory.bandwidth_gbps",
                    &at,
                    &mut inh,
                ),
            };
            Some(Spanned::new(at.clone(), m))
        }
        (c, b) => pick(c, b, "memory", &at, &mut inh),
    };
    inh.note("cpu", !child.cpu.is_empty());
    let cpu = match child.cpu.is_empty() {
        true => base.cpu.clone(),
        false => child.cpu.clone(),
    };
    let p = RawPlatform {
        base: None,
        cpu,
        packages: pick(&child.packages, &base.packages, "packages", &at, &mut inh),
        nodes_per_package: pick(
            &child.nodes_per_package,
            &base.nodes_per_package,
            "nodes_per_package",
            &at,
            &mut inh,
        ),
        cores_per_package: pick(
            &child.cores_per_package,
            &base.cores_per_package,
            "cores_per_package",
            &at,
            &mut inh,
        ),
        threads_per_core: pick(
            &child.threads_per_core,
            &base.threads_per_core,
            "threads_per_core",
            &at,
            &mut inh,
        ),
        clock_ghz: pick(
            &child.clock_ghz,
            &base.clock_ghz,
            "clock_ghz",
            &at,
            &mut inh,
        ),
        llc_bytes: pick(
            &child.llc_bytes,
            &base.llc_bytes,
            "llc_bytes",
            &at,
            &mut inh,
        ),
        llc_ways: pick(&child.llc_ways, &base.llc_ways, "llc_ways", &at, &mut inh),
        ddio_ways: pick(
            &child.ddio_ways,
            &base.ddio_ways,
            "ddio_ways",
            &at,
            &mut inh,
        ),
        dram_bytes_per_node: pick(
            &child.dram_bytes_per_node,
            &base.dram_bytes_per_node,
            "dram_bytes_per_node",
            &at,
            &mut inh,
        ),
        root_read_split_bytes: pick(
            &child.root_read_split_bytes,
            &base.root_read_split_bytes,
            "root_read_split_bytes",
            &at,
            &mut inh,
        ),
        root_p2p: {
            if child.root_p2p.is_some() || base.root_p2p.is_some() {
                inh.note("root_p2p", child.root_p2p.is_some());
            }
            child.root_p2p.or(base.root_p2p)
        },
        memory,
        interconnect: pick_list(
            &child.interconnect,
            &base.interconnect,
            "interconnect",
            &mut inh,
        ),
        ioh: pick_list(&child.ioh, &base.ioh, "ioh", &mut inh),
        memory_node: pick_list(
            &child.memory_node,
            &base.memory_node,
            "memory_node",
            &mut inh,
        ),
        timing: pick_table(&child.timing, &base.timing, "timing", &at, &mut inh),
        netstack: pick_table(&child.netstack, &base.netstack, "netstack", &at, &mut inh),
    };
    (p, inh)
}

/// Device model `child` over `base`, and which keys it gave and took.
fn device_model_over(
    child: &RawDeviceModel,
    base: &RawDeviceModel,
    at: Range<usize>,
) -> (RawDeviceModel, Keys) {
    let mut inh = Keys::default();
    if child.kind.is_some() || base.kind.is_some() {
        inh.note("kind", child.kind.is_some());
    }
    let kind = child.kind.or(base.kind);
    inh.note("model", !child.model.is_empty());
    let model = match child.model.is_empty() {
        true => base.model.clone(),
        false => child.model.clone(),
    };
    let bars = pick_list(&child.bars, &base.bars, "bars", &mut inh);
    let child_timing = Some(Spanned::new(at.clone(), child.timing.clone()));
    let base_timing = Some(Spanned::new(at.clone(), base.timing.clone()));
    let timing = pick_table(&child_timing, &base_timing, "timing", &at, &mut inh);
    let m = RawDeviceModel {
        base: None,
        kind,
        model,
        link: pick(&child.link, &base.link, "link", &at, &mut inh),
        bars,
        dma_mask_bits: pick(
            &child.dma_mask_bits,
            &base.dma_mask_bits,
            "dma_mask_bits",
            &at,
            &mut inh,
        ),
        timing: timing.map(Spanned::into_inner).unwrap_or_default(),
    };
    (m, inh)
}

/// Whether the error's key (under `prefix`, e.g. `platform.X.`) is one of `inherited`
/// or lies inside one (`interconnect[0].ends` inside `interconnect`).
fn is_inherited(key: &str, prefix: &str, inherited: &[String]) -> bool {
    let Some(rest) = key.strip_prefix(prefix) else {
        return false;
    };
    inherited.iter().any(|k| {
        rest == k
            || rest
                .strip_prefix(k.as_str())
                .is_some_and(|r| r.starts_with('.') || r.starts_with('['))
    })
}

impl Builder {
    /// Platform `name` with its base chain applied (`chain`: the names on the way, to
    /// refuse a loop), and the keys it took from its base.
    pub(super) fn platform_over_base(
        &self,
        name: &str,
        chain: &mut Vec<String>,
    ) -> Result<(Spanned<RawPlatform>, Keys), ScenarioError> {
        let (file, sp) = &self.platforms[name];
        let Some(base) = &sp.get_ref().base else {
            return Ok((sp.clone(), Keys::default()));
        };
        chain.push(name.to_string());
        let b = base.get_ref();
        let key = Some(format!("platform.{name}.base"));
        if chain.iter().any(|c| c == b) {
            let msg = format!("the base chain loops: {} → {b}", chain.join(" → "));
            return Err(self.err(*file, base.span(), key, &msg));
        }
        if !self.platforms.contains_key(b) {
            let msg = format!(
                "unknown base platform `{b}` (defined or built in: {})",
                name_list(
                    self.platforms
                        .keys()
                        .chain(builtin_names("platform").iter())
                )
            );
            return Err(self.err(*file, base.span(), key, &msg));
        }
        let (under, _) = self.platform_over_base(b, chain)?;
        let (merged, inherited) = platform_over(sp.get_ref(), under.get_ref(), base.span());
        Ok((Spanned::new(sp.span(), merged), inherited))
    }

    /// `e`, found checking a copy in `file` whose keys `inherited` came from `base`: an
    /// error about such a key is reported at the copy's `base` line, naming the base.
    pub(super) fn inherited_error(
        &self,
        e: ScenarioError,
        file: usize,
        prefix: &str,
        base: &Spanned<String>,
        inherited: &[String],
    ) -> ScenarioError {
        match &e.key {
            Some(k) if is_inherited(k, prefix, inherited) => {
                let msg = format!("{} (from base `{}`)", e.message, base.get_ref());
                self.err(file, base.span(), e.key.clone(), &msg)
            }
            _ => e,
        }
    }

    /// Adds the built-in platforms and device models that `base` keys name and no file of
    /// the scenario defines (a base need not be included). A name found nowhere is left
    /// for the check to report where it is written.
    pub(super) fn include_builtin_bases(&mut self) -> Result<(), ScenarioError> {
        loop {
            let mut wanted: Vec<(&'static str, String)> = Vec::new();
            for (_, p) in self.platforms.values() {
                if let Some(b) = &p.get_ref().base {
                    if !self.platforms.contains_key(b.get_ref()) {
                        wanted.push(("platform", b.get_ref().clone()));
                    }
                }
            }
            for (_, _, m) in &self.pending_models {
                if let Some(b) = &m.get_ref().base {
                    let b = b.get_ref();
                    let pending = self.pending_models.iter().any(|(_, n, _)| n == b);
                    if !self.device_models.contains_key(b) && !pending {
                        wanted.push(("device_model", b.clone()));
                    }
                }
            }
            let mut added = false;
            for (kind, name) in wanted {
                let Some(src) = crate::builtin::part_source(kind, &name) else {
                    continue;
                };
                let f = self.parse_include(src)?;
                let raw = &mut self.files[f].raw;
                if kind == "platform" {
                    if let Some(p) = raw.platform.remove(&name) {
                        self.collect_platform(f, name, p)?;
                        added = true;
                    }
                } else if let Some(m) = raw.device_model.remove(&name) {
                    self.collect_device_model(f, name, m)?;
                    added = true;
                }
            }
            if !added {
                return Ok(());
            }
        }
    }

    /// Checks the device models that name a base, each once its base is checked.
    pub(super) fn resolve_device_model_bases(&mut self) -> Result<(), ScenarioError> {
        while !self.pending_models.is_empty() {
            let ready = self.pending_models.iter().position(|(_, _, m)| {
                let b = m
                    .get_ref()
                    .base
                    .as_ref()
                    .expect("pending models name a base");
                self.device_models.contains_key(b.get_ref())
            });
            let Some(i) = ready else {
                return Err(self.unresolved_model_base());
            };
            let (file, name, m) = self.pending_models.remove(i);
            let base = m
                .get_ref()
                .base
                .clone()
                .expect("pending models name a base");
            let under = &self.device_models[base.get_ref()].raw;
            let (merged, keys) = device_model_over(m.get_ref(), under.get_ref(), base.span());
            let merged = Spanned::new(m.span(), merged);
            let prefix = format!("device_model.{name}.");
            let model: DeviceModel = self
                .check_device_model(file, &name, merged)
                .map_err(|e| self.inherited_error(e, file, &prefix, &base, &keys.inherited))?;
            self.device_models.insert(name, model);
        }
        Ok(())
    }

    /// Why no pending device model could be checked: a base that is nowhere, or a loop.
    fn unresolved_model_base(&self) -> ScenarioError {
        let (file, name, m) = &self.pending_models[0];
        let base = m
            .get_ref()
            .base
            .as_ref()
            .expect("pending models name a base");
        let b = base.get_ref();
        let key = Some(format!("device_model.{name}.base"));
        let msg = if self.pending_models.iter().any(|(_, n, _)| n == b) {
            format!("the base chain of device model `{name}` loops back through `{b}`")
        } else {
            let known = self.device_models.keys();
            format!(
                "unknown base device model `{b}` (defined or built in: {})",
                name_list(known.chain(builtin_names("device_model").iter()))
            )
        };
        self.err(*file, base.span(), key, &msg)
    }
}

/// The built-in platforms' or device models' names (`kind` = `platform`, `device_model`).
fn builtin_names(kind: &str) -> Vec<String> {
    let (platforms, models) = crate::builtin::parts();
    let parts = if kind == "platform" {
        platforms
    } else {
        models
    };
    parts.into_iter().map(|p| p.name).collect()
}
