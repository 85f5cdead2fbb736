//! The TCP part of the stack: its types and its table. The part's code is in three files:
//! this one (the 4-tuple table and what a socket slot holds for TCP — listeners, connections,
//! moved markers — plus the read-only queries), `tcp_input` (input, output, timers) and
//! `tcp_api` (the application calls).
//!
//! Responsibilities of the part:
//! - the connection table (`conn_table`: 8-byte entries of hash and slot, the 4-tuple compared
//!   in the slot), indexed by the RSS hash the NIC carried when the key is secret (DESIGN
//!   principle 4, "hash once"), else by the stack's keyed hash of the tuple;
//! - input: moved marker (drop or forward, never RST) → connection, else listener (SYN → new
//!   child), else RST;
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

use core::net::{IpAddr, SocketAddr};
use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use tcp::isn::{Endpoint, IsnGenerator, SynCookies};
use tcp::listen::{ListenLimits, ListenLoad, reset_reply};
use tcp::{Connection, Event, State};
use wire::{SeqNumber, TcpRepr};

use crate::config::StackConfig;
use crate::conn_table::ConnTable;
use crate::counters::Counters;
use crate::index_set::IndexSet;
use crate::socket::{Readiness, SocketError, SocketHandle};
use crate::sockets::{PortKind, Socket, Sockets, overlaps};
use crate::timer_wheel::TimerWheel;

mod conn_sock;
mod flow_key;

pub(crate) use conn_sock::ConnSock;

pub use flow_key::FourTuple;
#[cfg(test)]
use flow_key::PackedTuple;
pub(crate) use flow_key::{FlowKey, endpoint_bytes, rss_flow_hash, software_hash};

/// A listening socket.
#[derive(Debug)]
pub(crate) struct Listener {
    pub(crate) local: SocketAddr,
    /// Children (slot indexes) not yet accepted, embryonic or established, oldest first.
    /// Invariant: `pending.len()` ≤ `backlog_max`.
    pub(crate) pending: VecDeque<usize>,
    pub(crate) backlog_max: usize,
    /// Its children's configuration (inline: the whole listener is boxed in its slot).
    pub(crate) config: tcp::Config,
    /// `TCP_FASTOPEN`: Fast Open children allowed in SYN-RECEIVED (0: none unless the
    /// stack's switches make every listener a Fast Open one; `tcp_fastopen.rs`).
    pub(crate) fastopen_queue_max: u32,
    /// `TCP_FASTOPEN_KEY`: this listener's own cookie key, else the stack's.
    pub(crate) fastopen_keys: Option<tcp::fastopen::FastOpenKeys>,
    /// `SO_ZEROCOPY`, `SO_MARK`, `TCP_NOTSENT_LOWAT`, `SO_TIMESTAMPING` for its children.
    pub(crate) sock_opts: crate::tcp_notify::SockOpts,
}

/// [`ConnSock::armed_ns`] of a connection that holds no deadline in `TcpTable::timers`;
/// deadlines are clamped below it (`NOT_ARMED − 1` ns is 584 years after the epoch).
pub(crate) const NOT_ARMED: u64 = u64::MAX;

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
    pub(crate) key: FlowKey,
    pub(crate) expires_ns: u64,
    /// Where frames caught mid-move go, when the driver said.
    pub(crate) forward: Option<u16>,
    /// The host socket of a connection handed to an offload engine
    /// ([`crate::Stack::tcp_offload`]): its handle stays valid, it never expires, and frames
    /// for it are forwarded to the engine as bypass operations.
    pub(crate) bypass: Option<Box<crate::bypass::Bypass>>,
}

/// Per-socket TCP state.
#[derive(Debug)]
pub(crate) enum TcpState {
    /// Boxed: a listener is larger than a connection's state, and every socket slot is as
    /// large as the largest variant (connections are the many).
    Listener(Box<Listener>),
    Conn(ConnSock),
    /// A connection that moved to another owner (see [`MovedMarker`]).
    Moved(MovedMarker),
}

impl ConnSock {
    /// The connection's failure, while not yet reported to the application.
    pub(crate) fn pending_failure(&self) -> Option<SocketError> {
        if self.failure_reported {
            return None;
        }
        match self.conn.close_reason() {
            Some(tcp::CloseReason::Reset) => Some(SocketError::Reset),
            Some(tcp::CloseReason::TimedOut) => Some(SocketError::TimedOut),
            _ => None,
        }
    }

    /// What an application call returns for the engine's error `e`: a reset or time-out
    /// once (then it is no longer pending), `after` on every later call (POSIX `so_error`,
    /// Linux `sock_error`: the error is taken by the call that reports it).
    pub(crate) fn report_once(&mut self, e: SocketError, after: SocketError) -> SocketError {
        // An ICMP error that ended the open is the failure to report (Linux `sk_err`).
        if let Some(err) = self.error.take() {
            self.failure_reported = true;
            return err;
        }
        if matches!(e, SocketError::Reset | SocketError::TimedOut) {
            if self.failure_reported {
                return after;
            }
            self.failure_reported = true;
        }
        e
    }

    /// The engine's counters of this connection.
    pub(crate) fn engine_counters(&self) -> tcp::Counters {
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
            TcpState::Conn(c) => c.error.take().or_else(|| {
                let failure = c.pending_failure();
                c.failure_reported |= failure.is_some();
                failure
            }),
        }
    }

    pub(crate) fn local_addr(&self) -> SocketAddr {
        match self {
            TcpState::Listener(l) => l.local,
            TcpState::Conn(c) => c.key().tuple().local,
            TcpState::Moved(m) => m.key.tuple().local,
        }
    }
}

/// Listeners and the connection table.
pub(crate) struct TcpTable {
    /// The connection table: every connection in it (`ConnSock::in_table`) and every moved
    /// marker, by [`FlowKey::table_hash`], the key compared in the slot (`conn_table`).
    pub(crate) conns: ConnTable,
    /// Connections that may have output, by slot index (ordered: deterministic output; a
    /// bitmap, O(1) insert and remove per segment).
    pub(crate) dirty: IndexSet,
    /// Whether the flush sends runs of full segments as trains (`tcp_train.rs`); on unless
    /// a test turns it off (`Stack::set_tcp_trains`).
    pub(crate) trains: bool,
    /// Where the next flush starts (round-robin over `dirty`).
    pub(crate) flush_cursor: usize,
    /// Whether a connection's state is asked for all at once when a segment or an
    /// application call first reaches it (`tcp_prefetch`); on unless turned off
    /// (`Stack::set_tcp_prefetch`: the reference the tests and the benchmark compare with).
    pub(crate) prefetch: bool,
    /// The slot the last prefetch was for (`usize::MAX`: none): its state is taken to be
    /// cached, so the calls that follow on the same connection ask for nothing (a hint: a
    /// wrong guess only skips or repeats a prefetch).
    pub(crate) warm_slot: usize,
    /// (deadline, slot) of every connection with a timer and every moved marker: a timing
    /// wheel with exact deadlines, whose first entry is `poll_timeout`. Invariant: holds
    /// `(t, i)` for a connection `i` iff it has `armed_ns == t`, `t != NOT_ARMED`
    /// (`tcp_handle_timeout` clears `armed_ns` of what it pops), and `(expires_ns, i)` for each moved marker.
    pub(crate) timers: TimerWheel,
    /// Reused by `tcp_handle_timeout` for the slots due at one instant (empty between calls),
    /// so firing timers allocates nothing once it has grown.
    pub(crate) due_scratch: Vec<usize>,
    pub(crate) isn: IsnGenerator,
    pub(crate) cookies: SynCookies,
    /// ECN for connections opened from now on (Linux `net.ipv4.tcp_ecn`, read at each open):
    /// starts as `StackConfig::tcp.ecn`, changed by `Stack::tcp_set_ecn`; `config_for`
    /// applies it over a listener's or the stack's configuration copy.
    pub(crate) ecn: tcp::EcnMode,
    /// The configurations connections share (`tcp_config_share`): what `config_for` derives
    /// is looked up here, so connections of one listener and family hold one `Arc`.
    pub(crate) configs: crate::tcp_config_share::ConfigShare,
    /// Fast Open switches and server keys (`tcp_fastopen.rs`).
    pub(crate) fastopen: tcp::fastopen::FastOpenConfig,
    pub(crate) fastopen_keys: tcp::fastopen::FastOpenKeys,
    /// The client's Fast Open cache (`tcp_fastopen_client.rs`).
    pub(crate) fastopen_cache: crate::tcp_fastopen_client::ClientCache,
    /// Seed of the software flow hash.
    pub(crate) hash_seed: u32,
    /// The table hash the receive look-ahead computed for the frame being received
    /// ([`crate::Stack::receive_hinted`]; `None` outside it): TCP input looks the segment up
    /// under it ([`TcpTable::rx_lookup`]).
    pub(crate) rx_table_hash_hint: Option<u32>,
    /// `cfg.rss.is_some()`, copied (read per segment by `flow_key`).
    pub(crate) rss_on: bool,
    /// True when [`FlowKey::table_hash`] is the flow hash itself (no RSS key, or a secret
    /// one); false when it is the keyed software hash (a well-known or symmetric RSS key,
    /// which a peer could aim at one bucket).
    pub(crate) table_by_flow_hash: bool,
    /// Moved markers among `conns` (so `conns.len() - moved` connections are live).
    pub(crate) moved: usize,
    /// Frames caught mid-move, oldest first: (destination, frame, carried RSS hash).
    /// Invariant: `forward.len()` ≤ `limits.tcp_moved_forward_frames_max`.
    pub(crate) forward: VecDeque<(u16, Vec<u8>, wire::RxMeta)>,
    /// Operations on bypass sockets for the offload layer, oldest first: (slot, op).
    /// Bounded: writes by the sockets' send buffers, reads are coalesced, and forwarded
    /// frames (`bypass_forward_queued` of them) by `limits.tcp_moved_forward_frames_max`.
    pub(crate) bypass_ops: VecDeque<(usize, crate::bypass::BypassOp)>,
    pub(crate) bypass_forward_queued: usize,
    /// The RETA and queue active opens pick source ports for (`cfg.rss.home` at start; a
    /// rebalancer changes entries with [`crate::Stack::set_rss_home_entry`]).
    pub(crate) rss_home: Option<(rss::Reta, u16)>,
    /// The counters this part increments (TCP input, listeners, connections, moves);
    /// `Stack::counters` sums every part's.
    pub(crate) counters: Counters,
    /// The engine counters of every TCP connection whose slot was freed (closed, aborted or
    /// exported), summed; [`crate::Stack::tcp_counters`] adds the live ones.
    pub(crate) counters_released: tcp::Counters,
    /// Passive connections per remote address. Invariant: `per_source[a]` is the number of
    /// slots holding a `ConnSock` with `passive` set and remote address `a`; no zero entries.
    pub(crate) per_source: HashMap<IpAddr, u32>,
    /// No reclaim scan before this instant (set when a scan found fewer victims than it
    /// wanted, so a table of unreclaimable connections is not walked for every SYN).
    pub(crate) reclaim_next_scan_ns: u64,
    /// Reused by the reclaim scan for its candidates (empty between scans).
    pub(crate) reclaim_scratch: Vec<(u8, u64, usize)>,
    /// No memory reclaim walk (stalled connections, `overload`) before this instant.
    pub(crate) mem_reclaim_next_scan_ns: u64,
    /// Ring storage held by all connections, bytes (`tcp_mem`'s invariant: the sum of
    /// their `ConnSock::mem_bytes`).
    pub(crate) mem_bytes: usize,
    /// The memory state `mem_bytes` put the stack in (`tcp_mem`).
    pub(crate) mem_state: crate::tcp_mem::MemState,
    /// Connections in TIME-WAIT as compact records, by family (`time_wait`,
    /// `tcp_time_wait`). Invariant: no 4-tuple is both here and in `conns`; together they
    /// hold at most `limits.tcp_time_wait_max` records.
    pub(crate) tw4: crate::time_wait::TwTable<crate::time_wait::V4>,
    pub(crate) tw6: crate::time_wait::TwTable<crate::time_wait::V6>,
    /// The idle sweep (`tcp_idle`): the next slot it looks at, and when it may run again.
    pub(crate) idle_sweep_cursor: usize,
    pub(crate) idle_sweep_next_ns: u64,
    /// The challenge-ACK budget all TIME-WAIT records share (RFC 5961 §7).
    pub(crate) tw_limiter: tcp::time_wait::AckLimiter,
    pub(crate) cfg: Arc<StackConfig>,
}

impl core::fmt::Debug for TcpTable {
    // Not derived: the tables would drown the output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("TcpTable")
            .field("connections", &self.conns.len())
            .field("dirty", &self.dirty.len())
            .field("timers", &self.timers.len())
            .finish_non_exhaustive()
    }
}

impl TcpTable {
    pub(crate) fn new(cfg: Arc<StackConfig>) -> TcpTable {
        let secret = cfg.secret;
        TcpTable {
            conns: ConnTable::default(),
            dirty: IndexSet::new(),
            trains: true,
            flush_cursor: 0,
            prefetch: true,
            warm_slot: usize::MAX,
            timers: TimerWheel::new(),
            due_scratch: Vec::new(),
            isn: IsnGenerator::new(secret),
            // A different key from the ISN generator's (RFC 4987 §3.6 cookies must not let a
            // peer learn our ISN secret, nor the reverse).
            cookies: SynCookies::new([
                secret[1].rotate_left(17) ^ 0xc00c_1e5e_ed5a_17ed,
                secret[0].rotate_left(29),
            ]),
            // A third key, for Fast Open cookies (RFC 7413 §4.1.2).
            ecn: cfg.tcp.ecn,
            configs: crate::tcp_config_share::ConfigShare::default(),
            fastopen: cfg.tcp_fastopen,
            fastopen_keys: tcp::fastopen::FastOpenKeys::new(
                tcp::fastopen::FastOpenKey::from_words([
                    (secret[0] >> 7) as u32 ^ 0xfa57_0be7,
                    (secret[1] >> 3) as u32,
                    secret[0].rotate_left(41) as u32,
                    (secret[1].rotate_left(13) >> 32) as u32 ^ 0x7f0c_00c1,
                ]),
            ),
            fastopen_cache: crate::tcp_fastopen_client::ClientCache::new(
                cfg.limits.tcp_fastopen_cache_servers_max,
            ),
            hash_seed: (secret[0] ^ secret[1].rotate_left(32)) as u32,
            rx_table_hash_hint: None,
            rss_on: cfg.rss.is_some(),
            table_by_flow_hash: cfg.rss.as_ref().is_none_or(|r| r.key_is_secret),
            moved: 0,
            forward: VecDeque::new(),
            bypass_ops: VecDeque::new(),
            bypass_forward_queued: 0,
            rss_home: cfg.rss.as_ref().and_then(|r| r.home.clone()),
            counters: Counters::default(),
            counters_released: tcp::Counters::default(),
            per_source: HashMap::new(),
            reclaim_next_scan_ns: 0,
            reclaim_scratch: Vec::new(),
            mem_reclaim_next_scan_ns: 0,
            mem_bytes: 0,
            mem_state: crate::tcp_mem::MemState::Normal,
            tw4: crate::time_wait::TwTable::new(),
            tw6: crate::time_wait::TwTable::new(),
            tw_limiter: tcp::time_wait::AckLimiter::new(cfg.tcp.challenge_acks_per_s_max),
            idle_sweep_cursor: 0,
            idle_sweep_next_ns: 0,
            cfg,
        }
    }

    /// Connections in the table (moved markers not included), TIME-WAIT records included.
    pub(crate) fn len(&self) -> usize {
        self.conns.len() - self.moved + self.tw_len()
    }

    /// TIME-WAIT records (both families).
    pub(crate) fn tw_len(&self) -> usize {
        self.tw4.len() + self.tw6.len()
    }

    /// Takes a passive connection whose slot is going off its source's count
    /// (`per_source`'s invariant).
    pub(crate) fn forget_source(&mut self, c: &ConnSock) {
        if !c.passive {
            return;
        }
        let ip = c.key().tuple().remote.ip();
        if let Some(n) = self.per_source.get_mut(&ip) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                self.per_source.remove(&ip);
            }
        }
    }

    /// Memory back to the allocator past the tables' high-water mark: a map using at most an
    /// eighth of its capacity shrinks to twice its length (O(length), and only after the
    /// length fell by a factor of four or more since it last grew or shrank: O(1) amortized
    /// per removal).
    pub(crate) fn shrink_tables(&mut self) {
        const MIN: usize = 64;
        self.conns.shrink();
        if self.per_source.capacity() > MIN
            && self.per_source.len() * 8 <= self.per_source.capacity()
        {
            self.per_source.shrink_to(self.per_source.len() * 2);
        }
    }

    /// Passive connections held by `source` (see `Limits::tcp_source_share_pct`).
    pub(crate) fn source_connections(&self, source: IpAddr) -> u32 {
        self.per_source.get(&source).copied().unwrap_or(0)
    }
}

/// The RST that answers `seg` when no connection or listener wants it (RFC 9293 §3.10.7.1);
/// `None` when `seg` is itself a RST. Kept for callers of this path: the rule lives in
/// [`tcp::listen::reset_reply`].
pub fn rst_for<'a>(seg: &TcpRepr<'_>) -> Option<TcpRepr<'a>> {
    reset_reply(seg)
}

pub(crate) fn map_tcp_error(e: tcp::Error) -> SocketError {
    match e {
        tcp::Error::InvalidState => SocketError::InvalidState,
        tcp::Error::Finished => SocketError::Finished,
        tcp::Error::Reset => SocketError::Reset,
        tcp::Error::TimedOut => SocketError::TimedOut,
        tcp::Error::Closed => SocketError::Closed,
    }
}

pub(crate) fn readiness_of(e: Event) -> Readiness {
    match e {
        Event::Connected => Readiness::CONNECTED | Readiness::WRITABLE,
        Event::Readable => Readiness::READABLE,
        Event::Writable => Readiness::WRITABLE,
        Event::PeerClosed => Readiness::PEER_CLOSED | Readiness::READABLE,
        Event::Reset | Event::TimedOut => Readiness::ERROR,
        Event::Closed => Readiness::CLOSED,
    }
}

impl TcpTable {
    /// The flow hash of `tuple` for the table: the carried RSS hash when the stack knows the
    /// NIC's key (so the two agree), else the stack's own hash. Always inlined (the per-segment
    /// cases are a few instructions; the Toeplitz hash is out of line): as a call, the tuple
    /// went in and the key came back through memory (callgrind bulk: -281k Ir, ~40 per segment).
    #[inline(always)]
    pub(crate) fn flow_key(&self, tuple: FourTuple, carried: Option<u32>) -> FlowKey {
        let hash = match (self.rss_on, carried) {
            (true, Some(h)) => h,
            (true, None) => rss_flow_hash(&self.cfg, self.hash_seed, &tuple),
            (false, _) => software_hash(self.hash_seed, &tuple),
        };
        let table_hash = if self.table_by_flow_hash {
            hash
        } else {
            software_hash(self.hash_seed, &tuple)
        };
        FlowKey::new(hash, table_hash, &tuple)
    }

    /// A received segment's table key and the slot the table holds for it. With the
    /// look-ahead's table hash ([`TcpTable::rx_table_hash_hint`], taken) the tuple is not
    /// hashed: the slot found under it holds this very tuple (compared in the slot), which is
    /// all the found path needs — the key's RETA hash is then not computed (0). When nothing
    /// is found under it, the key is computed from `tuple` and `carried`
    /// ([`carried_tcp_hash`]) and looked up again, so a wrong hint changes nothing.
    #[inline(always)]
    pub(crate) fn rx_lookup(
        &mut self,
        sockets: &Sockets,
        tuple: FourTuple,
        carried: Option<u32>,
    ) -> (FlowKey, Option<usize>) {
        // One byte tested on the common path (no look-ahead); the hinted one out of line.
        if self.rx_table_hash_hint.is_some() {
            return self.rx_lookup_hinted(sockets, tuple, carried);
        }
        let key = self.flow_key(tuple, carried);
        let found = self.lookup(sockets, &key);
        (key, found)
    }

    /// [`TcpTable::rx_lookup`] with the look-ahead's table hash.
    #[inline(never)]
    fn rx_lookup_hinted(
        &mut self,
        sockets: &Sockets,
        tuple: FourTuple,
        carried: Option<u32>,
    ) -> (FlowKey, Option<usize>) {
        if let Some(th) = self.rx_table_hash_hint.take() {
            let probe = FlowKey::new(0, th, &tuple);
            if let Some(i) = self.lookup(sockets, &probe) {
                return (probe, Some(i));
            }
        }
        let key = self.flow_key(tuple, carried);
        let found = self.lookup(sockets, &key);
        (key, found)
    }

    /// The slot the connection table holds for `key` (a connection or a moved marker).
    #[inline(always)]
    pub(crate) fn lookup(&self, sockets: &Sockets, key: &FlowKey) -> Option<usize> {
        self.conns
            .get(key.table_hash, |i| slot_has_tuple(sockets, i, key))
    }

    /// True when the connection table holds `key`.
    pub(crate) fn holds(&self, sockets: &Sockets, key: &FlowKey) -> bool {
        self.lookup(sockets, key).is_some()
    }

    /// The TCP configuration for a connection over `family`, its MSS clamped to the MTU
    /// (IPv4: MTU − 40; IPv6: MTU − 60, RFC 9293 §3.7.1, RFC 8200 §5), with the stack's
    /// current ECN mode; shared with the connections that derived an equal one
    /// (`tcp_config_share`).
    pub(crate) fn config_for(&mut self, base: &tcp::Config, v4: bool) -> tcp::SharedConfig {
        let overhead = if v4 { 40 } else { 60 };
        let mut c = *base;
        c.ecn = self.ecn;
        if self.mem_state != crate::tcp_mem::MemState::Normal {
            // Memory pressure: new buffers no larger than the pressure size (`tcp_mem`).
            let cap = self.cfg.limits.tcp_mem_pressure_buffer_bytes;
            c.send_buffer_bytes = c.send_buffer_bytes.min(cap);
            c.recv_buffer_bytes = c.recv_buffer_bytes.min(cap);
            c = c.validated();
        }
        c.mss_bytes = c
            .mss_bytes
            .min(self.cfg.interface.mtu_bytes.saturating_sub(overhead));
        self.configs.get(c)
    }

    pub(crate) fn isn_for(&self, now: u64, tuple: &FourTuple) -> (SeqNumber, u32) {
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
        let iss = self.isn.isn(now, local, remote);
        // RFC 7323 §7.1: a per-connection timestamp offset; reuse the keyed hash (with the
        // endpoints swapped so it is not the ISN) at time 0.
        let ts_offset = self.isn.isn(0, remote, local).0;
        (iss, ts_offset)
    }

    pub(crate) fn listen_limits(&self, backlog_max: usize) -> ListenLimits {
        ListenLimits {
            half_open_max: self.cfg.limits.tcp_syn_backlog_max,
            ready_max: backlog_max,
            cookies: self.cfg.limits.tcp_syn_cookies,
        }
    }

    /// The listener for (`dst`, `port`): an exact address match first, else a wildcard one.
    pub(crate) fn find_listener(&self, sockets: &Sockets, dst: IpAddr, port: u16) -> Option<usize> {
        let mut wildcard = None;
        for &i in sockets.bound_to(PortKind::TcpListener, port) {
            let Some(Socket::Tcp(TcpState::Listener(l))) = sockets.get(i) else {
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

    /// How full a listener is (children still in SYN-RECEIVED, established children
    /// waiting for `accept`), counted from its children, and its bounds.
    pub(crate) fn listener_load(&self, sockets: &Sockets, li: usize) -> (ListenLoad, ListenLimits) {
        let Some(Socket::Tcp(TcpState::Listener(l))) = sockets.get(li) else {
            return (ListenLoad::default(), self.listen_limits(0));
        };
        let established = l
            .pending
            .iter()
            .filter(|&&ci| match sockets.get(ci) {
                Some(Socket::Tcp(TcpState::Conn(c))) => c.conn.state().is_synchronized(),
                _ => false,
            })
            .count();
        let load = ListenLoad {
            half_open: l.pending.len() - established,
            ready: established,
        };
        (load, self.listen_limits(l.backlog_max))
    }

    /// The slot of the moved marker for `tuple`, if there is one.
    pub(crate) fn moved_slot(&self, sockets: &Sockets, tuple: FourTuple) -> Option<usize> {
        let key = self.flow_key(tuple, None);
        let i = self.lookup(sockets, &key)?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Moved(_))) => Some(i),
            _ => None,
        }
    }

    /// See [`Stack::tcp_state`].
    pub(crate) fn tcp_state(&self, sockets: &Sockets, h: SocketHandle) -> Option<State> {
        let i = sockets.index(h).ok()?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(c.conn.state()),
            Some(Socket::Tcp(TcpState::Listener(_))) => None,
            _ => TcpTable::bypass_view(sockets, i).map(|v| v.0),
        }
    }

    /// See [`Stack::tcp_max_segment`].
    pub(crate) fn tcp_max_segment(
        &self,
        sockets: &Sockets,
        h: SocketHandle,
    ) -> Result<u16, SocketError> {
        let i = sockets.index(h)?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) if c.conn.state().is_synchronized() => {
                Ok(c.conn.eff_mss())
            }
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(c.conn.config().mss_bytes),
            Some(Socket::Tcp(TcpState::Listener(l))) => Ok(l.config.mss_bytes),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// The connection in the slot `h` names, for read-only queries (`WrongSocketType` for
    /// listeners and UDP sockets).
    pub(crate) fn conn_ref<'s>(
        &self,
        sockets: &'s Sockets,
        h: SocketHandle,
    ) -> Result<&'s Connection, SocketError> {
        let i = sockets.index(h)?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(&c.conn),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// See [`Stack::tcp_send_buffer_bytes`].
    pub(crate) fn tcp_send_buffer_bytes(
        &self,
        sockets: &Sockets,
        h: SocketHandle,
    ) -> Result<u32, SocketError> {
        let i = sockets.index(h)?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(c.conn.config().send_buffer_bytes),
            Some(Socket::Tcp(TcpState::Listener(l))) => Ok(l.config.send_buffer_bytes),
            _ => TcpTable::bypass_view(sockets, i)
                .map(|v| v.2)
                .ok_or(SocketError::WrongSocketType),
        }
    }

    /// See [`Stack::tcp_readiness`].
    pub(crate) fn tcp_readiness(
        &self,
        sockets: &Sockets,
        h: SocketHandle,
    ) -> Result<Readiness, SocketError> {
        use tcp::State;
        let i = sockets.index(h)?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Listener(l))) => {
                let ready = l.pending.iter().any(|&ci| {
                    matches!(
                        sockets.get(ci),
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
                // A deferred Fast Open is writable: its first send makes the SYN.
                let deferred = c.fastopen_deferred();
                if (matches!(state, State::Established | State::CloseWait) || deferred)
                    && c.notsent_writable(self.cfg.tcp_notsent_lowat_bytes)
                {
                    r |= Readiness::WRITABLE;
                }
                if c.has_notifications() {
                    r |= Readiness::ERROR_QUEUE;
                }
                if c.error.is_some() || c.pending_failure().is_some() {
                    r |= Readiness::ERROR;
                } else if c.failure_reported {
                    // The failure was reported: reads now see the end of the stream.
                    r |= Readiness::READABLE;
                }
                Ok(r)
            }
            _ => TcpTable::bypass_view(sockets, i)
                .map(|v| v.1)
                .ok_or(SocketError::WrongSocketType),
        }
    }

    /// See [`Stack::peer_addr`].
    pub(crate) fn peer_addr(
        &self,
        sockets: &Sockets,
        h: SocketHandle,
    ) -> Result<SocketAddr, SocketError> {
        let i = sockets.index(h)?;
        match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Ok(c.key().tuple().remote),
            Some(Socket::Tcp(TcpState::Listener(_))) => Err(SocketError::InvalidState),
            _ => TcpTable::bypass_view(sockets, i)
                .map(|v| v.3)
                .ok_or(SocketError::WrongSocketType),
        }
    }

    /// See [`Stack::tcp_connection_count`].
    pub(crate) fn tcp_connection_count(&self) -> usize {
        self.len()
    }

    pub(crate) fn tcp_poll_timeout(&self) -> Option<u64> {
        let wheel = self.timers.peek().map(|(t, _)| t);
        let tw = self.tw_next_expiry_ns();
        match (wheel, tw) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The engine counters of every connection this stack has held (see
    /// [`crate::Stack::tcp_counters`]).
    pub(crate) fn engine_counters(&self, sockets: &Sockets) -> tcp::Counters {
        let mut total = self.counters_released;
        for s in sockets.iter() {
            if let Socket::Tcp(TcpState::Conn(c)) = s {
                total.add(&c.engine_counters());
            }
        }
        total
    }
}

/// The key of the connection or moved marker in slot `i` (the connection table compares a
/// key with its tuple).
#[inline(always)]
pub(crate) fn slot_key(sockets: &Sockets, i: usize) -> Option<FlowKey> {
    match sockets.get(i) {
        Some(Socket::Tcp(TcpState::Conn(c))) => Some(c.key()),
        Some(Socket::Tcp(TcpState::Moved(m))) => Some(m.key),
        _ => None,
    }
}

/// The carried RSS hash when it is a received TCP segment's flow hash: only when the NIC
/// hashed the TCP 4-tuple (a fragment, or a hash type without TCP ports, carries the hash of
/// the addresses alone, under which the table would miss the connection).
#[inline(always)]
pub(crate) fn carried_tcp_hash(meta: &wire::RxMeta) -> Option<u32> {
    match meta.hash_type {
        Some(wire::RssHashType::TcpIpv4 | wire::RssHashType::TcpIpv6) => meta.hash,
        _ => None,
    }
}

/// True when slot `i` holds the connection or moved marker of `key`'s 4-tuple (a
/// connection's IPv4 tuple is compared in its slot's first line).
#[inline(always)]
pub(crate) fn slot_has_tuple(sockets: &Sockets, i: usize, key: &FlowKey) -> bool {
    match sockets.get(i) {
        Some(Socket::Tcp(TcpState::Conn(c))) => c.has_tuple(key),
        Some(Socket::Tcp(TcpState::Moved(m))) => m.key.same_tuple(key),
        _ => false,
    }
}

pub(crate) fn tcp_port_listened(sockets: &Sockets, ip: IpAddr, port: u16) -> bool {
    sockets
        .bound_to(PortKind::TcpListener, port)
        .iter()
        .any(|&i| match sockets.get(i) {
            Some(Socket::Tcp(TcpState::Listener(l))) => overlaps(l.local.ip(), ip),
            _ => false,
        })
}

#[cfg(test)]
mod tests;
