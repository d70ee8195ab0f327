//! The PageRank-like victim on a host's memory system (`pagerank`, run by `run::victim`
//! alone or inside the network model it shares its host with): its raw schema, and its
//! reading into a `Kind` with its range checks.

use fabric::ScenarioError;
use serde::Deserialize;
use sim::Time;

use super::located::{parse_duration, Entry};
use super::Kind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPageRank {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    threads_per_socket: u32,
    /// Its own warm-up: it starts this long before the window (default: with the run).
    warmup: Option<String>,
    /// Its graph's random draws (default: the run's `--seed`).
    seed: Option<u64>,
}

/// A `pagerank` workload: `threads_per_socket` victim threads on every socket of a host.
pub(super) fn pagerank(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawPageRank = e.read()?;
    e.check(
        (1..=64).contains(&r.threads_per_socket),
        &r.name,
        "threads_per_socket",
        "must be 1 .. 64 threads",
    )?;
    let warmup = match &r.warmup {
        None => None,
        Some(w) => Some(
            parse_duration(w)
                .ok()
                .filter(|t| *t > Time::ZERO)
                .ok_or_else(|| {
                    e.field(
                        &r.name,
                        "warmup",
                        "must be a duration with its unit, more than 0 and at most 1 s (\"1 ms\")",
                    )
                })?,
        ),
    };
    let k = Kind::PageRank {
        host: r.host,
        threads_per_socket: r.threads_per_socket,
        warmup,
        seed: r.seed,
    };
    Ok((r.name, k))
}
