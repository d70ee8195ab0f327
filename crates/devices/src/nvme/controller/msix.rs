//! MSI-X: the controller's vectors in its BAR0 table, their pending bits, and sending
//! or holding back an interrupt message.

use sim::net::ComponentId;
use sim::timed::TimedFabric;

use super::{NvmeController, WriteFor};
use crate::nvme::regs;

impl NvmeController {
    fn msix_entry(&self, tf: &TimedFabric, v: u16) -> (u64, u32, bool) {
        let mut e = [0u8; 16];
        let at = regs::MSIX_TABLE + v as u64 * regs::MSIX_ENTRY;
        tf.fabric.peek_bar(self.node, 0, at, &mut e);
        let addr = u64::from_le_bytes(e[0..8].try_into().expect("8"));
        let data = u32::from_le_bytes(e[8..12].try_into().expect("4"));
        (addr, data, e[12] & 1 == 1)
    }

    fn pending_bit(&self, tf: &mut TimedFabric, v: u16, set: bool) -> bool {
        let at = regs::MSIX_PBA + (v as u64 / 64) * 8;
        let mut b = [0u8; 8];
        tf.fabric.peek_bar(self.node, 0, at, &mut b);
        let mut w = u64::from_le_bytes(b);
        let was = w >> (v % 64) & 1 == 1;
        if set {
            w |= 1 << (v % 64);
        } else {
            w &= !(1 << (v % 64));
        }
        tf.fabric.poke_bar(self.node, 0, at, &w.to_le_bytes());
        was
    }

    pub(super) fn interrupt(&mut self, tf: &mut TimedFabric, me: ComponentId, v: u16) {
        if v >= self.params.queue_pairs {
            return;
        }
        let (addr, data, masked) = self.msix_entry(tf, v);
        if masked {
            self.stats.masked_interrupts += 1;
            self.pending_bit(tf, v, true);
            return;
        }
        self.stats.interrupts += 1;
        if !self.write(tf, me, addr, data.to_le_bytes().to_vec(), WriteFor::Msi) {
            self.stats.completion_faults += 1;
        }
    }

    pub(super) fn deliver_pending(&mut self, tf: &mut TimedFabric, me: ComponentId, v: u16) {
        if v >= self.params.queue_pairs {
            return;
        }
        let (_, _, masked) = self.msix_entry(tf, v);
        if !masked && self.pending_bit(tf, v, false) {
            self.interrupt(tf, me, v);
        }
    }
}
