//! The functional data path: accesses by devices and CPUs that route each page-sized
//! piece, log faults, and move real bytes into RAM, BARs, interrupt messages and
//! multicast members.

use super::{Fabric, Msi};
use crate::iommu::PAGE;
use crate::memory::Memory;
use crate::path::*;
use crate::topology::*;

impl Fabric {
    // ---- functional data path -------------------------------------------------------

    /// Routes `req` and records a fault in the log.
    fn route_logged(&mut self, req: &Request) -> Result<Target, Fault> {
        let mut path = std::mem::take(&mut self.scratch);
        let r = self.route(req, &mut path);
        self.scratch = path;
        if let Err(f) = r {
            self.faults.push(f);
        }
        r
    }

    fn access(
        &mut self,
        requester: Requester,
        addr: u64,
        len: usize,
        access: Access,
        mut each: impl FnMut(&mut Memory, &mut Vec<Msi>, Target, usize, usize),
    ) -> Result<(), Fault> {
        let mut done = 0usize;
        while done < len {
            let at = addr + done as u64;
            let n = ((PAGE - at % PAGE) as usize).min(len - done);
            let req = Request {
                requester,
                addr: at,
                len: n as u32,
                access,
            };
            let t = self.route_logged(&req)?;
            if let Target::Multicast { group, .. } = t {
                // Replicated: every live member gets the bytes; a dead one is skipped,
                // its fault logged and counted in the group.
                let mut mc = std::mem::take(&mut self.mc_scratch);
                self.route_multicast(&req, &mut mc)?;
                let (mut ok, mut skipped) = (0, 0);
                for (r, _) in mc.members() {
                    match *r {
                        Ok(t) => {
                            each(&mut self.mem, &mut self.interrupts, t, done, n);
                            ok += 1;
                        }
                        Err(f) => {
                            self.faults.push(f);
                            skipped += 1;
                        }
                    }
                }
                self.mc_scratch = mc;
                if let Some(g) = self.mcast[group.index()].as_mut() {
                    g.delivered += ok;
                    g.skipped += skipped;
                }
            } else {
                each(&mut self.mem, &mut self.interrupts, t, done, n);
            }
            done += n;
        }
        Ok(())
    }

    /// A device (or NTB function) writes `data` at bus address `addr`.
    pub fn dma_write(
        &mut self,
        requester: PcieNodeId,
        addr: u64,
        data: &[u8],
    ) -> Result<(), Fault> {
        self.write(Requester::Function(requester), addr, data)
    }

    /// A device reads `buf.len()` bytes at bus address `addr`. A fault fills the rest of
    /// `buf` with all-ones, as an Unsupported Request completion returns.
    pub fn dma_read(
        &mut self,
        requester: PcieNodeId,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        self.read(Requester::Function(requester), addr, buf)
    }

    /// Any requester (a function or a CPU package) writes `data` at `addr` as it sees it.
    pub fn store(&mut self, r: Requester, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.write(r, addr, data)
    }

    /// Any requester reads `buf.len()` bytes at `addr`; a fault fills the rest with ones.
    pub fn load(&mut self, r: Requester, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        self.read(r, addr, buf)
    }

    /// A CPU core of `package` stores `data` at host-physical address `addr`.
    pub fn cpu_store(
        &mut self,
        host: HostId,
        package: u32,
        addr: u64,
        data: &[u8],
    ) -> Result<(), Fault> {
        self.write(Requester::Cpu { host, package }, addr, data)
    }

    pub fn cpu_load(
        &mut self,
        host: HostId,
        package: u32,
        addr: u64,
        buf: &mut [u8],
    ) -> Result<(), Fault> {
        self.read(Requester::Cpu { host, package }, addr, buf)
    }

    fn write(&mut self, r: Requester, addr: u64, data: &[u8]) -> Result<(), Fault> {
        self.access(
            r,
            addr,
            data.len(),
            Access::Write,
            |mem, interrupts, t, at, n| {
                let chunk = &data[at..at + n];
                match t {
                    Target::Ram {
                        host, node, offset, ..
                    } => mem.ram(host, node).write(offset, chunk),
                    Target::Bar { node, bar, offset } => mem.bar(node, bar).write(offset, chunk),
                    Target::Interrupt { host, apic, .. } => {
                        let mut v = [0u8; 4];
                        let k = chunk.len().min(4);
                        v[..k].copy_from_slice(&chunk[..k]);
                        interrupts.push(Msi {
                            host,
                            apic,
                            data: u32::from_le_bytes(v),
                        });
                    }
                    // Expanded by `access` into the members' targets.
                    Target::Multicast { .. } => {}
                }
            },
        )
    }

    fn read(&mut self, r: Requester, addr: u64, buf: &mut [u8]) -> Result<(), Fault> {
        let len = buf.len();
        let mut filled = 0;
        let res = self.access(r, addr, len, Access::Read, |mem, _, t, at, n| {
            let chunk = &mut buf[at..at + n];
            match t {
                Target::Ram {
                    host, node, offset, ..
                } => mem.ram(host, node).read(offset, chunk),
                Target::Bar { node, bar, offset } => mem.bar(node, bar).read(offset, chunk),
                // Reads never route to interrupt delivery.
                Target::Interrupt { .. } | Target::Multicast { .. } => chunk.fill(0xFF),
            }
            filled = at + n;
        });
        if res.is_err() {
            buf[filled..].fill(0xFF);
        }
        res
    }

    /// Reads RAM directly, without routing (a debugger's view, for checks).
    pub fn peek_ram(&self, host: HostId, node: u32, offset: u64, buf: &mut [u8]) {
        self.mem.peek_ram(host, node, offset, buf)
    }

    pub fn peek_bar(&self, node: PcieNodeId, bar: u8, offset: u64, buf: &mut [u8]) {
        self.mem.peek_bar(node, bar, offset, buf)
    }

    /// The device itself updating the bytes behind its own BAR (its registers: a status
    /// bit, a queue's state, a table it keeps). Not an access: nothing is routed, timed or
    /// logged, and only the model that owns the function's BAR sink may call it for its
    /// own function. Every access by anyone else goes through `store`/`load`.
    pub fn poke_bar(&mut self, node: PcieNodeId, bar: u8, offset: u64, data: &[u8]) {
        self.mem.bar(node, bar).write(offset, data)
    }
}
