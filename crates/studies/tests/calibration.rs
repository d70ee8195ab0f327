//! What the calibration rests on (docs/hardware.md §2): which published points
//! parameters are fitted on, that the tables say so, that the P4000 has no published
//! figure, that `ntb_added_ns` comes from the route and not from a constant, and the
//! counting convention of the peer-to-peer table.

use devices::Op;
use fabric::{Basis as ParamBasis, Topology};
use sim::net::Hop;
use sim::timed::TimedFabric;
use studies::experiment::builtin;
use studies::harness::*;
use studies::result::{Basis, Reference};
use studies::smartio;

/// The built-in scenarios whose tables hold the fitted parameters (every platform, chip
/// and device model the experiments use).
const SCENARIOS: [&str; 7] = [
    "smartio_pxh810_b2b",
    "smartio_chassis_b2b",
    "smartio_chassis_k40c",
    "smartio_three_way",
    "ioctopus_r730",
    "rdma_haswell",
    "pciebench",
];

fn topology(name: &str) -> Topology {
    fabric::builtin::load_builtin(name)
        .unwrap()
        .unwrap()
        .topology
}

fn refs(id: &str) -> Vec<&'static Reference> {
    builtin()
        .iter()
        .filter(|e| e.info.id == id)
        .flat_map(|e| e.references.iter())
        .collect()
}

/// The basis text of a parameter named as a calibration point names it: a platform
/// timing key (`rc_p2p_read_tags`), `<device model> <key>` (`k40c dma_max_reads`) or
/// `<chip> <what>` (`pxh810_switch completion credits`, a built-in chip's source).
fn calibrated_basis(param: &str) -> Option<String> {
    let words: Vec<&str> = param.split_whitespace().collect();
    for name in SCENARIOS {
        let t = topology(name);
        match words.as_slice() {
            [key] => {
                for p in &t.platforms {
                    if let Some(ParamBasis::Calibrated(on)) =
                        p.timing.as_ref().and_then(|pt| pt.basis.get(*key))
                    {
                        return Some(on.clone());
                    }
                    // Network-stack costs (`[platform.X.netstack]`).
                    if let Some(ParamBasis::Calibrated(on)) =
                        p.netstack.as_ref().and_then(|n| n.basis.get(*key))
                    {
                        return Some(on.clone());
                    }
                }
            }
            [first, rest @ ..] => {
                for d in &t.devices {
                    if d.device_model.as_deref() == Some(*first) {
                        if let Some(ParamBasis::Calibrated(on)) = d.timed.basis.get(rest[0]) {
                            return Some(on.clone());
                        }
                    }
                }
                if let Some(c) = t.chips.iter().find(|c| c.name == *first) {
                    if c.source.contains("calibrated") {
                        return Some(c.source.clone());
                    }
                }
            }
            [] => {}
        }
    }
    None
}

#[test]
fn every_calibration_point_names_parameters_the_tables_mark_calibrated_on_it() {
    let mut n = 0;
    for e in builtin() {
        for r in &e.references {
            let Basis::Calibration(params) = r.basis else {
                continue;
            };
            for p in params {
                n += 1;
                let on = calibrated_basis(p).unwrap_or_else(|| {
                    panic!(
                        "{} {:?}: `{p}` is not marked calibrated",
                        r.experiment, r.config
                    )
                });
                assert!(
                    on.contains(r.experiment),
                    "`{p}` is calibrated on `{on}`, which does not name {}",
                    r.experiment
                );
            }
        }
    }
    // Eleven on the four studies' published values, eight on pcie-bench's calibration host.
    assert_eq!(n, 19, "nineteen fitted parameters");
}

#[test]
fn every_parameter_marked_calibrated_has_its_published_point() {
    let fitted: Vec<&str> = builtin()
        .iter()
        .flat_map(|e| e.references.iter())
        .flat_map(|r| match r.basis {
            Basis::Calibration(p) => p.to_vec(),
            Basis::Prediction => Vec::new(),
        })
        .collect();
    for name in SCENARIOS {
        let t = topology(name);
        for p in &t.platforms {
            for (key, b) in &p.timing.as_ref().unwrap().basis {
                if matches!(b, ParamBasis::Calibrated(_)) {
                    assert!(fitted.contains(&key.as_str()), "{name}: platform {key}");
                }
            }
            for (key, b) in p.netstack.iter().flat_map(|n| n.basis.iter()) {
                if matches!(b, ParamBasis::Calibrated(_)) {
                    assert!(fitted.contains(&key.as_str()), "{name}: netstack {key}");
                }
            }
        }
        for d in &t.devices {
            for (key, b) in &d.timed.basis {
                if matches!(b, ParamBasis::Calibrated(_)) {
                    let model = d.device_model.as_deref().unwrap_or("?");
                    assert!(
                        fitted.contains(&format!("{model} {key}").as_str()),
                        "{name}: {model} {key} is marked calibrated but no published point names it"
                    );
                }
            }
        }
    }
}

#[test]
fn the_mdev_bare_metal_reads_are_calibration_points_and_the_writes_predictions() {
    let r = refs("smartio.mdev");
    let at = |c: &str, m: &str| {
        r.iter()
            .find(|x| x.config == Some(c) && x.metric == m)
            .copied()
    };
    let off = at("bare_iommu_off", "read_gbps").expect("10.2 GB/s published");
    assert_eq!(off.value, 10.2);
    assert_eq!(off.basis, Basis::Calibration(&["k40c dma_max_reads"]));
    let on = at("bare_iommu_on", "read_gbps").expect("1.5–1.7 GB/s published");
    assert_eq!((on.value, on.value_high), (1.5, 1.7));
    assert_eq!(on.basis, Basis::Calibration(&["rc_p2p_read_tags"]));
    for c in ["bare_iommu_off", "bare_iommu_on"] {
        assert!(
            at(c, "write_gbps").is_none(),
            "nothing is published for writes"
        );
    }
    assert_eq!(r.len(), 2);
    let info = &builtin()
        .iter()
        .find(|e| e.info.id == "smartio.mdev")
        .unwrap()
        .info;
    assert!(
        info.configs_not_implemented.is_empty(),
        "the mdev config runs (a prediction, nothing published)"
    );
    assert!(at("mdev", "read_gbps").is_none() && at("mdev", "write_gbps").is_none());
}

#[test]
fn the_p4000_has_no_published_figure_and_no_calibrated_parameter() {
    let r = refs("smartio.gpu_dma");
    assert!(
        r.iter().all(|x| x.config == Some("k40_pxh810")),
        "only the K40 over PXH810 has published figures: {:?}",
        r.iter().map(|x| x.config).collect::<Vec<_>>()
    );
    assert_eq!(r.len(), 2);
    let t = topology("smartio_chassis_b2b");
    let p4000 = t
        .devices
        .iter()
        .find(|d| d.device_model.as_deref() == Some("p4000"))
        .unwrap();
    for (key, b) in &p4000.timed.basis {
        assert!(
            !matches!(b, ParamBasis::Calibrated(_)),
            "P4000 {key} is calibrated ({})",
            b.note()
        );
    }
    // Its copy engine is stated to be the K40c's: the two must not drift apart.
    let k40c = topology("smartio_chassis_k40c")
        .devices
        .into_iter()
        .find(|d| d.device_model.as_deref() == Some("k40c"))
        .unwrap();
    assert_eq!(p4000.timed.dma, k40c.timed.dma);
    assert!(p4000.timed.basis["dma_max_reads"]
        .note()
        .contains("taken from the K40c"));
}

/// `oneway_ns` and `ntb_added_ns` of a CPU store from `from` to `to`, with the topology
/// changed by `tweak` first.
fn store(scenario: &str, from: &str, to: &str, tweak: impl Fn(&mut Topology)) -> (f64, f64) {
    let fresh = || {
        let mut s = fabric::builtin::load_builtin(scenario).unwrap().unwrap();
        tweak(&mut s.topology);
        timed(s, scenario).unwrap()
    };
    let ram = format!("{to}.ram");
    let oneway = smartio::cpu_store_oneway(&mut fresh(), from, &ram, 1 << 20).unwrap();
    let added = smartio::cpu_store_ntb_span(&mut fresh(), from, &ram, 1 << 20).unwrap();
    (oneway.as_ns_f64(), added.as_ns_f64())
}

fn slower(chip: &'static str, by: f64) -> impl Fn(&mut Topology) {
    move |t: &mut Topology| {
        t.chips
            .iter_mut()
            .find(|c| c.name == chip)
            .unwrap()
            .latency_ns += by
    }
}

#[test]
fn ntb_added_is_derived_from_the_route_not_a_constant() {
    let (one, added) = store("smartio_pxh830_b2b", "a", "b", |_| {});
    assert!(
        added > 300.0 && added < one,
        "{added} ns of a {one} ns store"
    );
    // Both adapters are PEX8733s: 10 ns more per chip is 20 ns more crossing, and the
    // store is slower by as much.
    let (one2, added2) = store("smartio_pxh830_b2b", "a", "b", slower("pex8733", 10.0));
    assert!((added2 - added - 20.0).abs() < 1e-6, "{added} → {added2}");
    assert!((one2 - one - 20.0).abs() < 1e-6, "{one} → {one2}");
    // The three-way hosts' motherboard switches lie outside the adapters: the store
    // crosses two of them, the NTB crossing none.
    let (one, added) = store("smartio_three_way", "user", "lender1", |_| {});
    let (one2, added2) = store(
        "smartio_three_way",
        "user",
        "lender1",
        slower("mobo_switch", 10.0),
    );
    assert!((added2 - added).abs() < 1e-6, "{added} → {added2}");
    assert!((one2 - one - 20.0).abs() < 1e-6, "{one} → {one2}");
    // A cluster switch between the adapters is part of the crossing.
    let (_, via) = store("smartio_chassis_mxs824", "borrower", "lender", |_| {});
    let (_, via2) = store(
        "smartio_chassis_mxs824",
        "borrower",
        "lender",
        slower("mxs824", 10.0),
    );
    assert!((via2 - via - 10.0).abs() < 1e-6, "{via} → {via2}");
    // A store that stays in its host crosses no NTB.
    let (_, local) = store("smartio_pxh830_b2b", "a", "a", |_| {});
    assert_eq!(local, 0.0);
}

#[test]
fn a_routes_step_times_add_up_to_the_simulated_store() {
    let mut tf = load("smartio_chassis_mxs824", &[]).unwrap();
    let cpu = requester(&tf, "borrower.cpu").unwrap();
    let bus = map_buffer(&mut tf, cpu, "lender.ram", 1 << 20, 64).unwrap();
    let req = fabric::Request {
        requester: cpu,
        addr: bus,
        len: 4,
        access: fabric::Access::Write,
    };
    let (path, times) = tf.step_times(&req).unwrap();
    assert_eq!(path.steps.len(), times.len());
    let steps: f64 = times.iter().map(|t| t.as_ns_f64()).sum();
    let sink = sink_latency(&mut tf, &req);
    let fly = devices::single_access(&mut tf, cpu, Op::Write { dst: bus }, 4)
        .unwrap()
        .as_ns_f64();
    assert!(
        (steps + sink - fly).abs() < 0.01,
        "steps {steps} + sink {sink} vs simulated {fly}"
    );
    let span = smartio::ntb_span(&tf.fabric.topo, &path.steps).unwrap();
    let kinds: Vec<&str> = path.steps[span].iter().map(|s| s.kind()).collect();
    assert_eq!(
        kinds,
        [
            "link",
            "ntb_window",
            "rid_lut",
            "switch",
            "cable",
            "cluster_switch",
            "cable",
            "switch",
            "link"
        ]
    );
}

fn sink_latency(tf: &mut TimedFabric, req: &fabric::Request) -> f64 {
    let (route, _) = tf.route(req).unwrap();
    match tf.net.route_hops(route).last() {
        Some(&Hop::Sink(s, ddio)) => tf.net.sink_write_latency(s, ddio).as_ns_f64(),
        other => panic!("route ends in {other:?}"),
    }
}

/// The thesis's table of roots and hops (Paper IV, Table 1; docs/hardware.md §2) beside what
/// nudma counts under the convention of `smartio.p2p` (crates/studies/src/smartio.rs): the
/// seventeen numbers it matches, and the five no single convention can.
#[test]
fn p2p_roots_and_hops_follow_the_tables_convention() {
    // config, A, B, through the user's RAM, lender IOMMUs on, table (roots, hops),
    // nudma (roots, hops) where the table cannot be matched.
    type Row = (
        &'static str,
        &'static str,
        &'static str,
        bool,
        bool,
        (usize, usize),
        Option<(usize, usize)>,
    );
    #[rustfmt::skip]
    let rows: [Row; 11] = [
        ("loc_p2p_sw", "user.gpu0", "user.gpu1", false, false, (0, 1), None),
        ("loc_p2p_root", "user.gpu0", "user.gpu2", false, false, (1, 3), None),
        ("loc_ram_root", "user.gpu0", "user.gpu2", true, false, (1, 3), None),
        ("1l_p2p_sw", "lender1.gpu0", "lender1.gpu1", false, false, (0, 1), None),
        ("1l_p2p_iommu", "lender1.gpu0", "lender1.gpu1", false, true, (1, 3), None),
        ("2l_p2p_sw", "lender1.gpu0", "lender2.gpu0", false, false, (0, 4), None),
        ("2l_p2p_iommu", "lender1.gpu0", "lender2.gpu0", false, true, (2, 8), None),
        // Equal to 1l_ram_iommu in the table although the lender IOMMU is off.
        ("1l_ram_sw", "lender1.gpu0", "lender1.gpu1", true, false, (3, 11), Some((1, 9))),
        // Roots match; an IOMMU detour adds a switch and a root per GPU (2 hops each).
        ("1l_ram_iommu", "lender1.gpu0", "lender1.gpu1", true, true, (3, 11), Some((3, 13))),
        // Mirror-image halves: an even count contradicts loc_ram_root's odd 3.
        ("2l_ram_sw", "lender1.gpu0", "lender2.gpu0", true, false, (1, 8), Some((1, 9))),
        ("2l_ram_iommu", "lender1.gpu0", "lender2.gpu0", true, true, (3, 11), Some((3, 13))),
    ];
    for (config, a, b, via_ram, iommu, table, unmatched) in rows {
        let mut tf = load(
            "smartio_three_way",
            &[("lender1", iommu), ("lender2", iommu)],
        )
        .unwrap();
        let pair = smartio::GpuPair {
            a,
            b,
            user: "user",
            via_ram,
        };
        let (hops, roots) = smartio::path_shape(&mut tf, pair).unwrap();
        let want = unmatched.unwrap_or(table);
        assert_eq!((roots, hops), want, "{config}: table {table:?}");
    }
    // The published predictions of smartio.p2p are exactly the matched numbers.
    let published = refs("smartio.p2p");
    assert_eq!(published.len(), 17);
    assert!(published.iter().all(|r| r.basis == Basis::Prediction));
    for r in &published {
        let row = rows.iter().find(|x| Some(x.0) == r.config).unwrap();
        let (roots, hops) = row.5;
        let table = if r.metric == "roots" { roots } else { hops };
        assert_eq!(r.value, table as f64, "{:?} {}", r.config, r.metric);
        if let Some((nr, nh)) = row.6 {
            let ours = if r.metric == "roots" { nr } else { nh };
            assert_eq!(
                ours, table,
                "{:?} {} is published but unmatched",
                r.config, r.metric
            );
        }
    }
}

/// The K40c's fitted reads rest on the borrower's IOTLB missing once per 4 KiB page; with
/// misses as cheap as hits (2 MiB pages, say) the same fit would read within a few per
/// cent: the IOTLB assumption does not decide the calibration.
#[test]
fn the_borrower_iotlb_assumption_moves_the_k40c_reads_by_a_few_per_cent() {
    let read = |free_misses: bool| {
        let mut s = fabric::builtin::load_builtin("smartio_chassis_k40c")
            .unwrap()
            .unwrap();
        if free_misses {
            for p in &mut s.topology.platforms {
                let t = p.timing.as_mut().unwrap();
                t.iotlb_miss_ns = t.iotlb_hit_ns;
            }
        }
        let mut tf = timed(s, "k40c").unwrap();
        let g = requester(&tf, "lender.gpu").unwrap();
        let bytes = 8u64 << 20;
        let (bus, spec) = dma_to(&mut tf, g, "borrower.ram", 1 << 30, bytes).unwrap();
        let t = dma_time(&mut tf, g, spec, Op::Read { src: bus }, bytes).unwrap();
        let misses = tf.net.counters().iotlb_misses;
        (gbps(bytes, t), misses)
    };
    let (paid, misses) = read(false);
    let (free, _) = read(true);
    assert!(
        misses >= (8 << 20) / 4096,
        "the borrower's IOTLB misses once per 4 KiB page of the stream: {misses}"
    );
    let gain = (free - paid) / paid;
    assert!(
        gain > 0.0 && gain < 0.05,
        "IOTLB misses cost {:.1} % ({paid} → {free} GB/s)",
        gain * 100.0
    );
}
