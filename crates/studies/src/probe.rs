//! What a probe is (`probe = "…"` of an experiment file's `[[metric]]`): a name, the
//! fields it gives, and a function run on the config's hardware with a [`ProbeCx`]. The
//! studies write probes against this; the table of them is `crate::probes::PROBES`.
//!
//! A probe runs once per (config, sweep point, probe, resolved arguments, metric
//! hardware) and gives a map of fields; every metric naming it takes its `field` from
//! that one run. Adding a probe is one entry in `PROBES`:
//!
//! ```ignore
//! Probe {
//!     name: "nvme_sharing",
//!     fields: &["clients_ok", "total_kiops", "min_client_kiops", "jain_fairness", "error"],
//!     run: nvme_sharing, // fn(&mut ProbeCx) -> Result<BTreeMap<String, Value>, RunError>
//! },
//! ```
//!
//! and in the experiment file
//! `[[metric]] name = "total_kiops" probe = "nvme_sharing" field = "total_kiops"
//! args = { clients = "{clients}" }`.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use sim::timed::TimedFabric;

use crate::harness::RunError;

/// What a probe's function returns: field name → value (a number, a string, a bool,
/// null, a list or an object; the metrics that name a field report it as given).
pub type Fields = BTreeMap<String, Value>;

/// A probe's function.
pub type ProbeFn = fn(&mut ProbeCx) -> Result<Fields, RunError>;

/// One measurement experiment files can name.
#[derive(Clone, Copy, Debug)]
pub struct Probe {
    /// The name a `[[metric]]`'s `probe` gives.
    pub name: &'static str,
    /// The fields it gives, in the order it documents them; a metric without `field`
    /// takes the only one, so a probe of one field needs none named.
    pub fields: &'static [&'static str],
    pub run: ProbeFn,
}

impl Probe {
    pub fn find(registry: &'static [Probe], name: &str) -> Option<&'static Probe> {
        registry.iter().find(|p| p.name == name)
    }
}

/// What a probe sees: the timed fabric of its config's scenario with every override
/// applied (the config's `set`, the metric's, the user's `--set`), fresh for this run;
/// its arguments with `{var}` and `{swept}` substituted; the sweep point.
pub struct ProbeCx<'a> {
    pub tf: &'a mut TimedFabric,
    args: &'a BTreeMap<String, String>,
    point: &'a [(String, u64)],
    /// "<experiment>: metric `<m>` (probe `<p>`)", for errors.
    what: String,
    counters: Option<Value>,
    /// The arguments the probe has read, so that one it never reads is an error, not a
    /// silent no-op.
    read: RefCell<BTreeSet<String>>,
}

impl<'a> ProbeCx<'a> {
    pub fn new(
        tf: &'a mut TimedFabric,
        args: &'a BTreeMap<String, String>,
        point: &'a [(String, u64)],
        what: String,
    ) -> ProbeCx<'a> {
        ProbeCx {
            tf,
            args,
            point,
            what,
            counters: None,
            read: RefCell::new(BTreeSet::new()),
        }
    }

    /// A resolved argument; an error naming the metric and the probe when it is missing.
    pub fn arg(&self, key: &str) -> Result<String, RunError> {
        self.read.borrow_mut().insert(key.to_string());
        self.args.get(key).cloned().ok_or_else(|| {
            self.error(format!(
                "needs argument `{key}` (given: {})",
                names(self.args.keys())
            ))
        })
    }

    /// Every resolved argument.
    pub fn args(&self) -> &BTreeMap<String, String> {
        self.read.borrow_mut().extend(self.args.keys().cloned());
        self.args
    }

    /// The sweep point: each swept parameter's value.
    pub fn point(&self) -> &[(String, u64)] {
        self.point
    }

    /// An argument a probe may go without (it then states its default).
    pub fn arg_opt(&self, key: &str) -> Option<&str> {
        self.read.borrow_mut().insert(key.to_string());
        self.args.get(key).map(String::as_str)
    }

    /// The arguments given that the probe never read: a misspelt or misplaced one.
    pub fn unread(&self) -> Vec<&str> {
        let read = self.read.borrow();
        self.args
            .keys()
            .filter(|k| !read.contains(*k))
            .map(String::as_str)
            .collect()
    }

    /// The value of a swept parameter at this point, if the experiment sweeps it.
    pub fn swept(&self, name: &str) -> Option<u64> {
        self.point.iter().find(|(k, _)| k == name).map(|p| p.1)
    }

    /// The value of a swept parameter this probe cannot do without.
    pub fn need_swept(&self, name: &str) -> Result<u64, RunError> {
        self.swept(name)
            .ok_or_else(|| self.error(format!("needs a swept `{name}`")))
    }

    /// The swept `bytes`.
    pub fn bytes(&self) -> Result<u64, RunError> {
        self.need_swept("bytes")
    }

    /// Hardware counters of this run (kept per metric in `counters.json`).
    pub fn set_counters(&mut self, counters: Value) {
        self.counters = Some(counters);
    }

    pub fn take_counters(&mut self) -> Option<Value> {
        self.counters.take()
    }

    /// "<experiment>: metric `<m>` (probe `<p>`)": where errors of this run are.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// An error located at this metric and probe.
    pub fn error(&self, msg: impl std::fmt::Display) -> RunError {
        RunError(format!("{}: {msg}", self.what))
    }

    /// An argument that must be one of two words: `Ok(true)` for `yes`, `Ok(false)` for `no`.
    pub fn choice(&self, key: &str, yes: &str, no: &str) -> Result<bool, RunError> {
        let v = self.arg(key)?;
        if v == yes {
            Ok(true)
        } else if v == no {
            Ok(false)
        } else {
            Err(self.error(format!("{key} = `{v}`: use \"{yes}\" or \"{no}\"")))
        }
    }
}

fn names<'s>(it: impl Iterator<Item = &'s String>) -> String {
    let v: Vec<&str> = it.map(String::as_str).collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// One field.
pub fn one(name: &str, v: Value) -> Fields {
    BTreeMap::from([(name.to_string(), v)])
}
