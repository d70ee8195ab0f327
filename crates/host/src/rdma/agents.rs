//! Work on the server beside the RDMA benchmark that shares the server's memory system
//! or the region's very lines — server threads storing to the region (`workers`), load
//! threads polluting its LLC (`load`) — and what it does to the RNIC's DMA there.

use devices::rnic::Wqe;
use sim::memsys::MemSys;
use sim::Time;

use super::Region;

/// Agents on the server, brought up to each moment the server's RNIC reaches its region.
pub trait ServerAgents {
    /// The server's RNIC (on socket `rnic_socket`) is about to DMA the bytes `w` names in
    /// `region` at `at`: the agents bring the lines and the memory system up to `at`;
    /// when the DMA may proceed (after snoops of lines their cores hold).
    fn device_access(
        &mut self,
        at: Time,
        mem: &mut MemSys,
        region: &Region,
        w: Wqe,
        rnic_socket: u32,
    ) -> Time;

    /// Starts a measurement window.
    fn reset_counters(&mut self);
}
