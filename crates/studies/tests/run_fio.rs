//! `nudma run`'s fio workload on examples/ioctopus_fio.toml: four media-bound PM1725a,
//! one row per job with its throughput, and bad job fields refused where they are written.

use std::path::Path;

use fabric::scenario::Source;
use studies::run::{self, overrides::Override};

fn example() -> Source {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/ioctopus_fio.toml");
    run::source(path.to_str().unwrap()).unwrap()
}

fn point(set: &[&str]) -> Result<run::PointResult, String> {
    let sets: Vec<Override> = set.iter().map(|s| Override::parse(s).unwrap()).collect();
    run::run_point(&example(), &run::sweep(&sets)[0], 1).map_err(|e| e.to_string())
}

#[test]
fn four_ssds_each_give_their_media_rate_and_the_same_seed_the_same_rows() {
    let p = point(&[]).unwrap();
    assert_eq!(p.rows.len(), 6);
    for d in 0..4 {
        let r = p
            .rows
            .iter()
            .find(|r| r.params["workload"] == format!("fio{d}"))
            .unwrap();
        let gbps = r.metrics["throughput_gbyte_s"].as_f64().unwrap();
        // PM1725a media 3.3 GB/s, counted in whole 128 KiB completions over 1 ms.
        assert!(gbps > 3.1 && gbps <= 3.3, "fio{d}: {gbps}");
        assert_eq!(r.metrics["errors"], 0);
        assert!(
            r.metrics["latency_ns_p50"].as_f64().unwrap() > 90_000.0,
            "queued behind the media"
        );
    }
    let again = point(&[]).unwrap();
    let rows = |p: &run::PointResult| format!("{:?}", p.rows);
    assert_eq!(rows(&p), rows(&again));
}

#[test]
fn bad_fio_fields_are_located_at_their_workload() {
    let e = point(&["workload.fio0.iodepth=1024"]).unwrap_err();
    assert!(e.contains("ioctopus_fio.toml (with --set):"), "{e}");
    assert!(
        e.contains("workload `fio0`: iodepth = 1024: an I/O queue of 1024 entries"),
        "{e}"
    );
    let e = point(&["workload.fio2.device=server.nvme7"]).unwrap_err();
    assert!(
        e.contains("workload `fio2`: no device `server.nvme7`"),
        "{e}"
    );
    let e = point(&["workload.fio1.block_bytes=256 KiB"]).unwrap_err();
    assert!(e.contains("maximum transfer (MDTS) of 128 KiB"), "{e}");
    let e = point(&["workload.fio1.threads=0"]).unwrap_err();
    assert!(
        e.contains("must be at least 1 thread (key `workload.fio1.threads`)"),
        "{e}"
    );
}
