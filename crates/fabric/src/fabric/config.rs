//! Configuration requests: routed by requester ID from a CPU to a function, and the
//! function's configuration space (its header filled from enumeration on first touch).

use super::routing::{push_uncore, rc_vertex};
use super::Fabric;
use crate::path::*;
use crate::topology::*;

/// Where a function's configuration space lives in the byte stores (no real BAR has it).
const CONFIG_SPACE: u8 = u8::MAX;

impl Fabric {
    /// The function with requester ID `rid` in `host`: the target of a configuration
    /// request, which a CPU of `package` sends to the root owning the function's bus, and
    /// which travels down by ID (Type 1, then Type 0 at the last bridge). Fills `path`.
    pub fn config_route(
        &self,
        host: HostId,
        package: u32,
        rid: Rid,
        write: bool,
        path: &mut Path,
    ) -> Result<PcieNodeId, Fault> {
        path.steps.clear();
        let topo = &self.topo;
        if !self.host_up[host.index()] {
            return Err(Fault {
                kind: FaultKind::HostDown { host },
                host,
                requester: self.requester_rid(Requester::Cpu { host, package }),
                addr: rid.0 as u64,
                access: if write { Access::Write } else { Access::Read },
            });
        }
        let h = topo.host(host);
        let node = h
            .nodes
            .iter()
            .copied()
            .find(|&n| {
                topo.node(n).rid == rid
                    && matches!(
                        topo.node(n).kind,
                        NodeKind::Function { .. } | NodeKind::NtbFunction { .. }
                    )
            })
            .ok_or(Fault {
                kind: FaultKind::NoWindow,
                host,
                requester: self.requester_rid(Requester::Cpu { host, package }),
                addr: rid.0 as u64,
                access: if write { Access::Write } else { Access::Read },
            })?;
        let rc = topo.node(node).root;
        let from = package.min(topo.platform_of(host).packages - 1);
        push_uncore(
            topo.platform_of(host),
            host,
            from,
            rc_vertex(topo, rc),
            path,
        );
        path.steps.push(Step::Root { node: rc });
        self.descend(rc, node, path);
        Ok(node)
    }

    /// A CPU of `package` in `host` reads the configuration space (4 KiB, PCIe extended)
    /// of the function with requester ID `rid`, routed by ID as `config_route` routes it:
    /// what enumeration programmed (BARs) and what drivers wrote. No such function faults.
    pub fn config_read(
        &mut self,
        host: HostId,
        package: u32,
        rid: Rid,
        reg: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        let node = self.config_target(host, package, rid, false)?;
        self.init_config(node);
        self.mem.bar(node, CONFIG_SPACE).read(reg, buf);
        Ok(())
    }

    /// A CPU writes a function's configuration space (routed by ID, as `config_read`).
    pub fn config_write(
        &mut self,
        host: HostId,
        package: u32,
        rid: Rid,
        reg: u64,
        data: &[u8],
    ) -> Result<(), Fault> {
        let node = self.config_target(host, package, rid, true)?;
        self.init_config(node);
        self.mem.bar(node, CONFIG_SPACE).write(reg, data);
        Ok(())
    }

    /// Routes a configuration request (logging a fault) and gives the function it reaches.
    fn config_target(
        &mut self,
        host: HostId,
        package: u32,
        rid: Rid,
        write: bool,
    ) -> Result<PcieNodeId, Fault> {
        let mut path = std::mem::take(&mut self.scratch);
        let r = self.config_route(host, package, rid, write, &mut path);
        self.scratch = path;
        if let Err(f) = r {
            self.faults.push(f);
        }
        r
    }

    /// Fills a function's header the first time it is touched: BAR registers hold what
    /// enumeration assigned (memory BARs, 64-bit ones over two registers).
    fn init_config(&mut self, node: PcieNodeId) {
        let n = self.topo.node(node);
        let store = self.mem.bar(node, CONFIG_SPACE);
        if store.resident_pages() > 0 {
            return;
        }
        let mut header = [0u8; 64];
        header[0x0e] = 0; // header type 0: an endpoint
        for b in &n.bars {
            let reg = 0x10 + 4 * b.index as usize;
            let bits64 = b.addr >= 1 << 32 || b.size > 1 << 31;
            let low = (b.addr as u32 & !0xf) | if bits64 { 0x4 } else { 0 };
            if reg + 4 <= header.len() {
                header[reg..reg + 4].copy_from_slice(&low.to_le_bytes());
            }
            if bits64 && reg + 8 <= header.len() {
                header[reg + 4..reg + 8].copy_from_slice(&((b.addr >> 32) as u32).to_le_bytes());
            }
        }
        store.write(0, &header);
    }
}
