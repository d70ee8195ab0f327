//! Probes of the IOctopus study (EXPERIMENTS.md `ioctopus.*`, REFERENCE.md §1) over the
//! packet-granular stack (`host::net`), the NIC (`devices::nic`) and the octoNIC driver
//! side (`systems::ioctopus`). A config picks hardware and placement only: the NIC's
//! steering mode (`standard` or `octonic`) and, for a standard NIC, the PF whose netdev
//! the workload uses; the workload runs on one core of socket 0 with its memory on node 0.

mod colocation;
pub mod migration;
pub mod setup;

pub use colocation::colocation;

use devices::nic::SteeringMode;
use host::net::NetHost;

use crate::harness::RunError;
use crate::probe::ProbeCx;

/// The NIC's steering mode a config names: `standard`, `octonic` or `linux_multipf`.
fn steering_mode(cx: &ProbeCx) -> Result<SteeringMode, RunError> {
    match cx.arg("mode")?.as_str() {
        "standard" => Ok(SteeringMode::Standard),
        "octonic" => Ok(SteeringMode::OctoNic),
        "linux_multipf" => Ok(SteeringMode::LinuxMultiPf),
        other => Err(cx.error(format!(
            "mode = `{other}`: use \"standard\", \"octonic\" or \"linux_multipf\""
        ))),
    }
}

/// The bulk-transfer client of a config (`setup::stream_client`).
fn client(cx: &ProbeCx, name: &str, nic: &str) -> Result<NetHost, RunError> {
    setup::stream_client(&cx.tf.fabric.topo, name, nic).map_err(|e| cx.error(e))
}
