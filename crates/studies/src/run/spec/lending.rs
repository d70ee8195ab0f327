//! The Device Lending limit workloads (timed once): `borrow_all` (a borrower borrowing a
//! lender's devices until a requester-ID LUT refuses), `map_windows` (a borrowed device's
//! mappings, each in a window of its own, until an address LUT refuses) and `lend_dma` (a
//! borrow and one DMA into the borrower's RAM, read back). Their raw schemas and reading.

use fabric::ScenarioError;
use serde::Deserialize;

use super::located::Entry;
use super::Kind;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawBorrowAll {
    name: String,
    #[allow(dead_code)]
    kind: String,
    lender: String,
    borrower: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDevice {
    name: String,
    #[allow(dead_code)]
    kind: String,
    device: String,
    borrower: String,
}

/// A `borrow_all` workload.
pub(super) fn borrow_all(e: &Entry) -> Result<(String, Kind), ScenarioError> {
    let r: RawBorrowAll = e.read()?;
    e.check(
        r.lender != r.borrower,
        &r.name,
        "borrower",
        "a host does not borrow its own devices",
    )?;
    let k = Kind::BorrowAll {
        lender: r.lender,
        borrower: r.borrower,
    };
    Ok((r.name, k))
}

/// A `map_windows` or `lend_dma` workload (`kind`).
pub(super) fn device(e: &Entry, kind: &str) -> Result<(String, Kind), ScenarioError> {
    let r: RawDevice = e.read()?;
    let (device, borrower) = (r.device, r.borrower);
    let k = if kind == "map_windows" {
        Kind::MapWindows { device, borrower }
    } else {
        Kind::LendDma { device, borrower }
    };
    Ok((r.name, k))
}
