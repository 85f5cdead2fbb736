//! The socket table: slots named by generation-checked handles, the port index of UDP
//! sockets and TCP listeners, the ephemeral-port cursor and the queue of readiness events.
//!
//! It owns only the slots' bookkeeping; what a slot holds belongs to its protocol part (UDP
//! sockets to `udp`, listeners, connections and moved markers to the TCP table), which reach
//! it through [`Sockets::get`] / [`Sockets::get_mut`].

use core::net::IpAddr;
use std::collections::{BTreeMap, VecDeque};

use crate::socket::{Readiness, SocketError, SocketEvent, SocketHandle, UdpSocket};
use crate::tcp_sockets::TcpState;

/// First and last ephemeral ports (RFC 6335 §6: 49152–65535).
pub(crate) const EPHEMERAL_FIRST: u16 = 49152;
pub(crate) const EPHEMERAL_LAST: u16 = 65535;

/// True when two local bindings of the same port conflict: same family and the same address,
/// or either is the wildcard.
pub(crate) fn overlaps(a: IpAddr, b: IpAddr) -> bool {
    a.is_ipv4() == b.is_ipv4() && (a == b || a.is_unspecified() || b.is_unspecified())
}

/// The port index key of a socket that owns a port: UDP sockets and TCP listeners. TCP
/// connections live in the 4-tuple table instead.
pub(crate) fn port_key(socket: &Socket) -> Option<(PortKind, u16)> {
    match socket {
        Socket::Udp(u) => Some((PortKind::Udp, u.local.port())),
        Socket::Tcp(t) => t.listen_port().map(|p| (PortKind::TcpListener, p)),
    }
}

/// What a bound port belongs to (UDP and TCP port spaces are separate).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) enum PortKind {
    Udp,
    TcpListener,
}

/// What a slot holds.
#[derive(Debug)]
pub(crate) enum Socket {
    Udp(UdpSocket),
    Tcp(TcpState),
}

/// One entry of the socket table.
///
/// `repr(C)` and 64-byte aligned (128 bytes, two cache lines): the slot's own fields, which
/// handles and readiness touch (8 bytes), then the socket, so a connection's hot fields
/// (`ConnSock`'s first 56 bytes) share the first line with them and an established IPv4
/// connection's segments touch that line alone.
#[derive(Debug)]
#[repr(C, align(64))]
pub(crate) struct Slot {
    generation: u32,
    /// Conditions that became true and were not yet reported.
    pending: Readiness,
    /// True while this slot's index sits in `Sockets::events`.
    queued: bool,
    socket: Option<Socket>,
}

impl Slot {
    /// True when the slot holds a socket a handle may name (not empty, not a moved marker
    /// unless it is a bypass socket).
    pub(crate) fn holds_socket(&self) -> bool {
        match &self.socket {
            None => false,
            Some(Socket::Tcp(TcpState::Moved(m))) => m.bypass.is_some(),
            Some(_) => true,
        }
    }
}

/// The socket table. Invariants: `slots.len()` ≤ `sockets_max`; `free_slots` holds exactly
/// the empty slots that are not reserved (a moved marker's slot is neither empty nor named by
/// a handle), plus, in any order, indexes ≥ `slots.len()` that `compact` dropped (`alloc`
/// skips them; nothing is pushed while any remain); `in_use` counts the slots holding a socket or
/// reserved; every slot's generation is below `generation_base` unless it was pushed after
/// the last `compact` (so no handle to a dropped slot names a later one); `ports` lists every slot whose socket owns a port, under that port; `events`
/// holds each slot index at most once (`Slot::queued`), so it is bounded by `slots`.
#[derive(Debug)]
pub(crate) struct Sockets {
    sockets_max: usize,
    slots: Vec<Slot>,
    /// Indexes of empty slots (reused last-freed first), and indexes at or past
    /// `slots.len()` that `compact` dropped (stale: skipped by `alloc`).
    free_slots: Vec<usize>,
    /// Slots holding a socket or reserved (`len`).
    in_use: usize,
    /// Port → slots bound to it (UDP sockets, TCP listeners), so input demultiplexing never
    /// scans the socket table.
    ports: BTreeMap<(PortKind, u16), Vec<usize>>,
    /// Slot indexes with pending readiness.
    events: VecDeque<u32>,
    /// Where the next ephemeral port search starts.
    next_ephemeral: u16,
    /// The generation a slot pushed from now on starts at: above every generation a slot
    /// given back to the allocator had (`compact`), so a stale handle for a slot that was
    /// dropped never names the slot that later takes its index.
    generation_base: u32,
    /// Bumped whenever what any slot holds changes (a socket put in, taken out or replaced,
    /// slots dropped): never decreases, so a record made at one value
    /// (`conn_table::LastFlow`) is known stale once it differs.
    epoch: u64,
}

/// A table this many slots long or shorter is never compacted.
const COMPACT_MIN_SLOTS: usize = 64;

impl Sockets {
    pub(crate) fn new(sockets_max: usize) -> Sockets {
        Sockets {
            sockets_max,
            slots: Vec::new(),
            free_slots: Vec::new(),
            in_use: 0,
            ports: BTreeMap::new(),
            events: VecDeque::new(),
            next_ephemeral: EPHEMERAL_FIRST,
            generation_base: 0,
            epoch: 0,
        }
    }

    /// The slot contents' change count (see `Sockets::epoch`'s field doc): equal at two
    /// times only if no slot's content changed between them.
    #[inline(always)]
    pub(crate) fn epoch(&self) -> u64 {
        self.epoch
    }

    /// Sockets in the table (moved markers included).
    pub(crate) fn len(&self) -> usize {
        self.in_use
    }

    /// Heap bytes the table holds: slots (spare capacity included), the free list, the event
    /// queue (the port index, a few entries per listener, is left out).
    pub(crate) fn heap_bytes(&self) -> usize {
        self.slots.capacity() * core::mem::size_of::<Slot>()
            + self.free_slots.capacity() * core::mem::size_of::<usize>()
            + self.events.capacity() * core::mem::size_of::<u32>()
    }

    /// Slots in the table, empty ones included (indexes run below this).
    pub(crate) fn slot_count(&self) -> usize {
        self.slots.len()
    }

    /// What slot `i` holds.
    pub(crate) fn get(&self, i: usize) -> Option<&Socket> {
        self.slots.get(i).and_then(|s| s.socket.as_ref())
    }

    /// Asks for slot `i`'s first line (a connection's hot fields, all of an IPv4 key) to be
    /// brought into the cache (a hint only; nothing for an index past the table).
    #[inline]
    pub(crate) fn prefetch_slot(&self, i: usize) {
        if let Some(s) = self.slots.get(i) {
            platform::prefetch::prefetch_line(s);
        }
    }

    /// What slot `i` holds, to change it in place.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<&mut Socket> {
        self.slots.get_mut(i).and_then(|s| s.socket.as_mut())
    }

    /// Every socket in the table.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &Socket> {
        self.slots.iter().filter_map(|s| s.socket.as_ref())
    }

    /// Every socket in the table with its slot index, in slot order.
    pub(crate) fn iter_indexed(&self) -> impl Iterator<Item = (usize, &Socket)> {
        self.slots
            .iter()
            .enumerate()
            .filter_map(|(i, s)| s.socket.as_ref().map(|so| (i, so)))
    }

    /// Every occupied slot with its index, mutably (rare walks: the memory budget's state
    /// changes).
    pub(crate) fn iter_indexed_mut(&mut self) -> impl Iterator<Item = (usize, &mut Socket)> {
        self.slots
            .iter_mut()
            .enumerate()
            .filter_map(|(i, s)| s.socket.as_mut().map(|so| (i, so)))
    }

    /// Replaces what slot `i` holds (a connection by its moved marker, say), dropping any
    /// readiness not yet reported; returns the old content. The handle stays reserved.
    pub(crate) fn replace(&mut self, i: usize, socket: Socket) -> Option<Socket> {
        self.epoch += 1;
        let slot = self.slots.get_mut(i)?;
        slot.pending = Readiness::NONE;
        slot.socket.replace(socket)
    }

    /// Records `readiness` for slot `i` without queueing an event (a child connection waiting
    /// for `accept` keeps its events until then).
    pub(crate) fn add_pending(&mut self, i: usize, readiness: Readiness) {
        if let Some(s) = self.slots.get_mut(i) {
            s.pending |= readiness;
        }
    }

    /// Takes slot `i`'s unreported readiness, with its handle.
    pub(crate) fn take_pending(&mut self, i: usize) -> Option<(SocketHandle, Readiness)> {
        let slot = self.slots.get_mut(i)?;
        let handle = SocketHandle {
            index: u32::try_from(i).ok()?,
            generation: slot.generation,
        };
        Some((handle, core::mem::take(&mut slot.pending)))
    }

    /// The next readiness notification, if any.
    /// Readiness notifications are queued (a slot's pending readiness is queued with it).
    pub(crate) fn has_events(&self) -> bool {
        !self.events.is_empty()
    }

    pub(crate) fn poll_event(&mut self) -> Option<SocketEvent> {
        while let Some(index) = self.events.pop_front() {
            let Some(slot) = self.slots.get_mut(index as usize) else {
                continue;
            };
            slot.queued = false;
            let readiness = core::mem::take(&mut slot.pending);
            if slot.holds_socket() && !readiness.is_empty() {
                return Some(SocketEvent {
                    handle: SocketHandle {
                        index,
                        generation: slot.generation,
                    },
                    readiness,
                });
            }
        }
        None
    }

    /// Where the next ephemeral port search starts.
    pub(crate) fn next_ephemeral(&self) -> u16 {
        self.next_ephemeral
    }

    /// Moves the ephemeral cursor past `port` (a port picked by another search).
    pub(crate) fn ephemeral_taken(&mut self, port: u16) {
        self.next_ephemeral = if port == EPHEMERAL_LAST {
            EPHEMERAL_FIRST
        } else {
            port + 1
        };
    }

    /// Records `readiness` for the slot and queues it for `poll_event` once.
    #[inline(always)]
    pub(crate) fn notify(&mut self, index: usize, readiness: Readiness) {
        let Some(slot) = self.slots.get_mut(index) else {
            return;
        };
        slot.pending |= readiness;
        if !slot.queued {
            slot.queued = true;
            if let Ok(i) = u32::try_from(index) {
                self.events.push_back(i);
            }
        }
    }

    /// Puts `socket` in a free slot.
    pub(crate) fn alloc(&mut self, socket: Socket) -> Result<SocketHandle, SocketError> {
        self.epoch += 1;
        let bound = port_key(&socket);
        // Entries `compact` left past the end are skipped (each once: nothing is pushed while
        // any remain).
        while self
            .free_slots
            .last()
            .is_some_and(|&i| i >= self.slots.len())
        {
            self.free_slots.pop();
        }
        let (i, generation) = if let Some(i) = self.free_slots.pop() {
            let Some(slot) = self.slots.get_mut(i) else {
                return Err(SocketError::TooManySockets);
            };
            slot.generation = slot.generation.wrapping_add(1);
            slot.socket = Some(socket);
            slot.pending = Readiness::NONE;
            (i, slot.generation)
        } else {
            if self.slots.len() >= self.sockets_max {
                return Err(SocketError::TooManySockets);
            }
            let generation = self.generation_base;
            // A grown slot vector's buffer on huge pages (one random slot per segment).
            platform::huge_vec::reserve_huge(&mut self.slots, 1);
            self.slots.push(Slot {
                generation,
                socket: Some(socket),
                pending: Readiness::NONE,
                queued: false,
            });
            (self.slots.len() - 1, generation)
        };
        self.in_use += 1;
        if let Some(k) = bound {
            self.ports.entry(k).or_default().push(i);
        }
        let index = u32::try_from(i).map_err(|_| SocketError::TooManySockets)?;
        Ok(SocketHandle { index, generation })
    }

    /// Slot indexes of the sockets bound to `port` (UDP sockets or TCP listeners), in
    /// binding order.
    pub(crate) fn bound_to(&self, kind: PortKind, port: u16) -> &[usize] {
        self.ports.get(&(kind, port)).map_or(&[], Vec::as_slice)
    }

    /// The slot a handle names. A slot holding a moved marker names no socket: the handle of
    /// an exported connection is invalid until the connection is imported back.
    pub(crate) fn index(&self, h: SocketHandle) -> Result<usize, SocketError> {
        let i = h.index as usize;
        match self.slots.get(i) {
            Some(s) if s.generation == h.generation && s.holds_socket() => Ok(i),
            _ => Err(SocketError::InvalidHandle),
        }
    }

    /// The handle naming slot `i` now (`None` for a slot out of range).
    pub(crate) fn handle_of(&self, i: usize) -> Option<SocketHandle> {
        let slot = self.slots.get(i)?;
        Some(SocketHandle {
            index: u32::try_from(i).ok()?,
            generation: slot.generation,
        })
    }

    /// Puts `socket` back in slot `i`, which a moved marker held, keeping the slot's
    /// generation: the connection gets the handle it had before it moved away.
    pub(crate) fn reuse(&mut self, i: usize, socket: Socket) -> Option<SocketHandle> {
        self.epoch += 1;
        let slot = self.slots.get_mut(i)?;
        slot.socket = Some(socket);
        slot.pending = Readiness::NONE;
        Some(SocketHandle {
            index: u32::try_from(i).ok()?,
            generation: slot.generation,
        })
    }

    /// The next ephemeral port for which `free` holds, cycling through the range once.
    pub(crate) fn pick_ephemeral(
        &mut self,
        mut free: impl FnMut(&Sockets, u16) -> bool,
    ) -> Option<u16> {
        let span = u32::from(EPHEMERAL_LAST - EPHEMERAL_FIRST) + 1;
        for _ in 0..span {
            let p = self.next_ephemeral;
            self.next_ephemeral = if p == EPHEMERAL_LAST {
                EPHEMERAL_FIRST
            } else {
                p + 1
            };
            if free(self, p) {
                return Some(p);
            }
        }
        None
    }

    /// Frees a slot without any protocol action; returns what it held.
    pub(crate) fn free(&mut self, i: usize) -> Option<Socket> {
        self.epoch += 1;
        let slot = self.slots.get_mut(i)?;
        let socket = slot.socket.take()?;
        slot.pending = Readiness::NONE;
        if let Some(k) = port_key(&socket) {
            if let Some(v) = self.ports.get_mut(&k) {
                v.retain(|&x| x != i);
                if v.is_empty() {
                    self.ports.remove(&k);
                }
            }
        }
        self.free_slots.push(i);
        self.in_use -= 1;
        if i + 1 == self.slots.len()
            && self.slots.len() > COMPACT_MIN_SLOTS
            && self.in_use * 8 <= self.slots.len()
        {
            self.compact();
        }
        Some(socket)
    }

    /// Memory back to the allocator past the table's high-water mark: when the last slot is
    /// freed while at most an eighth of the slots are in use, the run of empty slots at the
    /// end of the table is dropped (each slot is dropped at most once per time it was pushed,
    /// so this is O(1) amortized per slot), and the slot vector shrinks once its capacity is
    /// four times what it holds. The dropped indexes stay in `free_slots` until `alloc`
    /// skips them; event-queue entries for them are dropped here (O(queue), which the
    /// application drains every iteration).
    #[cold]
    fn compact(&mut self) {
        self.epoch += 1;
        let mut keep = self.slots.len();
        while keep > 0 {
            let slot = &self.slots[keep - 1];
            if slot.socket.is_some() {
                break;
            }
            self.generation_base = self.generation_base.max(slot.generation.wrapping_add(1));
            keep -= 1;
        }
        self.slots.truncate(keep);
        // The connections that held those slots are gone; the ring buffers the thread pooled
        // for their successors go back to the allocator with them.
        tcp::ring::pool_clear();
        // The dropped indexes need not wait in `free_slots` for `alloc` to skip them.
        self.free_slots.retain(|&i| i < keep);
        if self.free_slots.capacity() >= 4 * self.free_slots.len().max(COMPACT_MIN_SLOTS) {
            self.free_slots
                .shrink_to(2 * self.free_slots.len().max(COMPACT_MIN_SLOTS));
        }
        if self.slots.capacity() >= 4 * keep.max(COMPACT_MIN_SLOTS) {
            self.slots.shrink_to(2 * keep.max(COMPACT_MIN_SLOTS));
        }
        // A dropped slot's index left in the queue would, once the index is pushed again,
        // let it be queued twice: drop them (the queue holds at most one entry per slot).
        self.events.retain(|&i| (i as usize) < keep);
        if self.events.capacity() >= 4 * self.events.len().max(COMPACT_MIN_SLOTS) {
            self.events
                .shrink_to(2 * self.events.len().max(COMPACT_MIN_SLOTS));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp_sockets::{ConnSock, FlowKey, FourTuple, TcpTable};

    /// Byte offset of `field` from the start of `slot`.
    fn offset<T>(slot: &Slot, field: &T) -> usize {
        (field as *const T as usize) - (slot as *const Slot as usize)
    }

    #[test]
    fn connection_slot_hot_fields_fill_the_first_line() {
        let ifc = crate::config::InterfaceConfig::new(
            wire::EthernetAddress([2, 0, 0, 0, 0, 1]),
            crate::config::Ipv4Cidr::new([10, 0, 0, 1].into(), 24),
        );
        let cfg = std::sync::Arc::new(crate::config::StackConfig::new(ifc));
        let table = TcpTable::new(cfg);
        let tuple = FourTuple {
            local: "10.0.0.1:80".parse().unwrap(),
            remote: "10.0.0.2:40000".parse().unwrap(),
        };
        let conn =
            tcp::Connection::connect(0, &tcp::Config::default(), 80, 40000, wire::SeqNumber(1), 0);
        let key = table.flow_key(tuple, None);
        let sock = ConnSock::new(
            key,
            platform::huge_box::HugeBox::new(conn),
            0,
            Some(3),
            false,
            None,
        );
        let mut sockets = Sockets::new(4);
        let h = sockets.alloc(Socket::Tcp(TcpState::Conn(sock))).unwrap();
        let slot = &sockets.slots[h.index as usize];
        assert_eq!(core::mem::size_of::<Slot>(), 128, "two lines a slot");
        assert_eq!(
            slot as *const Slot as usize % 64,
            0,
            "slots start on a line"
        );
        let Some(Socket::Tcp(TcpState::Conn(c))) = &slot.socket else {
            panic!("a connection");
        };
        assert_eq!(c.key(), key, "the key's two parts join back");
        assert!(c.has_tuple(&key));
        assert_eq!(c.ips(), (tuple.local.ip(), tuple.remote.ip()));
        // The first line: the slot's own fields and everything an established connection's
        // segment or application call reads or writes (`ConnSock`'s doc).
        let line = |o: usize| o / 64;
        let hot = c.hot_field_spans();
        for (name, o, len) in [
            ("generation", offset(slot, &slot.generation), 4),
            ("pending", offset(slot, &slot.pending), 1),
            ("queued", offset(slot, &slot.queued), 1),
        ]
        .into_iter()
        .chain(
            hot.iter()
                .map(|&(name, addr, len)| (name, addr - (slot as *const Slot as usize), len)),
        ) {
            assert_eq!(line(o), 0, "{name} at {o}");
            assert_eq!(line(o + len - 1), 0, "{name} at {o}");
        }
        assert_eq!(hot.len(), 8, "every hot field checked");
        // The socket enums need no tag of their own: they use the largest niche of their
        // largest variant, `parent`'s tag (a `u32` holding 0 or 1), which is in the first
        // line (above), so telling a connection from a marker or a listener reads that line.
        assert_eq!(
            core::mem::size_of::<Option<Socket>>(),
            core::mem::size_of::<ConnSock>()
        );
    }

    #[test]
    fn connection_tuples_match_by_head_and_ipv6_tails() {
        let ifc = crate::config::InterfaceConfig::new(
            wire::EthernetAddress([2, 0, 0, 0, 0, 1]),
            crate::config::Ipv4Cidr::new([10, 0, 0, 1].into(), 24),
        );
        let table = TcpTable::new(std::sync::Arc::new(crate::config::StackConfig::new(ifc)));
        let tuples = [
            ("10.0.0.1:80", "10.0.0.2:40000"),
            ("10.0.0.1:80", "10.0.0.2:40001"),
            ("10.0.0.1:80", "10.0.0.3:40000"),
            ("[2001:db8::1]:80", "[2001:db8::2]:40000"),
            // Same first four bytes and ports as the one above: only the tails differ.
            ("[2001:db8::1]:80", "[2001:db8::3]:40000"),
            ("[2001:db8::9:1]:80", "[2001:db8::2]:40000"),
            // The IPv6 address whose first bytes are the IPv4 one's.
            ("[a00:1::]:80", "[a00:2::]:40000"),
            ("10.0.0.1:80", "[2001:db8::2]:40000"),
        ];
        let keys: Vec<FlowKey> = tuples
            .iter()
            .map(|(l, r)| {
                table.flow_key(
                    FourTuple {
                        local: l.parse().unwrap(),
                        remote: r.parse().unwrap(),
                    },
                    None,
                )
            })
            .collect();
        for (i, a) in keys.iter().enumerate() {
            let conn = tcp::Connection::connect(
                0,
                &tcp::Config::default(),
                80,
                40000,
                wire::SeqNumber(1),
                0,
            );
            let sock = ConnSock::new(
                *a,
                platform::huge_box::HugeBox::new(conn),
                0,
                None,
                false,
                None,
            );
            assert_eq!(sock.key(), *a);
            let t = a.tuple();
            assert_eq!(sock.ips(), (t.local.ip(), t.remote.ip()), "{:?}", tuples[i]);
            for (j, b) in keys.iter().enumerate() {
                assert_eq!(
                    sock.has_tuple(b),
                    i == j,
                    "{:?} vs {:?}",
                    tuples[i],
                    tuples[j]
                );
            }
        }
    }
}
