//! The `Host` trait: what the world drives, and the order it drives it in.

use core::any::Any;
use core::fmt;

/// Index of a host in a [`crate::World`], handed out by [`crate::World::add_host`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct HostId(pub(crate) u32);

impl HostId {
    /// The host's position in insertion order (0-based).
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for HostId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "host{}", self.0)
    }
}

/// A host-local interface number. A port is attached to at most one link.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct PortId(pub u16);

impl fmt::Display for PortId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "port{}", self.0)
    }
}

/// A sans-IO machine the world runs: a `stack` instance with its applications, or a toy.
///
/// The trait is object-safe; the world holds `Box<dyn Host>`.
///
/// # Call order
///
/// The world never calls a host re-entrantly and always passes a non-decreasing `now_ns`.
/// Each *activation* of a host is one of:
///
/// 1. a frame arrives on a port → [`Host::handle_frame`];
/// 2. the deadline last returned by [`Host::poll_timeout`] is reached and `poll_timeout` still
///    returns a deadline `<= now_ns` → [`Host::handle_timeout`] (a deadline that moved later is
///    simply re-armed; one that became `None` is dropped);
/// 3. a wake-up ([`crate::World::wake`], or the first activation right after
///    [`crate::World::add_host`]) → nothing is handled;
///
/// and is always followed by:
///
/// 4. [`Host::poll_transmit`] repeatedly until it returns `None` (at most
///    [`crate::World::TRANSMIT_BURST_MAX`] frames per activation; if the host still has more,
///    the world wakes it again at the same instant);
/// 5. [`Host::poll_timeout`] once, to (re-)arm the host's single timer.
///
/// A host must therefore make every output visible through `poll_transmit`/`poll_timeout`
/// after each `handle_*` call, exactly as a sans-IO engine does under a real driver.
pub trait Host {
    /// A frame arrived on `port` at `now_ns`. The frame may be corrupt or duplicated: the host
    /// must treat it as untrusted input.
    fn handle_frame(&mut self, now_ns: u64, port: PortId, frame: &[u8]);

    /// The deadline returned by [`Host::poll_timeout`] has been reached.
    fn handle_timeout(&mut self, now_ns: u64);

    /// The next frame to send, if any, and the port to send it on.
    fn poll_transmit(&mut self, now_ns: u64) -> Option<(PortId, Vec<u8>)>;

    /// A frame this host sent (through [`Host::poll_transmit`]) that the world is done with:
    /// delivered to its receiver or dropped by the link. A host may keep the buffer for a
    /// later frame, as a driver recycles a buffer on transmit completion, so a steady flow
    /// allocates nothing; the default drops it. The contents are stale: the world may hand back
    /// a buffer the link corrupted, and never hands back one it still needs.
    fn recycle_frame(&mut self, frame: Vec<u8>) {
        drop(frame);
    }

    /// The earliest instant (ns, absolute virtual time) at which the host wants
    /// [`Host::handle_timeout`], or `None`. A deadline in the past fires at the current instant.
    fn poll_timeout(&self) -> Option<u64>;

    /// For checkers and tests: downcast to the concrete host type.
    fn as_any(&self) -> &dyn Any;

    /// For tests that drive applications from outside: downcast mutably. Call
    /// [`crate::World::wake`] afterwards so new output is polled.
    fn as_any_mut(&mut self) -> &mut dyn Any;
}
