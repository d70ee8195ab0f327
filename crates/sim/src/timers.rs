//! A component's timers, typed. The kernel carries only a [`TimerKey`]; the component
//! keeps what each pending timer means in its own [`Timers`], so no kind, queue number or
//! epoch is packed into a number, and a component that wraps another (a block driver
//! around an NVMe driver) keeps two sets that never mix.

pub use crate::net::TimerKey;
use crate::net::{ComponentId, Net};
use crate::time::Time;

/// Pending timers of one component, each with its meaning `T`. Slots are reused, so a
/// component's memory stays the size of its most timers pending at once.
#[derive(Clone, Debug)]
pub struct Timers<T> {
    set: u16,
    slots: Vec<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Timers<T> {
    fn default() -> Self {
        Timers::new()
    }
}

impl<T> Timers<T> {
    /// A component's (first) set of timers.
    pub fn new() -> Timers<T> {
        Timers::set(0)
    }

    /// Set number `set` of a component that keeps several (each its own number).
    pub fn set(set: u16) -> Timers<T> {
        Timers {
            set,
            slots: Vec::new(),
            free: Vec::new(),
        }
    }

    fn put(&mut self, t: T) -> TimerKey {
        let slot = match self.free.pop() {
            Some(s) => {
                self.slots[s as usize] = Some(t);
                s
            }
            None => {
                self.slots.push(Some(t));
                (self.slots.len() - 1) as u32
            }
        };
        TimerKey {
            set: self.set,
            slot,
        }
    }

    /// Tells component `me` of `t` at `at` (not before now).
    pub fn at(&mut self, net: &mut Net, at: Time, me: ComponentId, t: T) {
        let key = self.put(t);
        net.timer_at(at, me, key);
    }

    /// Tells component `me` of `t` (once) when a write lands on any byte of
    /// `[offset, offset + bytes)` of `sink` (`Net::watch`).
    pub fn on_write(
        &mut self,
        net: &mut Net,
        sink: u32,
        offset: u64,
        bytes: u64,
        me: ComponentId,
        t: T,
    ) {
        let key = self.put(t);
        net.watch(sink, offset, bytes, me, key);
    }

    /// Whether `key` is one of this set's.
    pub fn owns(&self, key: TimerKey) -> bool {
        key.set == self.set
    }

    /// The meaning of the timer that fired, its slot freed. A key this set did not give
    /// out, or gave back already, is a wiring bug of the component, not of its input.
    pub fn take(&mut self, key: TimerKey) -> T {
        assert!(
            self.owns(key),
            "timer of set {} given to set {}",
            key.set,
            self.set
        );
        let t = self.slots[key.slot as usize]
            .take()
            .unwrap_or_else(|| panic!("timer {key:?} fired twice"));
        self.free.push(key.slot);
        t
    }

    /// Timers set and not fired yet.
    pub fn pending(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::net::{Event, Notice};

    #[test]
    fn a_timer_comes_back_with_its_meaning_at_its_time_and_slots_are_reused() {
        #[derive(Debug, PartialEq)]
        enum T {
            Poll(u16),
            Ring { qid: u16, epoch: u32 },
        }
        let mut net = Net::new(1);
        let mut timers = Timers::new();
        timers.at(&mut net, Time::from_ns(20), 3, T::Ring { qid: 7, epoch: 2 });
        timers.at(&mut net, Time::from_ns(10), 3, T::Poll(5));
        assert_eq!(timers.pending(), 2);
        let mut seen = Vec::new();
        while let Some(Notice::To(c, Event::Timer(key))) = net.next_notice(Time::MAX) {
            seen.push((net.now(), c, timers.take(key)));
        }
        assert_eq!(
            seen,
            [
                (Time::from_ns(10), 3, T::Poll(5)),
                (Time::from_ns(20), 3, T::Ring { qid: 7, epoch: 2 })
            ]
        );
        assert_eq!(timers.pending(), 0);
        timers.at(&mut net, Time::from_ns(30), 3, T::Poll(1));
        assert_eq!(timers.slots.len(), 2, "a freed slot is reused");
    }

    #[test]
    fn two_sets_of_one_component_tell_their_keys_apart() {
        let mut net = Net::new(1);
        let (mut outer, mut inner) = (Timers::set(0), Timers::set(1));
        outer.at(&mut net, Time::from_ns(1), 0, "outer");
        inner.at(&mut net, Time::from_ns(2), 0, "inner");
        let mut got = Vec::new();
        while let Some(Notice::To(_, Event::Timer(key))) = net.next_notice(Time::MAX) {
            got.push(if outer.owns(key) {
                outer.take(key)
            } else {
                inner.take(key)
            });
        }
        assert_eq!(got, ["outer", "inner"]);
    }
}
