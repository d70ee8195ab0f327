//! Thin wrappers over the Linux calls calibrate needs.

use std::io;

use crate::cpuset::CpuSet;

const MPOL_BIND: libc::c_long = 2;
const MPOL_MF_STRICT: libc::c_ulong = 1;
const MPOL_MF_MOVE: libc::c_ulong = 2;
const MPOL_F_NODE: libc::c_ulong = 1;
const MPOL_F_ADDR: libc::c_ulong = 2;

/// An anonymous private mapping, unmapped on drop.
pub struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    pub fn new(len: usize) -> io::Result<Mapping> {
        // SAFETY: a fresh anonymous mapping; no existing memory is affected.
        let ptr = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
                -1,
                0,
            )
        };
        if ptr == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(Mapping { ptr, len })
    }

    /// Asks for transparent huge pages; refusal only costs TLB misses.
    pub fn advise_huge_pages(&self) -> io::Result<()> {
        // SAFETY: advice on our own mapping; it changes no memory contents.
        if unsafe { libc::madvise(self.ptr, self.len, libc::MADV_HUGEPAGE) } != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// (transparent, explicit) huge-page bytes of the mapping, from smaps.
    pub fn huge_bytes(&self) -> Option<(u64, u64)> {
        let text = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = self.ptr as u64;
        super::huge_pages::smaps_huge_bytes(&text, start, start + self.len as u64)
    }

    /// Binds the (untouched) mapping to one node, so the first touch allocates there.
    pub fn bind_to_node(&self, node: u32) -> io::Result<()> {
        let bits = 64 * (node as usize / 64 + 1);
        let mut mask = vec![0 as libc::c_ulong; bits / 64];
        mask[node as usize / 64] |= 1 << (node % 64);
        // SAFETY: mbind reads `bits` bits from `mask`, which is that long; the
        // range is our mapping. The kernel counts maxnode one past the mask.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_mbind,
                self.ptr,
                self.len as libc::c_ulong,
                MPOL_BIND,
                mask.as_ptr(),
                (bits + 1) as libc::c_ulong,
                MPOL_MF_STRICT | MPOL_MF_MOVE,
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Checks where sample pages landed; a message when not all are on `node`.
    pub fn check_node(&self, node: u32) -> Option<String> {
        let samples = 16usize;
        let mut wrong = 0;
        let mut failed = None;
        for k in 0..samples {
            let off = (self.len / samples) * k;
            let mut found: libc::c_int = -1;
            // SAFETY: get_mempolicy writes one int to `found`; no nodemask is
            // requested (null, 0); the address lies inside our mapping.
            let rc = unsafe {
                libc::syscall(
                    libc::SYS_get_mempolicy,
                    &mut found as *mut libc::c_int,
                    std::ptr::null_mut::<libc::c_ulong>(),
                    0 as libc::c_ulong,
                    (self.ptr as *mut u8).wrapping_add(off) as *mut libc::c_void,
                    MPOL_F_NODE | MPOL_F_ADDR,
                )
            };
            if rc != 0 {
                failed = Some(io::Error::last_os_error());
                break;
            }
            if found != node as libc::c_int {
                wrong += 1;
            }
        }
        match (failed, wrong) {
            (Some(e), _) => Some(format!(
                "cannot verify page placement on node {node} (get_mempolicy: {e})"
            )),
            (None, 0) => None,
            (None, w) => Some(format!(
                "{w} of {samples} sampled pages are not on node {node}: the node is short of free memory"
            )),
        }
    }

    pub fn words(&self) -> &[u64] {
        // SAFETY: the mapping is page-aligned, `len` bytes long, readable, and
        // zero-filled on first access; it lives as long as `self`.
        unsafe { std::slice::from_raw_parts(self.ptr as *const u64, self.len / 8) }
    }

    pub fn words_mut(&mut self) -> &mut [u64] {
        // SAFETY: as in `words`, and `&mut self` makes the access exclusive.
        unsafe { std::slice::from_raw_parts_mut(self.ptr as *mut u64, self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps exactly the region mmap returned; no slices outlive self.
        unsafe {
            libc::munmap(self.ptr, self.len);
        }
    }
}

/// Pins the calling thread to `cpus`.
pub fn pin_current_thread(cpus: &CpuSet) -> io::Result<()> {
    // SAFETY: cpu_set_t is plain data; CPU_SET stays within its fixed size
    // because larger CPU numbers are skipped.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_ZERO(&mut set);
        let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
        for cpu in cpus.iter().filter(|&c| (c as usize) < max) {
            libc::CPU_SET(cpu as usize, &mut set);
        }
        if libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}
