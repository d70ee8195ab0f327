//! `ioctopus.qpi_congestion` as its file runs it: what STREAM pairs on the remote node do
//! to a single core's TCP receive and a UDP ping-pong, per config.

use studies::experiment::builtin;
use studies::Run;

fn series(runs: &[Run], config: &str, metric: &str) -> Vec<f64> {
    let mut pts: Vec<(u64, f64)> = runs
        .iter()
        .filter(|r| r.config == config)
        .map(|r| {
            (
                r.params["stream_pairs"].as_u64().unwrap(),
                r.metrics[metric].as_f64().unwrap(),
            )
        })
        .collect();
    pts.sort_by_key(|p| p.0);
    pts.into_iter().map(|p| p.1).collect()
}

#[test]
fn streams_on_the_remote_node_squeeze_only_the_remote_pf() {
    let exp = builtin()
        .iter()
        .find(|e| e.info.id == "ioctopus.qpi_congestion")
        .expect("built in");
    let runs = exp.run(&[]).expect("runs");
    assert_eq!(runs.len(), 3 * 7);
    let rx_remote = series(&runs, "remote", "rx_gbps");
    let udp_remote = series(&runs, "remote", "udp_latency_us");
    // Remote: receive never rises with more pairs (the NIC's turn on the loaded link
    // is still more than its ≈ 1 GB/s, so the core-bound receive holds); the ping-pong
    // only gets slower, its DMA waiting turns behind the streams.
    for w in rx_remote.windows(2) {
        assert!(w[1] <= w[0] * 1.005, "remote rx rose: {rx_remote:?}");
    }
    for w in udp_remote.windows(2) {
        assert!(w[1] >= w[0], "remote udp latency fell: {udp_remote:?}");
    }
    assert!(udp_remote[6] > udp_remote[0], "{udp_remote:?}");
    // Local and ioctopus: the PF on the workload's socket keeps its DMA off QPI.
    for config in ["local", "ioctopus"] {
        for metric in ["rx_gbps", "udp_latency_us"] {
            let s = series(&runs, config, metric);
            for x in &s {
                assert!(
                    (x / s[0] - 1.0).abs() < 0.01,
                    "{config} {metric} should stay flat: {s:?}"
                );
            }
        }
    }
    // Without streams the remote PF is the slower one, as in ioctopus.tcp_rx_1core.
    let rx_local = series(&runs, "local", "rx_gbps");
    assert!(rx_remote[0] < rx_local[0]);
    // The streams themselves: more pairs move more bytes until QPI is full.
    let st = series(&runs, "remote", "stream_gbps");
    assert_eq!(st[0], 0.0);
    assert!(st[1] > 0.0 && st[6] >= st[3], "{st:?}");
}
