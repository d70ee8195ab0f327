//! `nudma advise` as a library: the placements a person could change in a scenario's
//! workloads — each process's NUMA node and its buffers', the PF whose netdev it uses, the
//! netdev mode — each run in the simulation beside the scenario as it is, and the ones that
//! gain ranked by the objective, with the reason and the commands that apply them.

use std::collections::BTreeMap;

use fabric::scenario::Source;
use fabric::Topology;
use serde_json::{json, Value};
use studies::run::overrides::{self, Override, Point};
use studies::run::{self, keys};

/// What a placement is judged by.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Objective {
    /// The geometric mean of every workload's throughput ratio to the scenario's.
    Throughput,
    /// The geometric mean of every workload's tail latency ratio (the scenario's over the
    /// candidate's: above 1 is better).
    P99,
    /// The worst-off workload's throughput ratio: a change gains only if every workload does.
    Fairness,
}

impl std::str::FromStr for Objective {
    type Err = anyhow::Error;
    fn from_str(s: &str) -> anyhow::Result<Objective> {
        match s {
            "throughput" => Ok(Objective::Throughput),
            "p99" => Ok(Objective::P99),
            "fairness" => Ok(Objective::Fairness),
            other => {
                anyhow::bail!("objective `{other}`: use \"throughput\", \"p99\" or \"fairness\"")
            }
        }
    }
}

/// A workload's throughput: the first of these metrics its row has.
const THROUGHPUT: [&str; 7] = [
    "throughput_gbit_s",
    "throughput_gbyte_s",
    "mpps",
    "mops",
    "kops",
    "total_kiops",
    "ops_per_sec",
];

/// A workload's tail latency: the first of these its row has (a mean where it has no tail).
const TAIL: [&str; 6] = [
    "p99_us",
    "latency_ns_p99",
    "write_p99_us",
    "latency_us",
    "latency_ns",
    "pingpong_ns",
];

/// Placement keys whose values are words: a key's alternatives are the words of the set its
/// current value is in (`placement` means an RDMA memcached's or a Tyche application's).
const WORDS: [(&str, &[&str]); 3] = [
    ("server_placement", &["local", "remote"]),
    (
        "placement",
        &["both_local", "both_remote", "client_local_server_remote"],
    ),
    ("placement", &["balanced", "zmio", "affine"]),
];

/// Below this gain a change is noise, not advice.
const MIN_GAIN: f64 = 1.01;

/// One change a person could make: the `--set` keys and values, and what it means.
#[derive(Clone, Debug)]
pub struct Change {
    pub sets: Vec<(String, String)>,
    pub what: String,
}

pub struct Recommendation {
    pub change: Change,
    pub predicted: BTreeMap<String, f64>,
    pub gain: f64,
    pub why: String,
    pub commands: Vec<String>,
}

pub struct Advice {
    pub scenario: String,
    pub objective: Objective,
    pub baseline: BTreeMap<String, f64>,
    /// Placements run (the baseline not counted), and those the scenario refused.
    pub searched: usize,
    pub refused: Vec<(Change, String)>,
    pub recommendations: Vec<Recommendation>,
}

/// One run of the scenario: each workload's metrics (`workload.metric`) and the counters.
struct Outcome {
    metrics: BTreeMap<String, f64>,
    counters: Value,
}

/// What to search: the scenario (with `--set`s of one value each), the objective, how
/// many placements to run at most, and the keys (or prefixes) to keep as they are.
pub struct Search<'a> {
    pub scenario: &'a str,
    pub sets: &'a [Override],
    pub objective: Objective,
    pub budget: usize,
    pub fixed: &'a [String],
    pub seed: u64,
}

/// Advises on a scenario: runs it as it is, then each placement change of its workloads
/// (at most `budget` of them, keys under a `fixed` prefix kept), and ranks the changes
/// that gain under the objective, best first, with the best two of different keys also
/// tried together.
pub fn advise(s: &Search) -> anyhow::Result<Advice> {
    let (arg, objective, seed) = (s.scenario, s.objective, s.seed);
    if s.budget == 0 {
        anyhow::bail!("--budget 0: give the number of placements to try (at least 1)");
    }
    let src = super::compare::scenario(arg)?;
    let mut set = keys::keys_of(&src).map_err(anyhow::Error::msg)?;
    let mut base_sets = Vec::new();
    for o in s.sets {
        let [v] = o.values.as_slice() else {
            anyhow::bail!(
                "--set {}: advise starts from one placement; give one value ({} given)",
                o.key,
                o.values.len()
            );
        };
        let v = v.to_string().trim().trim_matches('"').to_string();
        set.insert(o.key.clone(), v.clone());
        base_sets.push((o.key.clone(), v));
    }
    let fixed = s.fixed;
    for f in fixed {
        if !set.keys().any(|k| under(k, f)) {
            anyhow::bail!("--fix {f}: the scenario sets no key `{f}` or under it");
        }
    }
    let (scenario, _) = overrides::load(&src, &point(&base_sets)?).map_err(anyhow::Error::msg)?;
    let changes: Vec<Change> = candidates(&set, &scenario.topology)
        .into_iter()
        .filter(|c| {
            !c.sets
                .iter()
                .any(|(k, _)| fixed.iter().any(|f| under(k, f)))
        })
        .collect();
    if changes.is_empty() {
        anyhow::bail!(
            "nothing to search: no workload of `{arg}` has a placement key left to change \
             (cpu_node, mem_node, netdev_pf, nic_mode{})",
            if fixed.is_empty() {
                ""
            } else {
                " not under --fix"
            }
        );
    }
    let base = outcome(&src, &base_sets, &[], seed)?;
    if score(objective, &base.metrics, &base.metrics).is_none() {
        anyhow::bail!(
            "no workload of `{arg}` reports a metric the {objective:?} objective reads \
             (throughput: {}; p99: {})",
            THROUGHPUT.join(", "),
            TAIL.join(", ")
        );
    }
    let mut advice = Advice {
        scenario: arg.to_string(),
        objective,
        baseline: base.metrics.clone(),
        searched: 0,
        refused: Vec::new(),
        recommendations: Vec::new(),
    };
    let mut gains: Vec<(Change, Outcome, f64)> = Vec::new();
    for c in changes.into_iter().take(s.budget) {
        advice.searched += 1;
        match outcome(&src, &base_sets, &c.sets, seed) {
            Ok(o) => {
                let g = score(objective, &base.metrics, &o.metrics).unwrap_or(0.0);
                if g >= MIN_GAIN {
                    gains.push((c, o, g));
                }
            }
            Err(e) => advice.refused.push((c, e.to_string())),
        }
    }
    gains.sort_by(|a, b| b.2.total_cmp(&a.2));
    if let Some(both) = combine(&src, &base_sets, objective, &base, &gains, seed) {
        advice.searched += 1;
        gains.insert(0, both);
    }
    advice.recommendations = gains
        .into_iter()
        .map(|(change, o, gain)| Recommendation {
            why: why(objective, &base, &o, &change),
            commands: commands(arg, &change),
            predicted: o.metrics,
            change,
            gain,
        })
        .collect();
    Ok(advice)
}

/// Whether key `k` is `prefix` or lies under it.
fn under(k: &str, prefix: &str) -> bool {
    k == prefix || k.starts_with(&format!("{prefix}."))
}

/// The best change together with the best one that sets other keys, when together they
/// gain more than the best alone.
fn combine(
    src: &Source,
    base_sets: &[(String, String)],
    objective: Objective,
    base: &Outcome,
    gains: &[(Change, Outcome, f64)],
    seed: u64,
) -> Option<(Change, Outcome, f64)> {
    let (best, _, g) = gains.first()?;
    let other = gains[1..].iter().find(|(c, _, _)| {
        c.sets
            .iter()
            .all(|(k, _)| best.sets.iter().all(|(b, _)| b != k))
    })?;
    let mut sets = best.sets.clone();
    sets.extend(other.0.sets.iter().cloned());
    let o = outcome(src, base_sets, &sets, seed).ok()?;
    let both = score(objective, &base.metrics, &o.metrics)?;
    (both >= g * MIN_GAIN).then(|| {
        let what = format!("{}; and {}", best.what, other.0.what);
        (Change { sets, what }, o, both)
    })
}

/// `sets` as a sweep point.
fn point(sets: &[(String, String)]) -> anyhow::Result<Point> {
    let mut point: Point = Vec::new();
    for (k, v) in sets {
        let mut o = Override::parse(&format!("{k}={v}")).map_err(anyhow::Error::msg)?;
        point.push((o.key, o.values.remove(0)));
    }
    Ok(point)
}

/// Runs `src` with the baseline's `base` sets and the `change` (which wins on a key both set).
fn outcome(
    src: &Source,
    base: &[(String, String)],
    change: &[(String, String)],
    seed: u64,
) -> anyhow::Result<Outcome> {
    let kept = base
        .iter()
        .filter(|(k, _)| change.iter().all(|(c, _)| c != k));
    let sets: Vec<(String, String)> = kept.chain(change).cloned().collect();
    let r = run::run_point(src, &point(&sets)?, seed)?;
    let mut metrics = BTreeMap::new();
    for row in &r.rows {
        let w = row.params["workload"].as_str().unwrap_or("");
        for (m, v) in &row.metrics {
            if let Some(x) = v.as_f64() {
                metrics.insert(format!("{w}.{m}"), x);
            }
        }
    }
    Ok(Outcome {
        metrics,
        counters: r.counters,
    })
}

/// Each workload's value of the first of `names` it reports.
fn per_workload(m: &BTreeMap<String, f64>, names: &[&str]) -> BTreeMap<String, (String, f64)> {
    let mut out = BTreeMap::new();
    for (k, &v) in m {
        let Some((w, metric)) = k.split_once('.') else {
            continue;
        };
        let Some(rank) = names.iter().position(|n| *n == metric) else {
            continue;
        };
        let better = out.get(w).is_none_or(|(old, _): &(String, f64)| {
            rank < names.iter().position(|n| n == old).unwrap_or(usize::MAX)
        });
        if better {
            out.insert(w.to_string(), (metric.to_string(), v));
        }
    }
    out
}

/// The candidate's gain over the baseline under `objective` (above 1 is better); `None`
/// when no workload reports a metric the objective reads.
fn score(
    objective: Objective,
    base: &BTreeMap<String, f64>,
    cand: &BTreeMap<String, f64>,
) -> Option<f64> {
    let names: &[&str] = match objective {
        Objective::P99 => &TAIL,
        _ => &THROUGHPUT,
    };
    let ratios: Vec<f64> = per_workload(base, names)
        .iter()
        .filter_map(|(w, (m, b))| {
            let c = *cand.get(&format!("{w}.{m}"))?;
            match objective {
                Objective::P99 => (c > 0.0).then(|| b / c),
                _ => (*b > 0.0).then(|| c / b),
            }
        })
        .collect();
    if ratios.is_empty() {
        return None;
    }
    Some(match objective {
        Objective::Fairness => ratios.iter().copied().fold(f64::INFINITY, f64::min),
        _ => (ratios.iter().map(|r| r.max(1e-12).ln()).sum::<f64>() / ratios.len() as f64).exp(),
    })
}

/// Every placement change of the workloads `set` describes: move a process and its
/// memory to another node, move either alone, use another PF's netdev, another netdev mode.
fn candidates(set: &BTreeMap<String, String>, topo: &Topology) -> Vec<Change> {
    let mut out = Vec::new();
    let workloads: Vec<&str> = set
        .keys()
        .filter_map(|k| k.strip_prefix("workload.")?.strip_suffix(".kind"))
        .collect();
    for w in workloads {
        let get = |k: &str| {
            set.get(&format!("workload.{w}.{k}"))
                .map(|v| v.trim_matches('"').to_string())
        };
        let key = |k: &str| format!("workload.{w}.{k}");
        let host = get("server").or_else(|| get("host"));
        let Some(host) = host.and_then(|h| topo.host_by_name(&h)) else {
            continue;
        };
        let platform = topo.platform_of(host);
        let (cpu, mem) = (get("cpu_node"), get("mem_node"));
        if let (Some(c), Some(m)) = (&cpu, &mem) {
            // Where only one of the two moves, the single-key change below is the same.
            for n in 0..platform.cpu_nodes() {
                let n = n.to_string();
                if *c != n && *m != n {
                    out.push(Change {
                        sets: vec![(key("cpu_node"), n.clone()), (key("mem_node"), n.clone())],
                        what: format!("{w}: its cores and memory on node {n}"),
                    });
                }
            }
        }
        for (k, nodes, what) in [
            ("mem_node", platform.numa_nodes(), "its memory"),
            ("cpu_node", platform.cpu_nodes(), "its cores"),
        ] {
            let Some(cur) = get(k) else { continue };
            for n in (0..nodes).map(|n| n.to_string()).filter(|n| *n != cur) {
                out.push(Change {
                    sets: vec![(key(k), n.clone())],
                    what: format!("{w}: {what} on node {n}"),
                });
            }
        }
        let pfs = get("nic")
            .and_then(|nic| topo.device_by_name(host, &nic))
            .map_or(0, |d| topo.devices[d.index()].functions.len());
        if let Some(cur) = get("netdev_pf") {
            let named = cur.starts_with("pf");
            for p in 0..pfs {
                let v = if named {
                    format!("pf{p}")
                } else {
                    p.to_string()
                };
                if v != cur {
                    out.push(Change {
                        sets: vec![(key("netdev_pf"), v)],
                        what: format!("{w}: the netdev of the NIC's PF {p}"),
                    });
                }
            }
        }
        for (k, words) in WORDS {
            let Some(cur) = get(k).filter(|c| words.contains(&c.as_str())) else {
                continue;
            };
            for v in words.iter().filter(|v| **v != cur) {
                out.push(Change {
                    sets: vec![(key(k), v.to_string())],
                    what: format!("{w}: {k} {v}"),
                });
            }
        }
        // The octoNIC and the multi-PF netdev need a PF on each socket.
        if let Some(cur) = get("nic_mode").filter(|_| pfs > 1) {
            for m in ["standard", "octonic", "linux_multipf"]
                .into_iter()
                .filter(|m| *m != cur)
            {
                out.push(Change {
                    sets: vec![(key("nic_mode"), m.to_string())],
                    what: format!("{w}: the {m} netdev mode"),
                });
            }
        }
    }
    out
}

/// The workload whose objective metric moved most, and what the interconnect and the
/// memory nodes did.
fn why(objective: Objective, base: &Outcome, cand: &Outcome, change: &Change) -> String {
    let names: &[&str] = match objective {
        Objective::P99 => &TAIL,
        _ => &THROUGHPUT,
    };
    let mut moved: Vec<(String, f64, f64)> = per_workload(&base.metrics, names)
        .into_iter()
        .filter_map(|(w, (m, b))| {
            let k = format!("{w}.{m}");
            Some((k.clone(), b, *cand.metrics.get(&k)?))
        })
        .collect();
    moved.sort_by(|a, b| ((b.2 / b.1).ln().abs()).total_cmp(&(a.2 / a.1).ln().abs()));
    let mut parts = vec![change.what.clone()];
    if let Some((k, b, c)) = moved.first() {
        parts.push(format!("{k} {} → {}", num(*b), num(*c)));
    }
    if let Some((name, b, c)) = link_moved_most(base, cand) {
        parts.push(format!(
            "link {name} {} % → {} % busy",
            (b * 100.0).round(),
            (c * 100.0).round()
        ));
    }
    parts.join("; ")
}

/// The link (a PCIe or interconnect direction) whose utilisation changed most, by at
/// least 5 points: its name, and its utilisation before and after.
fn link_moved_most(base: &Outcome, cand: &Outcome) -> Option<(String, f64, f64)> {
    let utils = |o: &Outcome| -> BTreeMap<String, f64> {
        let links = o.counters["links"].as_array().cloned().unwrap_or_default();
        links
            .iter()
            .filter_map(|l| Some((l["name"].as_str()?.to_string(), l["util"].as_f64()?)))
            .collect()
    };
    let (b, c) = (utils(base), utils(cand));
    b.iter()
        .map(|(name, &u)| (name.clone(), u, c.get(name).copied().unwrap_or(0.0)))
        .filter(|(_, u, v)| (u - v).abs() >= 0.05)
        .max_by(|x, y| (x.1 - x.2).abs().total_cmp(&(y.1 - y.2).abs()))
}

fn num(x: f64) -> String {
    studies::format::format_number(x)
}

/// The commands that apply `change` on Linux, workload by workload (`<w>` stands for
/// workload w's own command line), and the `nudma run` that shows it.
fn commands(arg: &str, change: &Change) -> Vec<String> {
    let mut out = Vec::new();
    let mut workloads: Vec<&str> = change
        .sets
        .iter()
        .filter_map(|(k, _)| k.strip_prefix("workload.")?.split('.').next())
        .collect();
    workloads.dedup();
    for w in workloads {
        out.extend(workload_commands(w, change));
    }
    let sets: Vec<String> = change
        .sets
        .iter()
        .map(|(k, v)| format!("--set {k}={v}"))
        .collect();
    out.push(format!("nudma run {arg} {}", sets.join(" ")));
    out
}

/// The commands that apply `change`'s keys of workload `w`.
fn workload_commands(w: &str, change: &Change) -> Vec<String> {
    let value = |k: &str| {
        let key = format!("workload.{w}.{k}");
        change
            .sets
            .iter()
            .find(|(s, _)| *s == key)
            .map(|(_, v)| v.clone())
    };
    let mut out = Vec::new();
    match (value("cpu_node"), value("mem_node")) {
        (Some(c), Some(m)) => out.push(format!("numactl --cpunodebind={c} --membind={m} -- <{w}>")),
        (Some(c), None) => out.push(format!("numactl --cpunodebind={c} -- <{w}>")),
        (None, Some(m)) => out.push(format!("numactl --membind={m} -- <{w}>")),
        (None, None) => {}
    }
    match value("server_placement").as_deref() {
        Some("local") => out.push(format!(
            "<{w}>'s server with its region on the RNIC's node: numactl --membind=$(cat \
             /sys/class/infiniband/<rnic>/device/numa_node) -- <{w} server>"
        )),
        Some(other) => out.push(format!(
            "<{w}>'s server with its region away from the RNIC's node ({other}): numactl \
             --membind=<another node> -- <{w} server>"
        )),
        None => {}
    }
    if let Some(p) = value("placement") {
        out.push(format!(
            "<{w}> with its buffers placed `{p}` (the application's own setting)"
        ));
    }
    if let Some(pf) = value("netdev_pf") {
        let p = pf.trim_start_matches("pf");
        out.push(format!(
            "<{w}> on the netdev of the NIC's PF {p} (ls /sys/bus/pci/devices/<PF {p}'s BDF>/net), \
             its queues' interrupts on <{w}>'s cores: echo <cpus> > /proc/irq/<N>/smp_affinity_list"
        ));
    }
    match value("nic_mode").as_deref() {
        Some("linux_multipf") => out.push(
            "Linux ≥ 6.9 with an mlx5 Socket Direct NIC: one multi-PF netdev over both PFs"
                .to_string(),
        ),
        Some("octonic") => {
            out.push("the IOctopus octoNIC (a research prototype): no Linux command".to_string())
        }
        Some("standard") => out.push("a netdev per PF (Linux's default)".to_string()),
        _ => {}
    }
    out
}

impl Advice {
    /// The JSON `nudma advise --format json` prints (docs/cli.md).
    pub fn json(&self) -> Value {
        let recs: Vec<Value> = self
            .recommendations
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let changes: serde_json::Map<String, Value> = r
                    .change
                    .sets
                    .iter()
                    .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                    .collect();
                json!({
                    "rank": i + 1,
                    "changes": changes,
                    "predicted": r.predicted,
                    "gain": r.gain,
                    "verified": true,
                    "flow_vs_sim": Value::Null,
                    "why": r.why,
                    "commands": r.commands,
                })
            })
            .collect();
        let mut out = json!({
            "scenario": self.scenario,
            "objective": format!("{:?}", self.objective).to_lowercase(),
            "searched": self.searched,
            "baseline": self.baseline,
            "recommendations": recs,
        });
        if self.recommendations.is_empty() {
            out["message"] = Value::String(self.best_already());
        }
        out
    }

    /// What an empty list means.
    pub fn best_already(&self) -> String {
        format!(
            "already at its best: none of the {} placements tried gains {} % or more",
            self.searched,
            ((MIN_GAIN - 1.0) * 100.0).round()
        )
    }
}
