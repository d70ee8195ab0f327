//! The parts a scenario defines by name and hosts refer to — platforms, switch chips,
//! NTB adapters, device models — collected from every file (includes first) into the
//! builder's catalog, each checked where it is written. Also the shape checks parts share
//! wherever they appear: a PCIe link, an NTB's BAR and LUT, a DMA mask, a chip by name.

use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use toml::Spanned;

use super::rules::{adapter_rule, device_rule, Rule, ADAPTER_TIMING_KEYS, DEVICE_TIMING_KEYS};
use super::{valid_name, Builder, DeviceModel, MIB};
use crate::catalog::{builtin_adapters, builtin_chips, AdapterSpec, ChipSpec};
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;
use crate::units::fmt_size;

impl Builder {
    /// Adds one file's parts to the catalog (the built-in chips and adapters first, once).
    pub(super) fn collect_parts(
        &mut self,
        file: usize,
        platforms: BTreeMap<String, Spanned<RawPlatform>>,
        chips: BTreeMap<String, Spanned<RawChip>>,
        adapters: BTreeMap<String, Spanned<RawAdapter>>,
        device_models: BTreeMap<String, Spanned<RawDeviceModel>>,
    ) -> Result<(), ScenarioError> {
        if self.chips.is_empty() {
            self.chips = builtin_chips();
            self.adapters = builtin_adapters().into_iter().map(Arc::new).collect();
        }
        for (name, p) in platforms {
            self.collect_platform(file, name, p)?;
        }
        for (name, c) in chips {
            self.collect_chip(file, name, c)?;
        }
        for (name, a) in adapters {
            self.collect_adapter(file, name, a)?;
        }
        for (name, m) in device_models {
            self.collect_device_model(file, name, m)?;
        }
        Ok(())
    }

    /// A platform is only named here; it is checked when a host first uses it.
    pub(super) fn collect_platform(
        &mut self,
        file: usize,
        name: String,
        p: Spanned<RawPlatform>,
    ) -> Result<(), ScenarioError> {
        if !valid_name(&name) {
            return Err(self.err(
                file,
                p.span(),
                Some(format!("platform.{name}")),
                "platform names use letters, digits, `_` and `-`",
            ));
        }
        if let Some((other, _)) = self.platforms.get(&name) {
            let msg = format!(
                "platform `{name}` is defined twice (also in {})",
                self.files[*other].name
            );
            return Err(self.err(file, p.span(), Some(format!("platform.{name}")), &msg));
        }
        self.platforms.insert(name, (file, p));
        Ok(())
    }

    /// A switch chip: its size in lanes and ports, its latency, its basis.
    fn collect_chip(
        &mut self,
        file: usize,
        name: String,
        c: Spanned<RawChip>,
    ) -> Result<(), ScenarioError> {
        let key = Some(format!("chip.{name}"));
        if self.chips.iter().any(|x| x.name == name) {
            return Err(self.err(
                file,
                c.span(),
                key,
                &format!("chip `{name}` is already defined (built in or earlier)"),
            ));
        }
        let r = c.get_ref();
        let (lanes, ports) = (r.lanes.get_ref().value, r.ports.get_ref().value);
        if lanes == 0 || lanes > 1024 || !(2..=256).contains(&ports) {
            return Err(self.err(
                file,
                c.span(),
                key,
                "a switch chip needs 1..=1024 lanes and 2..=256 ports",
            ));
        }
        let ck = format!("chip.{name}");
        self.check_param(
            file,
            &r.latency_ns,
            Rule::Latency,
            &format!("{ck}.latency_ns"),
        )?;
        let mut basis = Provenance::new();
        basis.insert("lanes".into(), r.lanes.get_ref().basis.clone());
        basis.insert("ports".into(), r.ports.get_ref().basis.clone());
        basis.insert("latency_ns".into(), r.latency_ns.get_ref().basis.clone());
        if let Some(c) = &r.credits {
            basis.insert("credits".into(), c.get_ref().basis.clone());
        }
        self.chips.push(ChipSpec {
            name: name.clone(),
            description: r.description.clone(),
            lanes,
            ports,
            latency_ns: r.latency_ns.get_ref().value,
            cluster: r.cluster,
            credits: r.credits.as_ref().map_or([0; 3], |c| c.get_ref().value),
            source: format!("scenario {}", self.files[file].name),
            basis,
        });
        Ok(())
    }

    /// An NTB adapter: its chip (not a cluster switch chip), link, BAR and LUT, requester
    /// ID LUT, cable ports and timing.
    fn collect_adapter(
        &mut self,
        file: usize,
        name: String,
        a: Spanned<RawAdapter>,
    ) -> Result<(), ScenarioError> {
        let key = format!("adapter.{name}");
        if self.adapters.iter().any(|x| x.name == name) {
            return Err(self.err(
                file,
                a.span(),
                Some(key),
                &format!("adapter `{name}` is already defined (built in or earlier)"),
            ));
        }
        let r = a.get_ref();
        let chip = self.find_board_chip(
            file,
            &r.chip,
            &format!("{key}.chip"),
            "an adapter's chip cannot be a cluster switch chip",
        )?;
        let link = self.link(file, &r.link, &format!("{key}.link"))?;
        let (bar, win) = (r.bar_size.get_ref().value.0, r.lut_windows.get_ref().value);
        self.check_lut(
            file,
            r.bar_size.span(),
            r.lut_windows.span(),
            bar,
            win,
            &key,
        )?;
        let (ent, res) = (
            r.rid_lut_entries.get_ref().value,
            r.rid_reserved.get_ref().value,
        );
        if ent == 0 || ent > 256 || res >= ent {
            return Err(self.err(
                file,
                r.rid_lut_entries.span(),
                Some(format!("{key}.rid_lut_entries")),
                "rid_lut_entries must be 1..=256 and greater than rid_reserved",
            ));
        }
        let ports = r.ports.as_ref().map_or(1, |p| p.get_ref().value);
        if ports == 0 || ports > 8 {
            return Err(self.err(
                file,
                r.ports.as_ref().map_or(a.span(), |p| p.span()),
                Some(format!("{key}.ports")),
                "ports must be 1..=8",
            ));
        }
        let (timing, mut basis) = self.timing_table(
            file,
            &r.timing,
            adapter_rule,
            &ADAPTER_TIMING_KEYS,
            &format!("{key}.timing"),
        )?;
        basis.insert("bar_size".into(), r.bar_size.get_ref().basis.clone());
        basis.insert("lut_windows".into(), r.lut_windows.get_ref().basis.clone());
        basis.insert(
            "rid_lut_entries".into(),
            r.rid_lut_entries.get_ref().basis.clone(),
        );
        basis.insert(
            "rid_reserved".into(),
            r.rid_reserved.get_ref().basis.clone(),
        );
        if let Some(p) = &r.ports {
            basis.insert("ports".into(), p.get_ref().basis.clone());
        }
        self.adapters.push(Arc::new(AdapterSpec {
            name: name.clone(),
            description: r.description.clone(),
            chip: self.chips[chip as usize].name.clone(),
            gen: link.gen,
            width: link.width,
            bar_size: bar,
            lut_windows: win,
            rid_lut_entries: ent,
            rid_reserved: res,
            ports,
            timing: timing.into_iter().collect(),
            source: format!("scenario {}", self.files[file].name),
            basis,
        }));
        Ok(())
    }

    /// A device model: what devices may take from it (link, DMA mask, BARs without
    /// addresses, timing), checked once here — or, when it names a base, once every
    /// file's parts are in.
    pub(super) fn collect_device_model(
        &mut self,
        file: usize,
        name: String,
        m: Spanned<RawDeviceModel>,
    ) -> Result<(), ScenarioError> {
        let key = format!("device_model.{name}");
        if !valid_name(&name) {
            return Err(self.err(
                file,
                m.span(),
                Some(key),
                "device model names use letters, digits, `_` and `-`",
            ));
        }
        let other = self.device_models.get(&name).map(|o| o.file).or_else(|| {
            let pending = self.pending_models.iter();
            pending
                .filter(|(_, n, _)| *n == name)
                .map(|(f, _, _)| *f)
                .next()
        });
        if let Some(other) = other {
            let msg = format!(
                "device model `{name}` is defined twice (also in {})",
                self.files[other].name
            );
            return Err(self.err(file, m.span(), Some(key), &msg));
        }
        if m.get_ref().base.is_some() {
            self.pending_models.push((file, name, m));
            return Ok(());
        }
        let model = self.check_device_model(file, &name, m)?;
        self.device_models.insert(name, model);
        Ok(())
    }

    /// Checks a device model's keys (its base already applied).
    pub(super) fn check_device_model(
        &self,
        file: usize,
        name: &str,
        m: Spanned<RawDeviceModel>,
    ) -> Result<DeviceModel, ScenarioError> {
        let key = format!("device_model.{name}");
        let r = m.get_ref();
        if let Some(l) = &r.link {
            self.link(file, l, &format!("{key}.link"))?;
        }
        if let Some(mask) = &r.dma_mask_bits {
            self.check_mask(file, mask, &key)?;
        }
        for (bi, b) in r.bars.iter().flatten().enumerate() {
            if let Some(a) = &b.get_ref().address {
                return Err(self.err(
                    file,
                    a.span(),
                    Some(format!("{key}.bars[{bi}].address")),
                    "a fixed BAR address belongs to a device, not to its model",
                ));
            }
        }
        let timing = self.timing_table(
            file,
            &r.timing,
            device_rule,
            &DEVICE_TIMING_KEYS,
            &format!("{key}.timing"),
        )?;
        Ok(DeviceModel {
            file,
            raw: m,
            timing,
        })
    }

    /// A DMA mask of 32..=64 bits (`key` is the part's key path).
    pub(super) fn check_mask(
        &self,
        file: usize,
        m: &Spanned<u8>,
        key: &str,
    ) -> Result<u8, ScenarioError> {
        if !(32..=64).contains(m.get_ref()) {
            return Err(self.err(
                file,
                m.span(),
                Some(format!("{key}.dma_mask_bits")),
                "dma_mask_bits must be 32..=64",
            ));
        }
        Ok(*m.get_ref())
    }

    /// An NTB's BAR (a power of two, at least 1 MiB) and its LUT windows (a power of
    /// two, each at least 4 KiB).
    pub(super) fn check_lut(
        &self,
        file: usize,
        bar_span: Range<usize>,
        win_span: Range<usize>,
        bar: u64,
        windows: u32,
        key: &str,
    ) -> Result<(), ScenarioError> {
        if !bar.is_power_of_two() || bar < MIB {
            return Err(self.err(
                file,
                bar_span,
                Some(format!("{key}.bar_size")),
                &format!(
                    "an NTB BAR must be a power of two of at least 1 MiB, not {}",
                    fmt_size(bar)
                ),
            ));
        }
        if windows == 0 || !windows.is_power_of_two() || bar / (windows as u64) < 4096 {
            return Err(self.err(
                file,
                win_span,
                Some(format!("{key}.lut_windows")),
                &format!(
                    "lut_windows must be a power of two dividing the {} BAR into windows of at least 4 KiB",
                    fmt_size(bar)
                ),
            ));
        }
        Ok(())
    }

    /// A chip by name: built in, or defined by the scenario so far.
    pub(super) fn find_chip(
        &self,
        file: usize,
        name: &Spanned<String>,
        key: &str,
    ) -> Result<u32, ScenarioError> {
        self.chips
            .iter()
            .position(|c| &c.name == name.get_ref())
            .map(|i| i as u32)
            .ok_or_else(|| {
                let known = name_list(self.chips.iter().map(|c| c.name.as_str()));
                self.err(
                    file,
                    name.span(),
                    Some(key.into()),
                    &format!("unknown chip `{}` (known: {known})", name.get_ref()),
                )
            })
    }

    /// A chip that may sit on a board or in an adapter (not a cluster switch).
    pub(super) fn find_board_chip(
        &self,
        file: usize,
        name: &Spanned<String>,
        key: &str,
        why_not: &str,
    ) -> Result<u32, ScenarioError> {
        let chip = self.find_chip(file, name, key)?;
        if self.chips[chip as usize].cluster {
            return Err(self.err(file, name.span(), Some(key.into()), why_not));
        }
        Ok(chip)
    }

    /// A PCIe link: generation 1..=5 and a width PCIe has.
    pub(super) fn link(
        &self,
        file: usize,
        l: &Spanned<RawLink>,
        key: &str,
    ) -> Result<Link, ScenarioError> {
        let r = l.get_ref();
        if !(1..=5).contains(&r.gen) {
            return Err(self.err(
                file,
                l.span(),
                Some(format!("{key}.gen")),
                &format!("PCIe generation must be 1..=5, not {}", r.gen),
            ));
        }
        if ![1, 2, 4, 8, 12, 16, 32].contains(&r.width) {
            return Err(self.err(
                file,
                l.span(),
                Some(format!("{key}.width")),
                &format!(
                    "link width must be 1, 2, 4, 8, 12, 16 or 32, not {}",
                    r.width
                ),
            ));
        }
        Ok(Link {
            gen: r.gen,
            width: r.width,
            cable: r.cable,
        })
    }
}
