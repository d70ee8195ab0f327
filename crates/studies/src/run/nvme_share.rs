//! The `nvme_share` workload: clients on many hosts sharing one NVMe controller through
//! SmartIO's distributed driver (`systems::smartio::nvme_bench::sharing_with`). Like the
//! network workloads it runs on its own model: the scenario's hardware loaded anew, with
//! its own simulation loop over the `[measure]` window, so it meets no other workload.

use fabric::scenario::Scenario;
use serde_json::{json, Value};
use systems::smartio::nvme_bench::{self, SharingSetup};

use super::bound::{self, Resource};
use super::packet::NetOutcome;
use super::spec::{Kind, Measure};
use crate::harness;

/// Runs an `nvme_share` workload over `m` on fresh hardware of `scenario`.
pub fn run(scenario: &Scenario, kind: &Kind, m: Measure, seed: u64) -> Result<NetOutcome, String> {
    let Kind::NvmeShare {
        device,
        clients,
        depth,
        sq,
    } = kind
    else {
        return Err(format!("`{}` is not an nvme_share workload", kind.name()));
    };
    let mut tf = super::once::hardware(scenario, seed).map_err(|e| e.0)?;
    let hosts: Vec<String> = tf
        .fabric
        .topo
        .hosts
        .iter()
        .map(|h| h.name.clone())
        .collect();
    let setup = SharingSetup {
        device,
        hosts: &hosts,
        clients: *clients as usize,
        depth: *depth,
        sq: sq.clone(),
        warmup: m.warmup,
        window: m.duration,
    };
    let r = nvme_bench::sharing_with(&mut tf, &setup).map_err(|e| e.to_string())?;
    let min = if r.clients_ok == 0 {
        0.0
    } else {
        r.min_client_kiops
    };
    let metrics = [
        ("clients_ok", json!(r.clients_ok)),
        ("total_kiops", json!(r.total_kiops)),
        ("min_client_kiops", json!(min)),
        ("jain_fairness", json!(r.jain_fairness)),
        ("error", r.error.map_or(Value::Null, Value::String)),
        ("control_msgs_in_window", json!(r.control_msgs_in_window)),
        ("median_us", json!(r.median_us)),
        ("p99_us", json!(r.p99_us)),
        ("ops_per_sec", json!(r.total_kiops * 1e3)),
    ];
    let mut metrics = metrics
        .into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect();
    // Its bound: the device's media read rate (the clients read 4 KiB blocks) against
    // what they read in the window; the fabric's link counters cover the whole run here,
    // so its links are not candidates.
    let data = super::requester(&tf, device)
        .ok()
        .and_then(|who| harness::data_path(&tf, who, true));
    let resources: Vec<Resource> = data
        .map(|(ps, what)| Resource {
            name: format!("{device} {what}"),
            util: r.total_kiops * 1e3 * BLOCK / (bound::gbyte_s(ps) * 1e9),
        })
        .into_iter()
        .collect();
    let latency = format!("{} outstanding", u64::from(*clients) * u64::from(*depth));
    let resources = bound::insert(&mut metrics, &resources, Some(&latency));
    Ok(NetOutcome {
        metrics,
        counters: json!({ "commands": r.commands, "resources": resources }),
    })
}

/// Bytes of one of its clients' reads (`nvme_bench::sharing_with`: 4 KiB).
const BLOCK: f64 = 4096.0;
