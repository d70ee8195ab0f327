//! Calibration needs Linux's NUMA system calls.
use std::io;

use crate::cpuset::CpuSet;

pub struct Mapping {
    data: Vec<u64>,
}

impl Mapping {
    pub fn new(len: usize) -> io::Result<Mapping> {
        let _ = len;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "nudma calibrate needs Linux",
        ))
    }
    pub fn advise_huge_pages(&self) -> io::Result<()> {
        Ok(())
    }
    pub fn huge_bytes(&self) -> Option<(u64, u64)> {
        None
    }
    pub fn bind_to_node(&self, _node: u32) -> io::Result<()> {
        Ok(())
    }
    pub fn check_node(&self, _node: u32) -> Option<String> {
        None
    }
    pub fn words(&self) -> &[u64] {
        &self.data
    }
    pub fn words_mut(&mut self) -> &mut [u64] {
        &mut self.data
    }
}

pub fn pin_current_thread(_cpus: &CpuSet) -> io::Result<()> {
    Ok(())
}
