//! Checks of PCIe links: a device running below what both ends of its link can do.

use super::{below_capability, Auditor, Finding, Severity};

impl<'a> Auditor<'a> {
    pub(super) fn links(&mut self) {
        for d in &self.m.pci {
            if d.physfn.is_some() {
                continue;
            }
            // Root ports share their link with the device below; check endpoints
            // and switch upstream ports only.
            let is_switch_up =
                d.is_bridge
                    && d.parent.is_some_and(|p| self.m.pci[p].is_bridge)
                    && self.m.pci.iter().any(|c| {
                        c.is_bridge && c.parent.is_some_and(|p| self.m.pci[p].bdf == d.bdf)
                    });
            if d.is_bridge && !is_switch_up {
                continue;
            }
            let Some(Some((cap_s, cap_w))) = below_capability(self.m, d) else {
                continue;
            };
            let (cur_s, cur_w) = (
                d.link.current_gts.unwrap_or(0.0),
                d.link.current_width.unwrap_or(0),
            );
            let share = (cur_s * cur_w as f64) / (cap_s * cap_w as f64) * 100.0;
            let bdf = d.bdf;
            let width_short = cur_w < cap_w;
            let mut why =
                format!("The link carries about {share:.0}% of the bandwidth both ends support. ");
            if width_short {
                why.push_str("Fewer lanes than both ends have usually means a slot wired narrower than it looks, a riser, or a bad contact.");
            } else {
                why.push_str("A lower speed with full width is often power management (ASPM or the driver lowers the speed while idle): check again under load; if it stays low, the slot, riser or BIOS setting limits it.");
            }
            self.findings.push(
                Finding::new(
                    Severity::Warning,
                    "link-degraded",
                    format!(
                        "{}: PCIe link runs at {} x{cur_w}, below its capability {} x{cap_w}",
                        d.label(),
                        speed_text(cur_s),
                        speed_text(cap_s)
                    ),
                    why,
                    vec![
                        format!("lspci -vv -s {bdf} | grep -E 'LnkCap|LnkSta'   # under load"),
                        format!(
                            "# reseat the card or move it to a slot wired x{cap_w} at {}; check the BIOS PCIe speed setting",
                            speed_text(cap_s)
                        ),
                    ],
                )
                .on(bdf),
            );
        }
        // A card that could do more than its slot: not degraded, but worth knowing.
        for d in &self.m.pci {
            let Some(parent) = d.parent.map(|p| &self.m.pci[p]) else {
                continue;
            };
            if d.is_bridge || d.physfn.is_some() {
                continue;
            }
            let (Some(dw), Some(pw)) = (d.link.max_width, parent.link.max_width) else {
                continue;
            };
            let (Some(ds), Some(ps)) = (d.link.max_gts, parent.link.max_gts) else {
                continue;
            };
            if dw > pw || ds > ps + 0.01 {
                self.findings.push(
                    Finding::new(
                        Severity::Info,
                        "link-slot-limited",
                        format!(
                            "{}: the device can do {} x{dw} but its slot ({}) only {} x{pw}",
                            d.label(),
                            speed_text(ds),
                            parent.bdf,
                            speed_text(ps)
                        ),
                        "The link runs at what the slot allows; the device's full bandwidth needs a wider or faster slot.".to_string(),
                        vec![format!("# move {} to a slot with {} x{dw}", d.label(), speed_text(ds))],
                    )
                    .on(d.bdf),
                );
            }
        }
    }
}

fn speed_text(gts: f64) -> String {
    if gts.fract() == 0.0 {
        format!("{gts:.0} GT/s")
    } else {
        format!("{gts} GT/s")
    }
}
