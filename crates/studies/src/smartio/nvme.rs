//! The timing of a GPU's copy into a VM's memory through MDEV, which the `gpu_copy`
//! workload calls (`through = "mdev"`); the mechanism lives in `systems::smartio::mdev`.

use sim::timed::{ns, TimedFabric};
use sim::Time;
use systems::smartio::mdev::{setup_guest_dma, VmConfig};

use crate::harness::{self, RunError};

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
