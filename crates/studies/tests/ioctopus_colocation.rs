//! `ioctopus.colocation` as its file runs it: what memcached or netperf-receive instances
//! on 6 cores per socket do to the PageRank victim on the other 8, per NIC placement.

use studies::experiment::builtin;
use studies::Run;

fn metric(runs: &[Run], config: &str, io: &str, name: &str) -> f64 {
    runs.iter()
        .find(|r| r.config == config && r.params["io"] == io)
        .unwrap_or_else(|| panic!("no run {config} {io}"))
        .metrics[name]
        .as_f64()
        .unwrap()
}

/// The port's line rate (docs/hardware.md §1: 100 Gb/s) per direction.
const LINE_GBPS: f64 = 100.0;

#[test]
fn remote_dma_slows_the_victim_and_the_octonic_removes_it() {
    let exp = builtin()
        .iter()
        .find(|e| e.info.id == "ioctopus.colocation")
        .expect("built in");
    let runs = exp.run(&[]).expect("runs (every GET reply checked whole)");
    assert_eq!(runs.len(), 3 * 2);
    for io in ["memcached", "netperf"] {
        let slow = |c: &str| metric(&runs, c, io, "pagerank_slowdown");
        let gbps = |c: &str| metric(&runs, c, io, "io_throughput_gbps");
        // The victim progresses and I/O only ever slows it.
        for c in ["local", "remote", "ioctopus"] {
            assert!(
                slow(c) >= 0.999 && slow(c).is_finite(),
                "{io} {c}: {}",
                slow(c)
            );
        }
        // Remote: the I/O's DMA crosses QPI into DRAM beside the victim's reads.
        assert!(
            slow("remote") > slow("local") * 1.05,
            "{io}: remote {:.3} vs local {:.3}",
            slow("remote"),
            slow("local")
        );
        // The octoNIC's PF is local to every instance: as local.
        assert!(
            (slow("ioctopus") / slow("local") - 1.0).abs() < 0.01,
            "{io}: ioctopus {:.3} vs local {:.3}",
            slow("ioctopus"),
            slow("local")
        );
        assert!((gbps("ioctopus") / gbps("local") - 1.0).abs() < 0.01);
        for c in ["local", "remote", "ioctopus"] {
            // netperf is one direction; memcached's values go both ways, 9:1 GETs out, so
            // at most the line rate out plus a ninth of it in.
            let bound = match io {
                "netperf" => LINE_GBPS,
                _ => LINE_GBPS * (1.0 + 1.0 / 9.0) * 1.02,
            };
            assert!(
                gbps(c) > 0.5 * LINE_GBPS && gbps(c) <= bound,
                "{io} {c}: {:.1} Gb/s on a {LINE_GBPS} Gb/s port",
                gbps(c)
            );
        }
    }
}
