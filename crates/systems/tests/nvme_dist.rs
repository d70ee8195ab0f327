//! The distributed user-space NVMe driver: a manager on the lender, clients on other hosts
//! with their own queue pairs, bytes written and read back by each, the controller's queue
//! limit refusing the client past it, no control message per I/O, and the SQ's place
//! deciding the fetch path (docs/hardware.md §2's hop counts).

use devices::nvme::queue::{DriverLog, IoCmd};
use devices::nvme::NvmeDriver;
use devices::pattern_byte;
use fabric::{builtin, Fabric, Requester};
use sim::component::Sim;
use sim::timed::TimedFabric;
use systems::smartio::nvme_dist::{
    io_job, CqPlacement, DistError, Manager, QueueRequest, SqPlacement,
};
use systems::smartio::Cluster;

const BLOCKS: u64 = 1 << 20;

fn rig(name: &str, borrower_iommu: Option<&str>) -> (TimedFabric, Sim<TimedFabric>, Cluster) {
    let mut s = builtin::load_builtin(name).unwrap().unwrap();
    if let Some(h) = borrower_iommu {
        let id = s.topology.host_by_name(h).unwrap();
        s.topology.hosts[id.index()].iommu = true;
    }
    let mut f = Fabric::from_scenario(s).unwrap();
    let mut cl = Cluster::new(&f);
    for d in cl.device_list(&f) {
        cl.lend(d.fdid).unwrap();
    }
    let _ = &mut f;
    let tf = TimedFabric::new(f, 1).unwrap();
    (tf, Sim::new(), cl)
}

fn log(sim: &Sim<TimedFabric>, id: sim::net::ComponentId) -> &DriverLog {
    &sim.get::<NvmeDriver>(id).unwrap().log
}

/// Writes `blocks` 4 KiB blocks from the client's buffer at LBAs `base + 8 i`, clears the
/// buffer, reads them back and compares.
fn write_read_back(
    sim: &mut Sim<TimedFabric>,
    tf: &mut TimedFabric,
    q: &systems::smartio::nvme_dist::ClientQueue,
    base: u64,
    seed: u8,
) {
    let cpu = Requester::Cpu {
        host: q.host,
        package: 0,
    };
    let n = q.data.bytes / 4096;
    let data: Vec<u8> = (0..q.data.bytes).map(|i| pattern_byte(seed, i)).collect();
    tf.fabric.store(cpu, q.data.cpu, &data).unwrap();
    let cmds = |write| {
        (0..n)
            .map(|i| IoCmd {
                write,
                slba: base + 8 * i,
                blocks: 8,
                buf_offset: i * 4096,
            })
            .collect::<Vec<_>>()
    };
    q.start_io(sim, tf, io_job(cmds(true), 4));
    sim.run_until_finished(tf);
    tf.fabric
        .store(cpu, q.data.cpu, &vec![0u8; q.data.bytes as usize])
        .unwrap();
    q.start_io(sim, tf, io_job(cmds(false), 4));
    sim.run_until_finished(tf);
    let mut back = vec![0u8; q.data.bytes as usize];
    tf.fabric.load(cpu, q.data.cpu, &mut back).unwrap();
    assert_eq!(log(sim, q.driver).io_errors, 0);
    assert!(
        back == data,
        "client on host {} read back other bytes",
        q.host
    );
}

#[test]
fn a_client_reads_back_what_it_wrote_through_a_borrowed_controller_with_no_message_per_io() {
    let (mut tf, mut sim, mut cl) = rig("smartio_chassis_mxs824", Some("borrower"));
    let mut m =
        Manager::start(&mut sim, &mut tf, &mut cl, "lender", "lender.nvme", BLOCKS).unwrap();
    assert_eq!(
        m.io_pairs(),
        31,
        "P4800X: 32 pairs including the admin pair"
    );
    let req = QueueRequest::by_hints(64, 16 * 4096, 4);
    let q = m
        .create_queue_pair(&mut sim, &mut tf, &mut cl, "borrower", &req)
        .unwrap();
    let before = cl.stats().total();
    write_read_back(&mut sim, &mut tf, &q, 0, 7);
    let ios = log(&sim, q.driver).io.len();
    assert_eq!(ios, 32);
    assert_eq!(
        cl.stats().total(),
        before,
        "no control message during {ios} I/Os"
    );
}

#[test]
fn the_sq_placement_decides_the_fetch_path() {
    // docs/hardware.md §2: borrower RAM 4 hops, lender RAM 3, the P4000's memory 1.
    let cases = [
        (SqPlacement::NearCpu, 4),
        (SqPlacement::NearDevice, 3),
        (
            SqPlacement::DeviceMemory {
                device: "lender.gpu".into(),
                bar: 1,
            },
            1,
        ),
    ];
    for (sq, hops) in cases {
        let (mut tf, mut sim, mut cl) = rig("smartio_chassis_mxs824", Some("borrower"));
        let mut m =
            Manager::start(&mut sim, &mut tf, &mut cl, "lender", "lender.nvme", BLOCKS).unwrap();
        let req = QueueRequest {
            sq: sq.clone(),
            cq: CqPlacement::NearCpu,
            ..QueueRequest::by_hints(64, 8 * 4096, 1)
        };
        let q = m
            .create_queue_pair(&mut sim, &mut tf, &mut cl, "borrower", &req)
            .unwrap();
        let (h, _) = q.sq_fetch_path(&tf.fabric, m.device).unwrap();
        assert_eq!(h, hops, "{sq:?}");
        write_read_back(&mut sim, &mut tf, &q, 64, 3);
    }
}

#[test]
fn thirty_one_clients_get_queue_pairs_and_the_thirty_second_is_refused() {
    let (mut tf, mut sim, mut cl) = rig("smartio_cluster60", Some("h01"));
    let mut m = Manager::start(&mut sim, &mut tf, &mut cl, "h00", "h00.nvme", BLOCKS).unwrap();
    let mut qs = Vec::new();
    for i in 1..=32 {
        let host = format!("h{i:02}");
        let req = QueueRequest::by_hints(16, 2 * 4096, 1);
        let r = m.create_queue_pair(&mut sim, &mut tf, &mut cl, &host, &req);
        if i <= 31 {
            qs.push(r.unwrap_or_else(|e| panic!("{host}: {e}")));
        } else {
            let e = r.unwrap_err();
            assert!(matches!(e, DistError::Refused { .. }));
            let text = e.to_string();
            assert!(
                text.contains("Invalid Queue Identifier") && text.contains("31 I/O queue pairs"),
                "{text}"
            );
        }
    }
    // Each client's blocks are its own.
    for (i, q) in qs.iter().enumerate().step_by(6) {
        write_read_back(&mut sim, &mut tf, q, 1000 * i as u64, i as u8);
    }
}

#[test]
fn clients_with_their_sqs_in_one_gpus_memory_each_get_their_own_part_of_it() {
    let (mut tf, mut sim, mut cl) = rig("smartio_cluster60", None);
    let mut m = Manager::start(&mut sim, &mut tf, &mut cl, "h00", "h00.nvme", BLOCKS).unwrap();
    let req = QueueRequest {
        sq: SqPlacement::DeviceMemory {
            device: "h00.gpu".into(),
            bar: 1,
        },
        ..QueueRequest::by_hints(64, 8 * 4096, 4)
    };
    let qs: Vec<_> = ["h01", "h02", "h15"]
        .iter()
        .map(|h| {
            m.create_queue_pair(&mut sim, &mut tf, &mut cl, h, &req)
                .unwrap()
        })
        .collect();
    let sq_bytes = 64 * 64;
    for (i, a) in qs.iter().enumerate() {
        for b in &qs[i + 1..] {
            assert!(
                a.mem.sq_dev + sq_bytes <= b.mem.sq_dev || b.mem.sq_dev + sq_bytes <= a.mem.sq_dev,
                "SQs of hosts {} and {} overlap: {:#x} and {:#x}",
                a.host,
                b.host,
                a.mem.sq_dev,
                b.mem.sq_dev
            );
        }
    }
    // All three at once, so that a shared SQ slot would hand one client's command to
    // another's queue.
    let cpu = |q: &systems::smartio::nvme_dist::ClientQueue| Requester::Cpu {
        host: q.host,
        package: 0,
    };
    let cmds = |i: usize, write| {
        (0..8)
            .map(|k| IoCmd {
                write,
                slba: 10_000 * i as u64 + 8 * k,
                blocks: 8,
                buf_offset: k * 4096,
            })
            .collect::<Vec<_>>()
    };
    let data: Vec<Vec<u8>> = (0..qs.len())
        .map(|i| {
            (0..8 * 4096)
                .map(|k| pattern_byte(20 + i as u8, k))
                .collect()
        })
        .collect();
    for (i, q) in qs.iter().enumerate() {
        tf.fabric.store(cpu(q), q.data.cpu, &data[i]).unwrap();
        q.start_io(&mut sim, &mut tf, io_job(cmds(i, true), 4));
    }
    sim.run_until_finished(&mut tf);
    for (i, q) in qs.iter().enumerate() {
        tf.fabric
            .store(cpu(q), q.data.cpu, &[0u8; 8 * 4096])
            .unwrap();
        q.start_io(&mut sim, &mut tf, io_job(cmds(i, false), 4));
    }
    sim.run_until_finished(&mut tf);
    for (i, q) in qs.iter().enumerate() {
        let mut back = vec![0u8; 8 * 4096];
        tf.fabric.load(cpu(q), q.data.cpu, &mut back).unwrap();
        assert_eq!(log(&sim, q.driver).io_errors, 0, "host {}", q.host);
        assert!(back == data[i], "host {} read back other bytes", q.host);
    }
}
