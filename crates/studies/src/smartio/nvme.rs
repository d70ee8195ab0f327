//! The probe of the SmartIO failover campaign (not a workload file yet), and the timing
//! of a GPU's copy into a VM's memory through MDEV, which the `gpu_copy` workload calls.
//! The mechanisms live in `systems`; these only read arguments and report fields.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sim::timed::{ns, TimedFabric};
use sim::Time;
use systems::smartio::mdev::{setup_guest_dma, VmConfig};

use crate::harness::{self, RunError};
use crate::probe::{Fields, ProbeCx};

fn fields(v: Vec<(&str, Value)>) -> Fields {
    v.into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect::<BTreeMap<_, _>>()
}

/// bandwidthTest of a GPU (`gpu`) lent to a VM on `vm_host` through MDEV (4 GiB guest
/// on 2 MiB host pages), copying `b` bytes into (`write`) or out of guest memory; timed
/// like `gpu_copy_time`: the vCPU's doorbell through the borrower's window, the copy, the
/// completion flag the GPU writes into guest memory and the vCPU's poll of it.
pub fn gpu_copy_mdev_time(
    tf: &mut TimedFabric,
    gpu: &str,
    vm_host: &str,
    b: u64,
    write: bool,
) -> Result<Time, RunError> {
    // The buffer, then one more page for the completion flag.
    let s = setup_guest_dma(
        &mut tf.fabric,
        gpu,
        vm_host,
        VmConfig::mdev_experiment(),
        b + 4096,
    )
    .map_err(|e| RunError(format!("{gpu}: {e}")))?;
    let dev = s.device;
    let cpu = harness::requester(tf, &format!("{vm_host}.cpu"))?;
    let doorbell = harness::map_buffer(tf, cpu, &format!("{gpu}.bar0"), 0, 4)?;
    let host = tf.fabric.requester_host(cpu);
    let lender = tf.fabric.requester_host(dev);
    let spec = harness::device_spec(tf, dev, harness::mps_between(tf, host, lender))?;
    let launch = ns(tf.timing_of(host).cpu_mmio_write_ns)
        + harness::one_way(tf, cpu, doorbell)?
        + ns(harness::device_param(tf, dev, "launch_ns")?);
    let op = if write {
        devices::Op::Write { dst: s.gpa }
    } else {
        devices::Op::Read { src: s.gpa }
    };
    let dma = harness::dma_time(tf, dev, spec, op, b)?;
    let flag = s.gpa + b.div_ceil(4096) * 4096;
    let notify = harness::one_way(tf, dev, flag)? + ns(tf.timing_of(host).cpu_poll_ns);
    Ok(launch + dma + notify)
}

/// `nvme_failover`: args `mode` (`fail_over` | `flap` | `recreate`), `ios`: a two-path
/// client writing and reading back 4 KiB blocks at QD 8 while its primary link fails at
/// 1 ms (systems::smartio::failover).
pub fn nvme_failover(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    use systems::smartio::failover::{failover_run, FailoverMode};
    let mode = match cx.arg("mode")?.as_str() {
        "fail_over" => FailoverMode::FailOver,
        "flap" => FailoverMode::Flap,
        "recreate" => FailoverMode::Recreate,
        other => {
            return Err(cx.error(format!(
                "mode = `{other}`: use \"fail_over\", \"flap\" or \"recreate\""
            )))
        }
    };
    let ios: u64 = cx
        .arg("ios")?
        .parse()
        .map_err(|_| cx.error("ios must be a whole number"))?;
    let r = failover_run(cx.tf, mode, ios, 1).map_err(|e| cx.error(e))?;
    Ok(fields(vec![
        ("ios_completed", json!(r.ios_completed)),
        ("ios_failed_reported", json!(r.ios_failed_reported)),
        ("acked_writes_lost", json!(r.acked_writes_lost)),
        ("bytes_corrupted", json!(r.bytes_corrupted)),
        ("recovery_us", json!(r.recovery_us)),
        ("ios_verified", json!(r.ios_verified)),
        ("last_path", json!(r.last_path)),
    ]))
}
