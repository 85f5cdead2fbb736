//! TCP Fast Open (RFC 7413), client side, in the stack: the cookie cache, the decision on each
//! active Fast Open, the opens themselves ([`Stack::tcp_connect_fastopen`] for
//! `sendto(MSG_FASTOPEN)`, [`Stack::tcp_connect_deferred`] for `connect` with
//! `TCP_FASTOPEN_CONNECT`) and what the SYN-ACK teaches the cache.
//!
//! The cache ([`ClientCache`]) holds one entry per server address (Linux keys its
//! `tcp_metrics` by destination IP): the last cookie the server gave, the MSS its last
//! SYN-ACK announced, the cookie-option form to try (`try_exp`: after a cookie request in the
//! RFC 7413 form drew nothing, one request in the experimental 254/0xF989 form, then the RFC
//! form for good, Linux `tcp_rcv_fastopen_synack`), and the history of SYNs with data lost
//! (RFC 7413 §4.1.3.1). It is bounded ([`crate::Limits::tcp_fastopen_cache_servers_max`], or
//! [`Stack::tcp_set_fastopen_cache_servers_max`]); inserting beyond the bound evicts the entry
//! used longest ago (`tcp_fastopen_cache_evictions`).
//!
//! The decision ([`client_syn`]) for an open to a server:
//! - two or more SYNs with data lost in a row, the last less than 2^losses minutes ago: an
//!   ordinary SYN (RFC 7413 §4.1.3.1 lets a client stop using Fast Open on a path that drops
//!   it; the rule is Linux's before its black-hole detection replaced it);
//! - cookies not required (`tcp_fastopen` bit 0x4): data in the SYN, no option;
//! - a cookie cached: data in the SYN with the cookie, in the form the server gave it;
//! - no cookie: an ordinary SYN with a cookie request (an empty option), no data.
//!
//! The SYN with data carries the send buffer's first bytes, sized by the engine
//! (`tcp::Connection::set_syn_data`) from the cached MSS. After the SYN-ACK
//! (`TcpCx::fastopen_client_synack`): the MSS it announced is cached; its cookie is cached
//! only when our SYN asked for one (an unsolicited cookie is ignored) and it is 4 to 16 bytes
//! of even length (the option parser drops others); `TCPI_OPT_SYN_DATA` when it acknowledged
//! all the SYN's data; a SYN-ACK after retransmitted SYNs that neither acknowledges the data
//! nor carries a cookie counts a lost SYN with data. What the SYN-ACK did not acknowledge the
//! engine sends again at once. A refused SYN-ACK (an acknowledgment beyond what was sent) and
//! a reset teach nothing.
//!
//! The deferred open (`TCP_FASTOPEN_CONNECT`, Linux's `tcp_fastopen_defer_connect`): when the
//! decision is data in the SYN, nothing leaves until the first [`Stack::tcp_send`], which
//! takes only what the SYN carries (the rest of a write waits for the handshake, as in
//! SYN-SENT); the connection is writable meanwhile. Otherwise the SYN (with a cookie request)
//! leaves at once.

use core::net::{IpAddr, SocketAddr};
use std::collections::BTreeMap;

use tcp::State;
use tcp::fastopen::{FastOpenConfig, SYN_DATA_OPTION_RESERVE_BYTES};
use wire::tcp::FastOpenOption;

use crate::Stack;
use crate::socket::{SocketError, SocketHandle, SocketOption};
use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::TcpState;

/// Nanoseconds in a minute.
const NS_PER_MIN: u64 = 60 * 1_000_000_000;

/// What the client knows of one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct CachedServer {
    /// The MSS the server's last SYN-ACK announced (0: none seen).
    pub mss: u16,
    /// The last cookie the server gave (in the option form it used).
    pub cookie: Option<FastOpenOption>,
    /// After cookie requests that drew no cookie (Linux `try_exp`): 1, the next request uses
    /// the experimental option form; 2, back to the RFC form for good; 0, not tried.
    pub try_exp: u8,
    /// SYNs with data (or the cookie option) lost in a row: the SYN-ACK came after
    /// retransmitted SYNs, without a cookie and without acknowledging the data.
    pub syn_losses: u16,
    /// When the last of them was seen.
    pub last_syn_loss_ns: u64,
    /// When the entry was last used or taught (least recently used goes first).
    pub last_used_ns: u64,
}

/// The client's Fast Open cache, one entry per server address. Invariant: `entries.len()`
/// ≤ `max` (a `BTreeMap`: deterministic eviction order on ties).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientCache {
    entries: BTreeMap<IpAddr, CachedServer>,
    max: usize,
}

impl ClientCache {
    /// An empty cache of at most `max` servers.
    pub fn new(max: usize) -> ClientCache {
        ClientCache {
            entries: BTreeMap::new(),
            max,
        }
    }

    /// The entry of `server`.
    pub fn get(&self, server: IpAddr) -> Option<&CachedServer> {
        self.entries.get(&server)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when no server is cached.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The bound on entries.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Forgets every server (Linux `ip tcp_metrics flush`).
    pub fn flush(&mut self) {
        self.entries.clear();
    }

    /// Changes the bound; entries beyond it go, least recently used first. Returns how many
    /// went.
    pub fn set_max(&mut self, max: usize) -> usize {
        self.max = max;
        let mut evicted = 0;
        while self.entries.len() > self.max {
            self.evict_oldest();
            evicted += 1;
        }
        evicted
    }

    fn evict_oldest(&mut self) {
        let oldest = self
            .entries
            .iter()
            .min_by_key(|(_, e)| e.last_used_ns)
            .map(|(&ip, _)| ip);
        if let Some(ip) = oldest {
            self.entries.remove(&ip);
        }
    }

    /// The entry of `server`, created (evicting the least recently used entry when full)
    /// when missing; `None` when the bound is 0. The second value counts evictions (0 or 1).
    fn entry_mut(&mut self, server: IpAddr, now: u64) -> (Option<&mut CachedServer>, u64) {
        if self.max == 0 {
            return (None, 0);
        }
        let mut evicted = 0;
        if !self.entries.contains_key(&server) && self.entries.len() >= self.max {
            self.evict_oldest();
            evicted = 1;
        }
        let e = self.entries.entry(server).or_default();
        e.last_used_ns = now;
        (Some(e), evicted)
    }
}

/// How an active Fast Open's first SYN goes ([`client_syn`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientSyn {
    /// Data in the SYN, with this option (a cookie; none when cookies are not required),
    /// sized from this MSS (the server's last; ours when unknown).
    Data {
        option: Option<FastOpenOption>,
        mss_hint: Option<u16>,
    },
    /// An ordinary SYN with a cookie request in this form (experimental or RFC 7413).
    Request { experimental: bool },
    /// An ordinary SYN without the option: Fast Open set aside after recurring losses.
    Plain,
}

/// The decision for an active Fast Open towards a server of which the cache knows `entry`,
/// at `now` (see the module documentation).
pub fn client_syn(cfg: &FastOpenConfig, entry: Option<&CachedServer>, now: u64) -> ClientSyn {
    if let Some(e) = entry
        && e.syn_losses > 1
    {
        let hold_ns = NS_PER_MIN.saturating_mul(1u64 << e.syn_losses.min(32));
        if now < e.last_syn_loss_ns.saturating_add(hold_ns) {
            return ClientSyn::Plain;
        }
    }
    let mss_hint = entry.map(|e| e.mss).filter(|&m| m > 0);
    if cfg.client_no_cookie {
        return ClientSyn::Data {
            option: None,
            mss_hint,
        };
    }
    match entry.and_then(|e| e.cookie) {
        Some(cookie) => ClientSyn::Data {
            option: Some(cookie),
            mss_hint,
        },
        None => ClientSyn::Request {
            experimental: entry.is_some_and(|e| e.try_exp == 1),
        },
    }
}

/// A connection's client Fast Open state (beside the TCB in the stack's socket).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ClientOpen {
    /// `TCP_FASTOPEN_CONNECT` with data due in the SYN: nothing leaves until the first send,
    /// which carries this decision out.
    pub(crate) deferred: Option<ClientSyn>,
    /// The first SYN carries the option: `Some(experimental)` for its form. A cookie in the
    /// SYN-ACK is cached only then (Linux `syn_fastopen`).
    pub(crate) option_sent: Option<bool>,
}

/// What the SYN-SENT connection looked like before a segment arrived, for
/// [`TcpCx::fastopen_client_synack`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct BeforeSynAck {
    /// Bytes of data the SYN carried.
    pub(crate) syn_data_bytes: u32,
    /// Where the SYN's data ended: the SYN-ACK acknowledged all of it when SND.UNA reaches
    /// it.
    pub(crate) syn_data_end: wire::SeqNumber,
    /// The SYN had been retransmitted (Linux `total_retrans`).
    pub(crate) retransmitted: bool,
}

impl Stack {
    /// `sendto(MSG_FASTOPEN)` (RFC 7413 §4.1): an active open to `remote` whose SYN carries
    /// as much of `data` as it may, with the server's cached cookie; without a cookie, an
    /// ordinary SYN with a cookie request (no data). `options` are set on the connection
    /// first, as `setsockopt` before `sendto` (`MaxSegment` caps what the SYN carries too).
    /// Returns the handle and the bytes taken — those the SYN carries, the rest is the
    /// caller's to send after the handshake (a caller that blocks may queue it at once with
    /// [`Stack::tcp_send`]). `NotSupported` when the client side of Fast Open is off
    /// ([`Stack::tcp_set_fastopen`]); otherwise as [`Stack::tcp_connect`].
    pub fn tcp_connect_fastopen(
        &mut self,
        now: u64,
        remote: SocketAddr,
        local_port: u16,
        options: &[SocketOption],
        data: &[u8],
    ) -> Result<(SocketHandle, usize), SocketError> {
        let flags = crate::SendFlags::default();
        self.tcp_connect_fastopen_with(now, remote, local_port, options, data, flags)
    }

    /// [`Stack::tcp_connect_fastopen`] whose data is sent with `flags`
    /// ([`Stack::tcp_send_with`]: a zero-copy send's ID is taken only when the SYN carries
    /// data; `more` and `eor` have no effect on what a SYN carries).
    pub fn tcp_connect_fastopen_with(
        &mut self,
        now: u64,
        remote: SocketAddr,
        local_port: u16,
        options: &[SocketOption],
        data: &[u8],
        flags: crate::SendFlags,
    ) -> Result<(SocketHandle, usize), SocketError> {
        let mut cx = self.tcp_cx();
        let decision = cx.fastopen_client_decide(now, remote.ip())?;
        let h = cx.tcp_connect(now, remote, local_port)?;
        cx.fastopen_client_options(h, options)?;
        let n = cx.fastopen_client_start(h, decision, data, false)?;
        let i = cx.sockets.index(h)?;
        cx.tcp_after_send(i, n, flags);
        Ok((h, n))
    }

    /// `connect` with `TCP_FASTOPEN_CONNECT`: an active open to `remote` that, when its SYN
    /// would carry data (a cookie is cached, or cookies are not required), is deferred —
    /// nothing is sent until the first [`Stack::tcp_send`], whose bytes the SYN carries (only
    /// those: the send returns how many). Otherwise the SYN leaves now with a cookie request.
    /// `options` are set on the connection first, as `setsockopt` before `connect`. Returns
    /// the handle and whether the open was deferred. `NotSupported` when the client side of
    /// Fast Open is off; otherwise as [`Stack::tcp_connect`].
    pub fn tcp_connect_deferred(
        &mut self,
        now: u64,
        remote: SocketAddr,
        local_port: u16,
        options: &[SocketOption],
    ) -> Result<(SocketHandle, bool), SocketError> {
        let mut cx = self.tcp_cx();
        let decision = cx.fastopen_client_decide(now, remote.ip())?;
        let h = cx.tcp_connect(now, remote, local_port)?;
        cx.fastopen_client_options(h, options)?;
        let deferred = matches!(decision, ClientSyn::Data { .. });
        cx.fastopen_client_start(h, decision, &[], deferred)?;
        Ok((h, deferred))
    }

    /// True while `h` is a deferred Fast Open ([`Stack::tcp_connect_deferred`]) whose first
    /// send has not happened: no SYN has left.
    pub fn tcp_is_deferred(&self, h: SocketHandle) -> bool {
        let (_, sockets) = self.tcp_view();
        let Ok(i) = sockets.index(h) else {
            return false;
        };
        matches!(sockets.get(i), Some(Socket::Tcp(TcpState::Conn(c)))
            if c.fastopen_deferred())
    }

    /// What the client's Fast Open cache holds for `server`.
    pub fn tcp_fastopen_cached(&self, server: IpAddr) -> Option<CachedServer> {
        self.tcp_view().0.fastopen_cache.get(server).copied()
    }

    /// The client's whole Fast Open cache (to carry it into another stack with
    /// [`Stack::tcp_set_fastopen_cache`]).
    pub fn tcp_fastopen_cache(&self) -> &ClientCache {
        &self.tcp_view().0.fastopen_cache
    }

    /// Replaces the client's Fast Open cache (its bound comes with it).
    pub fn tcp_set_fastopen_cache(&mut self, cache: ClientCache) {
        self.tcp_cx().tcp.fastopen_cache = cache;
    }

    /// Forgets every cached server (Linux `ip tcp_metrics flush`).
    pub fn tcp_fastopen_flush_cache(&mut self) {
        self.tcp_cx().tcp.fastopen_cache.flush();
    }

    /// Bounds the client's Fast Open cache to `max` servers (0 turns caching off); entries
    /// beyond it are evicted at once, least recently used first (counted).
    pub fn tcp_set_fastopen_cache_servers_max(&mut self, max: usize) {
        let cx = self.tcp_cx();
        let evicted = cx.tcp.fastopen_cache.set_max(max);
        cx.tcp.counters.tcp_fastopen_cache_evictions += evicted as u64;
    }
}

impl TcpCx<'_> {
    /// The decision for an active Fast Open to `server` now.
    fn fastopen_client_decide(
        &mut self,
        now: u64,
        server: IpAddr,
    ) -> Result<ClientSyn, SocketError> {
        let cfg = self.tcp.fastopen;
        if !cfg.client {
            return Err(SocketError::NotSupported);
        }
        Ok(client_syn(&cfg, self.tcp.fastopen_cache.get(server), now))
    }

    /// Sets `options` on the new connection `h` (undone, with the connection, on an error).
    fn fastopen_client_options(
        &mut self,
        h: SocketHandle,
        options: &[SocketOption],
    ) -> Result<(), SocketError> {
        let i = self.sockets.index(h)?;
        for &opt in options {
            if let Err(e) = self.set_option(i, opt) {
                // The connection goes with its handle (nothing was sent yet).
                let _ = self.tcp_close(0, i);
                return Err(e);
            }
        }
        Ok(())
    }

    /// Carries `decision` out on the new connection `h`: queues what the SYN carries of
    /// `data` and arms the SYN's option, or (`defer`) only records it. Returns the bytes
    /// queued.
    fn fastopen_client_start(
        &mut self,
        h: SocketHandle,
        decision: ClientSyn,
        data: &[u8],
        defer: bool,
    ) -> Result<usize, SocketError> {
        let (i, c) = self.conn_for(h)?;
        if defer {
            c.rare_mut().fastopen_client = Some(Box::new(ClientOpen {
                deferred: Some(decision),
                option_sent: None,
            }));
            return Ok(0);
        }
        let (option, n) = match decision {
            ClientSyn::Data { option, mss_hint } => {
                let mss = mss_hint
                    .unwrap_or(c.conn.config().mss_bytes)
                    .min(c.conn.config().mss_bytes);
                let room = usize::from(mss.saturating_sub(SYN_DATA_OPTION_RESERVE_BYTES));
                let take = data.len().min(room);
                let n = c
                    .conn
                    .send(data.get(..take).unwrap_or_default())
                    .map_err(crate::tcp_sockets::map_tcp_error)?;
                c.conn.set_syn_data(mss_hint);
                (option, n)
            }
            ClientSyn::Request { experimental } => (Some(FastOpenOption::request(experimental)), 0),
            ClientSyn::Plain => (None, 0),
        };
        let rare = c.rare_mut();
        rare.fastopen_syn_option = option;
        rare.fastopen_client = Some(Box::new(ClientOpen {
            deferred: None,
            option_sent: option.map(|o| o.experimental),
        }));
        let counters = &mut self.tcp.counters;
        match decision {
            ClientSyn::Data { .. } => counters.tcp_fastopen_client_syn_data += 1,
            ClientSyn::Request { .. } => counters.tcp_fastopen_client_cookie_requests += 1,
            ClientSyn::Plain => counters.tcp_fastopen_client_disabled_after_loss += 1,
        }
        self.tcp.dirty.insert(i);
        Ok(n)
    }

    /// The first send on a deferred open (slot `i`): the SYN leaves with what it carries of
    /// `data`. `None` when the connection is not deferred.
    pub(crate) fn fastopen_client_first_send(
        &mut self,
        i: usize,
        h: SocketHandle,
        data: &[u8],
    ) -> Option<Result<usize, SocketError>> {
        let c = self.conn_mut(i)?;
        let decision = c.rare()?.fastopen_client.as_ref()?.deferred?;
        Some(self.fastopen_client_start(h, decision, data, false))
    }

    /// After a segment took connection `i` out of SYN-SENT (`before` as it was): the cache
    /// learns from the SYN-ACK, and `TCPI_OPT_SYN_DATA` is set when it acknowledged all the
    /// SYN's data (see the module documentation).
    pub(crate) fn fastopen_client_synack(
        &mut self,
        now: u64,
        i: usize,
        synack: &wire::TcpRepr<'_>,
        before: BeforeSynAck,
    ) {
        let Some(c) = self.conn_mut(i) else {
            return;
        };
        let Some(client) = c.rare().and_then(|r| r.fastopen_client.as_deref().copied()) else {
            return;
        };
        if !c.conn.state().is_synchronized() {
            // A simultaneous open, a reset or a refused SYN-ACK: nothing learnt.
            return;
        }
        let server = c.key().tuple().remote.ip();
        let (una, _, _) = c.conn.sequence_state();
        let all_acked = before.syn_data_bytes > 0 && !una.lt(before.syn_data_end);
        let data_unacked = before.syn_data_bytes > 0 && una.lt(before.syn_data_end);
        c.syn_data_acked = all_acked;
        // A cookie the SYN did not ask for is ignored (Linux `tcp_rcv_fastopen_synack`).
        let cookie = synack
            .fast_open
            .filter(|o| client.option_sent.is_some() && !o.is_request());
        let requested_in_vain = client.option_sent.is_some()
            && cookie.is_none()
            && before.syn_data_bytes == 0
            && !before.retransmitted;
        let syn_lost = client.option_sent.is_some()
            && before.retransmitted
            && cookie.is_none()
            && data_unacked;
        let counters = &mut self.tcp.counters;
        if all_acked {
            counters.tcp_fastopen_client_syn_data_acked += 1;
        } else if before.syn_data_bytes > 0 {
            counters.tcp_fastopen_client_syn_data_unacked += 1;
        }
        let (entry, evicted) = self.tcp.fastopen_cache.entry_mut(server, now);
        self.tcp.counters.tcp_fastopen_cache_evictions += evicted;
        let Some(e) = entry else {
            return;
        };
        if let Some(mss) = synack.max_seg_size.filter(|&m| m > 0) {
            e.mss = mss;
        }
        if let Some(cookie) = cookie {
            e.cookie = Some(cookie);
            self.tcp.counters.tcp_fastopen_client_cookies_cached += 1;
        } else if requested_in_vain && e.cookie.is_none() {
            // No cookie for a request in the RFC form: try the experimental form once; none
            // for that either: the RFC form for good (Linux `try_exp`).
            let next = if client.option_sent == Some(true) {
                2
            } else {
                1
            };
            e.try_exp = e.try_exp.max(next);
        }
        if syn_lost {
            e.syn_losses = e.syn_losses.saturating_add(1);
            e.last_syn_loss_ns = now;
        } else {
            e.syn_losses = 0;
        }
    }
}

/// Snapshot of a SYN-SENT client connection before input, when it is an active Fast Open
/// (`None` otherwise, at the cost of one pointer's test per segment).
#[inline(always)]
pub(crate) fn before_synack(c: &crate::tcp_sockets::ConnSock) -> Option<BeforeSynAck> {
    c.rare()?.fastopen_client.as_ref()?;
    before_synack_client(c)
}

#[cold]
#[inline(never)]
fn before_synack_client(c: &crate::tcp_sockets::ConnSock) -> Option<BeforeSynAck> {
    if c.conn.state() != State::SynSent {
        return None;
    }
    let syn_data_bytes = c.conn.syn_data_sent_bytes();
    Some(BeforeSynAck {
        syn_data_bytes,
        syn_data_end: c.conn.iss() + 1 + syn_data_bytes,
        retransmitted: c.conn.counters().rto_expirations > 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client_on() -> FastOpenConfig {
        FastOpenConfig::default().with_sysctl_bits(0x1)
    }

    fn cookie(b: &[u8]) -> FastOpenOption {
        FastOpenOption::with_cookie(b, false).unwrap()
    }

    #[test]
    fn no_cookie_cached_asks_for_one_in_the_rfc_form() {
        assert_eq!(
            client_syn(&client_on(), None, 0),
            ClientSyn::Request {
                experimental: false
            }
        );
    }

    #[test]
    fn a_cached_cookie_sends_data_sized_by_the_cached_mss() {
        let e = CachedServer {
            mss: 940,
            cookie: Some(cookie(&[1, 2, 3, 4])),
            ..CachedServer::default()
        };
        assert_eq!(
            client_syn(&client_on(), Some(&e), 0),
            ClientSyn::Data {
                option: Some(cookie(&[1, 2, 3, 4])),
                mss_hint: Some(940)
            }
        );
    }

    #[test]
    fn without_cookies_required_data_goes_without_the_option() {
        let cfg = FastOpenConfig::default().with_sysctl_bits(0x5);
        assert_eq!(
            client_syn(&cfg, None, 0),
            ClientSyn::Data {
                option: None,
                mss_hint: None
            }
        );
    }

    #[test]
    fn a_request_that_drew_nothing_is_retried_once_in_the_experimental_form() {
        let e = CachedServer {
            try_exp: 1,
            ..CachedServer::default()
        };
        assert_eq!(
            client_syn(&client_on(), Some(&e), 0),
            ClientSyn::Request { experimental: true }
        );
        let e = CachedServer {
            try_exp: 2,
            ..CachedServer::default()
        };
        assert_eq!(
            client_syn(&client_on(), Some(&e), 0),
            ClientSyn::Request {
                experimental: false
            }
        );
    }

    #[test]
    fn recurring_syn_losses_set_fast_open_aside_for_two_to_the_losses_minutes() {
        let e = CachedServer {
            cookie: Some(cookie(&[1, 2, 3, 4])),
            syn_losses: 2,
            last_syn_loss_ns: 1000,
            ..CachedServer::default()
        };
        assert_eq!(client_syn(&client_on(), Some(&e), 1000), ClientSyn::Plain);
        let after = 1000 + 4 * NS_PER_MIN;
        assert!(matches!(
            client_syn(&client_on(), Some(&e), after),
            ClientSyn::Data { .. }
        ));
        // One loss alone changes nothing (it may be an ordinary loss).
        let one = CachedServer { syn_losses: 1, ..e };
        assert!(matches!(
            client_syn(&client_on(), Some(&one), 1000),
            ClientSyn::Data { .. }
        ));
    }

    #[test]
    fn the_cache_is_bounded_and_evicts_the_least_recently_used_server() {
        let mut cache = ClientCache::new(2);
        let ip = |d| IpAddr::V4(core::net::Ipv4Addr::new(10, 0, 0, d));
        assert_eq!(cache.entry_mut(ip(1), 10).1, 0);
        assert_eq!(cache.entry_mut(ip(2), 20).1, 0);
        // Using 1 again makes 2 the oldest.
        assert_eq!(cache.entry_mut(ip(1), 30).1, 0);
        assert_eq!(cache.entry_mut(ip(3), 40).1, 1);
        assert_eq!(cache.len(), 2);
        assert!(cache.get(ip(2)).is_none());
        assert!(cache.get(ip(1)).is_some());
        assert_eq!(cache.set_max(1), 1);
        assert!(cache.get(ip(3)).is_some());
        assert_eq!(cache.set_max(0), 1);
        assert!(cache.entry_mut(ip(4), 50).0.is_none());
        assert!(cache.is_empty());
    }
}
