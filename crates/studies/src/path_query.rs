//! What `nudma topo path` answers, as a library: the route of one access between named
//! endpoints (with what a driver would set up for it through the host layer's DMA
//! API), and on a timed copy of the scenario its zero-load latency and, for a device,
//! the flow model's rate and bottleneck for a stream of such accesses.

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
    offset: u64,
    len: u32,
    access: Access,
) -> Result<Option<TimedAnswer>, QueryError> {
    let untimed = f
        .topo
        .hosts
        .iter()
        .any(|h| f.topo.platforms[h.platform as usize].timing.is_none());
    if untimed {
        return Ok(None);
    }
    let mut tf = sim::timed::TimedFabric::new(f, 1)
        .map_err(|e| QueryError(format!("timing {from} → {to}: {}", e.0)))?;
    timed_query_on(&mut tf, from, to, offset, len, access).map(Some)
}

/// The timed query on a timed fabric already made. What earlier queries left behind
/// (lines in an LLC, mappings) stays: give each query its own offset to keep them apart.
pub fn timed_query_on(
    tf: &mut sim::timed::TimedFabric,
    from: &str,
    to: &str,
    offset: u64,
    len: u32,
    access: Access,
) -> Result<TimedAnswer, QueryError> {
    let err = |e: &dyn std::fmt::Display| QueryError(format!("timing {from} → {to}: {e}"));
    let (req, _) = request_for(&mut tf.fabric, from, to, offset, len, access)?;
    let op = if access == Access::Write {
        devices::Op::Write { dst: req.addr }
    } else {
        devices::Op::Read { src: req.addr }
    };
    let latency_ns = devices::single_access(tf, req.requester, op, len)
        .map_err(|e| err(&fabric::describe::fault_text(&tf.fabric.topo, &e)))?
        .as_ns_f64();
    let stream = match req.requester {
        Requester::Function(n) => {
            let (route, target) = tf
                .route(&req)
                .map_err(|e| err(&fabric::describe::fault_text(&tf.fabric.topo, &e)))?;
            let topo = &tf.fabric.topo;
            let target_host = match target {
                Target::Ram { host, .. } | Target::Interrupt { host, .. } => host,
                Target::Bar { node, .. } => topo.node(node).host,
            };
            let mps = topo
                .host(topo.node(n).host)
                .mps
                .min(topo.host(target_host).mps);
            let dma = match topo.node(n).kind {
                NodeKind::Function { device, .. } => topo.devices[device as usize].timed.dma,
                NodeKind::NtbFunction { ntb } => {
                    let a = &topo.ntbs[ntb as usize].adapter;
                    match (
                        a.timing_value("dma_max_reads"),
                        a.timing_value("dma_mrrs_bytes"),
                    ) {
                        (Some(r), Some(m)) => Some(fabric::DmaTiming {
                            max_reads: r as u32,
                            mrrs_bytes: m as u32,
                        }),
                        _ => None,
                    }
                }
                _ => None,
            };
            // A stream of accesses of `len` bytes: each TLP carries at most that much.
            let len = len.max(1);
            let addr64 = req.addr >= 1 << 32;
            let e = if access == Access::Write {
                Some(tf.net.flow_write(route, mps.min(len), addr64))
            } else {
                dma.map(|d| {
                    tf.net
                        .flow_read(route, d.mrrs_bytes.min(len), d.max_reads, addr64)
                })
            };
            e.map(|e| (e.gbps, e.bottleneck))
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
