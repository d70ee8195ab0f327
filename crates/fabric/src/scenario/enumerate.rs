//! Enumeration of one host's PCIe tree, as firmware does it: bus numbers and requester
//! IDs depth-first from each root port, then BAR placement — each pool (32-bit below
//! 4 GiB, 64-bit above) sized bottom-up and packed top-down, largest alignment first,
//! with 1 MiB-granular bridge windows — and finally the host's sorted address map,
//! where any overlap (of RAM, or of BARs written at fixed addresses) is refused.

use std::collections::HashSet;
use std::ops::Range;

use super::MIB;
use crate::topology::*;
use crate::units::fmt_size;

/// Bus numbers and requester IDs for every node below `roots`, in tree order: each root
/// complex takes the next bus, its root ports are devices 1..=31 on it.
pub(super) fn number_buses(topo: &mut Topology, roots: &[PcieNodeId]) -> Result<(), String> {
    let mut bus: u32 = 0;
    for &rc in roots.iter() {
        let root_bus = bus;
        bus += 1;
        topo.nodes[rc.index()].rid = Rid::new(root_bus as u8, 0, 0);
        let kids = topo.nodes[rc.index()].children.clone();
        for (port, &c) in kids.iter().enumerate() {
            if port >= 31 {
                return Err(format!(
                    "root complex {} has more than 31 root ports",
                    topo.nodes[rc.index()].name
                ));
            }
            let port_rid = Rid::new(root_bus as u8, port as u8 + 1, 0);
            enumerate(topo, c, rc, 1, port_rid, &mut bus)?;
        }
    }
    Ok(())
}

/// Assigns buses and requester IDs below a root port, depth-first.
fn enumerate(
    topo: &mut Topology,
    id: PcieNodeId,
    rc: PcieNodeId,
    depth: u16,
    port_rid: Rid,
    bus: &mut u32,
) -> Result<(), String> {
    if *bus > 255 {
        return Err("PCI bus numbers exhausted (256 per segment)".into());
    }
    let b = *bus as u8;
    *bus += 1;
    {
        let n = &mut topo.nodes[id.index()];
        n.depth = depth;
        n.root = rc;
        n.port_rid = Some(port_rid);
        n.rid = Rid::new(b, 0, 0);
    }
    if topo.nodes[id.index()].is_switch() {
        // The switch's internal bus carries its downstream ports.
        if *bus > 255 {
            return Err("PCI bus numbers exhausted (256 per segment)".into());
        }
        let internal = *bus as u8;
        *bus += 1;
        let kids = topo.nodes[id.index()].children.clone();
        for (port, &c) in kids.iter().enumerate() {
            if matches!(topo.nodes[c.index()].kind, NodeKind::NtbFunction { .. }) {
                let n = &mut topo.nodes[c.index()];
                n.depth = depth + 1;
                n.root = rc;
                n.rid = Rid::new(internal, 0, 0);
                continue;
            }
            enumerate(
                topo,
                c,
                rc,
                depth + 1,
                Rid::new(internal, port as u8 + 1, 0),
                bus,
            )?;
        }
    }
    Ok(())
}

#[derive(Clone, Copy, Default)]
struct Need {
    size: u64,
    align: u64,
}

fn is_high(b: &Bar) -> bool {
    b.addr == u64::MAX
}

/// Bottom-up sizing of one pool (false = below 4 GiB, true = above) for `id`'s subtree:
/// items (sorted by `items_of`) packed; a bridge window is 1 MiB granular.
fn size_pool(
    topo: &Topology,
    id: PcieNodeId,
    high: bool,
    fixed: &HashSet<(PcieNodeId, u8)>,
) -> Need {
    let items = items_of(topo, id, high, fixed);
    let mut off = 0u64;
    let mut align = 1;
    for (_, need) in &items {
        off = off.next_multiple_of(need.align) + need.size;
        align = align.max(need.align);
    }
    Need {
        size: off.next_multiple_of(MIB),
        align: align.max(MIB),
    }
}

enum Item {
    Bar(u8),
    Child(PcieNodeId),
}

fn items_of(
    topo: &Topology,
    id: PcieNodeId,
    high: bool,
    fixed: &HashSet<(PcieNodeId, u8)>,
) -> Vec<(Item, Need)> {
    let n = &topo.nodes[id.index()];
    let mut items = Vec::new();
    for b in &n.bars {
        if is_high(b) == high && !fixed.contains(&(id, b.index)) {
            items.push((
                Item::Bar(b.index),
                Need {
                    size: b.size,
                    align: b.size,
                },
            ));
        }
    }
    for &c in &n.children {
        let need = size_pool(topo, c, high, fixed);
        if need.size > 0 && subtree_has(topo, c, high, fixed) {
            items.push((Item::Child(c), need));
        }
    }
    // Largest alignment first: packs without padding when sizes are multiples of alignments.
    items.sort_by_key(|i| std::cmp::Reverse(i.1.align));
    items
}

fn subtree_has(
    topo: &Topology,
    id: PcieNodeId,
    high: bool,
    fixed: &HashSet<(PcieNodeId, u8)>,
) -> bool {
    let n = &topo.nodes[id.index()];
    n.bars
        .iter()
        .any(|b| is_high(b) == high && !fixed.contains(&(id, b.index)))
        || n.children
            .iter()
            .any(|&c| subtree_has(topo, c, high, fixed))
}

fn place(
    topo: &mut Topology,
    id: PcieNodeId,
    high: bool,
    base: u64,
    fixed: &HashSet<(PcieNodeId, u8)>,
) {
    let need = size_pool(topo, id, high, fixed);
    let window = Some((base, base + need.size));
    if high {
        topo.nodes[id.index()].window64 = window;
    } else {
        topo.nodes[id.index()].window32 = window;
    }
    let items = items_of(topo, id, high, fixed);
    let mut off = base;
    for (item, need) in items {
        off = off.next_multiple_of(need.align);
        match item {
            Item::Bar(i) => {
                let bar = topo.nodes[id.index()]
                    .bars
                    .iter_mut()
                    .find(|b| b.index == i)
                    .expect("bar exists");
                bar.addr = off;
            }
            Item::Child(c) => place(topo, c, high, off, fixed),
        }
        off += need.size;
    }
}

/// Places every BAR of a host and builds its sorted address map.
pub(super) fn place_host(
    topo: &mut Topology,
    host: &mut Host,
    fixed_list: &[(PcieNodeId, u8, Range<usize>)],
) -> Result<(), (String, Option<Range<usize>>)> {
    let fixed: HashSet<(PcieNodeId, u8)> = fixed_list.iter().map(|f| (f.0, f.1)).collect();
    for high in [false, true] {
        let (mut cursor, limit) = if high {
            (host.mmio64_base, u64::MAX)
        } else {
            host.mmio32
        };
        for &rc in &host.roots.clone() {
            for c in topo.nodes[rc.index()].children.clone() {
                if !subtree_has(topo, c, high, &fixed) {
                    continue;
                }
                let need = size_pool(topo, c, high, &fixed);
                cursor = cursor.next_multiple_of(need.align);
                if cursor.checked_add(need.size).is_none_or(|end| end > limit) {
                    let what = if high {
                        "64-bit"
                    } else {
                        "32-bit (below 4 GiB)"
                    };
                    return Err((
                        format!(
                            "{what} MMIO window of host `{}` exhausted: `{}` needs {} more",
                            host.name,
                            topo.nodes[c.index()].name,
                            fmt_size(need.size)
                        ),
                        None,
                    ));
                }
                place(topo, c, high, cursor, &fixed);
                cursor += need.size;
            }
        }
    }
    let mut regions = host.regions.clone();
    for &id in &host.nodes {
        for b in &topo.nodes[id.index()].bars {
            regions.push(Region {
                start: b.addr,
                end: b.end(),
                owner: Owner::Bar {
                    node: id,
                    bar: b.index,
                },
            });
        }
    }
    regions.sort_by_key(|r| (r.start, r.end));
    for w in regions.windows(2) {
        if w[1].start < w[0].end {
            let label = |r: &Region| match r.owner {
                Owner::Ram { node, .. } => format!("RAM of node {node}"),
                Owner::Bar { node, bar } => {
                    format!("BAR{bar} of `{}`", topo.nodes[node.index()].name)
                }
            };
            let span = [w[0], w[1]].iter().find_map(|r| match r.owner {
                Owner::Bar { node, bar } => fixed_list
                    .iter()
                    .find(|f| f.0 == node && f.1 == bar)
                    .map(|f| f.2.clone()),
                _ => None,
            });
            return Err((
                format!(
                    "overlapping windows: {} [{:#x}, {:#x}) and {} [{:#x}, {:#x})",
                    label(&w[0]),
                    w[0].start,
                    w[0].end,
                    label(&w[1]),
                    w[1].start,
                    w[1].end
                ),
                span,
            ));
        }
    }
    host.regions = regions;
    Ok(())
}
