//! Probes of the SmartIO NVMe and MDEV experiments: a kernel-style block driver's QD-1
//! latency (`smartio.nvme_latency`), a distributed-driver client with its SQ placed
//! somewhere (`smartio.sq_placement`), many clients sharing one controller
//! (`smartio.nvme_sharing`), and a GPU's copy into a VM's memory through MDEV
//! (`smartio.mdev`). The mechanisms live in `systems`; these only read arguments and
//! report fields.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use sim::timed::ns;
use sim::Time;
use systems::smartio::mdev::{setup_guest_dma, VmConfig};
use systems::smartio::nvme_bench;
use systems::smartio::nvme_dist::SqPlacement;

use crate::harness::{self, RunError};
use crate::probe::{Fields, ProbeCx};

/// Reads measured per QD-1 run (after the warm-up); the model has no source of variance
/// at QD 1 on an idle fabric, so more would not move a percentile.
const QD1_READS: u64 = 1000;
const QD1_WARMUP: u64 = 50;
/// Writes, then reads of those blocks, in `nvme_blk_qd1`.
const BLK_IOS: u64 = 300;

fn fields(v: Vec<(&str, Value)>) -> Fields {
    v.into_iter()
        .map(|(k, v)| (k.to_string(), v))
        .collect::<BTreeMap<_, _>>()
}

/// `nvme_blk_qd1`: args `host`, `device`, `borrowed` ("true"/"false").
pub fn nvme_blk_qd1(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let borrowed = cx.choice("borrowed", "true", "false")?;
    let (host, device) = (cx.arg("host")?, cx.arg("device")?);
    let r =
        systems::drivers::nvme_blk::nvme_qd1_latency(cx.tf, &host, &device, borrowed, BLK_IOS, 7)
            .map_err(|e| cx.error(e))?;
    if r.mismatches > 0 {
        return Err(cx.error(format!("{} blocks read back wrong", r.mismatches)));
    }
    Ok(fields(vec![
        ("median_us", json!(r.median_us)),
        ("p99_us", json!(r.p99_us)),
        ("control_msgs_per_io", json!(r.control_msgs_per_io)),
        ("bytes_verified", json!(r.bytes_verified)),
    ]))
}

/// An `sq` argument: `borrower_ram` (the client's RAM), `lender_ram` (the lender's, by
/// the SQ's hints) or `HOST.DEVICE.barN` (a device's memory).
fn sq_placement(cx: &ProbeCx, sq: &str) -> Result<SqPlacement, RunError> {
    Ok(match sq {
        "borrower_ram" => SqPlacement::NearCpu,
        "lender_ram" => SqPlacement::NearDevice,
        other => {
            let (dev, bar) = other
                .rsplit_once(".bar")
                .and_then(|(d, b)| b.parse::<u8>().ok().map(|b| (d, b)))
                .ok_or_else(|| {
                    cx.error(format!(
                        "sq = `{other}`: use \"borrower_ram\", \"lender_ram\" or a device BAR (\"lender.gpu.bar1\")"
                    ))
                })?;
            SqPlacement::DeviceMemory {
                device: dev.to_string(),
                bar,
            }
        }
    })
}

/// `nvme_sq_qd1`: args `client`, `device`, `sq` (see [`sq_placement`]).
pub fn nvme_sq_qd1(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let sq = sq_placement(cx, &cx.arg("sq")?)?;
    let (client, device) = (cx.arg("client")?, cx.arg("device")?);
    let r = nvme_bench::qd1_reads(cx.tf, &client, &device, sq, QD1_WARMUP, QD1_READS, 1)
        .map_err(|e| cx.error(e))?;
    Ok(fields(vec![
        ("median_us", json!(r.median_us)),
        ("p99_us", json!(r.p99_us)),
        ("read_hops", json!(r.sq_read_hops)),
        ("read_roots", json!(r.sq_read_roots)),
        ("control_msgs_per_io", json!(r.control_msgs_per_io)),
    ]))
}

/// `nvme_sharing`: args `device`, `clients`, optionally `sq` (where every client's SQ is,
/// as for `nvme_sq_qd1`; without it, by the SQ's hints: `lender_ram`); clients run on
/// every other host in declaration order.
pub fn nvme_sharing(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let device = cx.arg("device")?;
    let clients: usize = cx
        .arg("clients")?
        .parse()
        .map_err(|_| cx.error("clients must be a whole number"))?;
    let sq = match cx.arg("sq") {
        Ok(sq) => sq_placement(cx, &sq)?,
        Err(_) => SqPlacement::NearDevice,
    };
    let hosts: Vec<String> = cx
        .tf
        .fabric
        .topo
        .hosts
        .iter()
        .map(|h| h.name.clone())
        .collect();
    let setup = nvme_bench::SharingSetup {
        device: &device,
        hosts: &hosts,
        clients,
        depth: 1,
        sq,
        warmup: Time::from_us(100),
        window: Time::from_us(2000),
    };
    let r = nvme_bench::sharing_with(cx.tf, &setup).map_err(|e| cx.error(e))?;
    Ok(fields(vec![
        ("clients_ok", json!(r.clients_ok)),
        ("total_kiops", json!(r.total_kiops)),
        (
            "min_client_kiops",
            json!(if r.clients_ok == 0 {
                0.0
            } else {
                r.min_client_kiops
            }),
        ),
        ("jain_fairness", json!(r.jain_fairness)),
        ("error", r.error.map_or(Value::Null, Value::String)),
        ("control_msgs_in_window", json!(r.control_msgs_in_window)),
        ("median_us", json!(r.median_us)),
        ("p99_us", json!(r.p99_us)),
    ]))
}

/// `gpu_copy_mdev`: bandwidthTest of a GPU (`gpu`) lent to a VM on `vm_host` through
/// MDEV (4 GiB guest on 2 MiB host pages), copying into or out of guest memory; timed
/// like `gpu_copy`: the vCPU's doorbell through the borrower's window, the copy, the
/// completion flag the GPU writes into guest memory and the vCPU's poll of it.
pub fn gpu_copy_mdev(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let b = cx.bytes()?;
    let write = cx.choice("op", "write", "read")?;
    let (gpu, vm_host) = (cx.arg("gpu")?, cx.arg("vm_host")?);
    let tf = &mut *cx.tf;
    // The buffer, then one more page for the completion flag.
    let s = setup_guest_dma(
        &mut tf.fabric,
        &gpu,
        &vm_host,
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
    let counters = harness::counters_json(tf, b);
    cx.set_counters(counters);
    Ok(fields(vec![(
        "gbps",
        json!(harness::gbps(b, launch + dma + notify)),
    )]))
}

/// `multicast_identify`: args `device`, `hosts` — one Identify Controller whose data the
/// controller writes once into a multicast group of `hosts` hosts.
pub fn multicast_identify(cx: &mut ProbeCx) -> Result<Fields, RunError> {
    let device = cx.arg("device")?;
    let hosts: usize = cx
        .arg("hosts")?
        .parse()
        .map_err(|_| cx.error("hosts must be a whole number"))?;
    let r = systems::smartio::multicast::multicast_identify(cx.tf, &device, hosts)
        .map_err(|e| cx.error(e))?;
    Ok(fields(vec![
        ("deliveries", json!(r.deliveries)),
        ("bytes_identical", json!(r.bytes_identical)),
        ("skipped_copies", json!(r.skipped_copies)),
    ]))
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
