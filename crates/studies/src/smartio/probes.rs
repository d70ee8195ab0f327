//! The SmartIO probes of the experiment files that are single measurements on the
//! config's hardware: a CPU store's one-way latency, NTB, GPU and peer-to-peer copies,
//! the GPU ping-pong and path shapes (the functions they call are in `crate::smartio`).

use std::collections::BTreeMap;

use serde_json::json;

use crate::harness::{self, RunError};
use crate::probe::{one, Fields, ProbeCx};

pub fn cpu_store_oneway(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let t = super::cpu_store_oneway(cx.tf, &cx.arg("from")?, &cx.arg("to")?)?;
    Ok(one("ns", json!(t.as_ns_f64())))
}

pub fn cpu_store_ntb_span(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let t = super::cpu_store_ntb_span(cx.tf, &cx.arg("from")?, &cx.arg("to")?)?;
    Ok(one("ns", json!(t.as_ns_f64())))
}

pub fn ntb_copy(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let b = cx.bytes()?;
    let write = cx.choice("op", "write", "read")?;
    let (engine, local, remote) = (cx.arg("engine")?, cx.arg("local")?, cx.arg("remote")?);
    let t = super::ntb_copy(cx.tf, &engine, &local, &remote, b, write)?;
    let counters = harness::counters_json(cx.tf, b);
    cx.set_counters(counters);
    Ok(one("gbps", json!(harness::gbps(b, t))))
}

pub fn gpu_copy(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    // `through = "mdev"`: the GPU is passed to a VM on the user's host (MDEV).
    if cx.arg_opt("through") == Some("mdev") {
        let mut args = cx.args().clone();
        args.insert("vm_host".into(), cx.arg("user")?);
        let what = cx.what().to_string();
        let point = cx.point().to_vec();
        let mut inner = ProbeCx::new(cx.tf, &args, &point, what);
        let f = super::nvme::gpu_copy_mdev(&mut inner)?;
        if let Some(c) = inner.take_counters() {
            cx.set_counters(c);
        }
        return Ok(f);
    }
    let b = cx.bytes()?;
    let write = cx.choice("op", "write", "read")?;
    let (gpu, user) = (cx.arg("gpu")?, cx.arg("user")?);
    let t = super::gpu_copy_probe(cx.tf, &gpu, &user, b, write)?;
    let counters = harness::counters_json(cx.tf, b);
    cx.set_counters(counters);
    Ok(one("gbps", json!(harness::gbps(b, t))))
}

pub fn p2p_copy(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let b = cx.bytes()?;
    let via_ram = cx.choice("via", "ram", "p2p")?;
    let t = super::p2p_copy(cx.tf, &cx.arg("a")?, &cx.arg("b")?, via_ram, b)?;
    Ok(one("gbps", json!(harness::gbps(b, t))))
}

pub fn pingpong(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let via_ram = cx.choice("via", "ram", "p2p")?;
    let t = super::gpu_pingpong(cx.tf, &cx.arg("a")?, &cx.arg("b")?, via_ram)?;
    Ok(one("ns", json!(t.as_ns_f64())))
}

pub fn path_shape(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let via_ram = cx.choice("via", "ram", "p2p")?;
    let (hops, roots) = super::path_shape(cx.tf, &cx.arg("a")?, &cx.arg("b")?, via_ram)?;
    Ok(BTreeMap::from([
        ("hops".to_string(), json!(hops)),
        ("roots".to_string(), json!(roots)),
    ]))
}
