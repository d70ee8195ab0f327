//! A netperf TCP_STREAM receive whose process the scheduler moves to the other socket
//! mid-run (`nudma run`'s netperf with `migrate_at_ms`, `ioctopus.migration`), on a
//! standard NIC (the flow keeps entering through its netdev's PF) or an octoNIC under the
//! IOctopus team driver (`systems::ioctopus::team`).

use devices::nic::{Steering, SteeringMode};
use host::net::migration::{self, MigrationResult, MigrationSpec};
use host::net::NetHost;
use systems::ioctopus::team::{TeamDriver, TeamTiming};

use super::setup::FLOW;

/// One migrating run and the driver it used (its timing from the server platform's
/// `[platform.X.netstack]`).
pub struct Migrated {
    pub result: MigrationResult,
    pub driver: TeamDriver,
}

/// Runs `spec`'s migrating stream `client` → `server` (whose NIC and netdev PF are
/// `server.pf`) under the team driver of `mode`.
pub fn run_spec(
    client: &mut NetHost,
    server: &mut NetHost,
    mode: SteeringMode,
    spec: MigrationSpec,
) -> Result<Migrated, String> {
    let sockets: Vec<u32> = server.nic.pfs.iter().map(|p| p.socket).collect();
    let to = spec.mv.to_queue.node;
    if !sockets.contains(&to) {
        return Err(format!(
            "the NIC has no PF on socket {to} (PF sockets {sockets:?})"
        ));
    }
    let steering = Steering::new(mode, sockets.len() as u8, 2);
    let timing = TeamTiming::of(&server.costs);
    let from = spec.from_queue;
    let mut driver = TeamDriver::new(
        steering, FLOW, from.node, from.index, server.pf, &sockets, timing,
    );
    let result = migration::run(client, server, spec, &mut driver)?;
    Ok(Migrated { result, driver })
}
