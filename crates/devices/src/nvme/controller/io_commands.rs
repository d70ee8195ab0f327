//! The I/O command set (Read, Write, Flush): checking a command, resolving its PRPs
//! (PRP lists fetched by DMA), moving its data by DMA, and the media access.

use sim::net::ComponentId;
use sim::timed::TimedFabric;

use super::{CtrlWork, NvmeController, ReadFor, WriteFor};
use crate::nvme::command::{io, Command, Status};

impl NvmeController {
    pub(super) fn io(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: u32,
        c: &Command,
    ) -> Option<(Status, u32)> {
        if !matches!(c.opcode, io::READ | io::WRITE | io::FLUSH) {
            return Some((Status::INVALID_OPCODE, 0));
        }
        if c.nsid != 1 {
            return Some((Status::INVALID_NAMESPACE, 0));
        }
        if c.opcode == io::FLUSH {
            // Data is durable once written to the media in this model.
            return Some((Status::SUCCESS, 0));
        }
        let slba = c.cdw10() as u64 | (c.cdw11() as u64) << 32;
        let nlb = (c.cdw12() & 0xffff) as u64 + 1;
        let bytes = nlb * self.namespace.lba_bytes();
        if bytes > 4096u64 << self.params.mdts {
            return Some((Status::INVALID_FIELD, 0));
        }
        if !self.namespace.in_range(slba, nlb) {
            return Some((Status::LBA_OUT_OF_RANGE, 0));
        }
        if c.opcode == io::READ {
            // The media first, then the data to the host.
            let now = tf.net.now();
            let at = self.media.access(now, false, bytes);
            let cmd = self.cmds.get_mut(slot).expect("under way");
            cmd.len = bytes;
            self.timer_at(tf, at, me, CtrlWork::Media(slot));
            None
        } else {
            self.start_transfer(tf, me, slot, vec![0; bytes as usize], false)
        }
    }

    /// Resolves the command's PRPs for `buf.len()` bytes, then moves the data: to the
    /// host (`buf` holds it) or from it (into `buf`).
    pub(super) fn start_transfer(
        &mut self,
        tf: &mut TimedFabric,
        me: ComponentId,
        slot: u32,
        buf: Vec<u8>,
        to_host: bool,
    ) -> Option<(Status, u32)> {
        let page = self.cc.page_bytes();
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let (prp1, prp2) = (cmd.sqe.prp1, cmd.sqe.prp2);
        let len = buf.len() as u64;
        cmd.len = len;
        cmd.buf = buf;
        cmd.to_host = to_host;
        if prp1 & 3 != 0 {
            return Some((Status::INVALID_PRP_OFFSET, 0));
        }
        let first = len.min(page - prp1 % page);
        cmd.segs = vec![(prp1, first)];
        let rest = len - first;
        if rest == 0 {
        } else if rest <= page {
            if prp2 % page != 0 {
                return Some((Status::INVALID_PRP_OFFSET, 0));
            }
            cmd.segs.push((prp2, rest));
        } else {
            if prp2 & 7 != 0 {
                return Some((Status::INVALID_PRP_OFFSET, 0));
            }
            cmd.list = Some((prp2, rest.div_ceil(page)));
            self.fetch_list(tf, me, slot);
            return None;
        }
        self.move_data(tf, me, slot);
        None
    }

    /// Reads the next PRP list page's entries (its last entry points on when more follow).
    fn fetch_list(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let page = self.cc.page_bytes();
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let Some((addr, left)) = cmd.list else { return };
        let room = (page - addr % page) / 8;
        let n = left.min(room);
        cmd.list_buf = vec![0; n as usize * 8];
        let pieces = self.read(tf, me, addr, n * 8, ReadFor::List { cmd: slot, off: 0 });
        if let Some(cmd) = self.cmds.get_mut(slot) {
            cmd.pending += pieces;
        }
    }

    fn list_arrived(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let page = self.cc.page_bytes();
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let Some((_, left)) = cmd.list else { return };
        let entries: Vec<u64> = cmd
            .list_buf
            .chunks(8)
            .map(|e| u64::from_le_bytes(e.try_into().expect("8")))
            .collect();
        let (data, next) = if (entries.len() as u64) < left {
            (&entries[..entries.len() - 1], entries.last().copied())
        } else {
            (&entries[..], None)
        };
        let mut placed: u64 = cmd.segs.iter().map(|s| s.1).sum();
        for &e in data {
            if e % page != 0 {
                self.complete(tf, me, slot, Status::INVALID_PRP_OFFSET, 0);
                return;
            }
            let n = (cmd.len - placed).min(page);
            cmd.segs.push((e, n));
            placed += n;
        }
        let left = left - data.len() as u64;
        match next {
            Some(p) if left > 0 => {
                if p & 7 != 0 {
                    self.complete(tf, me, slot, Status::INVALID_PRP_OFFSET, 0);
                    return;
                }
                cmd.list = Some((p, left));
                self.fetch_list(tf, me, slot);
            }
            _ => {
                cmd.list = None;
                self.move_data(tf, me, slot);
            }
        }
    }

    fn move_data(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let cmd = self.cmds.get_mut(slot).expect("under way");
        let segs = cmd.segs.clone();
        let mut off = 0u64;
        if cmd.to_host {
            let buf = std::mem::take(&mut cmd.buf);
            let mut pieces = 0;
            let mut failed = false;
            for (addr, len) in segs {
                let mut at = 0;
                while at < len {
                    let a = addr + at;
                    let n = (len - at).min(4096 - (a & 0xfff));
                    let data = &buf[(off + at) as usize..(off + at + n) as usize];
                    let (p, f) = self.post_data(tf, me, a, data, WriteFor::Data { cmd: slot });
                    pieces += p;
                    failed |= f;
                    at += n;
                }
                off += len;
            }
            let cmd = self.cmds.get_mut(slot).expect("under way");
            cmd.buf = buf;
            cmd.pending += pieces;
            cmd.failed |= failed;
            if cmd.pending == 0 {
                self.data_done(tf, me, slot);
            }
        } else {
            for (addr, len) in segs {
                let pieces = self.read(tf, me, addr, len, ReadFor::Data { cmd: slot, off });
                if let Some(cmd) = self.cmds.get_mut(slot) {
                    cmd.pending += pieces;
                }
                off += len;
            }
        }
    }

    /// One DMA piece of command `slot` is done (landed, arrived or failed).
    pub(super) fn piece_done(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let Some(cmd) = self.cmds.get_mut(slot) else {
            return;
        };
        cmd.pending = cmd.pending.saturating_sub(1);
        if cmd.pending > 0 {
            return;
        }
        if cmd.list.is_some() {
            if cmd.failed {
                self.complete(tf, me, slot, Status::DATA_TRANSFER_ERROR, 0);
            } else {
                self.list_arrived(tf, me, slot);
            }
            return;
        }
        self.data_done(tf, me, slot);
    }

    fn data_done(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let cmd = self.cmds.get_mut(slot).expect("under way");
        if cmd.failed {
            self.complete(tf, me, slot, Status::DATA_TRANSFER_ERROR, 0);
            return;
        }
        if cmd.to_host {
            self.stats.bytes_read += cmd.len;
            let dw0 = cmd.dw0;
            self.complete(tf, me, slot, Status::SUCCESS, dw0);
        } else {
            // A write's data has arrived: to the media, then complete.
            self.stats.bytes_written += cmd.len;
            let now = tf.net.now();
            let at = self.media.access(now, true, cmd.len);
            self.timer_at(tf, at, me, CtrlWork::Media(slot));
        }
    }

    pub(super) fn media_done(&mut self, tf: &mut TimedFabric, me: ComponentId, slot: u32) {
        let Some(cmd) = self.cmds.get_mut(slot) else {
            return;
        };
        let slba = cmd.sqe.cdw10() as u64 | (cmd.sqe.cdw11() as u64) << 32;
        if cmd.sqe.opcode == io::READ {
            let nlb = cmd.len / self.namespace.lba_bytes();
            let data = self.namespace.read(slba, nlb);
            if let Some((s, d)) = self.start_transfer(tf, me, slot, data, true) {
                self.complete(tf, me, slot, s, d);
            }
        } else {
            let buf = std::mem::take(&mut cmd.buf);
            self.namespace.write(slba, &buf);
            self.complete(tf, me, slot, Status::SUCCESS, 0);
        }
    }
}
