//! `ioctopus.memcached`: one memcached server instance on one core of socket 0 (its items
//! on node 0), 14 memslap connections from the client with one request outstanding each,
//! 256 B keys and 512 KiB values, a swept share of SETs.

use std::collections::BTreeMap;

use host::net::memcached::{self, MemcachedSpec};
use serde_json::{json, Value};
use sim::Time;

use super::{client, server_pf};
use crate::harness::RunError;
use crate::probe::{Fields, ProbeCx};

/// memslap's concurrency in the paper's setup (EXPERIMENTS.md: 14 clients on one CPU).
const CLIENTS: u32 = 14;
const KEY_BYTES: u64 = 256;
const VALUE_BYTES: u64 = 512 * 1024;
/// Warm-up: the LLC's item lines turn over (≈ 24 ms at 100 % SETs) and every ring has
/// wrapped many times; the window holds ≥ 75 requests at the slowest mix. End points move
/// < 1 % and mixed points ≈ 5 % from a 20 ms window (the random GET/SET mix).
const WARMUP: Time = Time::from_us(40000);
const WINDOW: Time = Time::from_us(40000);
const SEED: u64 = 11;

/// memcached under memslap, `set_ratio` (the fraction of requests that are SETs, 0 … 1).
pub fn memcached(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let word = cx.arg("set_ratio")?;
    let set_ratio: f64 = word
        .parse()
        .ok()
        .filter(|r: &f64| (0.0..=1.0).contains(r))
        .ok_or_else(|| cx.error(format!("set_ratio `{word}` must be a number in 0 … 1")))?;
    let nic = cx.arg("nic")?;
    let (mut server, pf) = server_pf(cx, &cx.arg("server")?, &nic)?;
    let mut client = client(cx, &cx.arg("client")?, &nic)?;
    let r = memcached::run(
        &mut server,
        &mut client,
        MemcachedSpec {
            key_bytes: KEY_BYTES,
            value_bytes: VALUE_BYTES,
            set_ratio,
            clients: CLIENTS,
            keys: memcached::MEMSLAP_KEYS,
            mtu: 1500,
            warmup: WARMUP,
            window: WINDOW,
            seed: SEED,
        },
    )
    .map_err(|e| cx.error(e))?;
    let counters = checked_counters(&r, pf).map_err(|e| cx.error(e))?;
    cx.set_counters(counters);
    Ok(BTreeMap::from([
        ("kops".to_string(), json!(r.kops)),
        ("mem_bw_gbps".to_string(), json!(r.mem_gbps)),
    ]))
}

/// The counters of a memcached run served from `pf`, or an error if any GET reply was not
/// the bytes a SET stored (every reply is checked whole).
pub fn checked_counters(r: &memcached::MemcachedResult, pf: usize) -> Result<Value, String> {
    if r.values_corrupt > 0 || r.values_stale > 0 {
        return Err(format!(
            "{} of {} GET replies were not the bytes a SET stored ({} stale)",
            r.values_corrupt + r.values_stale,
            r.values_checked,
            r.values_stale
        ));
    }
    Ok(json!({
        "pf": pf,
        "gets": r.gets,
        "sets": r.sets,
        "value_gbps": r.value_gbps,
        "interconnect_gbps": r.interconnect_gbps,
        "server_cpu_util": r.server_util,
        "values_checked": r.values_checked,
        "events": r.events,
    }))
}
