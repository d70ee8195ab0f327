//! Finite tables under Device Lending (`smartio.limits`, the `borrow_all`, `map_windows`
//! and `lend_dma` workloads), driven through the SmartIO layer (`systems::smartio`) until
//! one refuses: a borrower borrowing a lender's devices until a requester-ID LUT is full,
//! a borrowed device's per-mapping windows (no borrower IOMMU) until an address LUT is
//! full, and a borrow plus one DMA of a device whose DMA mask cannot reach the lender's
//! NTB BAR. Each reports how far it got and the error that stopped it, as the layer words
//! it; the limits themselves are the adapters' catalog entries, nothing here.

use fabric::Fabric;
use host::{DmaDirection, PhysAddr};
use serde_json::{json, Value};
use sim::timed::TimedFabric;
use systems::smartio::{BorrowOptions, Cluster, LendError};

use crate::harness::RunError;

/// A limit's metrics: what it got to, and the refusal that stopped it (null if none).
pub type Reached = Vec<(&'static str, Value)>;

fn host_id(f: &Fabric, name: &str) -> Result<fabric::HostId, RunError> {
    f.topo
        .host_by_name(name)
        .ok_or_else(|| RunError(format!("no host `{name}`")))
}

fn fields(count_name: &'static str, count: usize, error: Option<String>) -> Reached {
    vec![
        (count_name, json!(count)),
        ("error", error.map_or(Value::Null, Value::String)),
    ]
}

/// Host `borrower` borrows every device of host `lender` (exclusively, in fabric device ID
/// order), each lent first, until a borrow is refused. Fields: `borrowed`, how many it
/// held then; `error`, the refusal (null when every device could be borrowed).
pub fn borrow_until_full(
    tf: &mut TimedFabric,
    lender: &str,
    borrower: &str,
) -> Result<Reached, RunError> {
    let f = &mut tf.fabric;
    let (lender, borrower) = (host_id(f, lender)?, host_id(f, borrower)?);
    let mut c = Cluster::new(f);
    let fdids: Vec<_> = c
        .pool()
        .devices()
        .iter()
        .filter(|d| d.host == lender)
        .map(|d| d.fdid)
        .collect();
    let mut borrowed = 0;
    for fdid in fdids {
        let r = c
            .lend(fdid)
            .and_then(|()| c.borrow(f, borrower, fdid, BorrowOptions::exclusive()));
        match r {
            Ok(_) => borrowed += 1,
            Err(e) => return Ok(fields("borrowed", borrowed, Some(e.to_string()))),
        }
    }
    Ok(fields("borrowed", borrowed, None))
}

/// Host `borrower` borrows `device` and maps 4 KiB buffers of its RAM for it, each in a
/// window of its own (buffers one window size apart, the largest of the fabric's
/// adapters), until a mapping is refused. Without a borrower IOMMU every mapping takes a
/// lender window; with one they share the DMA window. Fields: `windows`, the mappings
/// made; `error`, the refusal (null only if no table refused, which cannot happen: every
/// window of every adapter is tried and one more). The borrower's RAM running out first
/// is an error.
pub fn map_until_full(
    tf: &mut TimedFabric,
    device: &str,
    borrower_name: &str,
) -> Result<Reached, RunError> {
    let f = &mut tf.fabric;
    let borrower = host_id(f, borrower_name)?;
    let ram = format!("{borrower_name}.ram");
    let what = device;
    let stride = f.topo.ntbs.iter().map(|n| n.window_size).max().unwrap_or(0);
    let limit: usize = f.topo.ntbs.iter().map(|n| n.lut_windows as usize).sum();
    let mut c = Cluster::new(f);
    let lend_err = |e: LendError| RunError(format!("{what}: {e}"));
    let fdid = c.fdid_by_name(f, device).map_err(lend_err)?;
    c.lend(fdid).map_err(lend_err)?;
    let b = c
        .borrow(f, borrower, fdid, BorrowOptions::exclusive())
        .map_err(lend_err)?;
    let mut windows = 0;
    // Every window of every adapter, and one more: the table must refuse by then.
    while windows <= limit {
        let (host, addr) = f
            .resolve_address(&ram, windows as u64 * stride)
            .map_err(|e| {
                RunError(format!(
                    "{what}: {ram} ends before the address LUT is full ({windows} windows mapped): {e}"
                ))
            })?;
        match c.map_for_device(
            f,
            b,
            PhysAddr { host, addr },
            4096,
            DmaDirection::FromDevice,
        ) {
            Ok(_) => windows += 1,
            Err(e) => return Ok(fields("windows", windows, Some(e.to_string()))),
        }
    }
    Ok(fields("windows", windows, None))
}

/// Host `borrower` borrows `device` and the device writes 4 KiB into a buffer of the
/// borrower's RAM mapped for it; the bytes are read back by the borrower's CPU. Fields:
/// `ok`, whether the borrow, the mapping and the DMA all worked with the bytes intact;
/// `error`, what failed (null when it worked).
pub fn lend_dma(
    tf: &mut TimedFabric,
    device: &str,
    borrower_name: &str,
) -> Result<Reached, RunError> {
    let borrower = host_id(&tf.fabric, borrower_name)?;
    let cpu = crate::harness::requester(tf, &format!("{borrower_name}.cpu"))?;
    let dev = crate::harness::requester(tf, device)?;
    let ram = format!("{borrower_name}.ram");
    let (host, addr) = tf
        .fabric
        .resolve_address(&ram, 1 << 20)
        .map_err(RunError::from(ram.as_str()))?;
    let f = &mut tf.fabric;
    let mut c = Cluster::new(f);
    let mut attempt = || -> Result<(), String> {
        let fdid = c.fdid_by_name(f, device).map_err(|e| e.to_string())?;
        c.lend(fdid).map_err(|e| e.to_string())?;
        let b = c
            .borrow(f, borrower, fdid, BorrowOptions::exclusive())
            .map_err(|e| e.to_string())?;
        let m = c
            .map_for_device(
                f,
                b,
                PhysAddr { host, addr },
                4096,
                DmaDirection::FromDevice,
            )
            .map_err(|e| e.to_string())?;
        let data: Vec<u8> = (0..4096u32).map(|i| (i * 13 + 7) as u8).collect();
        f.store(dev, m.addr.0, &data).map_err(|e| {
            format!(
                "the device's write faulted: {}",
                fabric::describe::fault_text(&f.topo, &e)
            )
        })?;
        let mut back = vec![0; data.len()];
        f.load(cpu, addr, &mut back).map_err(|e| {
            format!(
                "reading the buffer back faulted: {}",
                fabric::describe::fault_text(&f.topo, &e)
            )
        })?;
        if back != data {
            return Err("the device's write did not land in the buffer".into());
        }
        Ok(())
    };
    Ok(match attempt() {
        Ok(()) => vec![("ok", json!(true)), ("error", Value::Null)],
        Err(e) => vec![("ok", json!(false)), ("error", json!(e))],
    })
}
