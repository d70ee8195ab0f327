//! Route lookups per second on the 60-host cluster: a mix of the NVMe lender reaching
//! every borrower's RAM through three cluster switches, borrowers' CPUs ringing the
//! lender's NVMe doorbells, and local DMA in the lender's chassis.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fabric::{builtin, Access, Fabric, Path, Request};

fn setup() -> (Fabric, Vec<Request>) {
    let mut f = Fabric::from_scenario(builtin::load_builtin("smartio_cluster60").unwrap().unwrap())
        .unwrap();
    let mut reqs = Vec::new();
    for i in 1..60 {
        let nvme = f.resolve("h00.nvme").unwrap();
        let ram = f.resolve(&format!("h{i:02}.ram")).unwrap();
        let (r, _) = f
            .plan_access(nvme, ram, (i as u64) << 12, 64, Access::Read)
            .unwrap();
        reqs.push(r);
        let cpu = f.resolve(&format!("h{i:02}.cpu")).unwrap();
        let (r, _) = f.plan_access(cpu, nvme, 0x1008, 4, Access::Write).unwrap();
        reqs.push(r);
        let gpu = f.resolve("h00.gpu").unwrap();
        let (r, _) = f
            .plan_access(nvme, gpu, (i as u64) << 12, 64, Access::Read)
            .unwrap();
        reqs.push(r);
    }
    (f, reqs)
}

fn route(c: &mut Criterion) {
    let (f, reqs) = setup();
    let mut path = Path::with_capacity(64);
    for r in &reqs {
        f.route(r, &mut path).expect("planned accesses route");
    }
    let mut g = c.benchmark_group("route_cluster60");
    g.throughput(Throughput::Elements(reqs.len() as u64));
    g.bench_function("mixed", |b| {
        b.iter_batched_ref(
            || Path::with_capacity(64),
            |p| {
                let mut hops = 0;
                for r in &reqs {
                    if f.route(r, p).is_ok() {
                        hops += p.hops();
                    }
                }
                hops
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(3));
    targets = route
}
criterion_main!(benches);
