//! TCP in the host stack: segment demultiplexing, RST for closed ports, listeners with a
//! bounded accept backlog, the connection table and the socket API over `tcp::Connection`.
//!
//! Responsibilities, top to bottom:
//! - the connection table, keyed by 4-tuple and hashed with the RSS hash the NIC carried
//!   (DESIGN principle 4, "hash once");
//! - input: `Stack::process_tcp` → connection, else listener (SYN → new child), else RST;
//! - output: connections with possible output sit in a dirty set (ordered, so output order is
//!   deterministic); `poll_transmit` drains them into the transmit queue while it has room;
//! - timers: the earliest connection deadline; `handle_timeout` runs the due ones;
//! - events: `tcp::Event` → [`Readiness`] on the socket (or on the listener for children not
//!   yet accepted);
//! - the application calls: listen, accept, connect, send, recv, shutdown, close, options.
//!
//! Connection lifecycle: a connection leaves the table once the engine reports CLOSED and has
//! nothing left to send. Its handle stays valid (reads report why it ended) until the
//! application calls `close`; a connection the application already closed, or a child never
//! accepted, frees its slot at that moment.

use core::hash::{BuildHasherDefault, Hash, Hasher};
use core::net::{IpAddr, SocketAddr};
use std::collections::{BTreeSet, HashMap, VecDeque};

use tcp::isn::{Endpoint, IsnGenerator, SynCookies};
use tcp::listen::{
    ListenInput, ListenLimits, ListenLoad, SynAction, admit_cookie, admit_syn,
    classify_listen_segment, reset_reply,
};
use tcp::{Connection, Event, State};
use wire::{SeqNumber, TcpFlags, TcpPacket, TcpRepr};

use crate::egress::{
    ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN, TCP_HEADER_MIN, header_only,
};
use crate::socket::{Readiness, SocketError, SocketHandle, SocketOption};
use crate::stack::{
    EPHEMERAL_FIRST, EPHEMERAL_LAST, IpMeta, PortKind, RxFrame, Socket, Stack, overlaps,
};

/// A connection's addresses, as seen from this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FourTuple {
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// The connection-table key: the 4-tuple plus its flow hash.
///
/// Invariant: `hash` is a function of `tuple` alone (the RSS Toeplitz hash of the *incoming*
/// direction under the configured key, or the software hash when no RSS key is configured),
/// so equal tuples always carry equal hashes and `Hash` may look at `hash` only.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlowKey {
    hash: u32,
    tuple: FourTuple,
}

impl Hash for FlowKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u32(self.hash);
    }
}

/// Passes a precomputed 32-bit flow hash through, spread over 64 bits (Fibonacci hashing),
/// so the table never hashes the tuple a second time.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct FlowHasher(u64);

impl Hasher for FlowHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only `write_u32` is used by `FlowKey`; fold anything else in, to stay correct.
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = u64::from(v).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ u64::from(v);
    }
}

/// Software flow hash (FNV-1a over the incoming direction's tuple, seeded with a per-stack
/// secret so remote peers cannot aim tuples at one bucket), used when the stack has no RSS key
/// and so cannot reproduce the NIC's hash.
fn software_hash(seed: u32, t: &FourTuple) -> u32 {
    let mut h: u32 = 0x811c_9dc5 ^ seed;
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    };
    for a in [t.remote, t.local] {
        match a.ip() {
            IpAddr::V4(ip) => eat(&ip.octets()),
            IpAddr::V6(ip) => eat(&ip.octets()),
        }
    }
    eat(&t.remote.port().to_be_bytes());
    eat(&t.local.port().to_be_bytes());
    h
}

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    local: SocketAddr,
    /// Children (slot indexes) not yet accepted, embryonic or established, oldest first.
    /// Invariant: `pending.len()` ≤ `backlog_max`.
    pending: VecDeque<usize>,
    backlog_max: usize,
    config: tcp::Config,
}

/// A connection socket.
#[derive(Debug)]
pub(crate) struct ConnSock {
    key: FlowKey,
    /// Boxed: the TCB is large and listeners share the enum.
    conn: Box<Connection>,
    /// The listener's slot while this child waits in its backlog.
    parent: Option<usize>,
    /// True while the connection is in the table.
    in_table: bool,
    /// True once the application called `close` (the slot goes when the engine is done).
    app_closed: bool,
    /// The deadline this connection holds in `TcpTable::timers`.
    armed_ns: Option<u64>,
    /// A hard ICMP error that ended the open, until taken.
    error: Option<SocketError>,
}

/// What a connection exported by [`Stack::tcp_export`] leaves in its slot and in the table
/// (DESIGN handoff invariant 4): segments for its 4-tuple are never answered with RST; they are
/// dropped before any processing (`tcp_drop_moved`), or queued for the new owner when the
/// driver set a forward destination ([`Stack::tcp_set_moved_forward`]).
///
/// Invariants: the marker's slot is reserved (no handle names it, it is not on the free
/// list) until the marker goes; `conns` maps its key to the slot; `TcpTable::timers` holds
/// `(expires_ns, slot)`. It goes on import of the same tuple (which reuses the slot, so the
/// handle is the one the connection had), on [`Stack::tcp_release_moved`], or at
/// `expires_ns`.
#[derive(Debug)]
pub(crate) struct MovedMarker {
    key: FlowKey,
    expires_ns: u64,
    /// Where frames caught mid-move go, when the driver said.
    forward: Option<u16>,
}

/// Per-socket TCP state.
#[derive(Debug)]
pub(crate) enum TcpState {
    Listener(Listener),
    Conn(ConnSock),
    /// A connection that moved to another owner (see [`MovedMarker`]).
    Moved(MovedMarker),
}

impl ConnSock {
    /// The engine's counters of this connection.
    pub(crate) fn engine_counters(&self) -> &tcp::Counters {
        self.conn.counters()
    }
}

impl TcpState {
    /// The port a listener owns (connections own a 4-tuple, not a port).
    pub(crate) fn listen_port(&self) -> Option<u16> {
        match self {
            TcpState::Listener(l) => Some(l.local.port()),
            TcpState::Conn(_) | TcpState::Moved(_) => None,
        }
    }

    pub(crate) fn take_error(&mut self) -> Option<SocketError> {
        match self {
            TcpState::Listener(_) | TcpState::Moved(_) => None,
            TcpState::Conn(c) => c.error.take(),
        }
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        match self {
            TcpState::Listener(l) => l.local,
            TcpState::Conn(c) => c.key.tuple.local,
            TcpState::Moved(m) => m.key.tuple.local,
        }
    }
}

/// Listeners and the connection table.
pub(crate) struct TcpTable {
    conns: HashMap<FlowKey, usize, BuildHasherDefault<FlowHasher>>,
    /// Connections that may have output, by slot index (ordered: deterministic output).
    dirty: BTreeSet<usize>,
    /// Where the next flush starts (round-robin over `dirty`).
    flush_cursor: usize,
    /// (deadline, slot) of every connection with a timer: `poll_timeout` is the first entry.
    /// Invariant: holds `(t, i)` iff connection `i` has `armed_ns == Some(t)`.
    timers: BTreeSet<(u64, usize)>,
    isn: IsnGenerator,
    cookies: SynCookies,
    /// Seed of the software flow hash.
    hash_seed: u32,
    /// Moved markers among `conns` (so `conns.len() - moved` connections are live).
    moved: usize,
    /// Frames caught mid-move, oldest first: (destination, frame, carried RSS hash).
    /// Invariant: `forward.len()` ≤ `limits.tcp_moved_forward_frames_max`.
    forward: VecDeque<(u16, Vec<u8>, Option<u32>)>,
}

impl core::fmt::Debug for TcpTable {
    // Not derived: the tables would drown the output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TcpTable")
            .field("connections", &self.conns.len())
            .field("dirty", &self.dirty)
            .field("timers", &self.timers.len())
            .finish_non_exhaustive()
    }
}

impl TcpTable {
    pub(crate) fn new(secret: [u64; 2]) -> TcpTable {
        TcpTable {
            conns: HashMap::default(),
            dirty: BTreeSet::new(),
            flush_cursor: 0,
            timers: BTreeSet::new(),
            isn: IsnGenerator::new(secret),
            // A different key from the ISN generator's (RFC 4987 §3.6 cookies must not let a
            // peer learn our ISN secret, nor the reverse).
            cookies: SynCookies::new([
                secret[1].rotate_left(17) ^ 0xc00c_1e5e_ed5a_17ed,
                secret[0].rotate_left(29),
            ]),
            hash_seed: (secret[0] ^ secret[1].rotate_left(32)) as u32,
            moved: 0,
            forward: VecDeque::new(),
        }
    }

    /// Connections in the table (moved markers not included).
    pub(crate) fn len(&self) -> usize {
        self.conns.len() - self.moved
    }
}

/// The RST that answers `seg` when no connection or listener wants it (RFC 9293 §3.10.7.1);
/// `None` when `seg` is itself a RST. Kept for callers of this path: the rule lives in
/// [`tcp::listen::reset_reply`].
pub fn rst_for<'a>(seg: &TcpRepr<'_>) -> Option<TcpRepr<'a>> {
    reset_reply(seg)
}

fn map_tcp_error(e: tcp::Error) -> SocketError {
    match e {
        tcp::Error::InvalidState => SocketError::InvalidState,
        tcp::Error::Finished => SocketError::Finished,
        tcp::Error::Reset => SocketError::Reset,
        tcp::Error::TimedOut => SocketError::TimedOut,
        tcp::Error::Closed => SocketError::Closed,
    }
}

fn readiness_of(e: Event) -> Readiness {
    match e {
        Event::Connected => Readiness::CONNECTED | Readiness::WRITABLE,
        Event::Readable => Readiness::READABLE,
        Event::Writable => Readiness::WRITABLE,
        Event::PeerClosed => Readiness::PEER_CLOSED | Readiness::READABLE,
        Event::Reset | Event::TimedOut => Readiness::ERROR,
        Event::Closed => Readiness::CLOSED,
    }
}

fn endpoint_bytes(a: IpAddr) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    match a {
        IpAddr::V4(ip) => {
            b[..4].copy_from_slice(&ip.octets());
            (b, 4)
        }
        IpAddr::V6(ip) => (ip.octets(), 16),
    }
}

impl Stack {
    // ------------------------------------------------------------------ table helpers

    /// The flow hash of `tuple` for the table: the carried RSS hash when the stack knows the
    /// NIC's key (so the two agree), else the stack's own hash.
    fn flow_key(&self, tuple: FourTuple, carried: Option<u32>) -> FlowKey {
        let hash = match (&self.cfg.rss, carried) {
            (Some(_), Some(h)) => h,
            (Some(rss), None) => {
                let ports = Some(rss::PortPair {
                    src: tuple.remote.port(),
                    dst: tuple.local.port(),
                });
                let input = match (tuple.remote.ip(), tuple.local.ip()) {
                    (IpAddr::V4(src), IpAddr::V4(dst)) => rss::HashInput::V4 { src, dst, ports },
                    (IpAddr::V6(src), IpAddr::V6(dst)) => rss::HashInput::V6 { src, dst, ports },
                    _ => {
                        return FlowKey {
                            hash: software_hash(self.tcp.hash_seed, &tuple),
                            tuple,
                        };
                    }
                };
                rss.hasher.hash(&input)
            }
            (None, _) => software_hash(self.tcp.hash_seed, &tuple),
        };
        FlowKey { hash, tuple }
    }

    fn conn_mut(&mut self, i: usize) -> Option<&mut ConnSock> {
        match self.slots.get_mut(i).and_then(|s| s.socket.as_mut()) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(c),
            Some(Socket::Tcp(TcpState::Listener(_))) => None,
            _ => None,
        }
    }

    fn listener_mut(&mut self, i: usize) -> Option<&mut Listener> {
        match self.slots.get_mut(i).and_then(|s| s.socket.as_mut()) {
            Some(Socket::Tcp(TcpState::Listener(l))) => Some(l),
            Some(Socket::Tcp(TcpState::Conn(_))) => None,
            _ => None,
        }
    }

    /// The listener for (`dst`, `port`): an exact address match first, else a wildcard one.
    fn find_listener(&self, dst: IpAddr, port: u16) -> Option<usize> {
        let mut wildcard = None;
        for &i in self.bound_to(PortKind::TcpListener, port) {
            let Some(Socket::Tcp(TcpState::Listener(l))) =
                self.slots.get(i).and_then(|s| s.socket.as_ref())
            else {
                continue;
            };
            if l.local.is_ipv4() != dst.is_ipv4() {
                continue;
            }
            if l.local.ip() == dst {
                return Some(i);
            }
            if l.local.ip().is_unspecified() && wildcard.is_none() {
                wildcard = Some(i);
            }
        }
        wildcard
    }

    fn tcp_port_listened(&self, ip: IpAddr, port: u16) -> bool {
        self.bound_to(PortKind::TcpListener, port).iter().any(|&i| {
            match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
                Some(Socket::Tcp(TcpState::Listener(l))) => overlaps(l.local.ip(), ip),
                _ => false,
            }
        })
    }

    /// The TCP configuration for a connection over `family`, its MSS clamped to the MTU
    /// (IPv4: MTU − 40; IPv6: MTU − 60, RFC 9293 §3.7.1, RFC 8200 §5).
    fn tcp_config_for(&self, base: &tcp::Config, v4: bool) -> tcp::Config {
        let overhead = if v4 { 40 } else { 60 };
        let mut c = *base;
        c.mss_bytes = c
            .mss_bytes
            .min(self.cfg.interface.mtu_bytes.saturating_sub(overhead));
        c
    }

    fn isn_for(&self, now: u64, tuple: &FourTuple) -> (SeqNumber, u32) {
        let (l, ll) = endpoint_bytes(tuple.local.ip());
        let (r, rl) = endpoint_bytes(tuple.remote.ip());
        let local = Endpoint {
            addr: l.get(..ll).unwrap_or(&[]),
            port: tuple.local.port(),
        };
        let remote = Endpoint {
            addr: r.get(..rl).unwrap_or(&[]),
            port: tuple.remote.port(),
        };
        let iss = self.tcp.isn.isn(now, local, remote);
        // RFC 7323 §7.1: a per-connection timestamp offset; reuse the keyed hash (with the
        // endpoints swapped so it is not the ISN) at time 0.
        let ts_offset = self.tcp.isn.isn(0, remote, local).0;
        (iss, ts_offset)
    }

    // ------------------------------------------------------------------ input

    pub(crate) fn process_tcp(
        &mut self,
        now: u64,
        meta: IpMeta,
        payload: &[u8],
        whole: &[u8],
        rx: RxFrame<'_>,
    ) {
        let hash = rx.hash;
        let Some(pair) = meta.pair() else {
            return;
        };
        let Ok(view) = TcpPacket::new_checked(payload) else {
            self.counters.rx_drop_tcp_malformed += 1;
            return;
        };
        let Ok(seg) = TcpRepr::parse(&view, &pair, self.cfg.checksums) else {
            self.counters.rx_drop_tcp_malformed += 1;
            return;
        };
        let tuple = FourTuple {
            local: SocketAddr::new(meta.dst, seg.dst_port),
            remote: SocketAddr::new(meta.src, seg.src_port),
        };
        let key = self.flow_key(tuple, hash);
        if let Some(&i) = self.tcp.conns.get(&key) {
            if let Some(c) = self.conn_mut(i) {
                c.conn.handle_segment(now, &seg);
            } else if let Some(m) = self.moved_mut(i) {
                let forward = m.forward;
                self.tcp_moved_input(forward, whole, rx);
                return;
            }
            self.tcp_after_input(i);
            return;
        }
        let listener = if meta.dst_unicast {
            self.find_listener(meta.dst, seg.dst_port)
        } else {
            None
        };
        let Some(li) = listener else {
            self.reply_rst(now, meta, &seg);
            return;
        };
        // RFC 9293 §3.10.7.2 (LISTEN): RST is ignored, ACK draws a RST (unless it completes
        // a SYN-cookie handshake, RFC 4987 §3.6), SYN opens.
        match classify_listen_segment(&seg) {
            ListenInput::Syn => self.tcp_open_child(now, li, key, &seg),
            ListenInput::Ack => {
                if !seg.flags.contains(TcpFlags::SYN)
                    && self.tcp_open_from_cookie(now, li, key, &seg)
                {
                    return;
                }
                self.counters.tcp_listen_bad_segment += 1;
                self.reply_rst(now, meta, &seg);
            }
            ListenInput::Ignore => self.counters.tcp_listen_bad_segment += 1,
        }
    }

    /// A frame for a moved-away connection: never processed here (no RST, no state), but
    /// dropped and counted, or queued for the new owner in arrival order when the driver set a
    /// destination. The forwarded frame is the received Ethernet header followed by `whole`
    /// (the IP datagram, reassembled if it came in fragments).
    fn tcp_moved_input(&mut self, forward: Option<u16>, whole: &[u8], rx: RxFrame<'_>) {
        let Some(dest) = forward else {
            self.counters.tcp_drop_moved += 1;
            return;
        };
        if self.tcp.forward.len() >= self.cfg.limits.tcp_moved_forward_frames_max {
            self.counters.tcp_moved_forward_full += 1;
            return;
        }
        let eth = rx.frame.get(..ETHERNET_HEADER_LEN).unwrap_or(&[]);
        let mut frame = Vec::with_capacity(eth.len() + whole.len());
        frame.extend_from_slice(eth);
        frame.extend_from_slice(whole);
        self.tcp.forward.push_back((dest, frame, rx.hash));
        self.counters.tcp_moved_forwarded += 1;
    }

    fn moved_mut(&mut self, i: usize) -> Option<&mut MovedMarker> {
        match self.slots.get_mut(i).and_then(|s| s.socket.as_mut()) {
            Some(Socket::Tcp(TcpState::Moved(m))) => Some(m),
            _ => None,
        }
    }

    /// Removes the moved marker in slot `i` (import, release or expiry) and frees its slot.
    fn tcp_drop_marker(&mut self, i: usize) {
        let Some(m) = self.moved_mut(i) else {
            return;
        };
        let (key, expires_ns) = (m.key, m.expires_ns);
        self.tcp.timers.remove(&(expires_ns, i));
        self.tcp.conns.remove(&key);
        self.tcp.moved -= 1;
        self.free_slot(i);
    }

    /// The slot of the moved marker for `tuple`, if there is one.
    fn moved_slot(&self, tuple: FourTuple) -> Option<usize> {
        let key = self.flow_key(tuple, None);
        let &i = self.tcp.conns.get(&key)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Tcp(TcpState::Moved(_))) => Some(i),
            _ => None,
        }
    }

    /// Sends frames that arrive for `tuple`, a connection this stack exported
    /// ([`Stack::tcp_export`]), to `dest` (a driver-defined destination: a shard, a queue)
    /// through [`Stack::poll_forward`] instead of dropping them. `InvalidState` when `tuple`
    /// has no moved marker here (never exported, imported back, released or expired).
    pub fn tcp_set_moved_forward(
        &mut self,
        tuple: FourTuple,
        dest: u16,
    ) -> Result<(), SocketError> {
        let i = self.moved_slot(tuple).ok_or(SocketError::InvalidState)?;
        let m = self.moved_mut(i).ok_or(SocketError::InvalidState)?;
        m.forward = Some(dest);
        Ok(())
    }

    /// Removes the moved marker of `tuple` (the driver knows no frame for it can still
    /// arrive here). From then on its segments are treated as for any unknown connection
    /// (RST). `InvalidState` when there is no marker.
    pub fn tcp_release_moved(&mut self, tuple: FourTuple) -> Result<(), SocketError> {
        let i = self.moved_slot(tuple).ok_or(SocketError::InvalidState)?;
        self.tcp_drop_marker(i);
        Ok(())
    }

    /// The next frame caught mid-move, oldest first: (the destination the driver set with
    /// [`Stack::tcp_set_moved_forward`], the frame, the RSS hash it arrived with). The driver
    /// feeds it to the new owner's `receive` before newer frames of that connection (DESIGN
    /// handoff invariant 4). The outbox is bounded (`limits.tcp_moved_forward_frames_max`;
    /// overflow counted in `tcp_moved_forward_full`).
    pub fn poll_forward(&mut self) -> Option<(u16, Vec<u8>, Option<u32>)> {
        self.tcp.forward.pop_front()
    }

    /// How full a listener is (children still in SYN-RECEIVED, established children
    /// waiting for `accept`), counted from its children, and its bounds.
    fn listener_load(&self, li: usize) -> (ListenLoad, ListenLimits) {
        let Some(Socket::Tcp(TcpState::Listener(l))) =
            self.slots.get(li).and_then(|s| s.socket.as_ref())
        else {
            return (ListenLoad::default(), self.listen_limits(0));
        };
        let established = l
            .pending
            .iter()
            .filter(
                |&&ci| match self.slots.get(ci).and_then(|s| s.socket.as_ref()) {
                    Some(Socket::Tcp(TcpState::Conn(c))) => c.conn.state().is_synchronized(),
                    _ => false,
                },
            )
            .count();
        let load = ListenLoad {
            half_open: l.pending.len() - established,
            ready: established,
        };
        (load, self.listen_limits(l.backlog_max))
    }

    fn listen_limits(&self, backlog_max: usize) -> ListenLimits {
        ListenLimits {
            half_open_max: self.cfg.limits.tcp_syn_backlog_max,
            ready_max: backlog_max,
            cookies: self.cfg.limits.tcp_syn_cookies,
        }
    }

    /// A SYN on a listening port: a new child in SYN-RECEIVED, parked in the backlog; past the
    /// SYN backlog, a stateless SYN-cookie SYN-ACK (RFC 4987 §3.6); past the accept backlog,
    /// a counted drop (the peer retransmits its SYN; by then the application may have
    /// accepted).
    fn tcp_open_child(&mut self, now: u64, li: usize, key: FlowKey, syn: &TcpRepr<'_>) {
        let (load, limits) = self.listener_load(li);
        let Some(l) = self.listener_mut(li) else {
            return;
        };
        let base = l.config;
        let config = self.tcp_config_for(&base, key.tuple.local.is_ipv4());
        let action = admit_syn(load, limits);
        if action == SynAction::Drop {
            self.counters.tcp_listen_backlog_full += 1;
            return;
        }
        if action == SynAction::Cookie {
            let (l_ep, r_ep) = (
                endpoint_bytes(key.tuple.local.ip()),
                endpoint_bytes(key.tuple.remote.ip()),
            );
            let local = Endpoint {
                addr: l_ep.0.get(..l_ep.1).unwrap_or(&[]),
                port: key.tuple.local.port(),
            };
            let remote = Endpoint {
                addr: r_ep.0.get(..r_ep.1).unwrap_or(&[]),
                port: key.tuple.remote.port(),
            };
            let iss =
                self.tcp
                    .cookies
                    .generate(now, local, remote, syn.seq_number, syn.max_seg_size);
            // The same per-tuple timestamp offset `from_syn_cookie` will get, so the
            // timestamp clock is continuous across the stateless handshake.
            let (_, ts_offset) = self.isn_for(now, &key.tuple);
            let syn_ack = SynCookies::syn_ack(&config, syn, iss, now, ts_offset);
            self.egress
                .send_tcp(now, key.tuple.local.ip(), key.tuple.remote.ip(), &syn_ack);
            self.counters.tcp_syn_cookies_sent += 1;
            return;
        }
        let (iss, ts_offset) = self.isn_for(now, &key.tuple);
        let Ok(conn) = Connection::accept(now, &config, syn, iss, ts_offset) else {
            self.counters.tcp_listen_bad_segment += 1;
            return;
        };
        self.tcp_insert_child(li, key, conn);
    }

    /// An ACK on a listening port that may complete a SYN-cookie handshake. True when it did
    /// (the connection now exists, established); false when it is no valid cookie.
    fn tcp_open_from_cookie(
        &mut self,
        now: u64,
        li: usize,
        key: FlowKey,
        ack: &TcpRepr<'_>,
    ) -> bool {
        if !self.cfg.limits.tcp_syn_cookies {
            return false;
        }
        let (l_ep, r_ep) = (
            endpoint_bytes(key.tuple.local.ip()),
            endpoint_bytes(key.tuple.remote.ip()),
        );
        let local = Endpoint {
            addr: l_ep.0.get(..l_ep.1).unwrap_or(&[]),
            port: key.tuple.local.port(),
        };
        let remote = Endpoint {
            addr: r_ep.0.get(..r_ep.1).unwrap_or(&[]),
            port: key.tuple.remote.port(),
        };
        let Some(cookie) = self.tcp.cookies.validate(now, local, remote, ack) else {
            return false;
        };
        let (load, limits) = self.listener_load(li);
        let Some(l) = self.listener_mut(li) else {
            return false;
        };
        if !admit_cookie(load, limits) {
            // Valid, but nowhere to put it: drop; the peer's retransmission may fit later.
            self.counters.tcp_listen_backlog_full += 1;
            return true;
        }
        let base = l.config;
        let config = self.tcp_config_for(&base, key.tuple.local.is_ipv4());
        let (_, ts_offset) = self.isn_for(now, &key.tuple);
        let conn = Connection::from_syn_cookie(now, &config, ack, &cookie, ts_offset);
        self.counters.tcp_syn_cookies_accepted += 1;
        self.tcp_insert_child(li, key, conn);
        true
    }

    /// Puts a passive-open child in a slot, the table and its listener's backlog.
    fn tcp_insert_child(&mut self, li: usize, key: FlowKey, conn: Connection) {
        let sock = ConnSock {
            key,
            conn: Box::new(conn),
            parent: Some(li),
            in_table: true,
            app_closed: false,
            armed_ns: None,
            error: None,
        };
        let Ok(h) = self.alloc_slot(Socket::Tcp(TcpState::Conn(sock))) else {
            self.counters.tcp_conn_table_full += 1;
            return;
        };
        let ci = h.index as usize;
        self.tcp.conns.insert(key, ci);
        if let Some(l) = self.listener_mut(li) {
            l.pending.push_back(ci);
        }
        self.tcp_after_input(ci);
    }

    /// Keeps the timer index in step with the engine's deadline for connection `i`.
    fn tcp_rearm(&mut self, i: usize) {
        let Some(c) = self.conn_mut(i) else {
            return;
        };
        let want = if c.in_table {
            c.conn.poll_timeout()
        } else {
            None
        };
        let old = core::mem::replace(&mut c.armed_ns, want);
        if old == want {
            return;
        }
        if let Some(t) = old {
            self.tcp.timers.remove(&(t, i));
        }
        if let Some(t) = want {
            self.tcp.timers.insert((t, i));
        }
    }

    /// After any input to connection `i`: mark it for output, re-arm its timer and turn its
    /// events into readiness.
    fn tcp_after_input(&mut self, i: usize) {
        self.tcp.dirty.insert(i);
        self.tcp_rearm(i);
        let mut readiness = Readiness::NONE;
        let mut established = false;
        let parent = {
            let Some(c) = self.conn_mut(i) else {
                return;
            };
            while let Some(e) = c.conn.poll_event() {
                if e == Event::Connected {
                    established = true;
                }
                readiness |= readiness_of(e);
            }
            c.parent
        };
        if established {
            self.counters.tcp_connections_established += 1;
        }
        match parent {
            // A child waiting for accept: its listener becomes readable once it is
            // established; its own events are reported after `accept`.
            Some(li) => {
                if let Some(s) = self.slots.get_mut(i) {
                    s.pending |= readiness;
                }
                if established {
                    self.notify(li, Readiness::READABLE);
                }
            }
            None => {
                if !readiness.is_empty() {
                    self.notify(i, readiness);
                }
            }
        }
    }

    /// Answers a segment nobody wants with a RST (never to broadcast/multicast destinations,
    /// RFC 1122 §4.2.3.10).
    pub(crate) fn reply_rst(&mut self, now: u64, meta: IpMeta, seg: &TcpRepr<'_>) {
        let Some(rst) = reset_reply(seg) else {
            self.counters.tcp_rx_no_listener_rst_ignored += 1;
            return;
        };
        if !meta.dst_unicast {
            self.counters.tcp_rx_no_listener_rst_ignored += 1;
            return;
        }
        self.egress.send_tcp(now, meta.dst, meta.src, &rst);
        self.counters.tcp_rx_no_listener_rst_sent += 1;
    }

    /// An ICMP destination-unreachable about a segment we sent on (`local`, `remote`).
    /// RFC 5927 §4.1: act only when the quoted sequence number is in flight
    /// (SND.UNA ≤ seq < SND.NXT). RFC 1122 §4.2.3.9 / RFC 5461: a hard error aborts a
    /// connection still opening (SYN-SENT); otherwise errors are soft and only counted.
    pub(crate) fn tcp_icmp_error(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        quoted_seq: Option<u32>,
        hard: bool,
    ) -> bool {
        let key = self.flow_key(FourTuple { local, remote }, None);
        let Some(&i) = self.tcp.conns.get(&key) else {
            return false;
        };
        let Some(c) = self.conn_mut(i) else {
            return false;
        };
        let (una, nxt, _) = c.conn.sequence_state();
        let in_flight = quoted_seq.is_some_and(|s| SeqNumber(s).ge(una) && SeqNumber(s).lt(nxt));
        if !in_flight {
            return false;
        }
        if hard && c.conn.state() == State::SynSent {
            c.error = Some(SocketError::Unreachable);
            c.conn.abort();
            let parent = c.parent;
            self.tcp_after_input(i);
            if parent.is_none() {
                self.notify(i, Readiness::ERROR);
            }
        }
        self.counters.icmp_errors_to_sockets += 1;
        true
    }

    // ------------------------------------------------------------------ output and timers

    /// Drains dirty connections into the transmit queue while it has room.
    /// Drains dirty connections round-robin from a cursor, so when the transmit queue fills
    /// the next flush starts with the connection after the one that filled it.
    pub(crate) fn tcp_flush(&mut self, now: u64) {
        loop {
            let next = self
                .tcp
                .dirty
                .range(self.tcp.flush_cursor..)
                .next()
                .or_else(|| self.tcp.dirty.first())
                .copied();
            let Some(i) = next else {
                break;
            };
            self.tcp.flush_cursor = i.saturating_add(1);
            if !self.tcp_flush_one(now, i) {
                break;
            }
        }
    }

    /// Drains connection `i`'s output into the transmit queue. False when the queue filled
    /// first (the connection stays dirty).
    fn tcp_flush_one(&mut self, now: u64, i: usize) -> bool {
        let mtu = usize::from(self.cfg.interface.mtu_bytes);
        let mut drained = true;
        loop {
            if self.egress.tx_full() {
                drained = false;
                break;
            }
            let Some(c) = self.conn_mut(i) else {
                break;
            };
            let tuple = c.key.tuple;
            // One buffer per frame: the engine writes the payload after room for the headers
            // (a TCP header as long as the last one), `send_tcp_frame` emits them in front.
            // The payload room is what the MTU leaves after a bare TCP header.
            let ip_len = if tuple.remote.is_ipv4() {
                IPV4_HEADER_LEN
            } else {
                IPV6_HEADER_LEN
            };
            let payload_at = ETHERNET_HEADER_LEN + ip_len + self.egress.tx_header_guess;
            let room = mtu.saturating_sub(ip_len + TCP_HEADER_MIN);
            let mut frame = self.egress.take_frame_buf(payload_at + room);
            let Some(c) = self.conn_mut(i) else {
                self.egress.recycle(frame);
                break;
            };
            let Some(seg) = c
                .conn
                .poll_transmit(now, frame.get_mut(payload_at..).unwrap_or_default())
            else {
                self.egress.recycle(frame);
                break;
            };
            let n = seg.payload.len();
            let header = header_only(&seg);
            self.egress.send_tcp_frame(
                now,
                tuple.local.ip(),
                tuple.remote.ip(),
                &header,
                frame,
                payload_at,
                n,
            );
        }
        if drained {
            self.tcp.dirty.remove(&i);
            self.tcp_after_output(i);
        }
        drained
    }

    /// Removes a finished connection from the table and frees its slot when nobody will read
    /// it any more.
    fn tcp_after_output(&mut self, i: usize) {
        let Some(c) = self.conn_mut(i) else {
            return;
        };
        if c.conn.state() != State::Closed {
            // Transmitting may arm the retransmission timer.
            self.tcp_rearm(i);
            return;
        }
        let (key, was_in_table, parent, app_closed) = (c.key, c.in_table, c.parent, c.app_closed);
        c.in_table = false;
        self.tcp_rearm(i);
        if was_in_table {
            self.tcp.conns.remove(&key);
            self.counters.tcp_connections_closed += 1;
        }
        if let Some(li) = parent {
            // Died before being accepted: nobody holds its handle.
            if let Some(l) = self.listener_mut(li) {
                l.pending.retain(|&x| x != i);
            }
            self.free_slot(i);
        } else if app_closed {
            self.free_slot(i);
        }
    }

    pub(crate) fn tcp_poll_timeout(&self) -> Option<u64> {
        self.tcp.timers.first().map(|&(t, _)| t)
    }

    pub(crate) fn tcp_handle_timeout(&mut self, now: u64) {
        // Everything due, earliest first (ties by slot index): deterministic order. Collected
        // first so a connection whose deadline does not move cannot loop here.
        let due: Vec<usize> = self
            .tcp
            .timers
            .iter()
            .take_while(|&&(t, _)| t <= now)
            .map(|&(_, i)| i)
            .collect();
        for i in due {
            if self.moved_mut(i).is_some() {
                self.tcp_drop_marker(i);
                self.counters.tcp_moved_expired += 1;
                continue;
            }
            if let Some(c) = self.conn_mut(i) {
                c.conn.handle_timeout(now);
            }
            self.tcp_after_input(i);
        }
    }

    // ------------------------------------------------------------------ application calls

    /// Opens a listener on `local` (port 0 picks an ephemeral port; an unspecified IP listens
    /// on every address of the family). `backlog` bounds the children not yet accepted
    /// (clamped to `limits.tcp_backlog_max`).
    pub fn tcp_listen(
        &mut self,
        local: SocketAddr,
        backlog: usize,
    ) -> Result<SocketHandle, SocketError> {
        let ip = local.ip();
        if !ip.is_unspecified() && !self.egress.is_our_ip(ip) {
            return Err(SocketError::AddrNotAvailable);
        }
        let port = if local.port() == 0 {
            self.pick_ephemeral(|s, p| !s.tcp_port_listened(ip, p))
                .ok_or(SocketError::NoFreePort)?
        } else {
            if self.tcp_port_listened(ip, local.port()) {
                return Err(SocketError::AddrInUse);
            }
            local.port()
        };
        let listener = Listener {
            local: SocketAddr::new(ip, port),
            pending: VecDeque::new(),
            backlog_max: backlog.clamp(1, self.cfg.limits.tcp_backlog_max.max(1)),
            config: self.cfg.tcp,
        };
        self.alloc_slot(Socket::Tcp(TcpState::Listener(listener)))
    }

    /// Takes the oldest established child of a listener: its handle and the peer's address.
    /// `WouldBlock` when none has completed its handshake.
    pub fn tcp_accept(
        &mut self,
        listener: SocketHandle,
    ) -> Result<(SocketHandle, SocketAddr), SocketError> {
        let li = self.slot_index(listener)?;
        let pending: Vec<usize> = match self.listener_mut(li) {
            Some(l) => l.pending.iter().copied().collect(),
            None => return Err(SocketError::WrongSocketType),
        };
        for ci in pending {
            let Some(c) = self.conn_mut(ci) else {
                continue;
            };
            if !c.conn.state().is_synchronized() {
                continue;
            }
            c.parent = None;
            let remote = c.key.tuple.remote;
            if let Some(l) = self.listener_mut(li) {
                l.pending.retain(|&x| x != ci);
            }
            let Some(slot) = self.slots.get_mut(ci) else {
                continue;
            };
            let generation = slot.generation;
            // Report what happened while it waited in the backlog.
            let waiting = core::mem::take(&mut slot.pending);
            if !waiting.is_empty() {
                self.notify(ci, waiting);
            }
            let index = u32::try_from(ci).map_err(|_| SocketError::InvalidHandle)?;
            return Ok((SocketHandle { index, generation }, remote));
        }
        Err(SocketError::WouldBlock)
    }

    /// Active open to `remote` from the best local address. `local_port` 0 picks a port:
    /// with an RSS home queue configured, one whose replies hash back to this shard
    /// (DESIGN "Outgoing connections pick a source port whose hash maps back"), else the next
    /// free ephemeral port.
    pub fn tcp_connect(
        &mut self,
        now: u64,
        remote: SocketAddr,
        local_port: u16,
    ) -> Result<SocketHandle, SocketError> {
        let local_ip = self
            .egress
            .select_source(remote.ip())
            .ok_or(SocketError::NoRoute)?;
        let in_use = |s: &Stack, p: u16| {
            let t = FourTuple {
                local: SocketAddr::new(local_ip, p),
                remote,
            };
            let k = s.flow_key(t, None);
            s.tcp.conns.contains_key(&k)
        };
        let port = if local_port != 0 {
            if in_use(self, local_port) {
                return Err(SocketError::AddrInUse);
            }
            local_port
        } else {
            self.pick_connect_port(local_ip, remote, in_use)?
        };
        let tuple = FourTuple {
            local: SocketAddr::new(local_ip, port),
            remote,
        };
        let key = self.flow_key(tuple, None);
        let config = self.tcp_config_for(&self.cfg.tcp, remote.is_ipv4());
        let (iss, ts_offset) = self.isn_for(now, &tuple);
        let conn = Connection::connect(now, &config, port, remote.port(), iss, ts_offset);
        let sock = ConnSock {
            key,
            conn: Box::new(conn),
            parent: None,
            in_table: true,
            app_closed: false,
            armed_ns: None,
            error: None,
        };
        let h = self.alloc_slot(Socket::Tcp(TcpState::Conn(sock)))?;
        self.tcp.conns.insert(key, h.index as usize);
        self.tcp.dirty.insert(h.index as usize);
        Ok(h)
    }

    fn pick_connect_port(
        &mut self,
        local_ip: IpAddr,
        remote: SocketAddr,
        in_use: impl Fn(&Stack, u16) -> bool,
    ) -> Result<u16, SocketError> {
        if let Some(rss) = &self.cfg.rss {
            if let Some((reta, queue)) = &rss.home {
                let query = rss::SourcePortQuery {
                    local: local_ip,
                    remote: remote.ip(),
                    remote_port: remote.port(),
                    wanted_queue: *queue,
                    range: EPHEMERAL_FIRST..=EPHEMERAL_LAST,
                    start_hint: self.next_ephemeral,
                };
                let port = rss::pick_source_port(&query, reta, &rss.hasher, |p| in_use(self, p))
                    .ok_or(SocketError::NoFreePort)?;
                self.next_ephemeral = if port == EPHEMERAL_LAST {
                    EPHEMERAL_FIRST
                } else {
                    port + 1
                };
                return Ok(port);
            }
        }
        self.pick_ephemeral(|s, p| !in_use(s, p))
            .ok_or(SocketError::NoFreePort)
    }

    fn conn_for(&mut self, h: SocketHandle) -> Result<(usize, &mut ConnSock), SocketError> {
        let i = self.slot_index(h)?;
        match self.conn_mut(i) {
            Some(c) if c.parent.is_none() => Ok((i, c)),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// Queues bytes for sending; returns how many fit. `WouldBlock` when none fit.
    pub fn tcp_send(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        let (i, c) = self.conn_for(h)?;
        let n = c.conn.send(data).map_err(map_tcp_error)?;
        self.tcp_after_input(i);
        if n == 0 && !data.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        Ok(n)
    }

    /// `tcp_send` with `MSG_MORE`: full segments go, a partial tail waits for a later
    /// `tcp_send` (see `tcp::Connection::send_more`).
    pub fn tcp_send_more(&mut self, h: SocketHandle, data: &[u8]) -> Result<usize, SocketError> {
        let (i, c) = self.conn_for(h)?;
        let n = c.conn.send_more(data).map_err(map_tcp_error)?;
        self.tcp_after_input(i);
        if n == 0 && !data.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        Ok(n)
    }

    /// Reads received bytes. `WouldBlock` when none are ready, `Finished` after the peer's FIN
    /// once everything before it has been read.
    pub fn tcp_recv(&mut self, h: SocketHandle, out: &mut [u8]) -> Result<usize, SocketError> {
        let (i, c) = self.conn_for(h)?;
        let n = c.conn.recv(out).map_err(map_tcp_error)?;
        // Reading may open the window: a window update may be due.
        self.tcp_after_input(i);
        if n == 0 && !out.is_empty() {
            return Err(SocketError::WouldBlock);
        }
        Ok(n)
    }

    /// Half-close: a FIN follows the queued data; receiving continues.
    pub fn tcp_shutdown(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let (i, c) = self.conn_for(h)?;
        c.conn.shutdown_write().map_err(map_tcp_error)?;
        self.tcp_after_input(i);
        Ok(())
    }

    /// Aborts a connection (RST if synchronized, RFC 9293 §3.10.5).
    pub fn tcp_abort(&mut self, h: SocketHandle) -> Result<(), SocketError> {
        let (i, c) = self.conn_for(h)?;
        c.conn.abort();
        self.tcp_after_input(i);
        Ok(())
    }

    /// The engine state of a connection (`None` for listeners and invalid handles).
    pub fn tcp_state(&self, h: SocketHandle) -> Option<State> {
        let i = self.slot_index(h).ok()?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(c.conn.state()),
            Some(Socket::Tcp(TcpState::Listener(_))) => None,
            _ => None,
        }
    }

    /// Linux `getsockopt(TCP_MAXSEG)`: a synchronized connection's payload per segment (send
    /// MSS less the timestamp option, Linux `mss_cache`); before that, and for a listener, the
    /// cap on the MSS it will announce (Linux returns `user_mss` there when one was set).
    pub fn tcp_max_segment(&self, h: SocketHandle) -> Result<u16, SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Tcp(TcpState::Conn(c))) if c.conn.state().is_synchronized() => {
                Ok(c.conn.eff_mss())
            }
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(c.conn.config().mss_bytes),
            Some(Socket::Tcp(TcpState::Listener(l))) => Ok(l.config.mss_bytes),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// The send buffer capacity in bytes (unacknowledged plus unsent data) of a connection,
    /// or the one a listener gives the connections it accepts: what
    /// [`SocketOption::SendBufferBytes`] set, after the engine's validation (at least one MSS).
    pub fn tcp_send_buffer_bytes(&self, h: SocketHandle) -> Result<u32, SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(c.conn.config().send_buffer_bytes),
            Some(Socket::Tcp(TcpState::Listener(l))) => Ok(l.config.send_buffer_bytes),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// Level-triggered readiness of a TCP socket now, as `poll(2)` would report it (events
    /// from [`Stack::poll_event`] are its edges): a listener is `READABLE` while an
    /// established connection waits to be accepted; a connection is `READABLE` while data is
    /// queued or after the peer's FIN (with `PEER_CLOSED`), `WRITABLE` while it may send and
    /// its send buffer has room, `ERROR` once an error ended it.
    pub fn tcp_readiness(&self, h: SocketHandle) -> Result<Readiness, SocketError> {
        use tcp::State;
        let i = self.slot_index(h)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Tcp(TcpState::Listener(l))) => {
                let ready = l.pending.iter().any(|&ci| {
                    matches!(
                        self.slots.get(ci).and_then(|s| s.socket.as_ref()),
                        Some(Socket::Tcp(TcpState::Conn(c))) if c.conn.state().is_synchronized()
                    )
                });
                Ok(if ready {
                    Readiness::READABLE
                } else {
                    Readiness::NONE
                })
            }
            Some(Socket::Tcp(TcpState::Conn(c))) => {
                let state = c.conn.state();
                let mut r = Readiness::NONE;
                let peer_fin = matches!(
                    state,
                    State::CloseWait | State::LastAck | State::Closing | State::TimeWait
                );
                if c.conn.recv_queue_bytes() > 0 || peer_fin {
                    r |= Readiness::READABLE;
                }
                if peer_fin {
                    r |= Readiness::PEER_CLOSED;
                }
                if matches!(state, State::Established | State::CloseWait)
                    && c.conn.send_capacity_bytes() > 0
                {
                    r |= Readiness::WRITABLE;
                }
                let failed = matches!(
                    c.conn.close_reason(),
                    Some(tcp::CloseReason::Reset | tcp::CloseReason::TimedOut)
                );
                if c.error.is_some() || failed {
                    r |= Readiness::ERROR;
                }
                Ok(r)
            }
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// The peer's address of a connection.
    pub fn peer_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        let i = self.slot_index(h)?;
        match self.slots.get(i).and_then(|s| s.socket.as_ref()) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(c.key.tuple.remote),
            Some(Socket::Tcp(TcpState::Listener(_))) => Err(SocketError::InvalidState),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// Connections in the table (any state but CLOSED).
    pub fn tcp_connection_count(&self) -> usize {
        self.tcp.len()
    }

    /// Applies an option. TCP options apply to a listener (for the connections it will
    /// accept); on a live connection `NoDelay` and `SendBufferBytes` can change, and
    /// `MaxSegment` before the SYN left (the engine has no other setters yet: keepalive and
    /// user timeout are fixed at open).
    pub fn set_option(&mut self, h: SocketHandle, opt: SocketOption) -> Result<(), SocketError> {
        let i = self.slot_index(h)?;
        let udp_max = self.cfg.limits.udp_rx_queue_datagrams_max;
        match (self.slots.get_mut(i).and_then(|s| s.socket.as_mut()), opt) {
            (Some(Socket::Udp(u)), SocketOption::UdpRxQueueDatagrams(n)) => {
                u.rx_max = n.min(udp_max);
                Ok(())
            }
            (Some(Socket::Udp(_)), _) => Err(SocketError::WrongSocketType),
            (Some(Socket::Tcp(t)), opt) => match (t, opt) {
                (TcpState::Listener(_), SocketOption::UdpRxQueueDatagrams(_)) => {
                    Err(SocketError::WrongSocketType)
                }
                // A cork belongs to a connection's writes; accepted connections start uncorked.
                (TcpState::Listener(_), SocketOption::Cork(_)) => Err(SocketError::InvalidState),
                (TcpState::Listener(l), SocketOption::NoDelay(v)) => {
                    l.config.nodelay = v;
                    Ok(())
                }
                (TcpState::Listener(l), SocketOption::KeepaliveIdleNs(v)) => {
                    l.config.keepalive = v.map(|idle_ns| tcp::KeepaliveConfig {
                        idle_ns,
                        ..tcp::KeepaliveConfig::default()
                    });
                    Ok(())
                }
                (TcpState::Listener(l), SocketOption::UserTimeoutNs(v)) => {
                    l.config.user_timeout_ns = v;
                    Ok(())
                }
                (TcpState::Listener(l), SocketOption::MaxSegment(v)) => {
                    // Still clamped to the interface MTU at accept (`tcp_config_for`).
                    l.config.mss_bytes = v;
                    Ok(())
                }
                (TcpState::Listener(l), SocketOption::SendBufferBytes(v)) => {
                    l.config.send_buffer_bytes = v;
                    Ok(())
                }
                (TcpState::Conn(c), SocketOption::SendBufferBytes(v)) => {
                    c.conn.set_send_buffer(v);
                    // A larger buffer may make the socket writable.
                    self.tcp.dirty.insert(i);
                    Ok(())
                }
                (TcpState::Conn(c), SocketOption::MaxSegment(v)) => {
                    c.conn.set_mss_cap(v).map_err(|_| SocketError::InvalidState)
                }
                (TcpState::Conn(c), SocketOption::NoDelay(v)) => {
                    c.conn.set_nodelay(v);
                    self.tcp.dirty.insert(i);
                    Ok(())
                }
                (TcpState::Conn(c), SocketOption::Cork(v)) => {
                    c.conn.set_cork(v);
                    self.tcp.dirty.insert(i);
                    Ok(())
                }
                (TcpState::Conn(_), _) => Err(SocketError::InvalidState),
                (TcpState::Moved(_), _) => Err(SocketError::InvalidHandle),
            },
            (None, _) => Err(SocketError::InvalidHandle),
        }
    }

    /// Hands a live connection over (DESIGN "Handoff protocol"): flushes a delayed ACK and any
    /// owed output to the transmit queue, freezes the connection into a snapshot, and replaces
    /// it with a *moved marker*. The handle becomes invalid here. Segments that still arrive
    /// for the 4-tuple are never answered with RST (DESIGN handoff invariant 4): they are
    /// dropped before any processing (`tcp_drop_moved`), or, once the driver names the new
    /// owner with [`Stack::tcp_set_moved_forward`], queued for it on [`Stack::poll_forward`].
    /// The marker goes when the connection is imported back ([`Stack::tcp_import`], which
    /// then returns the same handle), on [`Stack::tcp_release_moved`], or after
    /// `limits.tcp_moved_marker_ns` (`tcp_moved_expired`). `WouldBlock` when output could not
    /// be drained (transmit queue full), `InvalidState` when the engine refuses (not
    /// synchronized).
    pub fn tcp_export(
        &mut self,
        now: u64,
        h: SocketHandle,
    ) -> Result<(FourTuple, tcp::ConnectionSnapshot), SocketError> {
        let (i, c) = self.conn_for(h)?;
        c.conn.flush_delayed_ack();
        self.tcp.dirty.insert(i);
        if !self.tcp_flush_one(now, i) {
            return Err(SocketError::WouldBlock);
        }
        let c = self.conn_mut(i).ok_or(SocketError::InvalidHandle)?;
        let snapshot = c.conn.export(now).map_err(|e| match e {
            tcp::SnapshotError::OutputPending => SocketError::WouldBlock,
            tcp::SnapshotError::NotSynchronized | tcp::SnapshotError::Inconsistent => {
                SocketError::InvalidState
            }
        })?;
        let key = c.key;
        c.in_table = false;
        self.tcp_rearm(i);
        self.tcp.dirty.remove(&i);
        // The table keeps the key, now naming the marker that takes the slot.
        let expires_ns = now.saturating_add(self.cfg.limits.tcp_moved_marker_ns);
        let marker = TcpState::Moved(MovedMarker {
            key,
            expires_ns,
            forward: None,
        });
        if let Some(slot) = self.slots.get_mut(i) {
            slot.pending = Readiness::NONE;
            if let Some(Socket::Tcp(TcpState::Conn(c))) = slot.socket.replace(Socket::Tcp(marker)) {
                self.tcp_counters_released.add(c.engine_counters());
            }
        }
        self.tcp.moved += 1;
        self.tcp.timers.insert((expires_ns, i));
        self.counters.tcp_connections_exported += 1;
        Ok((key.tuple, snapshot))
    }

    /// Takes over a connection exported by another stack (another shard, or an offload engine
    /// giving it back). `tuple.local` must be one of our addresses.
    ///
    /// Handles are stable across a move and back: when this stack exported `tuple` itself and
    /// its moved marker is still there, the import takes the marker's slot and returns the
    /// handle the connection had before the export. Otherwise (another stack's connection, or
    /// a marker already released or expired) the connection gets a new handle.
    pub fn tcp_import(
        &mut self,
        now: u64,
        tuple: FourTuple,
        snapshot: &tcp::ConnectionSnapshot,
    ) -> Result<SocketHandle, SocketError> {
        if !self.egress.is_our_ip(tuple.local.ip())
            || tuple.local.is_ipv4() != tuple.remote.is_ipv4()
        {
            return Err(SocketError::AddrNotAvailable);
        }
        let key = self.flow_key(tuple, None);
        let marker = self.moved_slot(tuple);
        if marker.is_none() && self.tcp.conns.contains_key(&key) {
            return Err(SocketError::AddrInUse);
        }
        let conn = Connection::import(now, snapshot).map_err(|_| SocketError::InvalidState)?;
        let readable = conn.recv_queue_bytes() > 0;
        let sock = ConnSock {
            key,
            conn: Box::new(conn),
            parent: None,
            in_table: true,
            app_closed: false,
            armed_ns: None,
            error: None,
        };
        let socket = Socket::Tcp(TcpState::Conn(sock));
        let h = match marker {
            Some(mi) => {
                let m = self.moved_mut(mi).ok_or(SocketError::InvalidState)?;
                let expires_ns = m.expires_ns;
                self.tcp.timers.remove(&(expires_ns, mi));
                self.tcp.moved -= 1;
                self.reuse_slot(mi, socket)
                    .ok_or(SocketError::InvalidState)?
            }
            None => self.alloc_slot(socket)?,
        };
        let i = h.index as usize;
        self.tcp.conns.insert(key, i);
        self.tcp_after_input(i);
        let mut ready = Readiness::WRITABLE;
        if readable {
            ready |= Readiness::READABLE;
        }
        self.notify(i, ready);
        self.counters.tcp_connections_imported += 1;
        Ok(h)
    }

    /// `close` for TCP sockets: a listener goes at once (children not yet accepted are
    /// aborted); a connection closes (FIN after queued data, or RST if unread data remains,
    /// per the engine) and its slot is freed when the engine is done.
    pub(crate) fn tcp_close(&mut self, _now: u64, i: usize) -> Result<(), SocketError> {
        if let Some(l) = self.listener_mut(i) {
            let children: Vec<usize> = l.pending.drain(..).collect();
            self.free_slot(i);
            for ci in children {
                if let Some(c) = self.conn_mut(ci) {
                    c.conn.abort();
                    c.parent = None;
                    c.app_closed = true;
                }
                self.tcp_after_input(ci);
            }
            return Ok(());
        }
        let Some(c) = self.conn_mut(i) else {
            return Err(SocketError::WrongSocketType);
        };
        c.app_closed = true;
        if c.conn.state() != State::Closed {
            // An error here only says the connection is already closing or closed.
            let _ = c.conn.close();
        }
        self.tcp_after_input(i);
        // Already finished and flushed: free now rather than waiting for the next flush.
        if self.conn_mut(i).is_some_and(|c| !c.in_table) {
            self.free_slot(i);
        }
        Ok(())
    }
}
