//! fio through the block driver's per-CPU queue pairs (`drivers::fio`): the bytes that
//! arrive, each thread on its own queue with `iodepth` in flight, and the errors a job
//! description gets against the hardware.

use devices::nvme::{NvmeController, NvmeDriver};
use fabric::{builtin, Fabric, HostId, Requester};
use sim::component::Sim;
use sim::timed::TimedFabric;
use sim::Time;
use systems::drivers::fio::{Fio, FioSpec};

fn tf() -> TimedFabric {
    let s = builtin::load_builtin("ioctopus_nvme").unwrap().unwrap();
    TimedFabric::new(Fabric::from_scenario(s).unwrap(), 1).unwrap()
}

fn spec() -> FioSpec {
    FioSpec {
        device: "server.nvme0".into(),
        cpu_node: 1,
        mem_node: 1,
        threads: 2,
        iodepth: 4,
        block_bytes: 128 << 10,
        write: false,
        random: true,
        seed: 3,
        lasts: Time::from_us(400),
    }
}

fn cpu() -> Requester {
    Requester::Cpu {
        host: HostId(0),
        package: 1,
    }
}

/// Probes, poisons the read buffers (so that bytes which never arrived show), runs.
fn run(spec: FioSpec, for_time: Time) -> (TimedFabric, Sim<TimedFabric>, Fio) {
    let mut tf = tf();
    let mut sim = Sim::new();
    let mut fio = Fio::probe(&mut tf, &mut sim, spec.clone()).unwrap();
    if !spec.write {
        let len = spec.iodepth as u64 * spec.block_bytes;
        for &b in &fio.buffers {
            tf.fabric
                .store(cpu(), b, &vec![0xA5; len as usize])
                .unwrap();
        }
    }
    fio.start(&mut tf);
    let t0 = tf.net.now();
    sim.run_until(&mut tf, t0 + Time::from_us(100));
    fio.reset_stats(&mut sim);
    sim.run_until(&mut tf, t0 + for_time);
    (tf, sim, fio)
}

/// A job whose lists end early (`lasts` short), run until every thread has finished.
fn run_to_the_end(spec: FioSpec) -> (TimedFabric, Sim<TimedFabric>, Fio) {
    let s = FioSpec {
        lasts: Time::from_us(30),
        ..spec
    };
    let (tf, sim, fio) = run(s, Time::from_us(3000));
    for &id in &fio.threads {
        let d = sim.get::<NvmeDriver>(id).unwrap();
        assert!(d.log.io_end > Time::ZERO, "the thread finished its list");
    }
    (tf, sim, fio)
}

#[test]
fn reads_bring_the_namespace_bytes_and_writes_leave_the_buffer_bytes() {
    // Every slot of every thread checked: 2 threads × 4 slots × 128 KiB. The namespace
    // was never written (zeros) and the buffers were poisoned: the bytes arrived.
    let all = 2 * 4 * (128 << 10);
    let (mut tf, sim, fio) = run_to_the_end(spec());
    assert_eq!(fio.verify(&mut tf, &sim), (all, 0));

    // Writes: the namespace ends up holding what the threads' buffers held.
    let w = FioSpec {
        write: true,
        ..spec()
    };
    let (mut tf, sim, fio) = run_to_the_end(w);
    assert_eq!(fio.verify(&mut tf, &sim), (all, 0));
    let ns = sim.get::<NvmeController>(fio.ctrl).unwrap().namespace();
    assert!(ns.used() >= 8 * 32, "4 KiB blocks written: {}", ns.used());
}

#[test]
fn each_thread_keeps_iodepth_in_flight_on_its_own_queue_pair() {
    let s = FioSpec {
        threads: 3,
        iodepth: 5,
        ..spec()
    };
    let (_tf, sim, fio) = run(s, Time::from_us(1000));
    assert_eq!(fio.queue_entries, 1024, "Linux's io_queue_depth under MQES");
    let st = fio.stats(&sim).unwrap();
    assert!(st.ops > 0 && st.errors == 0 && st.faults == 0, "{st:?}");
    assert_eq!(st.bytes, st.ops * (128 << 10));
    for (t, &id) in fio.threads.iter().enumerate() {
        let d = sim.get::<NvmeDriver>(id).unwrap();
        let qid = t as u16 + 1;
        assert_eq!(d.queue_pair(qid).unwrap().outstanding(), 5, "thread {t}");
        assert!(
            d.log.io.iter().all(|x| x.0 == qid),
            "thread {t} used only its queue"
        );
        assert!(!d.log.io.is_empty());
    }
    // Media-bound: 3 threads × 5 × 128 KiB keep the SSD's 3.3 GB/s path busy.
    let gbps = st.bytes as f64 / 900e-6 / 1e9;
    assert!(gbps > 3.0 && gbps < 3.35, "{gbps}");
}

#[test]
fn sequential_threads_each_walk_their_own_part_of_the_namespace() {
    let s = FioSpec {
        random: false,
        ..spec()
    };
    let (_tf, sim, fio) = run(s, Time::from_us(300));
    let starts: Vec<u64> = fio
        .threads
        .iter()
        .map(|&id| sim.get::<NvmeDriver>(id).unwrap().log.io[0].1.slba)
        .collect();
    for (t, &id) in fio.threads.iter().enumerate() {
        let mut lbas: Vec<u64> = sim
            .get::<NvmeDriver>(id)
            .unwrap()
            .log
            .io
            .iter()
            .map(|x| x.1.slba)
            .collect();
        lbas.sort();
        assert!(
            lbas.windows(2).all(|w| w[1] - w[0] == 32),
            "thread {t}: {lbas:?}"
        );
    }
    assert!(starts[1] > starts[0], "{starts:?}");
}

#[test]
fn a_bad_job_is_refused_with_the_reason() {
    let e = |s: FioSpec| {
        let mut tf = tf();
        Fio::probe(&mut tf, &mut Sim::new(), s).unwrap_err().0
    };
    assert_eq!(
        e(FioSpec {
            device: "server.nvme9".into(),
            ..spec()
        }),
        "no device `server.nvme9`"
    );
    assert_eq!(
        e(FioSpec {
            iodepth: 1024,
            ..spec()
        }),
        "iodepth = 1024: an I/O queue of 1024 entries holds 1..1023 commands (one slot stays empty)"
    );
    assert_eq!(
        e(FioSpec {
            threads: 129,
            ..spec()
        }),
        "threads = 129: server.nvme0 gives 1..128 I/O queue pairs, one per thread"
    );
    assert_eq!(
        e(FioSpec {
            block_bytes: 256 << 10,
            ..spec()
        }),
        "block_bytes = 262144: a whole number of 4 KiB blocks up to the controller's maximum transfer (MDTS) of 128 KiB"
    );
    assert_eq!(
        e(FioSpec {
            cpu_node: 2,
            ..spec()
        }),
        "cpu_node 2: host `server` has CPUs on nodes 0..2"
    );
    assert_eq!(
        e(FioSpec {
            mem_node: 5,
            ..spec()
        }),
        "mem_node 5: host `server` has NUMA nodes 0..2"
    );
}

#[test]
fn a_thread_that_runs_out_of_commands_is_an_error_not_a_slow_device() {
    let s = FioSpec {
        lasts: Time::from_us(50),
        ..spec()
    };
    let (_tf, sim, fio) = run(s, Time::from_us(2000));
    let e = fio.stats(&sim).unwrap_err().0;
    assert!(e.contains("ran out of commands"), "{e}");
}
