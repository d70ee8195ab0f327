//! What `nudma topo path` answers, as a library: the route of one access between named
//! endpoints (with what a driver would set up for it through the host layer's DMA
//! API), and on a timed copy of the scenario its zero-load latency and, for a device,
//! the flow model's rate and bottleneck for a stream of such accesses.

use crate::harness;
use fabric::{Access, Endpoint, Fabric, Fault, NodeKind, Path, Request, Requester, Target};

/// Why a query could not be asked (not a fault of the access: that is an answer).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct QueryError(pub String);

/// One access and its route.
#[derive(Debug)]
pub struct PathAnswer {
    pub request: Request,
    /// What was set up for the query (windows, requester entries, IOMMU mappings).
    pub setup: Vec<String>,
    pub path: Path,
    pub result: Result<Target, Fault>,
}

/// Zero-load latency of one access (ns: a write until it lands, a read until its data is
/// back) and, for a device, a stream's rate (GB/s) and what binds it.
#[derive(Clone, Debug, PartialEq)]
pub struct TimedAnswer {
    pub latency_ns: f64,
    pub stream: Option<(f64, String)>,
}

/// Routes one access from `from` (`host.device[.pfN]`, `host.cpuN`) to `to`
/// (`host.device[.pfN][.barN]`, `host.ram[.nodeN]`, or a bus address), mapping a named
/// target for the requester as a driver would.
pub fn route_query(
    f: &mut Fabric,
    from: &str,
    to: &str,
    offset: u64,
    len: u32,
    access: Access,
) -> Result<PathAnswer, QueryError> {
    if len == 0 || len > 4096 {
        return Err(QueryError(format!(
            "--len must be 1..=4096 bytes (one PCIe request), not {len}"
        )));
    }
    let (request, setup) = request_for(f, from, to, offset, len, access)?;
    let mut path = Path::default();
    let result = f.route(&request, &mut path);
    Ok(PathAnswer {
        request,
        setup,
        path,
        result,
    })
}

/// The same query on `f` given time (a fresh copy of the scenario: mapping state is set
/// up again). `Ok(None)` when the scenario has no timing parameters; an error when it
/// has them but they cannot time this access.
pub fn timed_query(
    f: Fabric,
    from: &str,
    to: &str,
    (offset, len): (u64, u32),
    access: Access,
    outstanding: Option<u64>,
) -> Result<Option<TimedAnswer>, QueryError> {
    if !has_timing(&f) {
        return Ok(None);
    }
    let mut tf = sim::timed::TimedFabric::new(f, 1)
        .map_err(|e| QueryError(format!("timing {from} → {to}: {}", e.0)))?;
    timed_query_on(&mut tf, from, to, (offset, len), access, outstanding).map(Some)
}

/// Whether every platform of the scenario states timing parameters.
pub fn has_timing(f: &Fabric) -> bool {
    f.topo
        .hosts
        .iter()
        .all(|h| f.topo.platforms[h.platform as usize].timing.is_some())
}

/// The timed query on a timed fabric already made. What earlier queries left behind
/// (lines in an LLC, mappings) stays: give each query its own offset to keep them apart.
pub fn timed_query_on(
    tf: &mut sim::timed::TimedFabric,
    from: &str,
    to: &str,
    (offset, len): (u64, u32),
    access: Access,
    outstanding: Option<u64>,
) -> Result<TimedAnswer, QueryError> {
    let (req, _) = request_for(&mut tf.fabric, from, to, offset, len, access)?;
    timed_request(tf, &req, outstanding)
        .map_err(|e| QueryError(format!("timing {from} → {to}: {}", e.0)))
}

/// Times a request already set up on `tf`: its zero-load latency and, for a device, the
/// flow model's rate for a stream of such accesses — the same stream a `dma` workload of
/// `nudma run` with this length and `outstanding` runs (the device's or its NTB adapter's
/// `dma_max_reads`/`dma_mrrs_bytes`; a read stream needs them, posted writes are paced by
/// the link), no faster than the device's own data path where its model states one (a
/// NIC's port, an NVMe's media). `outstanding` `None`: as many as it takes.
pub fn timed_request(
    tf: &mut sim::timed::TimedFabric,
    req: &Request,
    outstanding: Option<u64>,
) -> Result<TimedAnswer, QueryError> {
    let fault = |tf: &sim::timed::TimedFabric, e: &Fault| {
        QueryError(fabric::describe::fault_text(&tf.fabric.topo, e))
    };
    let (access, len) = (req.access, req.len);
    let op = if access == Access::Write {
        devices::Op::Write { dst: req.addr }
    } else {
        devices::Op::Read { src: req.addr }
    };
    let latency_ns = devices::single_access(tf, req.requester, op, len)
        .map_err(|e| fault(tf, &e))?
        .as_ns_f64();
    let stream = match req.requester {
        Requester::Function(n) => {
            let (route, target) = tf.route(req).map_err(|e| fault(tf, &e))?;
            let topo = &tf.fabric.topo;
            let target_host = match target {
                Target::Ram { host, .. } | Target::Interrupt { host, .. } => host,
                Target::Bar { node, .. } => topo.node(node).host,
                // Replicated at the sending adapter: the stream's MPS is the sender's.
                Target::Multicast { .. } => topo.node(n).host,
            };
            let mps = harness::mps_between(tf, topo.node(n).host, target_host);
            let spec = match harness::device_spec(tf, req.requester, mps) {
                Ok(spec) => Some(spec),
                // Posted writes need no read behaviour: the link paces them.
                Err(_) if access == Access::Write => topo.node(n).link.map(|l| devices::DmaSpec {
                    mps,
                    mrrs: mps,
                    max_reads: 1,
                    issue_ps_per_kib: sim::pcie::ps_per_kib(l.gen, l.width),
                }),
                Err(_) => None,
            };
            spec.map(|spec| {
                let stream = sim::flow::Stream {
                    data_path: harness::data_path(tf, req.requester, access == Access::Write),
                    ..spec.stream(op, len.max(1) as u64, outstanding)
                };
                let e = tf.net.flow(route, &stream);
                (e.gbps, e.bottleneck)
            })
        }
        Requester::Cpu { .. } => None,
    };
    Ok(TimedAnswer { latency_ns, stream })
}

/// The request to examine: to a bus address as given, or to a named endpoint with what
/// a driver would set up for it (listed).
fn request_for(
    f: &mut Fabric,
    from: &str,
    to: &str,
    offset: u64,
    len: u32,
    access: Access,
) -> Result<(Request, Vec<String>), QueryError> {
    if let Some(r) = borrowed_request(f, from, to, offset, len, access) {
        return r;
    }
    let src = f.resolve(from).map_err(|e| QueryError(e.to_string()))?;
    let requester = requester_of(f, src)?;
    match fabric::units::parse_size(to) {
        Ok(addr) if to.starts_with("0x") || to.chars().all(|c| c.is_ascii_digit()) => Ok((
            Request {
                requester,
                addr: addr + offset,
                len,
                access,
            },
            vec![],
        )),
        _ => {
            // What a driver would do: map the target for the requester through the host
            // layer's DMA API, which programs windows, requester entries and IOMMU pages.
            let (host, addr) = f
                .resolve_address(to, offset)
                .map_err(|e| QueryError(e.to_string()))?;
            let m = host::Hosts::with(f, |h, f| {
                h.dma_map_single(
                    f,
                    requester,
                    host::PhysAddr { host, addr },
                    len as u64,
                    host::DmaDirection::Bidirectional,
                )
                .map(|m| (m, h.take_log()))
            })
            .map_err(|e| QueryError(format!("setting up an access from {from} to {to}: {e}")))?;
            Ok((
                Request {
                    requester,
                    addr: m.0.addr.0,
                    len,
                    access,
                },
                m.1,
            ))
        }
    }
}

/// An access from a device the scenario borrows (`from` names a `[[borrow]]`, `gpu0` or
/// `borrower.gpu0`): the scenario's lending carried out as a run starts, then the
/// borrower's driver mapping the target for the device (through the DMA window into its
/// own memory, or as any other buffer elsewhere). `None` when `from` names no borrow.
fn borrowed_request(
    f: &mut Fabric,
    from: &str,
    to: &str,
    offset: u64,
    len: u32,
    access: Access,
) -> Option<Result<(Request, Vec<String>), QueryError>> {
    let named = |b: &fabric::topology::BorrowDecl| {
        b.name == from || format!("{}.{}", f.topo.host(b.host).name, b.name) == from
    };
    let decl = f.topo.borrows.iter().find(|b| named(b))?.clone();
    let err = |e: String| QueryError(format!("{from} → {to}: {e}"));
    let mut run = || -> Result<(Request, Vec<String>), QueryError> {
        let mut cl = systems::smartio::Cluster::from_fabric(f).map_err(|e| err(e.to_string()))?;
        let b = cl
            .borrow_named(&decl.name)
            .ok_or_else(|| err(format!("the lending did not give `{}`", decl.name)))?;
        let function = cl.function(f, b).map_err(|e| err(e.to_string()))?;
        let requester = Requester::Function(function);
        let (host, addr) = f
            .resolve_address(to, offset)
            .map_err(|e| QueryError(e.to_string()))?;
        let mut setup = vec![format!(
            "{} borrows {} (SmartIO: requester entry, DMA window)",
            f.topo.host(decl.host).name,
            decl.device
        )];
        let buf = host::PhysAddr { host, addr };
        let bus = if host == b.host {
            let m = cl
                .map_for_device(f, b, buf, len as u64, host::DmaDirection::Bidirectional)
                .map_err(|e| err(e.to_string()))?;
            setup.push(format!(
                "mapped for {from} in its DMA window at {:#x}",
                m.addr.0
            ));
            m.addr.0
        } else {
            let (m, log) = host::Hosts::with(f, |h, f| {
                h.dma_map_single(
                    f,
                    requester,
                    buf,
                    len as u64,
                    host::DmaDirection::Bidirectional,
                )
                .map(|m| (m, h.take_log()))
            })
            .map_err(|e| err(e.to_string()))?;
            setup.extend(log);
            m.addr.0
        };
        Ok((
            Request {
                requester,
                addr: bus,
                len,
                access,
            },
            setup,
        ))
    };
    Some(run())
}

fn requester_of(f: &Fabric, e: Endpoint) -> Result<Requester, QueryError> {
    Ok(match e {
        Endpoint::Node(n) => match f.topo.node(n).kind {
            NodeKind::Function { .. } | NodeKind::NtbFunction { .. } => Requester::Function(n),
            _ => {
                return Err(QueryError(format!(
                    "`{}` is a switch or root complex, not a requester",
                    f.topo.node_label(n)
                )))
            }
        },
        Endpoint::Bar { node, .. } => Requester::Function(node),
        Endpoint::Cpu { host, package } => Requester::Cpu { host, package },
        Endpoint::Ram { .. } => {
            return Err(QueryError(
                "RAM is not a requester: use `host.cpuN` or a device".into(),
            ))
        }
    })
}
