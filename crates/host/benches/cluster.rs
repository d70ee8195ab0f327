//! Clusters at scale, on the built-in 10,000-host smartio_cluster10k: loading and checking
//! it (what `nudma topo check` does: the scenario, then the fabric), and one path query
//! after loading (what `nudma topo path` does with a loaded fabric: resolve the two
//! names, map the target for the requester through the host layer — requester-ID entry,
//! address-LUT window, the way through the tree searched for the new adapter pair — and
//! route the access; then unmap, so every query starts from the loaded state). The
//! query crosses the whole tree: h0000's NVMe to h9999's RAM, seven MXS824s.
//! Targets (issue 9): load and check under 2 s, a query under 1 ms; peak memory is
//! measured apart with /usr/bin/time -v (README, performance).

use criterion::{criterion_group, criterion_main, Criterion};
use fabric::{builtin, Access, Fabric, Path, Request, Requester};
use host::{DmaDirection, Hosts, PhysAddr};

const SCENARIO: &str = "smartio_cluster10k";

fn load() -> Fabric {
    Fabric::from_scenario(builtin::load_builtin(SCENARIO).unwrap().unwrap()).unwrap()
}

/// One `topo path` query: returns the hops, and leaves the fabric as it found it.
fn query(f: &mut Fabric, from: &str, to: &str, path: &mut Path) -> usize {
    let requester = match f.resolve(from).unwrap() {
        fabric::Endpoint::Node(n) => Requester::Function(n),
        fabric::Endpoint::Cpu { host, package } => Requester::Cpu { host, package },
        e => panic!("not a requester: {e:?}"),
    };
    let (host, addr) = f.resolve_address(to, 0).unwrap();
    Hosts::with(f, |h, f| {
        let m = h
            .dma_map_single(
                f,
                requester,
                PhysAddr { host, addr },
                64,
                DmaDirection::Bidirectional,
            )
            .unwrap();
        let req = Request {
            requester,
            addr: m.addr.0,
            len: 64,
            access: Access::Read,
        };
        f.route(&req, path).expect("the query routes");
        h.dma_unmap_single(f, &m).unwrap();
        path.hops()
    })
}

fn cluster(c: &mut Criterion) {
    let mut g = c.benchmark_group("cluster10k");
    g.sample_size(10);
    g.bench_function("load_and_check", |b| b.iter(|| load().topo.hosts.len()));
    let mut f = load();
    let mut path = Path::with_capacity(64);
    assert_eq!(query(&mut f, "h0000.nvme", "h9999.ram", &mut path), 10);
    assert_eq!(
        f.ntb_ways_kept(),
        0,
        "unmapped: every query searches its way"
    );
    g.sample_size(50);
    g.bench_function("path_query", |b| {
        b.iter(|| query(&mut f, "h0000.nvme", "h9999.ram", &mut path))
    });
    g.finish();
}

criterion_group!(benches, cluster);
criterion_main!(benches);
