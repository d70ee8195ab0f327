//! The `nvme_share` workload: clients on many hosts sharing one NVMe controller through
//! SmartIO's distributed driver (`systems::smartio::nvme_bench::sharing_with`). Like the
//! network workloads it runs on its own model: the scenario's hardware loaded anew, with
//! its own simulation loop over the `[measure]` window, so it meets no other workload.

use fabric::scenario::Scenario;
use serde_json::{json, Value};
use systems::smartio::nvme_bench::{self, SharingSetup};

use super::packet::NetOutcome;
use super::spec::{Kind, Measure};

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
    Ok(NetOutcome {
        metrics: metrics
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        counters: json!({ "commands": r.commands }),
    })
}
