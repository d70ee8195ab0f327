//! What a scenario declares about hosts and devices once they exist: `[[window]]`s to
//! program into NTB LUTs, `[[lend]]` and `[[borrow]]` (SmartIO device lending), and the
//! `[[fault]]` schedule. They refer to hosts and devices by name, so they are checked
//! against the built topology, after every host and cable.

use toml::Spanned;

use super::{valid_name, Builder, StaticWindow};
use crate::error::{name_list, ScenarioError};
use crate::raw::*;
use crate::topology::*;

impl Builder {
    /// `[[window]]`s as written: their NTB and target are checked when they are programmed
    /// (each keeps where it was written for that).
    pub(super) fn windows(
        &self,
        root: usize,
        raw: &RawFile,
    ) -> Result<Vec<StaticWindow>, ScenarioError> {
        let mut windows = Vec::new();
        for (i, w) in raw.window.iter().enumerate() {
            let r = w.get_ref();
            let size = r.size.get_ref().0;
            if size == 0 {
                return Err(self.err(
                    root,
                    r.size.span(),
                    Some(format!("window[{i}].size")),
                    "a window needs a size > 0",
                ));
            }
            windows.push(StaticWindow {
                ntb: r.ntb.get_ref().clone(),
                to: r.to.get_ref().clone(),
                offset: r.offset.0,
                size,
                at: self.err(root, w.span(), Some(format!("window[{i}]")), ""),
            });
        }
        Ok(windows)
    }

    /// Checks `[[lend]]` and `[[borrow]]`: hosts and devices exist, a function is lent
    /// once, a borrow names a lent function of another host, borrow names are unique.
    pub(super) fn lending(
        &self,
        root: usize,
        raw: &RawFile,
        topo: &Topology,
    ) -> Result<(Vec<LendDecl>, Vec<BorrowDecl>), ScenarioError> {
        let lends = self.lends(root, raw, topo)?;
        let borrows = self.borrows(root, raw, topo, &lends)?;
        Ok((lends, borrows))
    }

    /// `[[lend]]`s: each a function of its host, lent once.
    fn lends(
        &self,
        root: usize,
        raw: &RawFile,
        topo: &Topology,
    ) -> Result<Vec<LendDecl>, ScenarioError> {
        let mut lends: Vec<LendDecl> = Vec::new();
        for (i, l) in raw.lend.iter().enumerate() {
            let r = l.get_ref();
            let host = self.lending_host(root, topo, &r.host, format!("lend[{i}].host"))?;
            let key = format!("lend[{i}].device");
            let function =
                self.lent_function(root, topo, host, r.device.get_ref(), &r.device, key.clone())?;
            if let Some(j) = lends.iter().position(|x| x.function == function) {
                return Err(self.err(
                    root,
                    r.device.span(),
                    Some(key),
                    &format!(
                        "`{}.{}` is already lent by lend[{j}]",
                        r.host.get_ref(),
                        r.device.get_ref()
                    ),
                ));
            }
            lends.push(LendDecl {
                host,
                function,
                device: r.device.get_ref().clone(),
            });
        }
        Ok(lends)
    }

    /// `[[borrow]]`s: each a uniquely named borrow of a function another host lends.
    fn borrows(
        &self,
        root: usize,
        raw: &RawFile,
        topo: &Topology,
        lends: &[LendDecl],
    ) -> Result<Vec<BorrowDecl>, ScenarioError> {
        let mut borrows: Vec<BorrowDecl> = Vec::new();
        for (i, b) in raw.borrow.iter().enumerate() {
            let r = b.get_ref();
            let host = self.lending_host(root, topo, &r.host, format!("borrow[{i}].host"))?;
            let name = r.name.get_ref();
            if !valid_name(name) {
                return Err(self.err(
                    root,
                    r.name.span(),
                    Some(format!("borrow[{i}].name")),
                    "borrow names use letters, digits, `_` and `-`",
                ));
            }
            if let Some(j) = borrows.iter().position(|x| &x.name == name) {
                return Err(self.err(
                    root,
                    r.name.span(),
                    Some(format!("borrow[{i}].name")),
                    &format!("duplicate borrow name `{name}` (also borrow[{j}])"),
                ));
            }
            let key = format!("borrow[{i}].device");
            let dev = r.device.get_ref();
            let (lname, rest) = dev.split_once('.').ok_or_else(|| {
                self.err(
                    root,
                    r.device.span(),
                    Some(key.clone()),
                    &format!("`{dev}` is not `lender.device`"),
                )
            })?;
            let lender = topo.host_by_name(lname).ok_or_else(|| {
                self.err(
                    root,
                    r.device.span(),
                    Some(key.clone()),
                    &format!("`{dev}` names unknown host `{lname}`"),
                )
            })?;
            let function = self.lent_function(root, topo, lender, rest, &r.device, key.clone())?;
            if !lends.iter().any(|l| l.function == function) {
                return Err(self.err(
                    root,
                    r.device.span(),
                    Some(key),
                    &format!("`{dev}` is borrowed but no [[lend]] lends it"),
                ));
            }
            if lender == host {
                return Err(self.err(
                    root,
                    r.host.span(),
                    Some(format!("borrow[{i}].host")),
                    &format!(
                        "host `{}` cannot borrow its own device `{dev}`",
                        r.host.get_ref()
                    ),
                ));
            }
            borrows.push(BorrowDecl {
                name: name.clone(),
                host,
                function,
                device: dev.clone(),
                exclusive: r.exclusive,
            });
        }
        Ok(borrows)
    }

    /// The host a lend or borrow names (at `s`, key `key`).
    fn lending_host(
        &self,
        root: usize,
        topo: &Topology,
        s: &Spanned<String>,
        key: String,
    ) -> Result<HostId, ScenarioError> {
        topo.host_by_name(s.get_ref()).ok_or_else(|| {
            let names: Vec<&String> = topo.hosts.iter().map(|h| &h.name).collect();
            self.err(
                root,
                s.span(),
                Some(key),
                &format!(
                    "unknown host `{}` (hosts: {})",
                    s.get_ref(),
                    name_list(names)
                ),
            )
        })
    }

    /// The function `dev` of `host`: a device's name (its function 0) or `device.pfN`.
    fn lent_function(
        &self,
        root: usize,
        topo: &Topology,
        host: HostId,
        dev: &str,
        s: &Spanned<String>,
        key: String,
    ) -> Result<PcieNodeId, ScenarioError> {
        let (d, pf) = match dev.rsplit_once(".pf") {
            Some((d, p)) => (d, p.parse::<usize>().ok()),
            None => (dev, Some(0)),
        };
        let h = topo.host(host);
        let found = topo
            .device_by_name(host, d)
            .and_then(|id| pf.and_then(|pf| topo.devices[id.index()].functions.get(pf)));
        found.copied().ok_or_else(|| {
            let names: Vec<&String> = h
                .devices
                .iter()
                .map(|&d| &topo.devices[d.index()].name)
                .collect();
            self.err(
                root,
                s.span(),
                Some(key),
                &format!(
                    "host `{}` has no device function `{dev}` (devices: {})",
                    h.name,
                    name_list(names)
                ),
            )
        })
    }

    /// `[[fault]]`s, each checked against the topology; names unique.
    pub(super) fn faults(
        &self,
        root: usize,
        raw: &RawFile,
        topo: &Topology,
    ) -> Result<Vec<crate::faults::FaultSpec>, ScenarioError> {
        let mut out: Vec<crate::faults::FaultSpec> = Vec::with_capacity(raw.fault.len());
        for (i, f) in raw.fault.iter().enumerate() {
            let r = f.get_ref();
            let spec = crate::faults::validate(topo, r).map_err(|(key, msg)| {
                let span = match key {
                    "kind" => r.kind.span(),
                    "at" => r.at.span(),
                    "target" => r.target.span(),
                    _ => r.duration.as_ref().map_or(f.span(), |d| d.span()),
                };
                self.err(root, span, Some(format!("fault[{i}].{key}")), &msg)
            })?;
            if let (Some(n), Some(first)) = (
                &r.name,
                out.iter()
                    .position(|o| o.name.is_some() && o.name == spec.name),
            ) {
                return Err(self.err(
                    root,
                    n.span(),
                    Some(format!("fault[{i}].name")),
                    &format!("duplicate fault name `{}` (fault[{first}])", n.get_ref()),
                ));
            }
            out.push(spec);
        }
        Ok(out)
    }
}
