//! The PageRank-like victim alone on a host's memory system (`pagerank`, run by
//! `run::victim`): its raw schema, and its reading into a `Kind` with its range check.

use fabric::ScenarioError;
use serde::Deserialize;

use super::located::Entry;
use super::Kind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPageRank {
    name: String,
    #[allow(dead_code)]
    kind: String,
    host: String,
    threads_per_socket: u32,
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
    let k = Kind::PageRank {
        host: r.host,
        threads_per_socket: r.threads_per_socket,
    };
    Ok((r.name, k))
}
