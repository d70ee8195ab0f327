//! A host's devices (`[[host.device]]`): each takes what it does not say from its device
//! model, if it names one — kind, DMA mask, BARs, link, timing — and has one PCI
//! function, or up to eight (`functions`), each with its own parent, link and BARs.
//! BARs are checked here (size, width, slots, fixed addresses) and placed later.

use toml::Spanned;

use super::super::rules::{device_rule, DEVICE_TIMING_KEYS};
use super::super::{DeviceModel, MIB};
use super::{HostBuild, Pending, FOUR_GIB};
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;
use crate::units::fmt_size;

/// 64-bit BARs larger than this go above 4 GiB even when not asked (assumption: firmware
/// keeps small 64-bit BARs low to save the high window, large ones high).
const HIGH_BAR_THRESHOLD: u64 = 64 * MIB;

/// One PCI function of a device as written. Its link and BARs may come from a device
/// model in another file: `*_at` say which file and key path to name in errors.
struct FunctionSpec {
    parent: Spanned<String>,
    link: Spanned<RawLink>,
    link_at: (usize, String),
    bars: Vec<Spanned<RawBar>>,
    bars_at: (usize, String),
    bdf: Option<String>,
    key: String,
}

impl<'a> HostBuild<'a> {
    /// A device and its functions (each a node of the host, `name.pfN` when there are
    /// several).
    pub(super) fn device(
        &mut self,
        topo: &mut Topology,
        di: usize,
        d: &Spanned<RawDevice>,
    ) -> Result<(), ScenarioError> {
        let (b, file) = (self.b, self.file);
        let r = d.get_ref();
        let key = format!("{}.device[{di}]", self.hkey);
        let model = self.device_model(&key, r)?;
        let mraw = model.map(|m| m.raw.get_ref());
        let kind = self.device_kind(&key, d, mraw)?;
        let mask = match (
            &r.dma_mask_bits,
            mraw.and_then(|m| m.dma_mask_bits.as_ref()),
        ) {
            (Some(m), _) => b.check_mask(file, m, &key)?,
            (None, Some(m)) => *m.get_ref(),
            (None, None) => 64,
        };
        let dev_id = DeviceId::from_index(topo.devices.len());
        let funcs = self.function_specs(&key, d, model)?;
        self.claim(&r.name, &format!("{key}.name"), PcieNodeId(u32::MAX))?;
        let multi = funcs.len() > 1;
        // Timing: the model's, then the device's own key by key.
        let (mut timing, mut basis) = model.map(|m| m.timing.clone()).unwrap_or_default();
        let (own, own_basis) = b.timing_table(
            file,
            &r.timing,
            device_rule,
            &DEVICE_TIMING_KEYS,
            &format!("{key}.timing"),
        )?;
        timing.extend(own);
        basis.extend(own_basis);
        let has_bars = funcs.iter().any(|f| !f.bars.is_empty());
        let timed_model = b.device_timing(
            file,
            d.span(),
            &key,
            (&timing, basis),
            self.timed,
            kind,
            has_bars,
        )?;
        let mut device = Device {
            host: self.id,
            name: r.name.get_ref().clone(),
            kind,
            model: if r.model.is_empty() {
                mraw.map(|m| m.model.clone()).unwrap_or_default()
            } else {
                r.model.clone()
            },
            functions: vec![],
            labels: vec![],
            timing,
            timed: timed_model,
            device_model: r.device_model.as_ref().map(|m| m.get_ref().clone()),
        };
        for (pf, f) in funcs.into_iter().enumerate() {
            let FunctionSpec {
                parent,
                link,
                link_at,
                bars,
                bars_at,
                bdf,
                key: fkey,
            } = f;
            let link = b.link(link_at.0, &link, &format!("{}.link", link_at.1))?;
            let out =
                self.function_bars(PcieNodeId::from_index(topo.nodes.len()), &bars, &bars_at)?;
            let nname = if multi {
                format!("{}.pf{pf}", r.name.get_ref())
            } else {
                r.name.get_ref().clone()
            };
            let id = self.new_node(
                topo,
                nname,
                NodeKind::Function {
                    device: dev_id,
                    pf: pf as u8,
                },
                Some(link),
                mask,
                out,
            );
            device.functions.push(id);
            device.labels.push(bdf);
            self.pending.push(Pending {
                node: id,
                parent,
                key: format!("{fkey}.parent"),
            });
        }
        self.names
            .get_mut(r.name.get_ref())
            .expect("claimed above")
            .1 = device.functions[0];
        topo.devices.push(device);
        self.host.devices.push(dev_id);
        Ok(())
    }

    /// The device model a device names, if it names one.
    fn device_model(
        &self,
        key: &str,
        r: &RawDevice,
    ) -> Result<Option<&'a DeviceModel>, ScenarioError> {
        let b = self.b;
        Ok(match &r.device_model {
            Some(m) => Some(b.device_models.get(m.get_ref()).ok_or_else(|| {
                let known: Vec<&str> = b.device_models.keys().map(|s| s.as_str()).collect();
                self.err(
                    m.span(),
                    format!("{key}.device_model"),
                    &format!(
                        "unknown device model `{}` (defined: {})",
                        m.get_ref(),
                        name_list(known)
                    ),
                )
            })?),
            None => None,
        })
    }

    /// The device's kind: its own or its model's, and not two different ones.
    fn device_kind(
        &self,
        key: &str,
        d: &Spanned<RawDevice>,
        mraw: Option<&RawDeviceModel>,
    ) -> Result<DeviceKind, ScenarioError> {
        let r = d.get_ref();
        Ok(
            match (r.kind.as_ref().map(|k| *k.get_ref()), mraw.and_then(|m| m.kind)) {
                (Some(k), Some(mk)) if k != mk => {
                    return Err(self.err(
                        r.kind.as_ref().map_or(d.span(), |k| k.span()),
                        format!("{key}.kind"),
                        &format!("the device's kind differs from its model's ({mk:?})"),
                    ))
                }
                (Some(k), _) | (None, Some(k)) => k,
                (None, None) => {
                    return Err(self.err(
                        d.span(),
                        format!("{key}.kind"),
                        "a device needs `kind` (nic, nvme, gpu, rnic or other) or a `device_model` that gives it",
                    ))
                }
            },
        )
    }

    /// The device's functions as written: its `functions`, or one from its `parent` and
    /// `link`. BARs and link come from the device (or function), else from its model.
    fn function_specs(
        &self,
        key: &str,
        d: &Spanned<RawDevice>,
        model: Option<&DeviceModel>,
    ) -> Result<Vec<FunctionSpec>, ScenarioError> {
        let file = self.file;
        let r = d.get_ref();
        let mkey = r
            .device_model
            .as_ref()
            .map(|m| format!("device_model.{}", m.get_ref()))
            .unwrap_or_default();
        let mraw = model.map(|m| m.raw.get_ref());
        // BARs and link: the device's own, else its model's (named in errors where written).
        let (bars, bars_at) = match (&r.bars, mraw.and_then(|m| m.bars.as_ref()), model) {
            (Some(b), _, _) => (b.clone(), (file, key.to_string())),
            (None, Some(b), Some(m)) => (b.clone(), (m.file, mkey.clone())),
            _ => (vec![], (file, key.to_string())),
        };
        let mut funcs: Vec<FunctionSpec> = Vec::new();
        let model_link = model.and_then(|m| m.raw.get_ref().link.clone().map(|l| (l, m.file)));
        match (&r.functions, &r.parent, &r.link) {
            (Some(fs), None, None) => {
                if fs.get_ref().is_empty() || fs.get_ref().len() > 8 {
                    return Err(self.err(
                        fs.span(),
                        format!("{key}.functions"),
                        "a device has 1..=8 functions",
                    ));
                }
                for (fi, f) in fs.get_ref().iter().enumerate() {
                    let fr = f.get_ref();
                    let fkey = format!("{key}.functions[{fi}]");
                    let (bars, bars_at) = match &fr.bars {
                        Some(b) => (b.clone(), (file, fkey.clone())),
                        None => (bars.clone(), bars_at.clone()),
                    };
                    funcs.push(FunctionSpec {
                        parent: fr.parent.clone(),
                        link: fr.link.clone(),
                        link_at: (file, fkey.clone()),
                        bars,
                        bars_at,
                        bdf: fr.bdf.clone(),
                        key: fkey,
                    });
                }
            }
            (None, Some(p), link) => {
                let (link, link_at) = match (link, model_link) {
                    (Some(l), _) => (l.clone(), (file, key.to_string())),
                    (None, Some((l, mf))) => (l, (mf, mkey.clone())),
                    (None, None) => {
                        return Err(self.err(
                            d.span(),
                            format!("{key}.link"),
                            "a device needs `link` (or a `device_model` that gives it)",
                        ))
                    }
                };
                funcs.push(FunctionSpec {
                    parent: p.clone(),
                    link,
                    link_at,
                    bars,
                    bars_at,
                    bdf: r.bdf.clone(),
                    key: key.to_string(),
                })
            }
            (Some(_), _, _) => {
                return Err(self.err(
                    d.span(),
                    key.to_string(),
                    "a multi-PF device gives `functions` instead of `parent` and `link`, not both",
                ))
            }
            _ => {
                return Err(self.err(
                    d.span(),
                    key.to_string(),
                    "a device needs `parent` and `link` (or `functions` for a multi-PF device)",
                ))
            }
        }
        Ok(funcs)
    }

    /// The BARs of function `node` (the next node), checked where they are written
    /// (`bars_at`: the device's or its model's file and key path). Slots count as in a
    /// config header: six 32-bit slots, a 64-bit BAR takes two. A BAR above 4 GiB waits
    /// for placement with address `u64::MAX`; one at a fixed address is noted in `fixed`.
    fn function_bars(
        &mut self,
        node: PcieNodeId,
        bars: &[Spanned<RawBar>],
        bars_at: &(usize, String),
    ) -> Result<Vec<Bar>, ScenarioError> {
        let builder = self.b;
        let mut out = Vec::new();
        let mut index = 0u8;
        for (bi, b) in bars.iter().enumerate() {
            let br = b.get_ref();
            let (bfile, bkey) = (bars_at.0, format!("{}.bars[{bi}]", bars_at.1));
            let err = |span, key, msg: &str| builder.err(bfile, span, Some(key), msg);
            let size = br.size.get_ref().0;
            if !size.is_power_of_two() || size < 16 {
                return Err(err(
                    br.size.span(),
                    format!("{bkey}.size"),
                    &format!("a BAR size must be a power of two of at least 16 bytes, not {size}"),
                ));
            }
            let bits = br.bits.as_ref().map(|b| *b.get_ref()).unwrap_or(64);
            if bits != 32 && bits != 64 {
                return Err(err(
                    br.bits.as_ref().map(|b| b.span()).unwrap_or(b.span()),
                    format!("{bkey}.bits"),
                    "BAR bits must be 32 or 64",
                ));
            }
            if bits == 32 && (br.above_4g == Some(true) || size > FOUR_GIB / 2) {
                return Err(err(
                    b.span(),
                    bkey,
                    "a 32-bit BAR cannot be placed above 4 GiB or exceed 2 GiB",
                ));
            }
            if index > 5 || (bits == 64 && index > 4) {
                return Err(err(
                    b.span(),
                    bkey,
                    "a function has at most six 32-bit BAR slots (a 64-bit BAR takes two)",
                ));
            }
            let above = bits == 64 && (br.above_4g == Some(true) || size > HIGH_BAR_THRESHOLD);
            let mut bar = Bar {
                index,
                size,
                bits64: bits == 64,
                prefetchable: br.prefetchable.unwrap_or(bits == 64),
                addr: if above { u64::MAX } else { 0 },
            };
            if let Some(a) = &br.address {
                let addr = a.get_ref().0;
                let end = addr.checked_add(size);
                if addr % size != 0 || end.is_none_or(|end| bits == 32 && end > FOUR_GIB) {
                    return Err(err(a.span(), format!("{bkey}.address"), &format!("a fixed BAR address must be aligned to its size ({}) and fit its width", fmt_size(size))));
                }
                bar.addr = addr;
                self.fixed.push((node, index, a.span()));
            }
            out.push(bar);
            index += if bits == 64 { 2 } else { 1 };
        }
        Ok(out)
    }
}
