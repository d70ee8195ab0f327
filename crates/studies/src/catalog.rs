//! The experiment catalog: every experiment ID by study, and the ones this build
//! implements with the function that runs each.

use std::borrow::Cow;
use std::path::Path;

use crate::experiment;
use crate::harness::RunError;
use crate::result::{ExperimentInfo, Reference, Run};

/// One experiment of the catalog: its ID and a title (the workload it runs,
/// shortened), for the lists of what is not implemented yet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    pub id: &'static str,
    pub title: &'static str,
    /// Not in the paper: an experiment nudma adds to a study (a mechanism an issue
    /// asks for that the paper proposed or lacked), listed and reported as such.
    pub extension: bool,
}

const fn e(id: &'static str, title: &'static str) -> Entry {
    Entry {
        id,
        title,
        extension: false,
    }
}

const fn extension(id: &'static str, title: &'static str) -> Entry {
    Entry {
        id,
        title,
        extension: true,
    }
}

/// Every experiment of the four studies, by study, in a fixed order (`engine.phold` runs by
/// `nudma bench`), then the pcie-bench study (pcie-bench's released measurements, whose
/// IDs and metrics follow its own tables).
pub const ALL: &[(&str, &[Entry])] = &[
    (
        "ioctopus",
        &[
            e(
                "ioctopus.tcp_rx_1core",
                "netperf TCP_STREAM receive on one core",
            ),
            e(
                "ioctopus.tcp_tx_1core",
                "netperf TCP_STREAM transmit on one core, TSO 64 KB",
            ),
            e("ioctopus.tcp_multicore", "one netperf per core, all cores"),
            e(
                "ioctopus.pktgen_1core",
                "in-kernel packet generator on one core, same packet repeated",
            ),
            e(
                "ioctopus.tcp_rr",
                "netperf TCP_RR request/response latency, one core each side",
            ),
            e(
                "ioctopus.memcached",
                "one memcached server, 14 memslap clients, 512 KB values",
            ),
            e(
                "ioctopus.qpi_congestion",
                "TCP receive and a UDP ping-pong beside STREAM pairs on the remote node",
            ),
            e(
                "ioctopus.colocation",
                "PageRank victim beside memcached or netperf instances",
            ),
            e(
                "ioctopus.migration",
                "TCP receive while the process moves to the other socket",
            ),
            e(
                "ioctopus.nvme_upi",
                "fio on the node remote from the SSDs beside STREAM instances",
            ),
            extension(
                "ioctopus.coalescing",
                "TCP_RR and TCP receive with interrupt coalescing off, static and adaptive (DIM)",
            ),
            extension(
                "ioctopus.ioctosg",
                "pktgen with packets whose pages span both nodes: IOctoSG's per-fragment PF hint",
            ),
        ],
    ),
    (
        "tyche",
        &[
            e(
                "tyche.nics_node0",
                "FIO direct random I/O, 128 KB, NICs all on node 0",
            ),
            e(
                "tyche.zmio_6nic",
                "zmIO over 6 NICs (3 per node), ramdisk target",
            ),
            e(
                "tyche.fio_6nic",
                "FIO on XFS over 6 NICs, 256 MB file per thread",
            ),
            extension(
                "tyche.spill",
                "zmIO's skewed buffers: NUMA scheduling with and without spilling across QPI",
            ),
        ],
    ),
    (
        "rdma",
        &[
            e("rdma.latency", "64 B one-sided operations, closed loop"),
            e(
                "rdma.size_sweep",
                "8 connections, open loop, MTU 256, size sweep",
            ),
            e(
                "rdma.independent_load",
                "8 connections beside 128 load threads on their own buffers",
            ),
            e(
                "rdma.mr_workers",
                "server threads writing or reading the memory region clients access",
            ),
            e("rdma.memcached", "memcached over one-sided RDMA reads"),
        ],
    ),
    (
        "smartio",
        &[
            e(
                "smartio.ram_latency",
                "one-way latency of a CPU store reaching the other host's RAM",
            ),
            e(
                "smartio.ntb_dma",
                "the NTB adapter's DMA engine copying RAM → remote RAM, PXH810 b2b",
            ),
            e(
                "smartio.gpu_dma",
                "bandwidthTest on a lent Quadro P4000 and a borrowed Tesla K40",
            ),
            e(
                "smartio.nvme_latency",
                "4 KB random reads at QD 1, local and borrowed NVMe",
            ),
            e(
                "smartio.p2p",
                "two K420 GPUs on the three-way testbed: A → B copies and a ping-pong",
            ),
            e(
                "smartio.sq_placement",
                "user-space NVMe driver with its SQ in borrower RAM, lender RAM or a GPU",
            ),
            e(
                "smartio.nvme_sharing",
                "one P4800X shared by many hosts through the distributed driver",
            ),
            e(
                "smartio.multicast",
                "one NVMe Identify landing in a multicast group of N hosts",
            ),
            e(
                "smartio.mdev",
                "bandwidthTest on a borrowed K40c, bare metal and from a VM through MDEV",
            ),
            e(
                "smartio.failover",
                "a distributed-NVMe client failing over between two NTB paths",
            ),
            e(
                "smartio.limits",
                "requester-ID and address LUTs exhausted; a 40-bit DMA mask behind a high BAR",
            ),
        ],
    ),
    (
        "pciebench",
        &[
            e(
                "pciebench.lat_dma_sizes",
                "pcie-bench LAT_DMA_RD and LAT_DMA_WRRD by size on an NFP6000",
            ),
            e(
                "pciebench.bw_dma_sz_sweep",
                "pcie-bench BW_DMA_RD, WR and RW by size on an NFP6000",
            ),
            e(
                "pciebench.bw_dma_win_sweep",
                "pcie-bench BW_DMA_RD and WR by host-buffer window and cache state on an NFP6000",
            ),
        ],
    ),
];

/// Every catalog entry, in catalog order.
pub fn entries() -> impl Iterator<Item = &'static Entry> {
    ALL.iter().flat_map(|(_, entries)| entries.iter())
}

/// The catalog entry of an experiment ID.
pub fn entry(id: &str) -> Option<&'static Entry> {
    entries().find(|e| e.id == id)
}

/// An experiment to reproduce: a built-in experiment file (`scenarios/experiments/`) or
/// a user's file, run by the same code.
pub struct Experiment {
    pub info: ExperimentInfo,
    file: Cow<'static, experiment::Experiment>,
}

impl Experiment {
    /// Runs every config and parameter value it lists.
    pub fn run(&self) -> Result<Vec<Run>, RunError> {
        self.file.run(&[])
    }

    /// Its published reference points, each with its basis.
    pub fn references(&self) -> &[Reference] {
        &self.file.references
    }

    /// A user's experiment file at `path`, with its own published values.
    pub fn from_file(path: &Path) -> Result<Experiment, String> {
        if !path.is_file() {
            return Err(format!(
                "{}: no such file (name an experiment file, or a study or experiment ID: `nudma list`)",
                path.display()
            ));
        }
        let src =
            fabric::builtin::source_of(&path.display().to_string()).map_err(|e| e.to_string())?;
        if !experiment::is_experiment(&src) {
            return Err(format!(
                "{}: not an experiment file (it has no [experiment] table); run a scenario \
                 with `nudma run {}`",
                src.name, src.name
            ));
        }
        let mut file = experiment::Experiment::parse(&src).map_err(|e| e.to_string())?;
        if let Some(dir) = path.parent() {
            file.resolve_scenarios_in(dir);
        }
        Ok(Experiment {
            info: file.info.clone(),
            file: Cow::Owned(file),
        })
    }
}

/// The experiments this build runs, in catalog order.
pub fn implemented() -> Vec<Experiment> {
    let files = experiment::builtin();
    entries()
        .filter_map(|entry| files.iter().find(|e| e.info.id == entry.id))
        .map(|file| Experiment {
            info: file.info.clone(),
            file: Cow::Borrowed(file),
        })
        .collect()
}

/// Published reference points of every implemented experiment, each with its basis: the
/// parameters fitted on it (calibration) or none (prediction).
pub fn references() -> Vec<Reference> {
    experiment::builtin()
        .iter()
        .flat_map(|e| e.references.iter().cloned())
        .collect()
}

/// The study an experiment ID belongs to.
pub fn study_of(id: &str) -> Option<&'static str> {
    ALL.iter()
        .find(|(_, entries)| entries.iter().any(|e| e.id == id))
        .map(|(s, _)| *s)
}

/// What `reproduce` was asked for, resolved: the experiments to run, and the catalog
/// entries of the named studies (every study when none is named) that are not
/// implemented yet — each once, in catalog order, for stderr and the report. A target
/// that is a file (a user's experiment, or a copy of a built-in one) runs after the
/// catalog's, in the order given, with the published values it carries.
pub fn select(targets: &[String]) -> Result<(Vec<Experiment>, Vec<&'static Entry>), String> {
    let mut all = implemented();
    let is_implemented = |id: &str| all.iter().any(|e| e.info.id == id);
    let mut want: Vec<&'static str> = Vec::new();
    let mut studies: Vec<&str> = Vec::new();
    let mut files = Vec::new();
    if targets.is_empty() {
        studies = ALL.iter().map(|(s, _)| *s).collect();
    }
    for t in targets {
        if is_file_target(t) {
            files.push(Experiment::from_file(Path::new(t))?);
        } else if let Some((study, entries)) = ALL.iter().find(|(s, _)| s == t) {
            studies.push(*study);
            want.extend(entries.iter().map(|e| e.id).filter(|id| is_implemented(id)));
        } else if let Some(e) = all.iter().find(|e| e.info.id == t) {
            want.push(e.info.id);
        } else if study_of(t).is_some() {
            return Err(format!(
                "experiment `{t}` is in the catalog but not implemented yet (implemented: {})",
                implemented_list(&all)
            ));
        } else {
            return Err(format!(
                "unknown study or experiment `{t}` (studies: {}; implemented experiments: {})",
                ALL.iter().map(|(s, _)| *s).collect::<Vec<_>>().join(", "),
                implemented_list(&all)
            ));
        }
    }
    // Catalog order, each once, however often a study was named.
    let missing = ALL
        .iter()
        .filter(|(s, _)| studies.contains(s))
        .flat_map(|(_, entries)| entries.iter())
        .filter(|e| !is_implemented(e.id))
        .collect();
    if !targets.is_empty() {
        all.retain(|e| want.contains(&e.info.id));
    }
    all.extend(files);
    Ok((all, missing))
}

/// Whether a `reproduce` target names a file rather than a study or an experiment ID:
/// one that exists, or a name no ID has (a path or a `.toml` name).
fn is_file_target(t: &str) -> bool {
    Path::new(t).is_file() || t.ends_with(".toml") || t.contains(std::path::MAIN_SEPARATOR)
}

/// The IDs of `experiments`, sorted, each once, comma-separated.
fn implemented_list(experiments: &[Experiment]) -> String {
    let mut ids: Vec<&str> = experiments.iter().map(|e| e.info.id).collect();
    ids.sort_unstable();
    ids.dedup();
    ids.join(", ")
}

/// Every catalog entry not implemented by this build, in catalog order.
pub fn not_implemented() -> Vec<&'static Entry> {
    let all = implemented();
    entries()
        .filter(|e| !all.iter().any(|x| x.info.id == e.id))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_titled_and_of_their_study() {
        let mut seen = std::collections::BTreeSet::new();
        for (study, entries) in ALL {
            for e in entries.iter() {
                assert!(seen.insert(e.id), "{} twice", e.id);
                assert!(e.id.starts_with(&format!("{study}.")), "{}", e.id);
                assert!(!e.title.trim().is_empty(), "{} has no title", e.id);
                assert_eq!(study_of(e.id), Some(*study));
            }
        }
        // The smartio study has eleven experiments, failover among them.
        assert_eq!(
            entry("smartio.failover").map(|e| e.id),
            Some("smartio.failover")
        );
        let catalog = entries().filter(|e| !e.extension && study_of(e.id) != Some("pciebench"));
        assert_eq!(catalog.count(), 29);
    }

    #[test]
    fn every_implemented_experiment_is_in_the_catalog() {
        let files = crate::experiment::builtin();
        for f in files {
            assert!(
                entry(f.info.id).is_some(),
                "{} is not in the catalog",
                f.info.id
            );
        }
        assert_eq!(implemented().len(), files.len());
    }

    #[test]
    fn a_study_named_twice_runs_each_experiment_once_and_misses_none() {
        // SmartIO is whole: named twice, it runs each experiment once and misses none.
        let (runs, missing) = select(&["smartio".into(), "smartio".into()]).unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        let mut ids: Vec<&str> = runs.iter().map(|e| e.info.id).collect();
        let n = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), n, "each once: {ids:?}");
        assert!(ids.contains(&"smartio.limits"), "implemented: {ids:?}");
        assert!(ids.iter().all(|id| id.starts_with("smartio.")), "{ids:?}");
        // A study named twice runs each of its experiments once (every study is complete
        // now, so nothing is missing).
        let (twice, missing) = select(&["rdma".into(), "rdma".into()]).unwrap();
        assert!(missing.is_empty(), "{missing:?}");
        let ids: Vec<&str> = twice.iter().map(|e| e.info.id).collect();
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert!(ids.contains(&"rdma.memcached"), "{ids:?}");
        assert_eq!(ids.len(), unique.len(), "{ids:?}");
        // Nothing named: every study's missing experiments, as not_implemented() says.
        let (all, missing) = select(&[]).unwrap();
        assert_eq!(all.len(), implemented().len());
        assert_eq!(missing, not_implemented());
        // An implemented experiment by ID: nothing missing.
        let (one, missing) = select(&["smartio.p2p".into(), "smartio.p2p".into()]).unwrap();
        assert_eq!(one.len(), 1);
        assert!(missing.is_empty());
    }

    #[test]
    fn unknown_targets_name_the_choices_once() {
        // Any experiment still missing (none once every study is complete).
        if let Some(missing) = not_implemented().first() {
            let e = select(&[missing.id.into()]).err().unwrap();
            assert!(e.contains("in the catalog but not implemented yet"), "{e}");
        }
        let e = select(&["nope".into()]).err().unwrap();
        assert!(
            e.contains(
                "(studies: ioctopus, tyche, rdma, smartio, pciebench; implemented experiments: "
            ),
            "{e}"
        );
        let list = e.rsplit("implemented experiments: ").next().unwrap();
        let ids: Vec<&str> = list.trim_end_matches(')').split(", ").collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(ids, sorted, "sorted and unique: {e}");
        assert!(ids.contains(&"smartio.p2p"), "{e}");
    }
}
