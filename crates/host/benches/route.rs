//! Route lookups per second on the 60-host cluster: a mix of the NVMe lender reaching
//! every borrower's RAM through three cluster switches, borrowers' CPUs ringing the
//! lender's NVMe doorbells, and local DMA in the lender's chassis.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use fabric::{builtin, Access, Fabric, Path, Request, Requester};
use host::{DmaDirection, Hosts, PhysAddr};

/// Maps the target for the requester through the host layer, as a driver would.
fn request(f: &mut Fabric, from: &str, to: &str, offset: u64, len: u32, access: Access) -> Request {
    let requester = match f.resolve(from).unwrap() {
        fabric::Endpoint::Node(n) => Requester::Function(n),
        fabric::Endpoint::Cpu { host, package } => Requester::Cpu { host, package },
        e => panic!("not a requester: {e:?}"),
    };
    let (host, addr) = f.resolve_address(to, offset).unwrap();
    let m = Hosts::with(f, |h, f| {
        h.dma_map_single(
            f,
            requester,
            PhysAddr { host, addr },
            len as u64,
            DmaDirection::Bidirectional,
        )
    })
    .unwrap();
    Request {
        requester,
        addr: m.addr.0,
        len,
        access,
    }
}

fn setup() -> (Fabric, Vec<Request>) {
    let mut f = Fabric::from_scenario(builtin::load_builtin("smartio_cluster60").unwrap().unwrap())
        .unwrap();
    let mut reqs = Vec::new();
    for i in 1..60 {
        let ram = format!("h{i:02}.ram");
        reqs.push(request(
            &mut f,
            "h00.nvme",
            &ram,
            (i as u64) << 12,
            64,
            Access::Read,
        ));
        let cpu = format!("h{i:02}.cpu");
        reqs.push(request(&mut f, &cpu, "h00.nvme", 0x1008, 4, Access::Write));
        reqs.push(request(
            &mut f,
            "h00.nvme",
            "h00.gpu",
            (i as u64) << 12,
            64,
            Access::Read,
        ));
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
