//! The `[[platform.X.interconnect]]` links between packages: which pairs are joined
//! (from the distance matrices) and what kind of link (from the CPU model).

use std::collections::BTreeSet;
use std::fmt::Write;

use super::PLATFORM;
use crate::layout::Layout;
use crate::model::Machine;

/// One `[[platform.X.interconnect]]` per link; none with a single package.
pub(super) fn interconnect_toml(m: &Machine, packages: usize, links: &[(usize, usize)]) -> String {
    let mut out = String::new();
    if packages >= 2 {
        let kind = interconnect_kind(m);
        for (a, b) in links {
            let _ = writeln!(out, "[[platform.{PLATFORM}.interconnect]]");
            let _ = writeln!(out, "ends = [\"pkg{a}\", \"pkg{b}\"]");
            let _ = writeln!(
                out,
                "kind = \"{kind}\"   # assumption: inferred from the CPU model; links inferred from the distance matrix"
            );
            let _ = writeln!(out);
        }
    }
    out
}

fn interconnect_kind(m: &Machine) -> &'static str {
    let model = m.cpu_model.as_deref().unwrap_or("").to_ascii_lowercase();
    if model.contains("epyc") || model.contains("threadripper") {
        "infinity"
    } else if model.contains("opteron") || model.contains("athlon") {
        "hypertransport"
    } else if model.contains("xeon") {
        let upi = [
            "gold",
            "platinum",
            "silver",
            "bronze",
            "xeon(r) w",
            "xeon(r) 6",
            "max",
        ];
        if upi.iter().any(|k| model.contains(k)) {
            "upi"
        } else {
            "qpi"
        }
    } else {
        "generic"
    }
}

/// Package pairs joined by a link. Two packages: one link. More: the pairs at the
/// smallest distance level (hwloc Package distances when every scenario package is one
/// machine package, else the nearest CPU nodes of each package) that connects every
/// package, widening the level until it does; a full mesh when there is no distance
/// information.
pub(super) fn package_links(m: &Machine, layout: &Layout) -> Vec<(usize, usize)> {
    let packages = layout.packages.len();
    let all: Vec<(usize, usize)> = (0..packages)
        .flat_map(|a| (a + 1..packages).map(move |b| (a, b)))
        .collect();
    if packages <= 2 {
        return all;
    }
    let single: Option<Vec<u64>> = layout
        .packages
        .iter()
        .map(|p| match p.machine_packages.as_slice() {
            [one] => Some(*one as u64),
            _ => None,
        })
        .collect();
    let package_matrix = single.as_ref().and_then(|ids| {
        m.distances
            .iter()
            .find(|d| {
                d.object_type.eq_ignore_ascii_case("Package")
                    && d.kind & 8 == 0
                    && ids.iter().all(|i| d.ids.contains(i))
            })
            .map(|d| (d, ids))
    });
    let numa = m.numa_distances();
    let dist = |a: usize, b: usize| -> Option<f64> {
        if let Some((pd, ids)) = package_matrix {
            return pd.get(ids[a], ids[b]);
        }
        let d = numa?;
        let mut best: Option<f64> = None;
        for &x in &layout.packages[a].cpu_nodes {
            for &y in &layout.packages[b].cpu_nodes {
                if let Some(v) = d.get(x as u64, y as u64) {
                    best = Some(best.map_or(v, |bv: f64| bv.min(v)));
                }
            }
        }
        best
    };
    let Some(dists) = all
        .iter()
        .map(|&(a, b)| dist(a, b))
        .collect::<Option<Vec<f64>>>()
    else {
        return all;
    };
    let mut levels = dists.clone();
    levels.sort_by(f64::total_cmp);
    levels.dedup();
    for level in levels {
        let linked: Vec<(usize, usize)> = all
            .iter()
            .zip(&dists)
            .filter(|(_, d)| **d <= level + 1e-9)
            .map(|(p, _)| *p)
            .collect();
        if connects(&linked, packages) {
            return linked;
        }
    }
    all
}

/// Links crossed between every two packages (`None` when unreachable).
pub(super) fn package_hops(packages: usize, links: &[(usize, usize)]) -> Vec<Vec<Option<usize>>> {
    (0..packages)
        .map(|from| {
            let mut hops = vec![None; packages];
            hops[from] = Some(0);
            let mut frontier = vec![from];
            let mut h = 0;
            while !frontier.is_empty() {
                h += 1;
                let mut next = Vec::new();
                for &(a, b) in links {
                    for (x, y) in [(a, b), (b, a)] {
                        if frontier.contains(&x) && hops[y].is_none() {
                            hops[y] = Some(h);
                            next.push(y);
                        }
                    }
                }
                frontier = next;
            }
            hops
        })
        .collect()
}

fn connects(links: &[(usize, usize)], n: usize) -> bool {
    let mut reached: BTreeSet<usize> = BTreeSet::from([0]);
    loop {
        let before = reached.len();
        for &(a, b) in links {
            if reached.contains(&a) || reached.contains(&b) {
                reached.insert(a);
                reached.insert(b);
            }
        }
        if reached.len() == before {
            return reached.len() == n;
        }
    }
}
