//! A host's switches: the PCIe switches on its boards (`[[host.switch]]`) and its NTB
//! adapters (`[[host.ntb]]`). An NTB adapter is a switch chip of its own whose one
//! internal function is the NTB: its register BAR and its LUT BAR, whose windows
//! translate into other hosts' memory.

use std::sync::Arc;

use toml::Spanned;

use super::{HostBuild, Pending};
use crate::catalog::AdapterSpec;
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;

/// Size of an NTB function's register BAR (assumption: 128 KiB of 32-bit MMIO).
const NTB_REG_BAR: u64 = 128 << 10;

impl HostBuild<'_> {
    /// A switch on one of the host's boards (not a cluster switch chip).
    pub(super) fn switch(
        &mut self,
        topo: &mut Topology,
        si: usize,
        s: &Spanned<RawSwitch>,
    ) -> Result<(), ScenarioError> {
        let r = s.get_ref();
        let key = format!("{}.switch[{si}]", self.hkey);
        let chip = self.b.find_board_chip(
            self.file,
            &r.chip,
            &format!("{key}.chip"),
            "a cluster switch chip goes in [[cluster_switch]], not inside a host",
        )?;
        let link = self.b.link(self.file, &r.link, &format!("{key}.link"))?;
        let id = self.new_node(
            topo,
            r.name.get_ref().clone(),
            NodeKind::Switch {
                chip,
                adapter: None,
            },
            Some(link),
            64,
            vec![],
        );
        self.claim(&r.name, &format!("{key}.name"), id)?;
        self.pending.push(Pending {
            node: id,
            parent: r.parent.clone(),
            key: format!("{key}.parent"),
        });
        Ok(())
    }

    /// An NTB adapter: its chip's node (a switch) with the NTB function below it. Its
    /// link, BAR size and LUT windows are the adapter's unless the host says otherwise.
    pub(super) fn ntb(
        &mut self,
        topo: &mut Topology,
        ni: usize,
        n: &Spanned<RawNtb>,
    ) -> Result<(), ScenarioError> {
        let (b, file) = (self.b, self.file);
        let r = n.get_ref();
        let key = format!("{}.ntb[{ni}]", self.hkey);
        let spec = self.adapter(&key, r)?;
        let chip = b
            .chips
            .iter()
            .position(|c| c.name == spec.chip)
            .expect("adapter chips are validated") as u32;
        let link = match &r.link {
            Some(l) => b.link(file, l, &format!("{key}.link"))?,
            None => Link {
                gen: spec.gen,
                width: spec.width,
                cable: false,
            },
        };
        let bar_size = r
            .bar_size
            .as_ref()
            .map(|b| b.get_ref().0)
            .unwrap_or(spec.bar_size);
        let windows = r
            .lut_windows
            .as_ref()
            .map(|w| *w.get_ref())
            .unwrap_or(spec.lut_windows);
        if r.bar_size.is_some() || r.lut_windows.is_some() {
            let bs = r.bar_size.as_ref().map_or(n.span(), |b| b.span());
            let ws = r.lut_windows.as_ref().map_or(n.span(), |w| w.span());
            b.check_lut(file, bs, ws, bar_size, windows, &key)?;
        }
        let ntb_id = NtbId::from_index(topo.ntbs.len());
        let chip_node = self.new_node(
            topo,
            r.name.get_ref().clone(),
            NodeKind::Switch {
                chip,
                adapter: Some(ntb_id),
            },
            Some(link),
            64,
            vec![],
        );
        self.claim(&r.name, &format!("{key}.name"), chip_node)?;
        let bars = vec![
            Bar {
                index: 0,
                size: NTB_REG_BAR,
                bits64: false,
                prefetchable: false,
                addr: 0,
            },
            Bar {
                index: 2,
                size: bar_size,
                bits64: true,
                prefetchable: true,
                addr: u64::MAX,
            },
        ];
        let fn_node = self.new_node(
            topo,
            format!("{}/ntb", r.name.get_ref()),
            NodeKind::NtbFunction { ntb: ntb_id },
            None,
            64,
            bars,
        );
        topo.nodes[fn_node.index()].parent = Some(chip_node);
        topo.nodes[chip_node.index()].children.push(fn_node);
        self.pending.push(Pending {
            node: chip_node,
            parent: r.parent.clone(),
            key: format!("{key}.parent"),
        });
        topo.ntbs.push(Ntb {
            host: self.id,
            name: r.name.get_ref().clone(),
            adapter: spec,
            chip_node,
            fn_node,
            lut_windows: windows,
            window_size: bar_size / windows as u64,
            window_bar: 2,
            cables: vec![],
        });
        self.host.ntbs.push(ntb_id);
        Ok(())
    }

    /// The adapter an NTB names, built in or defined by the scenario.
    fn adapter(&self, key: &str, r: &RawNtb) -> Result<Arc<AdapterSpec>, ScenarioError> {
        self.b
            .adapters
            .iter()
            .find(|a| &a.name == r.adapter.get_ref())
            .cloned()
            .ok_or_else(|| {
                let known: Vec<&str> = self.b.adapters.iter().map(|a| a.name.as_str()).collect();
                self.err(
                    r.adapter.span(),
                    format!("{key}.adapter"),
                    &format!(
                        "unknown NTB adapter `{}` (known: {})",
                        r.adapter.get_ref(),
                        name_list(known)
                    ),
                )
            })
    }
}
