//! Clusters at scale: what loading a cluster and answering one path query keep in memory
//! grows linearly with the hosts — no table of ways between every pair of adapters, no
//! per-host copy of shared parts. Measured in bytes by a counting allocator, not timed
//! (timing is in benches/cluster.rs). One test in this file: the counters see the whole
//! process, so nothing may run beside it.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use fabric::builtin::BuiltinResolver;
use fabric::scenario::{load, Source};
use fabric::{Access, Fabric, HostId, Path, Request, Requester};
use host::{DmaDirection, Hosts, PhysAddr};

struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(by: usize) {
    let now = LIVE.fetch_add(by, Relaxed) + by;
    PEAK.fetch_max(now, Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        System.alloc(l)
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        grew(l.size());
        System.alloc_zeroed(l)
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Relaxed);
        System.dealloc(p, l)
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        if new > l.size() {
            grew(new - l.size());
        } else {
            LIVE.fetch_sub(l.size() - new, Relaxed);
        }
        System.realloc(p, l, new)
    }
}

#[global_allocator]
static A: Counting = Counting;

/// Starts a measurement: the peak from here on, above what is live now.
fn start() -> usize {
    let now = LIVE.load(Relaxed);
    PEAK.store(now, Relaxed);
    now
}

/// A cluster of MXS824s with x8 trunks, `fanouts` below the top, ten hosts per leaf.
fn cluster(fanouts: &[u32]) -> String {
    let mut s = String::from(
        r#"include = ["platforms/smartio.toml"]
[scenario]
name = "scale"
[cluster]
switch_chip = "mxs824"
switch_names = "s{}"
hosts_per_leaf = 10
host_names = "h{}"
host_link = { gen = 3, width = 8 }
"#,
    );
    for f in fanouts {
        s += &format!("[[cluster.level]]\nfanout = {f}\nlink = {{ gen = 3, width = 8 }}\n");
    }
    s + "[cluster.host]\nplatform = \"smartio_host\"\n[[cluster.host.ntb]]\nname = \"ntb\"\nadapter = \"pxh830\"\nparent = \"rc0\"\n"
}

struct Bytes {
    hosts: usize,
    /// Peak while loading and checking (`topo check`: scenario, then fabric).
    load_peak: usize,
    /// Kept once loaded.
    loaded: usize,
    /// Peak of one cross-cluster path query after loading (set-up through the host
    /// layer, then the route), above what loading kept.
    query_peak: usize,
}

fn measure(fanouts: &[u32]) -> Bytes {
    let text = cluster(fanouts);
    let base = start();
    let s = load(
        Source {
            name: "scale.toml".into(),
            text,
        },
        &BuiltinResolver,
    )
    .unwrap();
    let mut f = Fabric::from_scenario(s).unwrap();
    let load_peak = PEAK.load(Relaxed) - base;
    let hosts = f.topo.hosts.len();
    let loaded = start() - base;
    let before = LIVE.load(Relaxed);
    let last = HostId::from_index(hosts - 1);
    let ram = f.topo.hosts[last.index()].regions[0].start;
    let requester = Requester::Cpu {
        host: HostId(0),
        package: 0,
    };
    let m = Hosts::with(&mut f, |h, f| {
        h.dma_map_single(
            f,
            requester,
            PhysAddr {
                host: last,
                addr: ram,
            },
            64,
            DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    let mut p = Path::default();
    f.route(
        &Request {
            requester,
            addr: m.addr.0,
            len: 64,
            access: Access::Write,
        },
        &mut p,
    )
    .unwrap();
    let query_peak = PEAK.load(Relaxed) - before;
    // Up to the top and down again: a cluster switch per level on each side, the top
    // once, and the two adapters.
    assert_eq!(p.hops(), 2 * fanouts.len() + 1 + 2, "{fanouts:?}");
    assert_eq!(
        f.ntb_ways_kept(),
        1,
        "the query kept one way: its own pair's"
    );
    Bytes {
        hosts,
        load_peak,
        loaded,
        query_peak,
    }
}

#[test]
fn memory_grows_linearly_with_the_hosts() {
    let runs = [measure(&[5, 10]), measure(&[10, 10]), measure(&[10, 10, 2])];
    assert_eq!(
        runs.iter().map(|r| r.hosts).collect::<Vec<_>>(),
        [500, 1000, 2000]
    );
    for w in runs.windows(2) {
        let (a, b) = (&w[0], &w[1]);
        for (what, x, y) in [
            ("load and check, peak", a.load_peak, b.load_peak),
            ("kept after loading", a.loaded, b.loaded),
            ("one path query, peak", a.query_peak, b.query_peak),
        ] {
            let ratio = y as f64 / x as f64;
            // Twice the hosts: at most about twice the bytes (a table per pair of
            // adapters would make it four times), and more than the fixed part alone.
            assert!(
                (1.5..=2.2).contains(&ratio),
                "{what}: {x} B for {} hosts, {y} B for {} ({ratio:.2}×)",
                a.hosts,
                b.hosts
            );
        }
    }
}
