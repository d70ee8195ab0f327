//! Finite hardware under lending: the PXH830's requester-ID LUT (32 entries, 2 reserved
//! for CPUs: 30 lent devices), its address LUT (256 windows) under per-mapping windows,
//! and a 40-bit device behind a lender NTB BAR above 2^40, with and without the lender IOMMU.

mod common;

use common::*;
use fabric::Requester;
use host::DmaDirection;
use systems::smartio::{BorrowOptions, Cluster, ControlKind, LendError};

/// A lender with `n` P4800Xs (spread over switches of 16) and the borrower.
fn many_devices(n: usize) -> String {
    let mut s = String::from(
        r#"include = ["platforms/smartio.toml", "platforms/devices.toml"]

[scenario]
name = "many"

[[host]]
name = "lender"
platform = "smartio_host"
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"
"#,
    );
    for sw in 0..n.div_ceil(16) {
        s += &format!(
            "[[host.switch]]\nname = \"sw{sw}\"\nchip = \"mobo_switch\"\nparent = \"rc0\"\nlink = {{ gen = 3, width = 16 }}\n"
        );
    }
    for i in 0..n {
        s += &format!(
            "[[host.device]]\nname = \"nvme{i}\"\ndevice_model = \"p4800x\"\nparent = \"sw{}\"\n",
            i / 16
        );
    }
    s + r#"
[[host]]
name = "borrower"
platform = "smartio_host"
iommu = true
[[host.ntb]]
name = "ntb"
adapter = "pxh830"
parent = "rc0"

[[cable]]
ends = ["lender.ntb", "borrower.ntb"]
link = { gen = 3, width = 8 }
"#
}

#[test]
fn the_31st_borrow_through_one_pxh830_finds_its_requester_lut_full() {
    let mut f = load_text(&many_devices(31));
    let mut c = Cluster::new(&f);
    let borrower = host(&f, "borrower");
    let mut held = Vec::new();
    for i in 0..31 {
        let fdid = c.fdid_by_name(&f, &format!("lender.nvme{i}")).unwrap();
        c.lend(fdid).unwrap();
        match c.borrow(&mut f, borrower, fdid, BorrowOptions::exclusive()) {
            Ok(b) => held.push(b),
            Err(e) => {
                assert_eq!(i, 30, "only the 31st fails: {e}");
                assert!(
                    matches!(
                        e,
                        LendError::RequesterLutFull {
                            used: 30,
                            capacity: 32,
                            reserved: 2,
                            ..
                        }
                    ),
                    "{e}"
                );
                assert_eq!(
                    e.to_string(),
                    "cannot lend fdid 30 (`lender.nvme30`) to host `borrower`: the requester-ID LUT of lender.ntb is full: 30 of 32 entries in use, 2 reserved for CPUs"
                );
            }
        }
    }
    assert_eq!(held.len(), 30);
    assert_eq!(
        c.borrows().len(),
        30,
        "the failed borrow left nothing behind"
    );
    // Returning one makes room for the 31st.
    c.return_device(&mut f, held[0]).unwrap();
    let last = c.fdid_by_name(&f, "lender.nvme30").unwrap();
    c.borrow(&mut f, borrower, last, BorrowOptions::exclusive())
        .unwrap();
}

#[test]
fn per_mapping_windows_run_the_address_lut_out_with_its_named_error() {
    let mut f = fabric(false, false);
    let mut c = Cluster::new(&f);
    let gpu = c.fdid_by_name(&f, "lender.gpu").unwrap();
    c.lend(gpu).unwrap();
    let borrower = host(&f, "borrower");
    let lntb = ntb(&f, "lender");
    let b = c
        .borrow(&mut f, borrower, gpu, BorrowOptions::exclusive())
        .unwrap();
    let free = f.ntb_state(lntb).free_windows();
    let ws = f.topo.ntbs[lntb.index()].window_size;
    let mut ok = 0;
    let err = loop {
        // One buffer per 32 MiB window of the borrower's RAM.
        let buf = ram(&f, "borrower.ram", ok as u64 * ws);
        match c.map_for_device(&mut f, b, buf, 4096, DmaDirection::FromDevice) {
            Ok(_) => ok += 1,
            Err(e) => break e,
        }
        assert!(ok <= 256, "the LUT has 256 entries");
    };
    assert_eq!(
        ok, free,
        "every free address-LUT entry was used, one per mapping"
    );
    assert_eq!(ok, 256);
    assert!(
        matches!(err, LendError::AddressLutFull { capacity: 256, .. }),
        "{err}"
    );
    assert_eq!(
        err.to_string(),
        "fdid 0 (`lender.gpu`): the address LUT of lender.ntb is full: all 256 windows in use"
    );
    assert_eq!(c.stats().get(ControlKind::WindowSetup), ok as u64 + 1);
    // Returning frees them all.
    c.return_device(&mut f, b).unwrap();
    assert_eq!(f.ntb_state(lntb).free_windows(), 256);
}

#[test]
fn a_40_bit_device_behind_a_high_ntb_bar_needs_the_lender_iommu() {
    for lender_iommu in [false, true] {
        let mut f = load_text(&text(lender_iommu, true, r#"mmio64_base = "2 TiB""#, ""));
        let lntb = ntb(&f, "lender");
        let bar = f
            .topo
            .node(f.topo.ntbs[lntb.index()].fn_node)
            .bar(f.topo.ntbs[lntb.index()].window_bar)
            .unwrap()
            .addr;
        assert!(
            bar >= 1 << 40,
            "the scenario puts the NTB BAR high: {bar:#x}"
        );
        let dev = function(&f, "lender.gpu");
        assert_eq!(f.topo.node(dev).dma_mask_bits, 40);
        let mut c = Cluster::new(&f);
        let gpu = c.fdid_by_name(&f, "lender.gpu").unwrap();
        c.lend(gpu).unwrap();
        let borrower = host(&f, "borrower");
        let r = c.borrow(&mut f, borrower, gpu, BorrowOptions::exclusive());
        if !lender_iommu {
            let e = r.unwrap_err();
            assert!(
                e.to_string()
                    .contains("has a 40-bit DMA mask and cannot reach bus address")
                    && e.to_string().contains("no IOMMU to remap it"),
                "{e}"
            );
            assert!(c.borrows().is_empty());
            assert_eq!(
                f.ntb_state(lntb).programmed_windows(),
                0,
                "nothing left programmed"
            );
            continue;
        }
        let b = r.unwrap();
        let w = c.dma_window(&f, b).unwrap().unwrap();
        assert!(w.ntb_base >= 1 << 40 && w.device_base < 1 << 40, "{w:?}");
        let buf = ram(&f, "borrower.ram", 1 << 20);
        let m = c
            .map_for_device(&mut f, b, buf, 4096, DmaDirection::FromDevice)
            .unwrap();
        assert!(m.addr.0 < 1 << 40);
        let data = bytes(4096, 1);
        f.store(Requester::Function(dev), m.addr.0, &data).unwrap();
        assert_eq!(peek(&f, buf, 4096), data);
    }
}
