//! What the hwloc importer refuses or repairs (the policy is in `hwloc`'s module doc):
//! attribute values it drops with a warning, objects that contradict each other, and
//! the PCI addresses that are garbage, missing or repeated.

use std::collections::BTreeMap;
use std::rc::Rc;

use roxmltree::Node;

use super::{obj_type, parse_number, Importer};
use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::{limits, NoteLevel};
use crate::pci::Bdf;

/// The nearest ancestor with a CPU set: every descendant's CPUs must lie within it.
pub(super) struct Ancestor {
    pub(super) cpus: CpuSet,
    pub(super) line: u32,
    pub(super) object: String,
}

/// What a size attribute may hold, and what it is the size of (for messages).
pub(super) struct SizeBound {
    pub(super) max: u64,
    pub(super) max_text: &'static str,
    /// `any machine's node`: what no real value exceeds.
    pub(super) beyond: &'static str,
    /// `the node's`: whose size becomes unknown.
    pub(super) whose: &'static str,
}

pub(super) const NODE_MEMORY: SizeBound = SizeBound {
    max: limits::NODE_BYTES,
    max_text: limits::NODE_BYTES_TEXT,
    beyond: "any machine's node",
    whose: "the node's",
};
pub(super) const MACHINE_MEMORY: SizeBound = SizeBound {
    max: limits::MACHINE_BYTES,
    max_text: limits::MACHINE_BYTES_TEXT,
    beyond: "any machine",
    whose: "the machine's",
};
pub(super) const CACHE_SIZE: SizeBound = SizeBound {
    max: limits::CACHE_BYTES,
    max_text: limits::CACHE_BYTES_TEXT,
    beyond: "any cache",
    whose: "the cache's",
};

/// `NUMANode os_index=1`, or the type alone.
pub(super) fn describe(t: &str, os_index: Option<u32>) -> String {
    match os_index {
        Some(i) => format!("{t} os_index={i}"),
        None => t.to_string(),
    }
}

pub(super) fn line_of(node: Node) -> u32 {
    node.document().text_pos_at(node.range().start).row
}

impl Importer {
    /// Records the first contradiction; the import then fails with it.
    pub(super) fn contradiction(&mut self, node: Node, object: &str, message: String) {
        if self.fault.is_none() {
            self.fault = Some(InspectError::Contradiction {
                path: self.path.clone(),
                line: line_of(node),
                object: object.to_string(),
                message,
            });
        }
    }

    fn attr_warning(&mut self, node: Node, object: &str, message: String) {
        let loc = self.loc(node);
        self.machine
            .note(NoteLevel::Warning, loc, format!("{object}: {message}"));
    }

    /// A size in bytes, when the attribute reads as one within `bound`; else a warning
    /// at the object and `None`.
    pub(super) fn size_attr(
        &mut self,
        node: Node,
        object: &str,
        name: &str,
        bound: &SizeBound,
    ) -> Option<u64> {
        let raw = node.attribute(name)?;
        let why = match parse_number(raw) {
            Some(v) if v <= bound.max => return Some(v),
            Some(_) => format!("is beyond {}, more than {}", bound.max_text, bound.beyond),
            None => "is not a size in bytes".to_string(),
        };
        let whose = bound.whose;
        self.attr_warning(
            node,
            object,
            format!("{name}={raw:?} {why}; {whose} size is taken as unknown"),
        );
        None
    }

    /// `os_index` as a 32-bit number (hwloc's `unsigned`); anything else is warned about
    /// and ignored rather than cut to another object's number.
    pub(super) fn os_index_attr(&mut self, node: Node, t: &str) -> Option<u32> {
        let raw = node.attribute("os_index")?;
        if let Some(v) = parse_number(raw).and_then(|v| u32::try_from(v).ok()) {
            return Some(v);
        }
        self.attr_warning(
            node,
            t,
            format!("os_index={raw:?} is not a 32-bit number; ignored"),
        );
        None
    }

    /// A NUMA node or PU number seen before is a contradiction: the model keys memory,
    /// distances and CPU homes on these numbers, so merging or dropping one would change
    /// the verdict without saying.
    pub(super) fn check_identity(&mut self, node: Node, t: &str, id: u32) {
        let seen = match t {
            "NUMANode" => &mut self.numa_at,
            "PU" => &mut self.pu_at,
            _ => return,
        };
        let line = line_of(node);
        let Some(&first) = seen.get(&id) else {
            seen.insert(id, line);
            return;
        };
        let what = if t == "PU" {
            "two processing units cannot share one CPU number"
        } else {
            "two memories cannot share one node number"
        };
        self.contradiction(
            node,
            &describe(t, Some(id)),
            format!("os_index {id} is also the {t} at line {first}; {what}"),
        );
    }

    /// In an hwloc tree every object's CPUs lie within its parent's; a PU's own number
    /// too. Returns what the object's children are checked against.
    pub(super) fn check_within(
        &mut self,
        node: Node,
        object: &str,
        cpus: Option<&CpuSet>,
        pu: Option<u32>,
        parent: Option<&Rc<Ancestor>>,
    ) -> Option<Rc<Ancestor>> {
        if let Some(p) = parent {
            let outside = cpus
                .and_then(|c| c.difference(&p.cpus).first())
                .map(|c| format!("cpuset holds CPU {c}"))
                .or_else(|| {
                    pu.filter(|&i| !p.cpus.contains(i))
                        .map(|i| format!("os_index {i} is a CPU"))
                });
            if let Some(what) = outside {
                self.contradiction(
                    node,
                    object,
                    format!(
                        "{what}, outside its parent {} (line {}), CPUs {}",
                        p.object,
                        p.line,
                        p.cpus.to_list_string()
                    ),
                );
            }
        }
        match cpus {
            Some(c) => Some(Rc::new(Ancestor {
                cpus: c.clone(),
                line: line_of(node),
                object: object.to_string(),
            })),
            None => parent.cloned(),
        }
    }

    /// NUMA nodes' CPU sets come from their places in one tree: two that share a CPU
    /// are equal or nested. A partial overlap is a contradiction, reported at the node
    /// later in the file.
    pub(super) fn check_node_overlaps(&mut self) {
        let nodes = &self.machine.nodes;
        // Node indexes per CPU, one per distinct set (equal sets are siblings).
        let mut by_cpu: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
        let mut distinct: Vec<&CpuSet> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            if n.cpus.is_empty() || distinct.contains(&&n.cpus) {
                continue;
            }
            distinct.push(&n.cpus);
            for c in n.cpus.iter() {
                by_cpu.entry(c).or_default().push(i);
            }
        }
        let mut clash = None;
        for holders in by_cpu.values_mut() {
            holders.sort_by_key(|&i| nodes[i].cpus.len());
            if let Some(w) = holders
                .windows(2)
                .find(|w| !nodes[w[0]].cpus.is_subset(&nodes[w[1]].cpus))
            {
                clash = Some((w[0], w[1]));
                break;
            }
        }
        let Some((a, b)) = clash else {
            return;
        };
        let (na, nb) = (&nodes[a], &nodes[b]);
        let line = |id: u32| self.numa_at.get(&id).copied().unwrap_or(0);
        let (later, earlier) = if line(na.id) >= line(nb.id) {
            (na, nb)
        } else {
            (nb, na)
        };
        let cpu = na.cpus.intersection(&nb.cpus).first().unwrap_or(0);
        let fault = InspectError::Contradiction {
            path: self.path.clone(),
            line: line(later.id),
            object: describe("NUMANode", Some(later.id)),
            message: format!(
                "cpuset holds CPU {cpu}, which the NUMANode os_index={} at line {} also holds, yet neither node's CPUs contain the other's; no hwloc tree places a CPU so",
                earlier.id,
                line(earlier.id)
            ),
        };
        self.fault.get_or_insert(fault);
    }

    /// A PCI function's address: `None` (with a warning naming what is skipped with it)
    /// when missing or unreadable. A repeated address is kept with a warning: an address
    /// only labels a function, whose locality comes from its place in the tree.
    pub(super) fn pci_address(&mut self, node: Node, t: &str) -> Option<Bdf> {
        let Some(raw) = node.attribute("pci_busid") else {
            // A host bridge has no address of its own; a function must have one.
            if t == "PCIDev" {
                let what = skipped(node);
                self.attr_warning(node, t, format!("no pci_busid; {what}"));
            }
            return None;
        };
        let object = format!("{t} pci_busid={raw:?}");
        let Ok(bdf) = raw.parse::<Bdf>() else {
            let what = if t == "Bridge" {
                "the bridge is skipped; the functions below it hang from its host bridge"
                    .to_string()
            } else {
                skipped(node)
            };
            self.attr_warning(
                node,
                &object,
                format!("not a PCI address (DDDD:BB:DD.F); {what}"),
            );
            return None;
        };
        let line = line_of(node);
        match self.pci_at.get(&bdf) {
            Some((first, first_type)) => {
                let message = format!(
                    "the address of the {first_type} at line {first} too; both functions are kept, told apart by their names"
                );
                self.attr_warning(node, &object, message);
            }
            None => {
                self.pci_at.insert(bdf, (line, t.to_string()));
            }
        }
        Some(bdf)
    }
}

/// `the function is skipped with its OS devices eth0, eth1`: what goes missing.
fn skipped(node: Node) -> String {
    let names: Vec<&str> = node
        .children()
        .filter(|c| c.is_element() && obj_type(*c) == "OSDev")
        .filter_map(|c| c.attribute("name"))
        .collect();
    if names.is_empty() {
        "the function is skipped".to_string()
    } else {
        format!(
            "the function is skipped with its OS devices {}",
            names.join(", ")
        )
    }
}
