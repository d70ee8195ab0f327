//! The NVMe experiments' measurements: relationships, not copied numbers.

use fabric::{builtin, Fabric};
use sim::timed::TimedFabric;
use sim::Time;
use systems::smartio::nvme_bench::{qd1_reads, sharing};
use systems::smartio::nvme_dist::SqPlacement;

fn load(name: &str, iommu: &[&str]) -> TimedFabric {
    let mut s = builtin::load_builtin(name).unwrap().unwrap();
    for h in iommu {
        let id = s.topology.host_by_name(h).unwrap();
        s.topology.hosts[id as usize].iommu = true;
    }
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

#[test]
fn sq_placement_prints() {
    for sq in [
        SqPlacement::NearCpu,
        SqPlacement::NearDevice,
        SqPlacement::DeviceMemory {
            device: "lender.gpu".into(),
            bar: 1,
        },
    ] {
        let mut tf = load("smartio_chassis_mxs824", &["borrower"]);
        let t = std::time::Instant::now();
        let r = qd1_reads(&mut tf, "borrower", "lender.nvme", sq.clone(), 50, 500, 1).unwrap();
        eprintln!("{sq:?}: {r:?} in {:?}", t.elapsed());
    }
}

#[test]
fn sharing_prints() {
    let hosts: Vec<String> = (0..60).map(|i| format!("h{i:02}")).collect();
    for n in [1, 8, 31, 32] {
        let mut tf = load("smartio_cluster60", &[]);
        let t = std::time::Instant::now();
        let r = sharing(&mut tf, "h00.nvme", &hosts, n, 1, Time::from_us(100), Time::from_us(20000)).unwrap();
        eprintln!("{n}: {r:?} in {:?} -> {:.0} cmds/s", t.elapsed(), r.commands as f64 / t.elapsed().as_secs_f64());
    }
}
