//! `nudma topo` as a library: a scenario's fabric, its check summary, and the route of
//! one access with, on a timed scenario, its zero-load latency and stream rate.

use fabric::describe;
use fabric::topology::Topology;
use fabric::{Access, Fabric, Fault, Path, Request, Target};
use serde_json::{json, Value};
use sim::timed::TimedFabric;
use studies::path_query::{has_timing, route_query, timed_request, PathAnswer};
use studies::run::overrides::Override;

/// Loads a scenario file or built-in name and builds its fabric.
pub fn load(scenario: &str) -> anyhow::Result<Fabric> {
    let s = fabric::builtin::load_any(scenario)?;
    Ok(Fabric::from_scenario(s)?)
}

/// What `topo check` prints after a valid scenario's name.
pub fn check_summary(f: &Fabric) -> String {
    let t = &f.topo;
    format!(
        "{}: ok — {} host(s), {} PCIe node(s), {} device(s), {} NTB adapter(s), {} cable(s), {} cluster switch(es)",
        t.name,
        t.hosts.len(),
        t.nodes.len(),
        t.devices.len(),
        t.ntbs.len(),
        t.cables.len(),
        t.cluster_switches.len()
    )
}

/// One access to route: requester, target and the request's shape.
pub struct PathQuery<'a> {
    /// `host.device[.pfN]` or `host.cpu[N]`.
    pub from: &'a str,
    /// `host.device[.pfN][.barN]`, `host.ram[.nodeN]`, or a bus address (0x…).
    pub to: &'a str,
    pub offset: u64,
    pub len: u32,
    pub access: Access,
    /// Accesses kept under way in the stream estimate; `None`: as many as it takes.
    pub outstanding: Option<u64>,
}

/// The fabric a query ran on: the timed one when the scenario has timing parameters.
enum OnFabric {
    Plain(Box<Fabric>),
    Timed(Box<TimedFabric>),
}

/// The answer to a [`PathQuery`]: the route and, with timing parameters, the timing.
pub struct PathReport {
    fabric: OnFabric,
    pub request: Request,
    pub setup: Vec<String>,
    pub path: Path,
    pub result: Result<Target, Fault>,
    /// Zero-load latency (ns) and, for a device, the stream's rate (GB/s) and bound.
    pub timed: Option<(f64, Option<(f64, String)>)>,
    /// Why the scenario's timing could not time this access.
    pub timing_error: Option<String>,
}

impl PathReport {
    pub fn topo(&self) -> &Topology {
        match &self.fabric {
            OnFabric::Plain(f) => &f.topo,
            OnFabric::Timed(tf) => &tf.fabric.topo,
        }
    }

    /// The JSON of `topo path --format json`.
    pub fn json(&self, q: &PathQuery) -> Value {
        let mut v = describe::path_json(self.topo(), &self.path, &self.result);
        v["from"] = q.from.into();
        v["to"] = q.to.into();
        v["access"] = format!("{:?}", q.access).to_lowercase().into();
        v["address"] = self.request.addr.into();
        v["len"] = q.len.into();
        v["setup"] = self.setup.clone().into();
        if let Some((l, stream)) = &self.timed {
            v["latency_ns"] = (*l).into();
            if let Some((gbyte_s, why)) = stream {
                v["stream"] = json!({ "gbyte_s": gbyte_s, "bottleneck": why });
            }
        }
        if let Some(e) = &self.timing_error {
            v["timing_error"] = e.clone().into();
        }
        v
    }
}

/// Routes `q` on the fabric `load` makes (called once, twice when the timed fabric cannot
/// be built: routing is the same, and loading a large cluster twice is not free).
pub fn path(
    load: &dyn Fn() -> anyhow::Result<Fabric>,
    q: &PathQuery,
) -> anyhow::Result<PathReport> {
    let (from, to) = (q.from, q.to);
    let f = load()?;
    let (mut fabric, mut timing_error) = if has_timing(&f) {
        match TimedFabric::new(f, 1) {
            Ok(tf) => (OnFabric::Timed(Box::new(tf)), None),
            Err(e) => (
                OnFabric::Plain(Box::new(load()?)),
                Some(format!("timing {from} → {to}: {}", e.0)),
            ),
        }
    } else {
        (OnFabric::Plain(Box::new(f)), None)
    };
    let on = match &mut fabric {
        OnFabric::Plain(f) => f,
        OnFabric::Timed(tf) => &mut tf.fabric,
    };
    let PathAnswer {
        request,
        setup,
        path,
        result,
    } = route_query(on, from, to, q.offset, q.len, q.access)?;
    // With timing parameters, the zero-load time of this one request: a write until it
    // lands, a read until its data is back (requester overheads not included).
    let timed = match (&result, &mut fabric) {
        (Ok(_), OnFabric::Timed(tf)) => match timed_request(tf, &request, q.outstanding) {
            Ok(t) => Some((t.latency_ns, t.stream)),
            Err(e) => {
                timing_error = Some(format!("timing {from} → {to}: {e}"));
                None
            }
        },
        _ => None,
    };
    Ok(PathReport {
        fabric,
        request,
        setup,
        path,
        result,
        timed,
        timing_error,
    })
}

/// Loads a scenario with `--set` overrides of one value each (a scenario, not a sweep).
pub fn load_with(scenario: &str, sets: &[Override]) -> anyhow::Result<Fabric> {
    if sets.is_empty() {
        return load(scenario);
    }
    if let Some(o) = sets.iter().find(|o| o.values.len() != 1) {
        anyhow::bail!(
            "{}: a scenario takes one value per key, not {} (sweep them instead)",
            o.key,
            o.values.len()
        );
    }
    let src = studies::run::source(scenario)?;
    let point = studies::run::sweep(sets).remove(0);
    let (s, _) = studies::run::overrides::load(&src, &point).map_err(anyhow::Error::msg)?;
    Ok(Fabric::from_scenario(s)?)
}
