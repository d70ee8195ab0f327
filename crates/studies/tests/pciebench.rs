//! pcie-bench's benchmarks as workloads (`pcie_lat`, `pcie_bw`): every test runs on a
//! user's own scenario, and the mechanisms behind pcie-bench's placements and cache
//! states each show as the relation they produce on the NFP6000 of the built-in
//! `pciebench` scenario.

use fabric::scenario::Source;
use serde_json::Value;
use studies::run::{self, overrides::Override};

/// A user's machine (examples/own_server_network.toml, exported from a real server) with
/// one pcie-bench workload on its NIC `eth0`.
fn users_machine(workload: &str) -> Source {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/own_server_network.toml");
    let text = std::fs::read_to_string(path).unwrap();
    let hw = &text[..text.find("[[workload]]").unwrap()];
    Source {
        name: "own.toml".into(),
        text: format!("{hw}\n{workload}\n[measure]\nwarmup = \"2 us\"\nduration = \"40 us\"\n"),
    }
}

fn workload(kind: &str, op: &str, extra: &str) -> String {
    format!(
        "[[workload]]\nname = \"b\"\nkind = \"{kind}\"\ndevice = \"conan.eth0\"\n\
         target = \"conan.ram.node0\"\nop = \"{op}\"\nbytes = 256\npattern = \"rand\"\n\
         cache = \"hwarm\"\n{extra}"
    )
}

fn row(src: &Source, sets: &[&str]) -> Result<serde_json::Map<String, Value>, String> {
    let sets: Vec<Override> = sets.iter().map(|s| Override::parse(s).unwrap()).collect();
    let point = run::sweep(&sets).pop().unwrap();
    let r = run::run_point(src, &point, 1).map_err(|e| e.0)?;
    Ok(r.rows[0].metrics.clone())
}

fn num(m: &serde_json::Map<String, Value>, k: &str) -> f64 {
    m[k].as_f64().unwrap_or_else(|| panic!("{k}: {m:?}"))
}

#[test]
fn every_pcie_bench_test_runs_on_a_users_nic_and_moves_its_bytes() {
    for (kind, op) in [
        ("pcie_lat", "rd"),
        ("pcie_lat", "wrrd"),
        ("pcie_bw", "rd"),
        ("pcie_bw", "wr"),
        ("pcie_bw", "rw"),
    ] {
        let m = row(&users_machine(&workload(kind, op, "")), &[]).unwrap();
        // Every read came back through the fabric's routes and every write landed.
        assert_eq!(num(&m, "faults"), 0.0, "{kind} {op}: {m:?}");
        assert!(num(&m, "bw_gbit_s") > 0.0, "{kind} {op}: {m:?}");
        assert!(num(&m, "median_ns") > 0.0, "{kind} {op}: {m:?}");
        // The imported NIC states no DMA engine pace: the row says the engine is ideal.
        assert_eq!(m["engine"], "ideal", "{kind} {op}");
    }
}

#[test]
fn a_latency_test_keeps_one_transfer_under_way_and_a_bandwidth_test_many() {
    let lat = row(&users_machine(&workload("pcie_lat", "rd", "")), &[]).unwrap();
    let bw = row(&users_machine(&workload("pcie_bw", "rd", "")), &[]).unwrap();
    // One at a time: transfers per second is the inverse of the latency.
    let one = 1e9 / num(&lat, "median_ns");
    assert!(
        (num(&lat, "transfers_per_sec") / one - 1.0).abs() < 0.02,
        "{lat:?}"
    );
    assert!(
        num(&bw, "bw_gbit_s") > 5.0 * num(&lat, "bw_gbit_s"),
        "{bw:?} {lat:?}"
    );
}

/// The NFP6000 of the built-in scenario reading 64 B, one at a time.
fn nfp_latency(sets: &[&str]) -> f64 {
    let mut src = run::source("pciebench").unwrap();
    src.text.push_str(
        "\n[[workload]]\nname = \"lat\"\nkind = \"pcie_lat\"\ndevice = \"host.nfp\"\n\
         target = \"host.ram.node0\"\nop = \"rd\"\nbytes = 64\npattern = \"seq\"\n\
         cache = \"hwarm\"\n[measure]\nwarmup = \"2 us\"\nduration = \"20 us\"\n",
    );
    num(&row(&src, sets).unwrap(), "median_ns")
}

#[test]
fn remote_memory_a_cold_cache_and_a_remote_owner_each_lengthen_a_dma_read() {
    let local = nfp_latency(&[]);
    // Across QPI and back: two crossings of the platform's 25 ns each at least.
    let remote = nfp_latency(&[
        "workload.lat.target=host.ram.node1",
        "workload.lat.control_node=1",
    ]);
    assert!(remote > local + 45.0, "remote {remote} local {local}");
    // From DRAM instead of the LLC (90 ns against 20 ns).
    let cold = nfp_latency(&["workload.lat.cache=cold"]);
    assert!(cold > local + 60.0, "cold {cold} local {local}");
    // Warmed by the other socket: the home snoops it there.
    let snooped = nfp_latency(&["workload.lat.control_node=1"]);
    assert!(snooped > cold + 45.0, "snooped {snooped} cold {cold}");
}

#[test]
fn bad_pcie_bench_workloads_are_refused_with_the_field_named() {
    let cases = [
        (workload("pcie_lat", "wr", ""), "`rd` or `wrrd`"),
        (workload("pcie_bw", "wrrd", ""), "`rd`, `wr` or `rw`"),
        (
            workload("pcie_bw", "rd", "window_bytes = 100\n"),
            "window_bytes",
        ),
        (
            workload("pcie_bw", "rd", "host_offset = 3900\n"),
            "host_offset",
        ),
        (workload("pcie_bw", "rd", "burst = 4\n"), "burst"),
        (
            workload("pcie_lat", "rd", "control_node = 9\n"),
            "control_node 9",
        ),
    ];
    for (w, want) in cases {
        let err = row(&users_machine(&w), &[]).unwrap_err();
        assert!(err.contains(want), "{want}: {err}");
    }
}

/// The NFP6000 of the built-in scenario reading 64 B at random over `window` bytes.
fn nfp_read_rate(window: u64, cache: &str, sets: &[&str]) -> f64 {
    let mut src = run::source("pciebench").unwrap();
    src.text.push_str(&format!(
        "\n[[workload]]\nname = \"bw\"\nkind = \"pcie_bw\"\ndevice = \"host.nfp\"\n\
         target = \"host.ram.node0\"\nop = \"rd\"\nbytes = 64\nwindow_bytes = {window}\n\
         pattern = \"rand\"\ncache = \"{cache}\"\n[measure]\nwarmup = \"2 us\"\nduration = \"20 us\"\n"
    ));
    num(&row(&src, sets).unwrap(), "bw_gbit_s")
}

#[test]
fn the_iotlb_reach_shows_with_4_kib_pages_and_not_with_super_pages() {
    let nosp = ["host.host.iommu=true"];
    let sp = ["host.host.iommu=true", "host.host.iommu_superpages=true"];
    // 64 KiB is 16 pages, within the IOTLB's 64 entries; 4 MiB is 1024 pages.
    let (small, large) = (
        nfp_read_rate(64 << 10, "cold", &nosp),
        nfp_read_rate(4 << 20, "cold", &nosp),
    );
    assert!(
        large < 0.85 * small,
        "4 KiB pages: {large} at 4 MiB, {small} at 64 KiB"
    );
    // Two 2 MiB pages: every lookup hits.
    let (small, large) = (
        nfp_read_rate(64 << 10, "cold", &sp),
        nfp_read_rate(4 << 20, "cold", &sp),
    );
    assert!(
        (large / small - 1.0).abs() < 0.02,
        "super pages: {large} vs {small}"
    );
}

#[test]
fn reads_slow_when_the_buffer_is_cold_or_larger_than_the_cache_that_warmed_it() {
    // Each read holds one of the NFP's 32 tags for its whole command: DRAM's extra
    // latency over the LLC's lowers the rate.
    let (warm, cold) = (
        nfp_read_rate(8 << 10, "hwarm", &[]),
        nfp_read_rate(8 << 10, "cold", &[]),
    );
    assert!(warm > 1.08 * cold, "hwarm {warm} cold {cold}");
    assert_eq!(cold, nfp_read_rate(8 << 10, "dthrash", &[]));
    // The device's own writes warm only the DDIO ways (2.5 MiB of the 25 MiB LLC), the
    // host's the whole LLC.
    let dwarm_8m = nfp_read_rate(8 << 20, "dwarm", &[]);
    let hwarm_8m = nfp_read_rate(8 << 20, "hwarm", &[]);
    assert!(
        hwarm_8m > 1.05 * dwarm_8m,
        "hwarm {hwarm_8m} dwarm {dwarm_8m} at 8 MiB"
    );
    assert!(nfp_read_rate(64 << 20, "hwarm", &[]) < 0.95 * warm);
}

/// README's side-by-side table of pcie-bench's own model is `studies::pcie_model` with
/// pcie-model's defaults, to the printed digit.
#[test]
fn readme_pcie_model_column_is_the_restated_model() {
    use studies::pcie_model::PcieModel;
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let m = PcieModel::pciebench_defaults(3, 8);
    let rows: Vec<Vec<&str>> = readme
        .lines()
        .skip_while(|l| !l.starts_with("| bytes | WR pcie-model |"))
        .skip(2)
        .take_while(|l| l.starts_with("| "))
        .map(|l| l.split('|').map(str::trim).collect())
        .collect();
    assert_eq!(rows.len(), 6, "the table's rows");
    for r in rows {
        let size: u32 = r[1].parse().unwrap();
        for (col, want) in [
            (2, m.write_gbit(size)),
            (5, m.read_gbit(size)),
            (8, m.read_write_gbit(size)),
        ] {
            assert_eq!(
                r[col],
                format!("{:.1}", want.unwrap()),
                "{size} B, column {col}"
            );
        }
    }
}
