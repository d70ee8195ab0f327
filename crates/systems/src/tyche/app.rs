//! The applications that drive Tyche's block device (docs/hardware.md §3): FIO with direct
//! I/O and zmIO with asynchronous direct I/O, each as threads keeping a number of
//! requests in flight, each request with its own buffer on some node.

/// Which benchmark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AppKind {
    /// FIO, direct I/O, one request in flight per thread (assumption: FIO's default
    /// `psync` engine; docs/hardware.md §3 says direct I/O and names no engine).
    Fio,
    /// zmIO, asynchronous direct I/O with `ZMIO_DEPTH` requests in flight per thread.
    Zmio,
}

/// Requests a zmIO thread keeps in flight (assumption: docs/hardware.md §3 gives none; a
/// depth of 8 keeps six 10 Gb/s channels busy with a few threads, as an asynchronous
/// benchmark means to).
pub const ZMIO_DEPTH: u32 = 8;

/// zmIO's buffer skew (docs/hardware.md §3): shares of its write and read buffers on node 0.
pub const ZMIO_WRITE_NODE0: f64 = 0.99;
pub const ZMIO_READ_NODE0: f64 = 0.75;

/// Where an application's threads run and its buffers are.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BufferPlacement {
    /// Thread i's buffers on node i mod 2 (FIO's direct I/O, balanced across nodes); the
    /// threads are not pinned.
    Balanced,
    /// This share of the buffers on node 0, the rest on node 1 (zmIO's placement); the
    /// threads are not pinned.
    Skewed { node0: f64 },
    /// Half the threads and their buffers on each node, each thread pinned to its
    /// buffers' node (application affinity).
    Affine,
    /// Every thread and buffer on this node.
    Node(u32),
}

/// An application: its threads, requests in flight per thread, and placement.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct App {
    pub kind: AppKind,
    pub threads: u32,
    pub placement: BufferPlacement,
}

impl App {
    /// Requests in flight per thread.
    pub fn depth(&self) -> u32 {
        match self.kind {
            AppKind::Fio => 1,
            AppKind::Zmio => ZMIO_DEPTH,
        }
    }

    pub fn check(&self) -> Result<(), String> {
        if self.threads == 0 || self.threads > 1024 {
            return Err(format!("threads {}: must be 1..=1024", self.threads));
        }
        if let BufferPlacement::Skewed { node0 } = self.placement {
            if !(0.0..=1.0).contains(&node0) {
                return Err(format!("buffer share on node 0 {node0}: must be in 0..=1"));
            }
        }
        Ok(())
    }

    /// The node of buffer `slot` of thread `thread`, on a host of `nodes` nodes.
    pub fn buffer_node(&self, thread: u32, slot: u32, nodes: u32) -> u32 {
        let nodes = nodes.max(1);
        match self.placement {
            BufferPlacement::Balanced | BufferPlacement::Affine => thread % nodes,
            BufferPlacement::Node(n) => n.min(nodes - 1),
            BufferPlacement::Skewed { node0 } => {
                // Spread evenly: buffer k is on node 0 when the running count of node-0
                // buffers steps up at k, so any prefix holds the share to within one.
                let k = (thread * self.depth() + slot) as f64;
                let on0 = ((k + 1.0) * node0).floor() > (k * node0).floor();
                if on0 || nodes == 1 {
                    0
                } else {
                    1
                }
            }
        }
    }

    /// The node a thread is pinned to, if it is.
    pub fn thread_node(&self, thread: u32, nodes: u32) -> Option<u32> {
        match self.placement {
            BufferPlacement::Affine => Some(thread % nodes.max(1)),
            BufferPlacement::Node(n) => Some(n.min(nodes.max(1) - 1)),
            BufferPlacement::Balanced | BufferPlacement::Skewed { .. } => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zmio_skew_puts_its_share_of_buffers_on_node_0() {
        for share in [ZMIO_READ_NODE0, ZMIO_WRITE_NODE0] {
            let app = App {
                kind: AppKind::Zmio,
                threads: 32,
                placement: BufferPlacement::Skewed { node0: share },
            };
            let n = 32 * app.depth();
            let on0 = (0..32)
                .flat_map(|t| (0..app.depth()).map(move |s| (t, s)))
                .filter(|&(t, s)| app.buffer_node(t, s, 2) == 0)
                .count();
            assert!(
                (on0 as f64 - share * n as f64).abs() <= 1.0,
                "{on0} of {n} on node 0 for share {share}"
            );
        }
    }
}
