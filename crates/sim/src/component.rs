//! Simulation components: device models, drivers, CPU agents and workloads, any number
//! of them in one run. Each has a `ComponentId`; the TLPs it sends, the timers it sets and
//! the sinks it owns carry that id, so flow and timer numbers are its own business and two
//! components never see each other's events. A `Sim` owns the components and dispatches
//! what the network says (`Net::next_notice`) to the one it is for.
//!
//! The context `C` is what components act on: a bare `Net` for network-level models, or
//! the timed fabric (`timed::TimedFabric`), which adds routes and the bytes behind them.
//! A component's timers are typed (`timers::Timers`); whoever runs the simulation starts
//! a component with `Net::wake_at`.

use std::any::Any;

use crate::net::{ComponentId, Event, Net, Notice};
use crate::time::Time;

/// Gives a context's network to the event loop.
pub trait HasNet {
    fn net(&mut self) -> &mut Net;
}

impl HasNet for Net {
    fn net(&mut self) -> &mut Net {
        self
    }
}

/// A component as `Any`, so a `Sim` can give it back as its concrete type. Every
/// `'static` type has it; the context `C` need not be `'static` (a model's world may
/// borrow its hosts from the caller).
pub trait AsAny {
    fn as_any(&self) -> &dyn Any;
    fn as_any_mut(&mut self) -> &mut dyn Any;
    fn into_any(self: Box<Self>) -> Box<dyn Any>;
}

impl<T: Any> AsAny for T {
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
    fn into_any(self: Box<Self>) -> Box<dyn Any> {
        self
    }
}

/// A model that takes part in a simulation.
pub trait Component<C>: AsAny {
    /// A delivery or timer for this component; `me` is its id (to tag what it sends).
    fn notify(&mut self, cx: &mut C, me: ComponentId, event: Event);

    /// Whether its work is done. A run that has components still working returns as soon
    /// as the last finishes; background components (CPU antagonists) always say `true`.
    fn finished(&self) -> bool {
        true
    }
}

/// Why `Sim::run` returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// Every component that had work finished it.
    Finished,
    /// The clock reached the run's horizon.
    Horizon,
    /// No event was left.
    Idle,
}

/// A set of components and their dispatch.
pub struct Sim<C> {
    components: Vec<Box<dyn Component<C>>>,
    done: Vec<bool>,
    working: usize,
}

impl<C: HasNet> Default for Sim<C> {
    fn default() -> Self {
        Sim::new()
    }
}

impl<C: HasNet> Sim<C> {
    pub fn new() -> Sim<C> {
        Sim {
            components: Vec::new(),
            done: Vec::new(),
            working: 0,
        }
    }

    /// Adds a component; its id is stable for the simulation's life.
    pub fn add<T: Component<C> + 'static>(&mut self, c: T) -> ComponentId {
        let done = c.finished();
        self.working += usize::from(!done);
        self.components.push(Box::new(c));
        self.done.push(done);
        self.components.len() as ComponentId - 1
    }

    pub fn len(&self) -> usize {
        self.components.len()
    }

    pub fn is_empty(&self) -> bool {
        self.components.is_empty()
    }

    // The reborrows below (`&**`) call `as_any` on the component, not on its `Box`: the
    // box is `Any` too when `C` is `'static`, and its downcast would always fail.

    /// The component `id` as its concrete type.
    pub fn get<T: Component<C> + 'static>(&self, id: ComponentId) -> Option<&T> {
        let c: &dyn Component<C> = &**self.components.get(id as usize)?;
        c.as_any().downcast_ref()
    }

    pub fn get_mut<T: Component<C> + 'static>(&mut self, id: ComponentId) -> Option<&mut T> {
        let c: &mut dyn Component<C> = &mut **self.components.get_mut(id as usize)?;
        c.as_any_mut().downcast_mut()
    }

    /// Removes every component and gives back component `id` (the run is over).
    pub fn take<T: Component<C> + 'static>(self, id: ComponentId) -> Option<T> {
        let c = self.components.into_iter().nth(id as usize)?;
        c.into_any().downcast().ok().map(|b| *b)
    }

    /// Calls `f` on component `id` with the context (to start or stop it between runs),
    /// keeping track of whether it has work.
    pub fn with<T: Component<C> + 'static, R>(
        &mut self,
        cx: &mut C,
        id: ComponentId,
        f: impl FnOnce(&mut T, &mut C) -> R,
    ) -> Option<R> {
        let c: &mut dyn Component<C> = &mut **self.components.get_mut(id as usize)?;
        let c = c.as_any_mut();
        let r = f(c.downcast_mut::<T>()?, cx);
        self.update(id);
        Some(r)
    }

    fn update(&mut self, id: ComponentId) {
        let now = self.components[id as usize].finished();
        let was = std::mem::replace(&mut self.done[id as usize], now);
        match (was, now) {
            (true, false) => self.working += 1,
            (false, true) => self.working -= 1,
            _ => {}
        }
    }

    /// Runs until every component that has work has finished it (or nothing is left).
    pub fn run_until_finished(&mut self, cx: &mut C) -> Stop {
        self.run(cx, None, true)
    }

    /// Runs until no event is left (never returns while a background component runs).
    pub fn run_until_idle(&mut self, cx: &mut C) -> Stop {
        self.run(cx, None, false)
    }

    /// Runs until the clock reaches `at` (it then stands at `at`), whatever the
    /// components' work, or until nothing is left to do.
    pub fn run_until(&mut self, cx: &mut C, at: Time) -> Stop {
        self.run(cx, Some(at), false)
    }

    /// Runs for `window` of simulated time from now.
    pub fn run_for(&mut self, cx: &mut C, window: Time) -> Stop {
        let at = cx.net().now() + window;
        self.run(cx, Some(at), false)
    }

    fn run(&mut self, cx: &mut C, horizon: Option<Time>, until_finished: bool) -> Stop {
        if let Some(h) = horizon {
            cx.net().set_horizon(h);
        }
        let until = horizon.unwrap_or(Time::MAX);
        loop {
            if until_finished && self.working == 0 {
                return Stop::Finished;
            }
            match cx.net().next_notice(until) {
                None => return Stop::Idle,
                // A horizon of an earlier run that ended sooner is stale.
                Some(Notice::Horizon(t)) if Some(t) == horizon => return Stop::Horizon,
                Some(Notice::Horizon(_)) => {}
                Some(Notice::To(id, ev)) => {
                    // Every id on this network comes from this `Sim`: an unknown one is a
                    // wiring bug in the caller, not something input can cause.
                    let c = self
                        .components
                        .get_mut(id as usize)
                        .unwrap_or_else(|| panic!("event for unknown component {id}"));
                    c.notify(cx, id, ev);
                    self.update(id);
                }
            }
        }
    }
}
