//! The experiment catalog: every ID of EXPERIMENTS.md by study, and the ones this build
//! implements with the function that runs each.

use crate::experiment;
use crate::harness::RunError;
use crate::result::{ExperimentInfo, Reference, Run};

/// Every experiment ID of EXPERIMENTS.md, by study (`engine.phold` runs by `nudma bench`).
pub const ALL: &[(&str, &[&str])] = &[
    (
        "ioctopus",
        &[
            "ioctopus.tcp_rx_1core",
            "ioctopus.tcp_tx_1core",
            "ioctopus.tcp_multicore",
            "ioctopus.pktgen_1core",
            "ioctopus.tcp_rr",
            "ioctopus.memcached",
            "ioctopus.qpi_congestion",
            "ioctopus.colocation",
            "ioctopus.migration",
            "ioctopus.nvme_upi",
        ],
    ),
    (
        "tyche",
        &["tyche.nics_node0", "tyche.zmio_6nic", "tyche.fio_6nic"],
    ),
    (
        "rdma",
        &[
            "rdma.latency",
            "rdma.size_sweep",
            "rdma.independent_load",
            "rdma.mr_workers",
            "rdma.memcached",
        ],
    ),
    (
        "smartio",
        &[
            "smartio.ram_latency",
            "smartio.ntb_dma",
            "smartio.gpu_dma",
            "smartio.nvme_latency",
            "smartio.p2p",
            "smartio.sq_placement",
            "smartio.nvme_sharing",
            "smartio.multicast",
            "smartio.mdev",
            "smartio.limits",
        ],
    ),
];

/// An implemented experiment: a built-in experiment file (`scenarios/experiments/`).
pub struct Experiment {
    pub info: ExperimentInfo,
    file: &'static experiment::Experiment,
}

impl Experiment {
    /// Runs every config and parameter value it lists.
    pub fn run(&self) -> Result<Vec<Run>, RunError> {
        self.file.run(&[])
    }
}

/// The experiments this build runs, in catalog order.
pub fn implemented() -> Vec<Experiment> {
    let files = experiment::builtin();
    ALL.iter()
        .flat_map(|(_, ids)| ids.iter())
        .filter_map(|id| files.iter().find(|e| e.info.id == *id))
        .map(|file| Experiment {
            info: file.info.clone(),
            file,
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
        .find(|(_, ids)| ids.contains(&id))
        .map(|(s, _)| *s)
}

/// What `reproduce` was asked for, resolved: the experiments to run, and the catalog IDs
/// of the named studies that are not implemented yet (to list on stderr).
pub fn select(targets: &[String]) -> Result<(Vec<Experiment>, Vec<&'static str>), String> {
    let mut all = implemented();
    if targets.is_empty() {
        let missing = ALL
            .iter()
            .flat_map(|(_, ids)| ids.iter().copied())
            .filter(|id| !all.iter().any(|e| e.info.id == *id))
            .collect();
        return Ok((all, missing));
    }
    let mut want: Vec<&'static str> = Vec::new();
    let mut missing = Vec::new();
    for t in targets {
        if let Some((_, ids)) = ALL.iter().find(|(s, _)| s == t) {
            for id in ids.iter() {
                if all.iter().any(|e| e.info.id == *id) {
                    want.push(id);
                } else {
                    missing.push(*id);
                }
            }
        } else if let Some(e) = all.iter().find(|e| e.info.id == t) {
            want.push(e.info.id);
        } else if study_of(t).is_some() {
            return Err(format!(
                "experiment `{t}` is in the catalog but not implemented yet (implemented: {})",
                all.iter().map(|e| e.info.id).collect::<Vec<_>>().join(", ")
            ));
        } else {
            let studies: Vec<&str> = ALL.iter().map(|(s, _)| *s).collect();
            return Err(format!(
                "unknown study or experiment `{t}` (studies: {}; implemented experiments: {})",
                studies.join(", "),
                all.iter().map(|e| e.info.id).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    all.retain(|e| want.contains(&e.info.id));
    Ok((all, missing))
}
