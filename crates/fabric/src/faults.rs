//! A scenario's fault schedule (`[[fault]]`): when (a simulated time, kept as a plain
//! number of picoseconds — the fabric has no clock), what (a link going down or up, a
//! cable pulled, a host crashing or restarting) and to which cable or host. Plain data:
//! the timing layer's `FaultInjector` applies it.
//!
//! ```toml
//! [[fault]]
//! name = "flap"              # optional; `--set fault.flap.at=…` addresses it
//! at = "200 us"              # simulated time, 0 ..= 1 s
//! kind = "link_down"         # link_down | link_up | cable_pull | host_crash | host_restart
//! target = "borrower.ntb"    # an adapter (its cables) for link kinds, a host for host kinds
//! duration = "50 us"         # optional, link_down and host_crash only: up / restart after
//! ```
//!
//! `link_up` of a cable that is up changes nothing (the injector logs that it was up);
//! `host_restart` of a host that is up does not clear its memory (a restart is cold only
//! after a crash).

use crate::raw::RawFault;
use crate::topology::{CableEnd, CableId, HostId, Topology};

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAction {
    /// The link goes down (and up again after `duration`, if given: a flap).
    LinkDown,
    /// The link comes (back) up.
    LinkUp,
    /// The cable is pulled: down, and it stays down.
    CablePull,
    /// The host crashes (and restarts cold after `duration`, if given).
    HostCrash,
    /// The host comes back cold: its memory contents are lost.
    HostRestart,
}

impl FaultAction {
    pub const NAMES: [&'static str; 5] = [
        "link_down",
        "link_up",
        "cable_pull",
        "host_crash",
        "host_restart",
    ];

    pub fn parse(s: &str) -> Option<FaultAction> {
        Some(match s {
            "link_down" => FaultAction::LinkDown,
            "link_up" => FaultAction::LinkUp,
            "cable_pull" => FaultAction::CablePull,
            "host_crash" => FaultAction::HostCrash,
            "host_restart" => FaultAction::HostRestart,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            FaultAction::LinkDown => "link_down",
            FaultAction::LinkUp => "link_up",
            FaultAction::CablePull => "cable_pull",
            FaultAction::HostCrash => "host_crash",
            FaultAction::HostRestart => "host_restart",
        }
    }

    /// Whether the action names a host (else a cable end).
    pub fn on_host(self) -> bool {
        matches!(self, FaultAction::HostCrash | FaultAction::HostRestart)
    }
}

/// What a fault hits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultTarget {
    /// The cables of one adapter (`host.ntb`): usually one.
    Cables(Vec<CableId>),
    Host(HostId),
}

/// One `[[fault]]`, validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FaultSpec {
    pub name: Option<String>,
    /// Simulated time, picoseconds.
    pub at_ps: u64,
    pub action: FaultAction,
    /// As written (`borrower.ntb`, `lender`).
    pub target_name: String,
    pub target: FaultTarget,
    /// For a flap (`link_down`) or a crash (`host_crash`): back up after this long.
    pub duration_ps: Option<u64>,
}

/// The latest a fault may be scheduled: the longest measurement window `nudma run` takes.
pub const MAX_FAULT_TIME_NS: f64 = 1e9;

/// "100 us", "1 ms", "250ns", "2 s" (also µs): a simulated time in picoseconds, in
/// 0 ..= 1 s.
pub fn parse_time_ps(s: &str) -> Result<u64, String> {
    let t = s.trim();
    if t.starts_with('-') {
        return Err(format!("`{s}` is negative: simulated time starts at 0"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let x: f64 = num
        .replace('_', "")
        .parse()
        .map_err(|_| format!("`{s}` is not a time: expected e.g. \"100 us\" or \"1 ms\""))?;
    let ns = match unit.trim() {
        "ps" => x / 1000.0,
        "ns" => x,
        "us" | "µs" => x * 1e3,
        "ms" => x * 1e6,
        "s" => x * 1e9,
        "" => return Err(format!("`{s}` has no unit (use ns, us, ms or s)")),
        other => {
            return Err(format!(
                "unknown time unit `{other}` in `{s}` (use ns, us, ms or s)"
            ))
        }
    };
    if !(0.0..=MAX_FAULT_TIME_NS).contains(&ns) {
        return Err(format!(
            "`{s}` is outside 0 .. 1 s of simulated time (the longest run window)"
        ));
    }
    Ok((ns * 1000.0).round() as u64)
}

/// The cables whose end is the adapter `label` (`host.ntb`).
pub fn cables_at(t: &Topology, label: &str) -> Option<Vec<CableId>> {
    let (h, n) = label.split_once('.')?;
    let ntb = t.host_by_name(h).and_then(|hid| t.ntb_by_name(hid, n))?;
    Some(
        t.cables
            .iter()
            .enumerate()
            .filter(|(_, c)| c.ends.contains(&CableEnd::Ntb(ntb)))
            .map(|(i, _)| CableId::from_index(i))
            .collect(),
    )
}

/// A fault's problem, and which of its keys it is about.
pub type FaultError = (&'static str, String);

/// Validates one raw `[[fault]]` against the topology. Errors name the key at fault.
pub fn validate(t: &Topology, r: &RawFault) -> Result<FaultSpec, FaultError> {
    let kind = r.kind.get_ref();
    let action = FaultAction::parse(kind).ok_or_else(|| {
        (
            "kind",
            format!(
                "unknown fault kind `{kind}` (one of: {})",
                FaultAction::NAMES.join(", ")
            ),
        )
    })?;
    let at_ps = parse_time_ps(r.at.get_ref()).map_err(|m| ("at", m))?;
    let name = r.target.get_ref();
    let target = if action.on_host() {
        match t.host_by_name(name) {
            Some(h) => FaultTarget::Host(h),
            None if cables_at(t, name).is_some() => {
                return Err((
                    "target",
                    format!(
                        "`{name}` is an adapter; {} names a host (e.g. `{}`)",
                        action.name(),
                        name.split('.').next().unwrap_or(name)
                    ),
                ))
            }
            None => {
                return Err((
                    "target",
                    format!(
                        "no host `{name}` (hosts: {})",
                        crate::error::name_list_at_most(t.hosts.iter().map(|h| &h.name), 8)
                    ),
                ))
            }
        }
    } else {
        match cables_at(t, name) {
            Some(c) if c.is_empty() => {
                return Err((
                    "target",
                    format!("adapter `{name}` has no cable: nothing to take down"),
                ))
            }
            Some(c) => FaultTarget::Cables(c),
            None if t.host_by_name(name).is_some() => {
                return Err((
                    "target",
                    format!(
                        "`{name}` is a host; {} names a cable by one of its ends, an adapter \
                         (`host.ntb`; use host_crash for a host)",
                        action.name()
                    ),
                ))
            }
            None => {
                let ends = t
                    .cables
                    .iter()
                    .flat_map(|c| c.ends)
                    .filter(|e| matches!(e, CableEnd::Ntb(_)))
                    .map(|e| t.cable_end_label(e));
                return Err((
                    "target",
                    format!(
                        "no adapter `{name}` at a cable (cable ends: {})",
                        crate::error::name_list_at_most(ends, 8)
                    ),
                ));
            }
        }
    };
    let duration_ps = match &r.duration {
        None => None,
        Some(d) => {
            if !matches!(action, FaultAction::LinkDown | FaultAction::HostCrash) {
                return Err((
                    "duration",
                    format!(
                        "a duration is for a flap (link_down, then up) or a crash and restart \
                         (host_crash); {} takes none{}",
                        action.name(),
                        if action == FaultAction::CablePull {
                            ": a pulled cable stays down (use link_down with a duration)"
                        } else {
                            ""
                        }
                    ),
                ));
            }
            let ps = parse_time_ps(d.get_ref()).map_err(|m| ("duration", m))?;
            if ps == 0 {
                return Err(("duration", "a flap's duration must be > 0".into()));
            }
            Some(ps)
        }
    };
    Ok(FaultSpec {
        name: r.name.as_ref().map(|n| n.get_ref().clone()),
        at_ps,
        action,
        target_name: name.clone(),
        target,
        duration_ps,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_parse_and_absurd_ones_are_refused() {
        assert_eq!(parse_time_ps("1 ms"), Ok(1_000_000_000));
        assert_eq!(parse_time_ps("250ns"), Ok(250_000));
        assert_eq!(parse_time_ps("0 us"), Ok(0));
        assert!(parse_time_ps("-1 ms").unwrap_err().contains("negative"));
        assert!(parse_time_ps("5 s").unwrap_err().contains("outside"));
        assert!(parse_time_ps("10").unwrap_err().contains("no unit"));
        assert!(parse_time_ps("3 days")
            .unwrap_err()
            .contains("unknown time unit"));
    }
}
