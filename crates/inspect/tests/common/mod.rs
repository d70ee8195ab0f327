//! Test helpers: where the hwloc fixtures live, unpacking sysfs snapshots, and a
//! builder for small synthetic sysfs/procfs trees.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};

use inspect::audit::{Audit, Finding};

/// The fixture directory: `$NUDMA_FIXTURES`, else the repository's `fixtures/hwloc`
/// (`../../fixtures/hwloc` from this crate).
pub fn fixtures() -> PathBuf {
    let dir = match std::env::var_os("NUDMA_FIXTURES") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/hwloc"),
    };
    assert!(
        dir.join("README.md").exists(),
        "hwloc fixtures not found at {} (set NUDMA_FIXTURES)",
        dir.display()
    );
    dir
}

pub fn xml(name: &str) -> PathBuf {
    fixtures().join("xml").join(name)
}

/// Unpacks `sysfs/<archive>` into a temp dir with `tar xjf`; returns the dir (keep
/// it alive) and the snapshot root inside it.
pub fn snapshot(archive: &str, root_name: &str) -> (tempfile::TempDir, PathBuf) {
    let path = fixtures().join("sysfs").join(archive);
    let tmp = scratch_dir();
    let status = std::process::Command::new("tar")
        .arg("xjf")
        .arg(&path)
        .arg("-C")
        .arg(tmp.path())
        .status()
        .expect("the tar command runs");
    assert!(status.success(), "tar xjf {} failed", path.display());
    let root = tmp.path().join(root_name);
    assert!(root.is_dir(), "{} did not unpack into {root_name}", archive);
    (tmp, root)
}

/// A temp dir on tmpfs when there is one: the snapshots hold ~10 000 small files,
/// which some disk file systems create slowly.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(t) = tempfile::Builder::new().prefix("nudma-").tempdir_in(shm) {
            return t;
        }
    }
    tempfile::tempdir().expect("temp dir")
}

pub fn kinds<'a>(audit: &'a Audit, kind: &'a str) -> Vec<&'a Finding> {
    audit.findings.iter().filter(|f| f.kind == kind).collect()
}

pub fn on_device<'a>(audit: &'a Audit, bdf: &str, kind: &str) -> Vec<&'a Finding> {
    audit
        .findings
        .iter()
        .filter(|f| f.kind == kind && f.device.as_deref() == Some(bdf))
        .collect()
}

/// A synthetic sysfs + procfs tree in a temp dir.
pub struct Tree {
    pub dir: tempfile::TempDir,
}

impl Tree {
    pub fn new() -> Tree {
        Tree {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub fn root(&self) -> &Path {
        self.dir.path()
    }

    pub fn file(&self, rel: &str, content: &str) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    pub fn bytes(&self, rel: &str, content: &[u8]) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    pub fn dir(&self, rel: &str) {
        fs::create_dir_all(self.root().join(rel)).unwrap();
    }

    /// A relative symlink at `rel` pointing to `target` (as sysfs does).
    pub fn link(&self, rel: &str, target: &str) {
        let p = self.root().join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink(target, p).unwrap();
    }

    pub fn node(&self, id: u32, cpus: &str, mem_kib: u64, distance: &str) {
        let d = format!("sys/devices/system/node/node{id}");
        self.file(&format!("{d}/cpulist"), &format!("{cpus}\n"));
        self.file(
            &format!("{d}/meminfo"),
            &format!("Node {id} MemTotal:       {mem_kib} kB\nNode {id} MemFree: 1 kB\n"),
        );
        self.file(&format!("{d}/distance"), &format!("{distance}\n"));
    }

    pub fn cpu(&self, cpu: u32, package: u32, core: u32) {
        let d = format!("sys/devices/system/cpu/cpu{cpu}/topology");
        self.file(&format!("{d}/physical_package_id"), &format!("{package}\n"));
        self.file(&format!("{d}/core_id"), &format!("{core}\n"));
    }

    pub fn cpus_online(&self, list: &str) {
        self.file("sys/devices/system/cpu/online", &format!("{list}\n"));
    }

    /// A PCI function at `sys/devices/<host>/<chain…>/<bdf>` with the usual files,
    /// linked from `sys/bus/pci/devices/<bdf>`. Returns its path relative to root.
    pub fn pci(&self, host: &str, chain: &[&str], dev: &PciSpec) -> String {
        let mut path = format!("sys/devices/{host}");
        for c in chain {
            path.push('/');
            path.push_str(c);
        }
        path.push('/');
        path.push_str(dev.bdf);
        self.file(&format!("{path}/class"), &format!("0x{:06x}\n", dev.class));
        self.file(
            &format!("{path}/vendor"),
            &format!("0x{:04x}\n", dev.vendor),
        );
        self.file(
            &format!("{path}/device"),
            &format!("0x{:04x}\n", dev.device),
        );
        self.file(&format!("{path}/numa_node"), &format!("{}\n", dev.numa));
        self.file(
            &format!("{path}/local_cpulist"),
            &format!("{}\n", dev.local),
        );
        if let Some((s, w, ms, mw)) = dev.link {
            self.file(
                &format!("{path}/current_link_speed"),
                &format!("{s} GT/s PCIe\n"),
            );
            self.file(&format!("{path}/current_link_width"), &format!("{w}\n"));
            self.file(
                &format!("{path}/max_link_speed"),
                &format!("{ms} GT/s PCIe\n"),
            );
            self.file(&format!("{path}/max_link_width"), &format!("{mw}\n"));
        }
        for irq in dev.irqs {
            self.file(&format!("{path}/msi_irqs/{irq}"), "msix\n");
        }
        let depth = 3; // sys/bus/pci/devices → sys
        let up = "../".repeat(depth);
        self.link(
            &format!("sys/bus/pci/devices/{}", dev.bdf),
            &format!("{up}{}", path.trim_start_matches("sys/")),
        );
        path
    }

    /// A network interface of the function at `dev_path` with queue masks.
    pub fn net(&self, dev_path: &str, name: &str, xps: &[&str], rps: &[&str]) {
        let p = format!("{dev_path}/net/{name}");
        for (i, m) in xps.iter().enumerate() {
            self.file(&format!("{p}/queues/tx-{i}/xps_cpus"), &format!("{m}\n"));
        }
        for (i, m) in rps.iter().enumerate() {
            self.file(&format!("{p}/queues/rx-{i}/rps_cpus"), &format!("{m}\n"));
        }
        self.file(&format!("{p}/address"), "00:11:22:33:44:55\n");
        self.link(
            &format!("sys/class/net/{name}"),
            &format!("../../{}", p.trim_start_matches("sys/")),
        );
    }

    /// A class entry (`sys/class/<class>/<name>`) for an OS device of a function.
    pub fn class_dev(&self, dev_path: &str, class: &str, sub: &str, name: &str) {
        let p = format!("{dev_path}/{sub}/{name}");
        self.file(&format!("{p}/dev"), "1:1\n");
        self.link(
            &format!("sys/class/{class}/{name}"),
            &format!("../../{}", p.trim_start_matches("sys/")),
        );
    }

    pub fn irq(&self, irq: u32, affinity: &str, effective: Option<&str>) {
        self.file(
            &format!("proc/irq/{irq}/smp_affinity_list"),
            &format!("{affinity}\n"),
        );
        if let Some(e) = effective {
            self.file(
                &format!("proc/irq/{irq}/effective_affinity_list"),
                &format!("{e}\n"),
            );
        }
    }
}

pub struct PciSpec<'a> {
    pub bdf: &'a str,
    pub class: u32,
    pub vendor: u16,
    pub device: u16,
    pub numa: i32,
    pub local: &'a str,
    /// (current GT/s, current width, max GT/s, max width)
    pub link: Option<(f64, u32, f64, u32)>,
    pub irqs: &'a [u32],
}

impl<'a> PciSpec<'a> {
    pub fn new(bdf: &'a str, class: u32, numa: i32, local: &'a str) -> Self {
        PciSpec {
            bdf,
            class,
            vendor: 0x8086,
            device: 0x1234,
            numa,
            local,
            link: None,
            irqs: &[],
        }
    }
}

/// A two-socket machine: node 0 = CPUs 0-3 (package 0), node 1 = CPUs 4-7
/// (package 1), SLIT 10/21, /proc/cpuinfo and meminfo.
pub fn two_socket() -> Tree {
    let t = Tree::new();
    t.cpus_online("0-7");
    for cpu in 0..8 {
        t.cpu(cpu, cpu / 4, cpu % 4);
    }
    t.node(0, "0-3", 16 << 20, "10 21");
    t.node(1, "4-7", 16 << 20, "21 10");
    let mut cpuinfo = String::new();
    for cpu in 0..8 {
        cpuinfo.push_str(&format!(
            "processor\t: {cpu}\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Gold 6140 CPU @ 2.30GHz\nphysical id\t: {}\ncore id\t\t: {}\n\n",
            cpu / 4,
            cpu % 4
        ));
    }
    t.file("proc/cpuinfo", &cpuinfo);
    t.file("proc/meminfo", "MemTotal:       33554432 kB\n");
    t.file("proc/sys/kernel/hostname", "synth-01\n");
    t
}

/// The text of an hwloc XML fixture.
pub fn xml_text(name: &str) -> String {
    fs::read_to_string(xml(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// `text` with the one occurrence of `from` replaced; panics unless there is exactly one,
/// so that a test cannot pass on a fixture whose text moved.
pub fn edit(text: &str, from: &str, to: &str) -> String {
    assert_eq!(text.matches(from).count(), 1, "expected one {from:?}");
    text.replacen(from, to, 1)
}

/// The 1-based line of the one occurrence of `needle`.
pub fn line_of(text: &str, needle: &str) -> usize {
    assert_eq!(text.matches(needle).count(), 1, "expected one {needle:?}");
    text[..text.find(needle).unwrap()].matches('\n').count() + 1
}

/// Loads scenario TOML as `nudma topo check` does: the scenario, then the fabric built
/// from it. The error is the checker's located message.
pub fn fabric_loads(name: &str, toml: &str) -> Result<(), String> {
    let s = fabric::scenario::load(
        fabric::scenario::Source {
            name: name.to_string(),
            text: toml.to_string(),
        },
        &fabric::builtin::BuiltinResolver,
    )
    .map_err(|e| e.to_string())?;
    fabric::Fabric::from_scenario(s)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

/// Exports `m` and loads the scenario in the fabric; panics with the checker's message
/// and the TOML when it does not load.
pub fn export_loads(m: &inspect::Machine) -> String {
    let e = inspect::scenario_toml(m, None).unwrap_or_else(|e| panic!("export: {e}"));
    if let Err(err) = fabric_loads("export.toml", &e.toml) {
        panic!("the export does not load: {err}\n{}", e.toml);
    }
    e.toml
}

/// The importer's warnings, as `path: message`.
pub fn warnings(m: &inspect::Machine) -> Vec<String> {
    m.notes
        .iter()
        .filter(|n| n.level == inspect::model::NoteLevel::Warning)
        .map(|n| format!("{}: {}", n.path, n.message))
        .collect()
}
