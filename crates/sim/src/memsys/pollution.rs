//! LLC pollution by background cores: their fills push a buffer out of a socket's LLC.
//! The fills' DRAM and interconnect traffic is the stream agents' (`arbitration`), so
//! pushing a buffer out charges only its own dirty lines' write-back.

use super::{MemSys, LINE};
use crate::time::Time;

impl MemSys {
    /// Background fills on `socket` have pushed `buf` out of its LLC (either share) by
    /// `at`: whether it was there. Its dirty lines are written back to `node`.
    pub fn push_out(&mut self, at: Time, socket: u32, node: u32, buf: u64) -> bool {
        let s = socket as usize;
        let gone = [self.ddio[s].remove(buf), self.cpu[s].remove(buf)];
        for (lines, dirty) in gone.into_iter().flatten() {
            if dirty {
                self.dram_write(at, node, lines * LINE);
            }
        }
        gone.iter().any(Option::is_some)
    }

    /// Lines of `socket`'s LLC that CPU fills use (the share outside DDIO's ways): how
    /// many lines background fills take to push out the oldest buffer there.
    pub fn cpu_share_lines(&self) -> u64 {
        self.cpu.first().map_or(0, |l| l.cap_lines)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::ms;
    use super::*;

    #[test]
    fn pushing_out_a_dirty_buffer_writes_it_back_and_a_clean_one_not() {
        let mut m = ms();
        m.cpu_write(Time::ZERO, 0, 3, 128);
        assert!(m.push_out(Time::ZERO, 0, 0, 3));
        assert!(!m.cached(0, 3));
        assert_eq!(m.dram(0).write, 128);
        assert!(!m.push_out(Time::ZERO, 0, 0, 3), "already gone");
        assert_eq!(m.cpu_share_lines(), (35u64 << 20) / 64 * 18 / 20);
    }
}
