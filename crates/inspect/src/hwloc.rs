//! Import of hwloc XML exports (`lstopo foo.xml`) into a [`Machine`].
//!
//! Three format generations are read:
//! - **1.x** (`<topology>` without version): NUMA nodes are ordinary parents of
//!   packages and I/O (`Socket` or `Package`, attribute-less `Cache` objects), and
//!   distances are `<distances relative_depth latency_base>` inside an object;
//! - **2.x** (`version="2.0"`): NUMA nodes are memory children of their package or
//!   group, caches are `L3Cache` etc., distances are top-level `<distances2>`,
//!   memory attributes are `<memattr>`; `osdev_type` is an enum (0 block, 1 GPU,
//!   2 network, 3 OpenFabrics, 4 DMA, 5 coprocessor);
//! - **3.x** (`version="3.0"`): as 2.x, but `osdev_type` is a bit mask (1 storage,
//!   2 memory, 4 GPU, 8 coprocessor, 16 network, 32 OpenFabrics, 64 DMA), `pci_type`
//!   carries the prog-if byte, and host-wide infos sit directly under `<topology>`.
//!
//! A PCI device's NUMA node is the node set of its nearest non-I/O ancestor: one node
//! there means the device is attached to it; several (hwloc attached it to the whole
//! machine or a group) means the export does not say.
//!
//! Bad input (`checks`) is handled by one rule: a value is dropped, an identity is not.
//! - An attribute that does not read, or reads beyond what any machine has, is dropped
//!   with a warning naming file, line, object and attribute (the import goes on, and the
//!   audit shows the warning): a size that is negative, not a number or beyond its
//!   bound (a node's memory 2^52 bytes, a machine's 2^60, a cache's 2^40), an `os_index`
//!   beyond 32 bits, a CPU set that does not parse. What it described becomes unknown.
//! - A PCI function without a readable `pci_busid` is skipped with such a warning, which
//!   names the OS devices that go with it.
//! - Objects that contradict each other are an error at the later object: two NUMA
//!   nodes or two PUs with one `os_index` (the model keys memory, distances and CPU homes
//!   on them, so merging or dropping one would silently change the verdict), an
//!   object's CPUs outside its parent's, two NUMA nodes' CPU sets overlapping without
//!   one holding the other. No hwloc tree can hold these, and any repair would guess.
//! - A repeated PCI address is the exception, kept with a warning: an address only
//!   labels a function, whose locality comes from its place in the tree (hand-edited
//!   exports, such as one fixture's, repeat them).

mod checks;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

use roxmltree::{Document, Node, ParsingOptions};

use crate::cpuset::CpuSet;
use crate::error::InspectError;
use crate::model::{
    Cache, CacheKind, Core, DistanceMatrix, Initiator, Machine, MemAttrValue, MemoryAttribute,
    NoteLevel, NumaNode, Package, PciDevice, Source,
};
use crate::pci::{Bdf, OsDevice, OsDeviceKind};
use crate::sysfs::clock_from_model;
use checks::{describe, Ancestor, CACHE_SIZE, MACHINE_MEMORY, NODE_MEMORY};

/// Deeper nesting than this is not a real topology; stop rather than recurse on.
const MAX_DEPTH: usize = 256;

/// Reads and imports an hwloc XML file.
pub fn import_hwloc_file(path: &Path) -> Result<Machine, InspectError> {
    // A regular file of bounded size: a device or FIFO would be read forever.
    let text = fabric::scenario::read_text(path).map_err(|e| {
        InspectError::io(
            path,
            std::io::Error::new(std::io::ErrorKind::InvalidInput, e),
        )
    })?;
    parse_hwloc_xml(&text, path)
}

/// Deepest element nesting the XML parser is given: its tokenizer recurses per level, so
/// a hostile file nested tens of thousands deep would overflow the stack. hwloc exports
/// nest a few dozen levels; the importer itself reads at most `MAX_DEPTH` objects deep.
const MAX_XML_NESTING: usize = 4 * MAX_DEPTH;

/// The (line, column) of the first element nested deeper than `limit`, found by a
/// single pass over the text that knows tags, quotes, comments, CDATA and declarations.
fn too_deep(text: &str, limit: usize) -> Option<(u32, u32)> {
    let b = text.as_bytes();
    let (mut i, mut depth) = (0usize, 0usize);
    let skip_to = |from: usize, end: &[u8]| -> usize {
        b[from..]
            .windows(end.len())
            .position(|w| w == end)
            .map_or(b.len(), |p| from + p + end.len())
    };
    while i < b.len() {
        if b[i] != b'<' {
            i += 1;
            continue;
        }
        let rest = &b[i..];
        if rest.starts_with(b"<!--") {
            i = skip_to(i + 4, b"-->");
        } else if rest.starts_with(b"<![CDATA[") {
            i = skip_to(i + 9, b"]]>");
        } else if rest.starts_with(b"<?") {
            i = skip_to(i + 2, b"?>");
        } else if rest.starts_with(b"<!") {
            i = skip_to(i + 2, b">");
        } else if rest.starts_with(b"</") {
            depth = depth.saturating_sub(1);
            i = skip_to(i + 2, b">");
        } else {
            // A start tag: find its end outside quoted attribute values.
            let start = i;
            let mut quote = None;
            i += 1;
            while i < b.len() {
                match (b[i], quote) {
                    (q @ (b'"' | b'\''), None) => quote = Some(q),
                    (q, Some(open)) if q == open => quote = None,
                    (b'>', None) => break,
                    _ => {}
                }
                i += 1;
            }
            let self_closing = i > 0 && i < b.len() && b[i - 1] == b'/';
            if !self_closing {
                depth += 1;
                if depth > limit {
                    let before = &text[..start];
                    let line = before.matches('\n').count() as u32 + 1;
                    let col = (start - before.rfind('\n').map_or(0, |p| p + 1)) as u32 + 1;
                    return Some((line, col));
                }
            }
            i += 1;
        }
    }
    None
}

/// Imports hwloc XML text; `path` names it in errors and in the machine's source.
pub fn parse_hwloc_xml(text: &str, path: &Path) -> Result<Machine, InspectError> {
    if let Some((line, column)) = too_deep(text, MAX_XML_NESTING) {
        return Err(InspectError::Xml {
            path: path.to_path_buf(),
            line,
            column,
            message: format!("elements nested deeper than {MAX_XML_NESTING} levels"),
        });
    }
    let options = ParsingOptions {
        allow_dtd: true,
        ..ParsingOptions::default()
    };
    let doc = Document::parse_with_options(text, options).map_err(|e| {
        let pos = e.pos();
        InspectError::Xml {
            path: path.to_path_buf(),
            line: pos.row,
            column: pos.col,
            message: e.to_string(),
        }
    })?;
    let root = doc.root_element();
    if root.tag_name().name() != "topology" {
        return Err(InspectError::NotHwloc {
            path: path.to_path_buf(),
            message: format!(
                "the root element is <{}>, expected <topology>",
                root.tag_name().name()
            ),
        });
    }
    let major = root
        .attribute("version")
        .and_then(|v| v.split('.').next())
        .and_then(|v| v.trim().parse::<u32>().ok())
        .unwrap_or(1);
    let mut importer = Importer {
        machine: Machine::empty(Source::Hwloc {
            path: path.to_path_buf(),
            major,
        }),
        major,
        path: path.to_path_buf(),
        gp_numa: HashMap::new(),
        gp_cpus: HashMap::new(),
        gp_package: HashMap::new(),
        host_bridges: 0,
        pending_gp_distances: Vec::new(),
        fault: None,
        numa_at: HashMap::new(),
        pu_at: HashMap::new(),
        pci_at: HashMap::new(),
    };
    let mut saw_object = false;
    for child in root.children().filter(Node::is_element) {
        match child.tag_name().name() {
            "object" => {
                saw_object = true;
                importer.object(child, &Context::default(), 0);
            }
            "distances2" => importer.distances2(child),
            "distances2hetero" => importer.machine.note(
                NoteLevel::Info,
                importer.path.display().to_string(),
                "heterogeneous distance matrix (distances2hetero) ignored",
            ),
            "memattr" => importer.memattr(child),
            "info" => importer.topology_info(child),
            _ => {}
        }
    }
    if !saw_object {
        return Err(InspectError::NotHwloc {
            path: path.to_path_buf(),
            message: "no <object> under <topology>".to_string(),
        });
    }
    importer.finish()
}

/// What an object inherits from its ancestors.
#[derive(Clone, Default)]
struct Context<'a, 'i> {
    package: Option<u32>,
    /// The nearest normal (non-I/O, non-memory) ancestor: where I/O locality comes from.
    locality: Option<Node<'a, 'i>>,
    /// The nearest ancestor PCI function (index in `machine.pci`).
    pci_parent: Option<usize>,
    host_bridge: Option<String>,
    /// The nearest ancestor with a CPU set.
    cpus: Option<Rc<Ancestor>>,
}

struct Importer {
    machine: Machine,
    major: u32,
    path: PathBuf,
    /// gp index → NUMA node OS index.
    gp_numa: HashMap<u64, u32>,
    /// gp index → CPU set, to resolve memory-attribute initiators given as objects.
    gp_cpus: HashMap<u64, CpuSet>,
    host_bridges: usize,
    /// gp index → package OS index.
    gp_package: HashMap<u64, u32>,
    /// Distance matrices given by gp index, resolved at the end.
    pending_gp_distances: Vec<usize>,
    /// The first contradiction between objects: the import fails with it.
    fault: Option<InspectError>,
    /// NUMA node and PU numbers → the line of the object that claimed them.
    numa_at: HashMap<u32, u32>,
    pu_at: HashMap<u32, u32>,
    /// PCI address → line and type of the first object with it.
    pci_at: HashMap<Bdf, (u32, String)>,
}

fn obj_type(node: Node) -> String {
    node.attribute("type").unwrap_or("").to_string()
}

fn gp_index(node: Node) -> Option<u64> {
    node.attribute("gp_index")
        .and_then(|v| v.parse().ok())
        .or_else(|| {
            node.attribute("id")
                .and_then(|v| v.strip_prefix("obj"))
                .and_then(|v| v.parse().ok())
        })
}

fn attr_u64(node: Node, name: &str) -> Option<u64> {
    node.attribute(name).and_then(parse_number)
}

/// hwloc writes decimal, but its reader accepts C `strtoull(…, 0)` forms.
fn parse_number(text: &str) -> Option<u64> {
    let t = text.trim();
    if let Some(hex) = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16).ok()
    } else {
        t.parse().ok()
    }
}

fn info_value<'a>(node: Node<'a, '_>, name: &str) -> Option<&'a str> {
    node.children()
        .filter(|c| c.is_element() && c.tag_name().name() == "info")
        .find(|c| c.attribute("name") == Some(name))
        .and_then(|c| c.attribute("value"))
        .filter(|v| !v.trim().is_empty())
}

fn is_io_type(t: &str) -> bool {
    matches!(t, "Bridge" | "PCIDev" | "OSDev")
}

fn is_memory_type(t: &str) -> bool {
    matches!(t, "NUMANode" | "MemCache")
}

impl Importer {
    fn loc(&self, node: Node) -> String {
        let doc_pos = node.document().text_pos_at(node.range().start);
        format!("{}:{}", self.path.display(), doc_pos.row)
    }

    fn cpuset_attr(&mut self, node: Node, name: &str) -> Option<CpuSet> {
        let text = node.attribute(name)?;
        match CpuSet::parse_hwloc(text) {
            Ok(s) => Some(s),
            Err(e) => {
                let loc = self.loc(node);
                self.machine.note(NoteLevel::Warning, loc, e.to_string());
                None
            }
        }
    }

    fn object<'a, 'i>(&mut self, node: Node<'a, 'i>, ctx: &Context<'a, 'i>, depth: usize) {
        if depth > MAX_DEPTH {
            let loc = self.loc(node);
            self.machine.note(
                NoteLevel::Warning,
                loc,
                format!("objects nested deeper than {MAX_DEPTH} levels ignored"),
            );
            return;
        }
        // v1 called packages "Socket" and memory "Node"; normalise names first.
        let raw_type = obj_type(node);
        let t = match raw_type.as_str() {
            "Socket" => "Package",
            "Node" => "NUMANode",
            "System" => "Machine",
            other => other,
        }
        .to_string();
        let os_index = self.os_index_attr(node, &t);
        let object = describe(&t, os_index);
        if let Some(id) = os_index {
            self.check_identity(node, &t, id);
        }
        let gp = gp_index(node);
        let cpuset = self.cpuset_attr(node, "cpuset");
        if let (Some(g), Some(c)) = (gp, &cpuset) {
            self.gp_cpus.insert(g, c.clone());
        }
        let mut child_ctx = ctx.clone();
        if !is_io_type(&t) {
            let pu = os_index.filter(|_| t == "PU");
            child_ctx.cpus =
                self.check_within(node, &object, cpuset.as_ref(), pu, ctx.cpus.as_ref());
        }
        if !is_io_type(&t) && !is_memory_type(&t) && t != "Misc" {
            child_ctx.locality = Some(node);
        }
        // In 1.x a NUMA node is a normal parent of the objects it holds.
        if t == "NUMANode" && self.major < 2 {
            child_ctx.locality = Some(node);
        }

        match t.as_str() {
            "Machine" if depth == 0 => self.machine_object(node, &object, cpuset.as_ref()),
            "Machine" => {}
            "Package" => {
                let id = os_index.unwrap_or(self.machine.packages.len() as u32);
                child_ctx.package = Some(id);
                self.package(node, id, gp, cpuset.clone());
            }
            "NUMANode" => self.numa_node(node, &object, os_index, gp, cpuset.clone()),
            "Core" => {
                let id = os_index.unwrap_or(self.machine.cores.len() as u32);
                self.machine.cores.push(Core {
                    package: ctx.package,
                    id,
                    cpus: cpuset.clone().unwrap_or_default(),
                });
            }
            "PU" => {
                if let Some(i) = os_index {
                    self.machine.cpus.insert(i);
                }
            }
            "Bridge" | "PCIDev" => {
                if let Some(index) = self.pci_object(node, &t, ctx) {
                    child_ctx.pci_parent = Some(index);
                } else if t == "PCIDev" {
                    // Skipped (its warning says so): its OS devices are not the bridge's.
                    child_ctx.pci_parent = None;
                } else {
                    // A host bridge: the root of one PCI hierarchy.
                    self.host_bridges += 1;
                    let range = node.attribute("bridge_pci").unwrap_or("?");
                    child_ctx.host_bridge = Some(format!("pci{range}"));
                    child_ctx.pci_parent = None;
                }
            }
            "OSDev" => self.os_device(node, ctx),
            _ if t.ends_with("Cache") && t != "MemCache" => {
                let size = self.size_attr(node, &object, "cache_size", &CACHE_SIZE);
                self.cache(node, &t, size, cpuset);
            }
            "Group" | "Die" | "Misc" | "MemCache" => {}
            other => {
                let loc = self.loc(node);
                self.machine.note(
                    NoteLevel::Info,
                    loc,
                    format!("unknown object type {other:?} skipped (its children are read)"),
                );
            }
        }

        for child in node.children().filter(Node::is_element) {
            match child.tag_name().name() {
                "object" => self.object(child, &child_ctx, depth + 1),
                "distances" => self.distances_v1(node, child),
                _ => {}
            }
        }
    }

    /// The top `Machine` object: host name, total memory, CPUs.
    fn machine_object(&mut self, node: Node, object: &str, cpuset: Option<&CpuSet>) {
        if let Some(v) = info_value(node, "HostName") {
            self.machine.hostname.get_or_insert(v.to_string());
        }
        if let Some(m) = self.size_attr(node, object, "local_memory", &MACHINE_MEMORY) {
            self.machine.total_memory_bytes = Some(m);
        }
        if let Some(c) = cpuset {
            if self.machine.cpus.is_empty() {
                self.machine.cpus = c.clone();
            }
        }
    }

    fn package(&mut self, node: Node, id: u32, gp: Option<u64>, cpuset: Option<CpuSet>) {
        if let Some(g) = gp {
            self.gp_package.insert(g, id);
        }
        self.machine.packages.push(Package {
            id,
            cpus: cpuset.unwrap_or_default(),
        });
        if let Some(m) = info_value(node, "CPUModel") {
            self.machine.cpu_model.get_or_insert(m.to_string());
        }
        if let Some(v) = info_value(node, "CPUVendor") {
            self.machine.cpu_vendor.get_or_insert(v.to_string());
        }
    }

    fn numa_node(
        &mut self,
        node: Node,
        object: &str,
        os_index: Option<u32>,
        gp: Option<u64>,
        cpuset: Option<CpuSet>,
    ) {
        let id = match os_index {
            Some(i) => i,
            // The first number no node has claimed (a later one may still).
            None => {
                let free = (0..=u32::MAX).find(|i| !self.numa_at.contains_key(i));
                let id = free.unwrap_or(0);
                self.numa_at.insert(id, checks::line_of(node));
                id
            }
        };
        if let Some(g) = gp {
            self.gp_numa.insert(g, id);
        }
        let memory = self.size_attr(node, object, "local_memory", &NODE_MEMORY);
        let mut n = NumaNode::new(id, cpuset.unwrap_or_default(), memory);
        // 2.x names the memory: DRAM, HBM, MCDRAM, NVM, SPM, GPUMemory, …
        n.kind = node
            .attribute("subtype")
            .map(str::trim)
            .filter(|k| !k.is_empty())
            .map(str::to_string);
        self.machine.nodes.push(n);
    }

    fn cache(&mut self, node: Node, t: &str, size: Option<u64>, cpuset: Option<CpuSet>) {
        let level = attr_u64(node, "depth").map(|d| d as u8).or_else(|| {
            t.strip_prefix('L')
                .and_then(|r| r.chars().next())
                .and_then(|c| c.to_digit(10))
                .map(|d| d as u8)
        });
        let Some(level) = level else {
            return;
        };
        let kind = match attr_u64(node, "cache_type") {
            Some(1) => CacheKind::Data,
            Some(2) => CacheKind::Instruction,
            Some(_) => CacheKind::Unified,
            None if t.contains("iCache") => CacheKind::Instruction,
            None => CacheKind::Unified,
        };
        let ways = node
            .attribute("cache_associativity")
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&w| w > 0)
            .map(|w| w as u32);
        self.machine.caches.push(Cache {
            level,
            kind,
            size_bytes: size.unwrap_or(0),
            ways,
            line_bytes: attr_u64(node, "cache_linesize")
                .filter(|&l| l > 0)
                .map(|l| l as u32),
            cpus: cpuset.unwrap_or_default(),
        });
    }

    /// Adds a PCI function (a PCIDev, or a Bridge with a bus address); returns its index.
    fn pci_object(&mut self, node: Node, t: &str, ctx: &Context) -> Option<usize> {
        let bdf = self.pci_address(node, t)?;
        let host = ctx
            .host_bridge
            .clone()
            .unwrap_or_else(|| format!("pci{:04x}:{:02x}", bdf.domain, bdf.bus));
        let mut dev = PciDevice::new(bdf, host);
        dev.is_bridge = t == "Bridge";
        dev.parent = ctx.pci_parent;
        if let Some(pt) = node.attribute("pci_type") {
            self.parse_pci_type(node, pt, &mut dev);
        }
        if let Some(speed) = node
            .attribute("pci_link_speed")
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|v| v.is_finite() && *v > 0.0)
        {
            dev.link.gbytes_per_s = Some(speed);
        }
        dev.vendor_name = info_value(node, "PCIVendor").map(str::to_string);
        dev.device_name = info_value(node, "PCIDevice").map(str::to_string);
        if let Some(loc_node) = ctx.locality {
            let nodes = self.locality_nodes(loc_node);
            if nodes.len() == 1 {
                dev.numa_node = nodes.first();
            }
            dev.attached_nodes = Some(nodes);
            dev.local_cpus = loc_node
                .attribute("cpuset")
                .and_then(|c| CpuSet::parse_hwloc(c).ok());
        }
        self.machine.pci.push(dev);
        Some(self.machine.pci.len() - 1)
    }

    /// `CCCC [VVVV:DDDD] [SSSS:SSSS] RR [PP]` (prog-if only from hwloc 3.x).
    fn parse_pci_type(&mut self, node: Node, text: &str, dev: &mut PciDevice) {
        let mut parts = text.split_whitespace();
        let class = parts.next().and_then(|c| u32::from_str_radix(c, 16).ok());
        let ids = |p: Option<&str>| -> Option<(u16, u16)> {
            let inner = p?.strip_prefix('[')?.strip_suffix(']')?;
            let (a, b) = inner.split_once(':')?;
            Some((
                u16::from_str_radix(a, 16).ok()?,
                u16::from_str_radix(b, 16).ok()?,
            ))
        };
        let vd = ids(parts.next());
        let sub = ids(parts.next());
        let _revision = parts.next();
        let prog_if = parts
            .next()
            .and_then(|p| u32::from_str_radix(p, 16).ok())
            .unwrap_or(0);
        match class {
            Some(c) if c <= 0xffff => dev.class_code = Some((c << 8) | (prog_if & 0xff)),
            _ => {
                let loc = self.loc(node);
                self.machine.note(
                    NoteLevel::Warning,
                    loc,
                    format!("unreadable pci_type {text:?}"),
                );
            }
        }
        if let Some((v, d)) = vd {
            dev.vendor_id = Some(v);
            dev.device_id = Some(d);
        }
        if let Some((v, d)) = sub {
            dev.subsystem_vendor_id = Some(v);
            dev.subsystem_device_id = Some(d);
        }
    }

    /// NUMA nodes covered by a normal object: its `nodeset`, itself if it is a
    /// (1.x) NUMA node, or the NUMA nodes below it.
    fn locality_nodes(&self, node: Node) -> CpuSet {
        if let Some(ns) = node
            .attribute("nodeset")
            .and_then(|n| CpuSet::parse_hwloc(n).ok())
        {
            return ns;
        }
        let t = obj_type(node);
        if t == "NUMANode" || t == "Node" {
            return attr_u64(node, "os_index")
                .map(|i| CpuSet::single(i as u32))
                .unwrap_or_default();
        }
        node.descendants()
            .filter(|d| d.is_element() && d.tag_name().name() == "object")
            .filter(|d| matches!(obj_type(*d).as_str(), "NUMANode" | "Node"))
            .filter_map(|d| attr_u64(d, "os_index").map(|i| i as u32))
            .collect()
    }

    fn os_device(&mut self, node: Node, ctx: &Context) {
        let Some(name) = node.attribute("name") else {
            return;
        };
        let raw = attr_u64(node, "osdev_type").unwrap_or(u64::MAX);
        let subtype = node.attribute("subtype").unwrap_or("");
        let kind = if self.major >= 3 {
            osdev_kind_v3(raw)
        } else {
            let opencl_gpu = info_value(node, "OpenCLDeviceType") == Some("GPU");
            osdev_kind_v2(raw, name, subtype, opencl_gpu)
        };
        // OS devices outside PCI (a block device of a platform controller) have no
        // function to hang on; they do not matter for NUDMA.
        let Some(index) = ctx.pci_parent else {
            return;
        };
        self.machine.pci[index].os_devices.push(OsDevice {
            name: name.to_string(),
            kind,
        });
    }

    fn topology_info(&mut self, node: Node) {
        if node.attribute("name") == Some("HostName") {
            if let Some(v) = node.attribute("value").filter(|v| !v.trim().is_empty()) {
                self.machine.hostname.get_or_insert(v.to_string());
            }
        }
    }

    /// `<distances2 type nbobjs kind name indexing>` with `<indexes>` and `<u64values>`.
    fn distances2(&mut self, node: Node) {
        let loc = self.loc(node);
        let object_type = node.attribute("type").unwrap_or("").to_string();
        let n = attr_u64(node, "nbobjs").unwrap_or(0) as usize;
        let kind = attr_u64(node, "kind").unwrap_or(0);
        let name = node.attribute("name").map(str::to_string);
        let indexing = node.attribute("indexing").unwrap_or("");
        let mut ids = Vec::new();
        let mut values = Vec::new();
        for child in node.children().filter(Node::is_element) {
            let text = child.text().unwrap_or("");
            let numbers = text.split_whitespace().map(parse_number);
            match child.tag_name().name() {
                "indexes" => ids.extend(numbers),
                "u64values" => values.extend(numbers),
                _ => {}
            }
        }
        let ids: Option<Vec<u64>> = ids.into_iter().collect();
        let values: Option<Vec<u64>> = values.into_iter().collect();
        let (Some(ids), Some(values)) = (ids, values) else {
            self.machine.note(
                NoteLevel::Warning,
                loc,
                "distance matrix with non-numeric values ignored",
            );
            return;
        };
        if !(2..=4096).contains(&n) || ids.len() != n || values.len() != n * n {
            self.machine.note(
                NoteLevel::Warning,
                loc,
                format!(
                    "distance matrix ignored: nbobjs={n}, {} indexes, {} values",
                    ids.len(),
                    values.len()
                ),
            );
            return;
        }
        self.machine.distances.push(DistanceMatrix {
            name,
            object_type: object_type.clone(),
            kind,
            ids,
            values: values.into_iter().map(|v| v as f64).collect(),
        });
        if (object_type == "NUMANode" || object_type == "Package") && indexing == "gp" {
            self.pending_gp_distances
                .push(self.machine.distances.len() - 1);
        }
    }

    /// 1.x: `<distances nbobjs relative_depth latency_base>` + `<latency value>`,
    /// over the objects `relative_depth` levels below `container`.
    fn distances_v1(&mut self, container: Node, node: Node) {
        let loc = self.loc(node);
        let n = attr_u64(node, "nbobjs").unwrap_or(0) as usize;
        let depth = attr_u64(node, "relative_depth").unwrap_or(0) as usize;
        let base: f64 = node
            .attribute("latency_base")
            .and_then(|v| v.trim().parse().ok())
            .filter(|v: &f64| v.is_finite() && *v > 0.0)
            .unwrap_or(1.0);
        let values: Option<Vec<f64>> = node
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == "latency")
            .map(|c| {
                c.attribute("value")
                    .and_then(|v| v.trim().parse::<f64>().ok())
                    .filter(|v| v.is_finite())
                    .map(|v| v * base)
            })
            .collect();
        let objects = objects_at_depth(container, depth);
        let all_numa = !objects.is_empty()
            && objects
                .iter()
                .all(|o| matches!(obj_type(*o).as_str(), "NUMANode" | "Node"));
        let Some(values) = values else {
            self.machine
                .note(NoteLevel::Warning, loc, "unreadable 1.x distance values");
            return;
        };
        if n < 2 || objects.len() != n || values.len() != n * n {
            self.machine.note(
                NoteLevel::Warning,
                loc,
                format!(
                    "1.x distance matrix ignored: nbobjs={n}, {} objects at relative depth {depth}, {} values",
                    objects.len(),
                    values.len()
                ),
            );
            return;
        }
        let object_type = if all_numa {
            "NUMANode".to_string()
        } else {
            obj_type(objects[0])
        };
        let ids = objects
            .iter()
            .enumerate()
            .map(|(i, o)| {
                if all_numa {
                    attr_u64(*o, "os_index").unwrap_or(i as u64)
                } else {
                    gp_index(*o).unwrap_or(i as u64)
                }
            })
            .collect();
        self.machine.distances.push(DistanceMatrix {
            name: Some("latency".to_string()),
            object_type,
            kind: 1 | 4,
            ids,
            values,
        });
    }

    fn memattr(&mut self, node: Node) {
        let name = node.attribute("name").unwrap_or("").to_string();
        let flags = attr_u64(node, "flags").unwrap_or(0);
        let mut values = Vec::new();
        for v in node
            .children()
            .filter(|c| c.is_element() && c.tag_name().name() == "memattr_value")
        {
            let (Some(target_gp), Some(value)) =
                (attr_u64(v, "target_obj_gp_index"), attr_u64(v, "value"))
            else {
                let loc = self.loc(v);
                self.machine.note(
                    NoteLevel::Info,
                    loc,
                    "memory attribute value without target or value ignored",
                );
                continue;
            };
            let initiator = if let Some(c) = v.attribute("initiator_cpuset") {
                CpuSet::parse_hwloc(c).ok().map(Initiator::Cpus)
            } else {
                attr_u64(v, "initiator_obj_gp_index").map(|g| Initiator::Object {
                    object_type: v.attribute("initiator_obj_type").unwrap_or("").to_string(),
                    gp_index: g,
                })
            };
            values.push(MemAttrValue {
                target_node: None,
                target_type: v.attribute("target_obj_type").unwrap_or("").to_string(),
                target_gp_index: target_gp,
                initiator,
                value,
            });
        }
        self.machine.memory_attributes.push(MemoryAttribute {
            name,
            flags,
            values,
        });
    }

    fn finish(mut self) -> Result<Machine, InspectError> {
        self.check_node_overlaps();
        if let Some(fault) = self.fault.take() {
            return Err(fault);
        }
        // Resolve gp indexes now that every object has been seen.
        for attr in &mut self.machine.memory_attributes {
            for v in &mut attr.values {
                if v.target_type == "NUMANode" || v.target_type.is_empty() {
                    v.target_node = self.gp_numa.get(&v.target_gp_index).copied();
                }
                if let Some(Initiator::Object { gp_index, .. }) = &v.initiator {
                    if let Some(c) = self.gp_cpus.get(gp_index) {
                        v.initiator = Some(Initiator::Cpus(c.clone()));
                    }
                }
            }
        }
        for &i in &self.pending_gp_distances {
            let d = &mut self.machine.distances[i];
            let map = if d.object_type == "Package" {
                &self.gp_package
            } else {
                &self.gp_numa
            };
            let mapped: Option<Vec<u64>> = d
                .ids
                .iter()
                .map(|g| map.get(g).map(|&n| n as u64))
                .collect();
            if let Some(m) = mapped {
                d.ids = m;
            }
        }
        let m = &mut self.machine;
        if m.nodes.is_empty() {
            // A machine without NUMA objects has one memory; say so rather than guess.
            m.nodes
                .push(NumaNode::new(0, m.cpus.clone(), m.total_memory_bytes));
            m.note(
                NoteLevel::Info,
                self.path.display().to_string(),
                "no NUMANode objects: the machine is taken as a single node",
            );
        }
        if m.cpus.is_empty() {
            m.cpus = m.nodes.iter().fold(CpuSet::new(), |a, n| a.union(&n.cpus));
        }
        // Node numbers are unique (`check_identity`), so sorting loses none.
        m.nodes.sort_by_key(|n| n.id);
        m.packages.sort_by_key(|p| p.id);
        if m.total_memory_bytes.is_none() {
            // In u128: thousands of nodes at their bound pass u64.
            let sum: Option<u128> = m.nodes.iter().map(|n| n.memory_bytes.map(u128::from)).sum();
            m.total_memory_bytes = sum
                .and_then(|s| u64::try_from(s).ok())
                .filter(|&s| s <= MACHINE_MEMORY.max);
            if let Some(s) = sum.filter(|_| m.total_memory_bytes.is_none()) {
                m.note(
                    NoteLevel::Warning,
                    self.path.display().to_string(),
                    format!("the NUMA nodes hold {s} bytes together, beyond {}; the machine's size is taken as unknown", MACHINE_MEMORY.max_text),
                );
            }
        }
        m.clock_ghz = m.cpu_model.as_deref().and_then(clock_from_model);
        if self.host_bridges == 0 && !m.pci.is_empty() {
            m.note(
                NoteLevel::Info,
                self.path.display().to_string(),
                "PCI devices without host bridge objects",
            );
        }
        Ok(self.machine)
    }
}

/// Object elements exactly `depth` object levels below `container`.
fn objects_at_depth<'a, 'i>(container: Node<'a, 'i>, depth: usize) -> Vec<Node<'a, 'i>> {
    let mut level = vec![container];
    for _ in 0..depth {
        level = level
            .iter()
            .flat_map(|n| {
                n.children()
                    .filter(|c| c.is_element() && c.tag_name().name() == "object")
            })
            .collect();
    }
    if depth == 0 {
        return Vec::new();
    }
    level
}

/// hwloc 3.x `osdev_type` bit mask; the most specific bit wins.
fn osdev_kind_v3(mask: u64) -> OsDeviceKind {
    if mask == u64::MAX {
        OsDeviceKind::Other
    } else if mask & 32 != 0 {
        OsDeviceKind::Openfabrics
    } else if mask & 16 != 0 {
        OsDeviceKind::Net
    } else if mask & 4 != 0 {
        OsDeviceKind::Gpu
    } else if mask & 8 != 0 {
        OsDeviceKind::Coproc
    } else if mask & 1 != 0 {
        OsDeviceKind::Block
    } else if mask & 2 != 0 {
        OsDeviceKind::Memory
    } else if mask & 64 != 0 {
        OsDeviceKind::Dma
    } else {
        OsDeviceKind::Other
    }
}

/// hwloc 1.x/2.x `osdev_type` enum.
fn osdev_kind_v2(value: u64, name: &str, subtype: &str, opencl_gpu: bool) -> OsDeviceKind {
    match value {
        0 if name.starts_with("dax") => OsDeviceKind::Memory,
        0 => OsDeviceKind::Block,
        1 => OsDeviceKind::Gpu,
        2 => OsDeviceKind::Net,
        3 => OsDeviceKind::Openfabrics,
        4 => OsDeviceKind::Dma,
        5 if subtype == "CUDA" || subtype == "LevelZero" || opencl_gpu => OsDeviceKind::Gpu,
        5 => OsDeviceKind::Coproc,
        _ => OsDeviceKind::Other,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn osdev_types() {
        assert_eq!(osdev_kind_v3(48), OsDeviceKind::Openfabrics);
        assert_eq!(osdev_kind_v3(16), OsDeviceKind::Net);
        assert_eq!(osdev_kind_v3(12), OsDeviceKind::Gpu);
        assert_eq!(osdev_kind_v3(1), OsDeviceKind::Block);
        assert_eq!(osdev_kind_v2(2, "eth0", "", false), OsDeviceKind::Net);
        assert_eq!(
            osdev_kind_v2(3, "mlx5_0", "", false),
            OsDeviceKind::Openfabrics
        );
        assert_eq!(osdev_kind_v2(5, "cuda0", "CUDA", false), OsDeviceKind::Gpu);
        assert_eq!(osdev_kind_v2(5, "mic0", "MIC", false), OsDeviceKind::Coproc);
    }

    #[test]
    fn malformed_xml_names_line() {
        let err = parse_hwloc_xml(
            "<topology>\n<object type=\"Machine\">\n</topology>",
            Path::new("x.xml"),
        )
        .unwrap_err()
        .to_string();
        assert!(err.starts_with("x.xml:"), "{err}");
        assert!(err.contains("invalid XML"), "{err}");
    }

    #[test]
    fn not_a_topology() {
        let err = parse_hwloc_xml("<foo/>", Path::new("y.xml")).unwrap_err();
        assert!(err.to_string().contains("expected <topology>"));
    }
}
