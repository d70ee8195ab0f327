//! sysfs and procfs sizes no machine has: a node's meminfo, /proc/cpuinfo's cache
//! size, a process's pages on every node. Refused with a warning, or summed without
//! overflow; never a panic.

mod common;

use common::{export_loads, two_socket, warnings};
use inspect::audit::audit;
use inspect::import_sysfs;
use inspect::procs::read_processes;

#[test]
fn a_node_beyond_2_52_bytes_is_refused_with_a_warning() {
    let t = two_socket();
    // 2^53 bytes in kB.
    t.node(1, "4-7", 1 << 43, "21 10");
    let m = import_sysfs(t.root()).unwrap();
    assert_eq!(m.node(1).unwrap().memory_bytes, None);
    let w = warnings(&m);
    assert!(
        w.iter().any(|w| w.ends_with(
            "node1/meminfo: MemTotal of 9007199254740992 bytes is beyond 2^52 bytes (4 PiB), more than any machine's node; the node's size is taken as unknown"
        )),
        "{w:#?}"
    );
    export_loads(&m);
}

#[test]
fn a_cpuinfo_cache_size_past_64_bits_is_not_a_panic() {
    let t = two_socket();
    t.file(
        "proc/cpuinfo",
        "processor\t: 0\nmodel name\t: Test CPU\ncache size\t: 18446744073709551615 KB\n\n",
    );
    let m = import_sysfs(t.root()).unwrap();
    assert!(m.caches.is_empty(), "{:?}", m.caches);
    export_loads(&m);
}

#[test]
fn a_process_with_pages_past_64_bits_on_two_nodes_audits() {
    let t = two_socket();
    t.file("proc/77/status", "Name:\tdb\nCpus_allowed_list:\t0-7\n");
    t.file(
        "proc/77/task/77/stat",
        &format!("77 (db) S {}\n", vec!["0"; 49].join(" ")),
    );
    let huge = u64::MAX;
    t.file(
        "proc/77/numa_maps",
        &format!("7f00 default N0={huge} N1={huge} kernelpagesize_kB=4\n"),
    );
    let mut m = import_sysfs(t.root()).unwrap();
    read_processes(&mut m, t.root(), &[77]);
    let a = audit(&m);
    assert_eq!(a.processes.len(), 1);
}
