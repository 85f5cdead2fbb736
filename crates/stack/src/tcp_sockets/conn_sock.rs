//! What a socket slot holds for a connection: [`ConnSock`], laid out by what a segment
//! touches (its doc), and the rare state boxed beside it, [`ConnRare`].

use core::net::IpAddr;

use platform::huge_box::HugeBox;
use tcp::Connection;

use super::flow_key::{KeyRest, TupleHead};
use super::{FlowKey, NOT_ARMED};
use crate::socket::SocketError;

/// A connection socket.
///
/// Laid out by what the per-segment path reads (`repr(C)`, hot first; issue 17 item 2): in
/// the socket slot's first cache line (`sockets::Slot`, 64-byte aligned; its own fields take
/// the first 8 bytes, these the other 56) everything an established connection's segment or
/// application call reads or writes — the TCB pointer, the listener (whose tag is the niche
/// the socket enums use for theirs, so telling a connection from a marker reads this line),
/// the armed deadline, the idle clock, the memory share, the head of the 4-tuple the
/// connection table compares (all of an IPv4 tuple), `in_table` and the presence bits of the
/// two optional boxes. The second line holds the rest of the key (the hashes, the tails of
/// IPv6 addresses), the boxes themselves and the flags only application calls and rare
/// events read. What only rare events touch (PLPMTUD, an active Fast Open, zero-window
/// stalls, memory pressure, Fast Open's SYN option) is in one box, [`ConnRare`].
/// `connection_slot_hot_fields_fill_the_first_line` checks the layout.
///
/// Invariants: `boxes & HAS_EXT` is set iff `ext` is `Some`, `boxes & HAS_RARE` iff `rare`
/// is (the fields are private; every change goes through the methods that keep the bits).
#[derive(Debug)]
#[repr(C)]
pub(crate) struct ConnSock {
    /// Boxed: the TCB is large and listeners share the enum. In a huge-page chunk of this
    /// thread's TCBs (`platform::huge_box`): with many connections a TCB's lines miss the
    /// TLB as well as the caches, and 2,729 TCBs share one 2 MiB page's TLB entry.
    pub(crate) conn: HugeBox<Connection>,
    /// The listener's slot while this child waits in its backlog (slots are `u32`: socket
    /// handles name them so). Its tag is the largest niche of the socket enums: it must lie
    /// in the first line, with the other variants (a moved marker, a UDP socket) fitting
    /// after it.
    pub(crate) parent: Option<u32>,
    /// The deadline this connection holds in `TcpTable::timers`, or [`NOT_ARMED`] (a `u64`,
    /// not an `Option`: eight bytes less keeps the hot fields in one line).
    pub(crate) armed_ns: u64,
    /// When the last segment for this connection arrived (its creation before any): how
    /// long it has been idle, for reclaiming under pressure. One store per segment.
    pub(crate) last_rx_ns: u64,
    /// Ring storage this connection held when last accounted (`tcp_mem`): its share of
    /// `TcpTable::mem_bytes`.
    pub(crate) mem_bytes: usize,
    /// The 4-tuple's head (`FlowKey::split`): what a lookup compares first.
    head: TupleHead,
    /// True while the connection is in the table.
    pub(crate) in_table: bool,
    /// Which of `ext` and `rare` are present ([`HAS_EXT`], [`HAS_RARE`]): the per-segment
    /// tests read this byte, not the pointers in the second line.
    boxes: u8,
    // The second line.
    /// The rest of the key: the hashes and the tails of IPv6 addresses.
    rest: KeyRest,
    /// Zero-copy, timestamping, notsent mark, mark and the error queue (`tcp_notify`), boxed
    /// on first use.
    ext: Option<Box<crate::tcp_notify::SockExt>>,
    /// What only rare events give a connection (PLPMTUD, an active Fast Open, a zero-window
    /// stall, memory pressure, a Fast Open SYN option), boxed on first use and dropped when
    /// empty again ([`ConnSock::rare_tidy`]).
    rare: Option<Box<ConnRare>>,
    /// True once the application called `close` (the slot goes when the engine is done).
    pub(crate) app_closed: bool,
    /// The connection's failure (reset or time-out) was reported to the application once:
    /// like POSIX `so_error`, it is pending until a call returns it (`recv`, `send`,
    /// `take_error`), after which reads see the end of the stream and writes `Closed`.
    pub(crate) failure_reported: bool,
    /// Opened from one of our listeners: counted in `TcpTable::per_source` while the slot
    /// is held, and the only kind the overload policy reclaims (`overload`).
    pub(crate) passive: bool,
    /// Its SYN's data was accepted (Fast Open): `TCPI_OPT_SYN_DATA`.
    pub(crate) syn_data_acked: bool,
    /// A hard ICMP error that ended the open, until taken.
    pub(crate) error: Option<SocketError>,
}

/// [`ConnSock::boxes`]: `ext` is present.
const HAS_EXT: u8 = 1;
/// [`ConnSock::boxes`]: `rare` is present.
const HAS_RARE: u8 = 2;

/// A connection socket's rare state ([`ConnSock::rare`]).
#[derive(Debug, Default)]
pub(crate) struct ConnRare {
    /// Packetization-layer path MTU discovery's search ([`tcp::plpmtud`], beside the TCB,
    /// which has no room): created at the first black hole when `tcp::Config::plpmtud` is
    /// on; not carried when the connection moves.
    pub(crate) plpmtud: Option<Box<tcp::plpmtud::Plpmtud>>,
    /// An active Fast Open's state (`tcp_fastopen_client.rs`).
    pub(crate) fastopen_client: Option<Box<crate::tcp_fastopen_client::ClientOpen>>,
    /// While stalled at a zero send window with data queued, as last seen when its timers
    /// fired: since when, and SND.UNA then (any progress restarts the clock).
    pub(crate) zero_window: Option<(u64, wire::SeqNumber)>,
    /// The send buffer size it had before memory pressure shrank it (given back when the
    /// stack returns to the normal state).
    pub(crate) send_buffer_before_pressure: Option<u32>,
    /// The Fast Open option its first SYN or SYN-ACK carries: the server's cookie for the
    /// client, or the client's cookie or cookie request (taken when that segment leaves, so a
    /// retransmission carries none).
    pub(crate) fastopen_syn_option: Option<wire::tcp::FastOpenOption>,
}

impl ConnRare {
    fn is_empty(&self) -> bool {
        self.plpmtud.is_none()
            && self.fastopen_client.is_none()
            && self.zero_window.is_none()
            && self.send_buffer_before_pressure.is_none()
            && self.fastopen_syn_option.is_none()
    }
}

impl ConnSock {
    /// A connection in its table: `conn` under `key`, opened at `now`, a child of the
    /// listener in slot `parent` while it waits for `accept`, `passive` when opened from one
    /// of our listeners, with the socket options `ext` (inherited or moved with it).
    pub(crate) fn new(
        key: FlowKey,
        conn: HugeBox<Connection>,
        now: u64,
        parent: Option<u32>,
        passive: bool,
        ext: Option<Box<crate::tcp_notify::SockExt>>,
    ) -> ConnSock {
        let (head, rest) = key.split();
        ConnSock {
            conn,
            parent,
            armed_ns: NOT_ARMED,
            last_rx_ns: now,
            mem_bytes: 0,
            head,
            in_table: true,
            boxes: if ext.is_some() { HAS_EXT } else { 0 },
            rest,
            ext,
            rare: None,
            app_closed: false,
            failure_reported: false,
            passive,
            syn_data_acked: false,
            error: None,
        }
    }

    /// The connection-table hash of its key (read from the slot's second line).
    #[inline(always)]
    pub(crate) fn table_hash(&self) -> u32 {
        self.rest.table_hash()
    }

    /// The connection's table key.
    #[inline(always)]
    pub(crate) fn key(&self) -> FlowKey {
        FlowKey::join(self.head, self.rest)
    }

    /// True when `key` is this connection's 4-tuple; reads only the first line for IPv4.
    #[inline(always)]
    pub(crate) fn has_tuple(&self, key: &FlowKey) -> bool {
        key.same_tuple_parts(&self.head, &self.rest)
    }

    /// The local and remote addresses (the transmit path's; the first line only for IPv4).
    #[inline(always)]
    pub(crate) fn ips(&self) -> (IpAddr, IpAddr) {
        if self.head.is_v4() {
            let (l, r) = self.head.ips4();
            (IpAddr::V4(l), IpAddr::V4(r))
        } else {
            self.ips_any()
        }
    }

    /// [`ConnSock::ips`] for a tuple with an IPv6 address.
    #[inline(never)]
    fn ips_any(&self) -> (IpAddr, IpAddr) {
        let k = self.key();
        (k.local_ip(), k.remote_ip())
    }

    /// Each field the first line must hold (`ConnSock`'s doc): name, address, bytes; the
    /// layout test checks them.
    #[cfg(test)]
    pub(crate) fn hot_field_spans(&self) -> [(&'static str, usize, usize); 8] {
        fn at<T>(f: &T) -> usize {
            f as *const T as usize
        }
        [
            ("conn", at(&self.conn), 8),
            (
                "parent",
                at(&self.parent),
                core::mem::size_of_val(&self.parent),
            ),
            ("armed_ns", at(&self.armed_ns), 8),
            ("last_rx_ns", at(&self.last_rx_ns), 8),
            (
                "mem_bytes",
                at(&self.mem_bytes),
                core::mem::size_of::<usize>(),
            ),
            ("head", at(&self.head), core::mem::size_of::<TupleHead>()),
            ("in_table", at(&self.in_table), 1),
            ("boxes", at(&self.boxes), 1),
        ]
    }

    /// The socket-option state, if any.
    #[inline(always)]
    pub(crate) fn ext(&self) -> Option<&crate::tcp_notify::SockExt> {
        if self.boxes & HAS_EXT == 0 {
            return None;
        }
        self.ext.as_deref()
    }

    /// The socket-option state to change, if any.
    #[inline(always)]
    pub(crate) fn ext_if_any_mut(&mut self) -> Option<&mut crate::tcp_notify::SockExt> {
        if self.boxes & HAS_EXT == 0 {
            return None;
        }
        self.ext.as_deref_mut()
    }

    /// True when the socket-option state exists (reads the presence byte only).
    #[inline(always)]
    pub(crate) fn has_ext(&self) -> bool {
        self.boxes & HAS_EXT != 0
    }

    /// The socket-option state, made by `make` on first use.
    pub(crate) fn ext_or_insert_with(
        &mut self,
        make: impl FnOnce() -> Box<crate::tcp_notify::SockExt>,
    ) -> &mut crate::tcp_notify::SockExt {
        self.boxes |= HAS_EXT;
        self.ext.get_or_insert_with(make)
    }

    /// The rare state, if any.
    #[inline(always)]
    pub(crate) fn rare(&self) -> Option<&ConnRare> {
        if self.boxes & HAS_RARE == 0 {
            return None;
        }
        self.rare.as_deref()
    }

    /// The rare state to change, if any.
    #[inline(always)]
    pub(crate) fn rare_if_any_mut(&mut self) -> Option<&mut ConnRare> {
        if self.boxes & HAS_RARE == 0 {
            return None;
        }
        self.rare.as_deref_mut()
    }

    /// The rare state, boxed on first use; [`ConnSock::rare_tidy`] gives an empty one back.
    pub(crate) fn rare_mut(&mut self) -> &mut ConnRare {
        self.boxes |= HAS_RARE;
        self.rare.get_or_insert_with(Box::default)
    }

    /// The rare state (boxed on first use, as [`ConnSock::rare_mut`]) beside the TCB.
    pub(crate) fn rare_and_conn_mut(&mut self) -> (&mut ConnRare, &mut Connection) {
        self.boxes |= HAS_RARE;
        (self.rare.get_or_insert_with(Box::default), &mut self.conn)
    }

    /// The rare state, if any, beside the TCB.
    #[inline(always)]
    pub(crate) fn rare_if_any_and_conn_mut(&mut self) -> Option<(&mut ConnRare, &mut Connection)> {
        if self.boxes & HAS_RARE == 0 {
            return None;
        }
        Some((self.rare.as_deref_mut()?, &mut self.conn))
    }

    /// Drops the rare state's box when nothing is left in it.
    pub(crate) fn rare_tidy(&mut self) {
        if self.rare.as_ref().is_some_and(|r| r.is_empty()) {
            self.rare = None;
            self.boxes &= !HAS_RARE;
        }
    }

    /// An active Fast Open whose SYN waits for the application's first send.
    pub(crate) fn fastopen_deferred(&self) -> bool {
        self.rare()
            .and_then(|r| r.fastopen_client.as_ref())
            .is_some_and(|f| f.deferred.is_some())
    }
}
