//! Simulated NVMe commands per wall-clock second on `smartio.nvme_sharing`: 31 clients of
//! the 60-host cluster sharing h00's P4800X at QD 1 (4 KiB random reads), the probe's
//! 100 µs warm-up and 2 ms window. Prints the rate, the network's events per command and
//! the simulated result, once with TLP trains (the default) and once TLP by TLP.
//!
//! `cargo bench -p systems --bench nvme_sharing [-- CLIENTS [WINDOW_US [trains|tlps]]]`. Only this
//! driver reads the wall clock; the simulation it times does not.

use std::time::Instant;

/// CPU time of this thread: on a shared machine the wall clock also counts other
/// processes' turns.
fn cpu_seconds() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

use fabric::{builtin, Fabric};
use sim::timed::TimedFabric;
use sim::Time;
use systems::smartio::nvme_bench;

fn main() {
    let args: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with("--"))
        .collect();
    let clients: usize = args.first().and_then(|a| a.parse().ok()).unwrap_or(31);
    let window_us: u64 = args.get(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let modes: &[bool] = match args.get(2).map(String::as_str) {
        Some("trains") => &[true],
        Some("tlps") => &[false],
        _ => &[true, false],
    };
    for &trains in modes {
        let s = builtin::load_builtin("smartio_cluster60")
            .expect("built in")
            .expect("loads");
        let mut tf = TimedFabric::new(Fabric::from_scenario(s).expect("builds"), 1).expect("timed");
        tf.net.set_trains(trains);
        let hosts: Vec<String> = tf
            .fabric
            .topo
            .hosts
            .iter()
            .map(|h| h.name.clone())
            .collect();
        let (t, cpu) = (Instant::now(), cpu_seconds());
        let r = nvme_bench::sharing(
            &mut tf,
            "h00.nvme",
            &hosts,
            clients,
            1,
            Time::from_us(100),
            Time::from_us(window_us),
        )
        .expect("runs");
        let wall = t.elapsed().as_secs_f64();
        let cpu = cpu_seconds() - cpu;
        // Commands of the warm-up too: the wall time covers it.
        let all = r.commands as f64 * (window_us + 100) as f64 / window_us as f64;
        println!(
            "trains={trains} clients={clients}: {:.0} commands per CPU second, {:.0} per wall \
             second ({} in the window; {:.2} s CPU, {:.2} s wall), {:.0} events/command, \
             total {:.1} kIOPS, min client {:.1} kIOPS, Jain {:.4}",
            all / cpu,
            all / wall,
            r.commands,
            cpu,
            wall,
            tf.net.events_handled() as f64 / all,
            r.total_kiops,
            r.min_client_kiops,
            r.jain_fairness
        );
    }
}
