//! Relationships the SmartIO timing must show by mechanism, whatever the constants:
//! reads lose more than writes when hops are added (they pay the round trip, writes are
//! posted); a root that re-issues reads as 64 B requests cuts read bandwidth; the same
//! physical path gives the same result whether the device is local or lent; more chips
//! mean more latency; runs are deterministic.

use devices::Op;
use studies::harness::*;

fn gpu_copy_gbps(
    scenario: &str,
    iommu: &[(&str, bool)],
    gpu: &str,
    ram: &str,
    write: bool,
    bytes: u64,
) -> f64 {
    let mut tf = load(scenario, iommu).unwrap();
    let g = requester(&tf, gpu).unwrap();
    let (bus, spec) = dma_to(&mut tf, g, ram, 1 << 30, bytes).unwrap();
    let op = if write {
        Op::Write { dst: bus }
    } else {
        Op::Read { src: bus }
    };
    gbps(bytes, dma_time(&mut tf, g, spec, op, bytes).unwrap())
}

const MB4: u64 = 4 << 20;

#[test]
fn reads_degrade_with_hops_faster_than_writes() {
    let rb = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[],
        "lender.gpu",
        "borrower.ram",
        false,
        MB4,
    );
    let rs = gpu_copy_gbps(
        "smartio_chassis_mxs824",
        &[],
        "lender.gpu",
        "borrower.ram",
        false,
        MB4,
    );
    let wb = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[],
        "lender.gpu",
        "borrower.ram",
        true,
        MB4,
    );
    let ws = gpu_copy_gbps(
        "smartio_chassis_mxs824",
        &[],
        "lender.gpu",
        "borrower.ram",
        true,
        MB4,
    );
    let read_loss = (rb - rs) / rb;
    let write_loss = (wb - ws) / wb;
    assert!(
        read_loss > 0.05,
        "a cluster switch on the way costs reads: {rb} → {rs}"
    );
    assert!(
        read_loss > 3.0 * write_loss.max(0.0),
        "reads {read_loss:.3} vs writes {write_loss:.3}"
    );
}

#[test]
fn a_root_that_splits_reads_cuts_read_bandwidth_but_not_writes() {
    let off = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[],
        "lender.gpu",
        "borrower.ram",
        false,
        MB4,
    );
    let on = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[("lender", true)],
        "lender.gpu",
        "borrower.ram",
        false,
        MB4,
    );
    assert!(
        on < off / 3.0,
        "lender IOMMU sends reads through the root: {off} → {on}"
    );
    let w_off = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[],
        "lender.gpu",
        "borrower.ram",
        true,
        MB4,
    );
    let w_on = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[("lender", true)],
        "lender.gpu",
        "borrower.ram",
        true,
        MB4,
    );
    assert!(
        w_on > 0.8 * w_off,
        "posted writes pass the root without splitting: {w_off} → {w_on}"
    );
}

#[test]
fn the_same_path_gives_the_same_result_for_local_and_lent() {
    // The chassis on the user's own host, and the same chassis on the lender writing the
    // lender's own RAM: GPU → PEX8796 → HIB68 → HIB68 → root in both.
    for write in [true, false] {
        let local = gpu_copy_gbps(
            "smartio_chassis_baseline",
            &[],
            "user.gpu",
            "user.ram",
            write,
            1 << 20,
        );
        let lender = gpu_copy_gbps(
            "smartio_chassis_b2b",
            &[],
            "lender.gpu",
            "lender.ram",
            write,
            1 << 20,
        );
        assert_eq!(
            local.to_bits(),
            lender.to_bits(),
            "write={write}: {local} vs {lender}"
        );
    }
}

#[test]
fn more_chips_on_the_way_mean_more_latency() {
    let runs = studies::experiment::run_builtin("smartio.ram_latency").unwrap();
    let get = |c: &str| {
        runs.iter().find(|r| r.config == c).unwrap().metrics["oneway_ns"]
            .as_f64()
            .unwrap()
    };
    assert!(
        get("pxh830_b2b") < get("pxh810_b2b"),
        "x16 serializes faster than x8"
    );
    assert!(
        get("via_mxs824") > get("pxh830_b2b") + 150.0,
        "a cluster switch adds its chip and a cable"
    );
    assert!(
        get("three_way") > get("pxh830_b2b") + 200.0,
        "two motherboard switches on the way"
    );
}

#[test]
fn reproduce_is_deterministic() {
    let a = studies::experiment::run_builtin("smartio.ram_latency").unwrap();
    let b = studies::experiment::run_builtin("smartio.ram_latency").unwrap();
    assert_eq!(a, b);
    let x = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[],
        "lender.gpu",
        "borrower.ram",
        false,
        1 << 20,
    );
    let y = gpu_copy_gbps(
        "smartio_chassis_b2b",
        &[],
        "lender.gpu",
        "borrower.ram",
        false,
        1 << 20,
    );
    assert_eq!(x.to_bits(), y.to_bits());
}

#[test]
fn p2p_reports_the_reference_path_shapes() {
    let runs = studies::experiment::run_builtin("smartio.p2p").unwrap();
    let at = |c: &str| runs.iter().find(|r| r.config == c).unwrap();
    assert_eq!(
        (
            at("1l_p2p_sw").metrics["hops"].as_u64(),
            at("1l_p2p_sw").metrics["roots"].as_u64()
        ),
        (Some(1), Some(0))
    );
    assert_eq!(
        (
            at("2l_p2p_sw").metrics["hops"].as_u64(),
            at("2l_p2p_sw").metrics["roots"].as_u64()
        ),
        (Some(4), Some(0))
    );
    assert_eq!(
        at("1l_p2p_iommu").metrics["roots"].as_u64(),
        Some(1),
        "IOMMU on: up to the root"
    );
    // Ping-pong over the root is slower than under one switch.
    let pp = |c: &str| at(c).metrics["pingpong_ns"].as_f64().unwrap();
    assert!(pp("loc_p2p_root") > pp("loc_p2p_sw"));
    assert!(pp("2l_p2p_sw") > pp("1l_p2p_sw"));
}

#[test]
fn the_gpu_pingpong_moves_real_counter_bytes_and_catches_a_misplaced_write() {
    use devices::{pingpong, Counters, Gpu, GpuError};
    let mut tf = load("smartio_three_way", &[]).unwrap();
    let (a, b) = (
        requester(&tf, "lender1.gpu0").unwrap(),
        requester(&tf, "lender2.gpu0").unwrap(),
    );
    let node = |r: fabric::Requester| match r {
        fabric::Requester::Function(n) => n,
        _ => unreachable!(),
    };
    let ga = Gpu::from_node(&tf, node(a)).unwrap();
    let gb = Gpu::from_node(&tf, node(b)).unwrap();
    let a_to_b = map_buffer(&mut tf, a, "lender2.gpu0.bar1", 0x2000, 4).unwrap();
    let b_to_a = map_buffer(&mut tf, b, "lender1.gpu0.bar1", 0x1000, 4).unwrap();
    let ok = Counters::InGpuMemory {
        a_to_b,
        b_to_a,
        a_offset: 0x1000,
        b_offset: 0x2000,
    };
    let t = pingpong(&mut tf, &ga, &gb, ok, 3).unwrap();
    assert!(
        t.as_ns() > 1000,
        "two NTB crossings each way and two polls: {t}"
    );
    assert_eq!(
        gb.own_u32(&tf, 0x2000),
        5,
        "B's counter holds A's last ping (2k+1, k = 2)"
    );
    assert_eq!(ga.own_u32(&tf, 0x1000), 6);
    // B polling the wrong word sees a stale value: the check fires.
    let wrong = Counters::InGpuMemory {
        a_to_b,
        b_to_a,
        a_offset: 0x1000,
        b_offset: 0x3000,
    };
    assert!(matches!(
        pingpong(&mut tf, &ga, &gb, wrong, 1),
        Err(GpuError::WrongValue { got: 0, want: 1 })
    ));
}

/// Packets a link carried in one direction, from the counters JSON.
fn packets(c: &serde_json::Value, link: &str) -> u64 {
    c["links"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["name"] == link)
        .unwrap_or_else(|| panic!("no link {link} in {c}"))["packets"]
        .as_u64()
        .unwrap()
}

#[test]
fn counters_show_the_root_re_issuing_each_gpu_read_as_64_byte_reads() {
    let mut tf = load("smartio_pxh810_b2b", &[]).unwrap();
    let g = requester(&tf, "lender.gpu").unwrap();
    let bytes = 1 << 20;
    let (bus, spec) = dma_to(&mut tf, g, "borrower.ram", 1 << 30, bytes).unwrap();
    dma_time(&mut tf, g, spec, Op::Read { src: bus }, bytes).unwrap();
    let c = counters_json(&tf, bytes);
    let from_gpu = packets(&c, "link lender.gpu →");
    let to_ntb = packets(&c, "link lender.ntb ←");
    assert_eq!(from_gpu, bytes / spec.mrrs as u64, "the GPU's own requests");
    assert_eq!(to_ntb, bytes / 64, "re-issued below the root");
    let mem = &c["memory"][0];
    assert_eq!(mem["name"], "borrower DRAM node0");
    assert_eq!(
        mem["read_bytes"], bytes,
        "every byte read once from the borrower's DRAM"
    );
}
