//! TCP input and timers over the socket table: segment demultiplexing (moved
//! markers, connections, listeners, RST for closed ports), the listener path (children, SYN
//! cookies), readiness and the timer index (the dirty-set flush into the egress part is `tcp_output.rs`).
//!
//! [`TcpCx`] is the TCP part at work: its own [`TcpTable`] plus the parts it borrows — the
//! socket table (slots, through its methods) and the egress part (to send).

use core::net::SocketAddr;

use tcp::isn::{Endpoint, SynCookies};
use tcp::listen::{
    ListenInput, SynAction, admit_cookie, admit_syn, classify_listen_segment, reset_reply,
};
use tcp::{Connection, Event, State};
use wire::{SeqNumber, TcpFlags, TcpPacket, TcpRepr};

use crate::cold_path;
use crate::config::StackConfig;
use crate::egress::{
    ETHERNET_HEADER_LEN, Egress, IPV4_HEADER_LEN, IPV6_HEADER_LEN, TCP_HEADER_MIN,
};
use crate::icmp::QuotedError;
use crate::ip_in::{IpMeta, RxFrame};
use crate::socket::{Readiness, SocketError};
use crate::sockets::{Socket, Sockets};
use crate::tcp_sockets::{
    ConnSock, FlowKey, FourTuple, Listener, MovedMarker, NOT_ARMED, TcpState, TcpTable,
    endpoint_bytes, readiness_of,
};

/// The sum (`wire::checksum`, folded) of a TCP segment's pseudo-header and header: `bytes`
/// is the segment, its header `header_len` long. With the text's sum it makes the whole
/// segment's (`tcp::Connection::handle_segment_summing`). `None` for an IPv4 segment too
/// long for its pseudo-header's 16-bit length (it cannot have come in one datagram): the
/// caller verifies it the ordinary way, which refuses it.
#[inline]
fn header_sum(bytes: &[u8], header_len: usize, pair: &wire::IpPair) -> Option<u16> {
    let header = bytes.get(..header_len).unwrap_or(&[]);
    match *pair {
        wire::IpPair::V4 { src, dst } => Some(wire::checksum::sum_pseudo_v4_header(
            src,
            dst,
            wire::IpProtocol::TCP.0,
            u16::try_from(bytes.len()).ok()?,
            header,
        )),
        wire::IpPair::V6 { .. } => Some(wire::checksum::combine(&[
            pair.pseudo_header_sum(
                wire::IpProtocol::TCP,
                u32::try_from(bytes.len()).unwrap_or(u32::MAX),
            ),
            wire::checksum::sum_header(header),
        ])),
    }
}

/// What the last-flow record (`conn_table::LastFlow`) compares for a segment: its IPv4
/// addresses and ports as received and the carried hash; `None` for IPv6 (looked up every
/// time).
#[inline(always)]
fn last_flow_key(
    meta: &IpMeta,
    seg: &TcpRepr<'_>,
    carried: Option<u32>,
) -> Option<crate::conn_table::LastFlowKey> {
    let (core::net::IpAddr::V4(src), core::net::IpAddr::V4(dst)) = (meta.src, meta.dst) else {
        return None;
    };
    Some(crate::conn_table::LastFlowKey {
        addrs: (u64::from(src.to_bits()) << 32) | u64::from(dst.to_bits()),
        ports: (u32::from(seg.src_port) << 16) | u32::from(seg.dst_port),
        carried,
    })
}

/// The TCP part with the parts it borrows for one call. Built by `Stack::tcp_cx`, which
/// splits the stack's borrows. TCP writes only `tcp`; it changes the socket table and the
/// egress part only through their methods.
pub(crate) struct TcpCx<'a> {
    pub(crate) cfg: &'a StackConfig,
    pub(crate) tcp: &'a mut TcpTable,
    pub(crate) sockets: &'a mut Sockets,
    pub(crate) egress: &'a mut Egress,
}

impl TcpCx<'_> {
    /// Frees slot `i`, keeping the engine counters of a connection it held.
    pub(crate) fn free_slot(&mut self, i: usize) {
        let slots = self.sockets.slot_count();
        let freed = self.sockets.free(i);
        if self.sockets.slot_count() < slots {
            // The socket table was compacted: the timer nodes of the dropped slots go too.
            self.tcp.timers.truncate(self.sockets.slot_count());
        }
        if let Some(Socket::Tcp(TcpState::Conn(c))) = freed {
            self.tcp.counters_released.add(&c.engine_counters());
            self.tcp.forget_source(&c);
            crate::tcp_mem::mem_forget(self.tcp, &c);
            self.tcp_mem_judge();
            self.tcp.shrink_tables();
        }
    }

    // ------------------------------------------------------------------ table helpers

    pub(crate) fn conn_mut(&mut self, i: usize) -> Option<&mut ConnSock> {
        match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => Some(c),
            Some(Socket::Tcp(TcpState::Listener(_))) => None,
            _ => None,
        }
    }

    pub(crate) fn listener_mut(&mut self, i: usize) -> Option<&mut Listener> {
        match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Listener(l))) => Some(l),
            Some(Socket::Tcp(TcpState::Conn(_))) => None,
            _ => None,
        }
    }

    // ------------------------------------------------------------------ input

    /// One received TCP segment. Always inlined into IP input's delivery (through
    /// `Upper::deliver`), as it was into the old `Stack::deliver`: as a call of its own, the
    /// `IpMeta`/`RxFrame` arguments and the `TcpCx` went through memory (-137k Ir in
    /// callgrind bulk, ~20 per segment).
    #[inline(always)]
    pub(crate) fn process_tcp(
        &mut self,
        now: u64,
        meta: IpMeta,
        payload: &[u8],
        whole: &[u8],
        rx: RxFrame<'_>,
    ) {
        let hash = crate::tcp_sockets::carried_tcp_hash(rx.meta);
        let Some(pair) = meta.pair() else {
            cold_path();
            return;
        };
        // The header is read at fixed offsets when it has no options or NOP NOP timestamps
        // (`wire::tcp_fixed`: the same `TcpRepr` the general parser builds, and `payload`
        // then holds the whole header), by the general parser otherwise. The checks and the
        // counters keep the general order: length, the NIC's verdict, the options.
        let fixed = wire::tcp_fixed::parse_fixed(payload);
        let view = if fixed.is_some() {
            TcpPacket::new_unchecked(payload)
        } else {
            let Ok(view) = TcpPacket::new_checked(payload) else {
                cold_path();
                self.tcp.counters.rx_drop_tcp_malformed += 1;
                return;
            };
            view
        };
        // The NIC's verdict decides whether the checksum is verified here (`Stack::receive`).
        let Some(caps) = rx.l4_caps(self.cfg.checksums, &mut self.tcp.counters) else {
            cold_path();
            self.tcp.counters.rx_drop_tcp_malformed += 1;
            return;
        };
        // A checksum to verify is verified after the lookup: a connection's predicted data
        // segment has it summed while the engine copies the text into the receive buffer
        // (`summing_input`), every other segment by a pass of its own before anything acts
        // on it. Either way a segment that fails is dropped, counted, with nothing changed.
        // By reference: the fixed read's `TcpRepr` is not moved out of its `Option` (a copy
        // of the whole struct per segment).
        let parsed;
        let seg = match &fixed {
            Some(seg) => seg,
            None => {
                let Ok(p) = TcpRepr::parse(
                    &view,
                    &pair,
                    wire::ChecksumCaps {
                        verify_rx: false,
                        ..caps
                    },
                ) else {
                    cold_path();
                    self.tcp.counters.rx_drop_tcp_malformed += 1;
                    return;
                };
                parsed = p;
                &parsed
            }
        };
        let tuple = |seg: &TcpRepr<'_>| FourTuple {
            local: SocketAddr::new(meta.dst, seg.dst_port),
            remote: SocketAddr::new(meta.src, seg.src_port),
        };
        // The last flow found first (`conn_table::LastFlow`: an IPv4 tuple compared in a few
        // words, the answer the lookup would give); else the lookup, under the look-ahead's
        // table hash when `Stack::receive_hinted` gave one. `key` is the segment's own key
        // whenever nothing was found (the paths below use it); a hit consumes the hint too.
        let last = last_flow_key(&meta, seg, hash);
        let epoch = self.sockets.epoch();
        let (key, found) = match last.and_then(|k| self.tcp.conns.last_get(&k, epoch)) {
            Some(i) => {
                debug_assert_eq!(
                    self.tcp
                        .lookup(self.sockets, &self.tcp.flow_key(tuple(seg), hash)),
                    Some(i),
                    "the last-flow record disagrees with the table"
                );
                self.tcp.rx_table_hash_hint = None;
                (None, Some(i))
            }
            None => {
                let (key, found) = self.tcp.rx_lookup(self.sockets, tuple(seg), hash);
                if let (Some(k), Some(i)) = (last, found) {
                    self.tcp.conns.last_set(k, i, epoch);
                }
                (Some(key), found)
            }
        };
        // The slot's first line is cached now: ask for the rest of the connection's state
        // at once (`tcp_prefetch`; nothing when the last segment or call was for it).
        if let Some(i) = found {
            self.prefetch_conn(i);
        }
        if caps.verify_rx {
            if let Some(i) = found {
                match self.summing_input(now, i, payload, &pair, seg, rx) {
                    tcp::SummedInput::Taken => return,
                    tcp::SummedInput::BadChecksum => {
                        cold_path();
                        self.tcp.counters.rx_drop_tcp_malformed += 1;
                        return;
                    }
                    tcp::SummedInput::Declined => {}
                }
            }
            if !view.verify_checksum(&pair) {
                cold_path();
                self.tcp.counters.rx_drop_tcp_malformed += 1;
                return;
            }
        }
        if let Some(i) = found {
            let mut synack = None;
            if let Some(c) = self.conn_mut(i) {
                c.last_rx_ns = now;
                // An active Fast Open in SYN-SENT: the SYN-ACK teaches the client's cache.
                let before = crate::tcp_fastopen_client::before_synack(c);
                c.conn
                    .handle_segment_ecn(now, seg, rx.meta.gro_mss_bytes, meta.ecn);
                if before.is_some() && c.conn.state() != State::SynSent {
                    synack = before;
                }
                if let Some((r, conn)) = c.rare_if_any_and_conn_mut()
                    && let Some(p) = r.plpmtud.as_deref_mut()
                {
                    let e = p.after_input(now, conn);
                    self.tcp.counters.count_plpmtud(e);
                }
            } else if let Some(m) = self.moved_mut(i) {
                if m.bypass.is_some() {
                    self.bypass_forward(i, whole);
                    return;
                }
                let forward = m.forward;
                self.tcp_moved_input(forward, whole, rx);
                return;
            }
            if let Some(before) = synack {
                cold_path();
                self.fastopen_client_synack(now, i, seg, before);
            }
            self.tcp_after_input(i);
            return;
        }
        // Nothing found: the lookup ran and made the key.
        let key = key.unwrap_or_else(|| self.tcp.flow_key(tuple(seg), hash));
        if self.tcp.tw_len() > 0 {
            if let Some(pos) = self.tcp.tw_find(&key) {
                self.tcp_time_wait_segment(now, meta, key, pos, seg);
                return;
            }
        }
        let listener = if meta.dst_unicast {
            self.tcp.find_listener(self.sockets, meta.dst, seg.dst_port)
        } else {
            None
        };
        let Some(li) = listener else {
            self.reply_rst(now, meta, seg);
            return;
        };
        // RFC 9293 §3.10.7.2 (LISTEN): RST is ignored, ACK draws a RST (unless it completes
        // a SYN-cookie handshake, RFC 4987 §3.6), SYN opens.
        match classify_listen_segment(seg) {
            ListenInput::Syn => self.tcp_open_child(now, li, key, seg),
            ListenInput::Ack => {
                if !seg.flags.contains(TcpFlags::SYN)
                    && self.tcp_open_from_cookie(now, li, key, seg)
                {
                    return;
                }
                self.tcp.counters.tcp_listen_bad_segment += 1;
                self.reply_rst(now, meta, seg);
            }
            ListenInput::Ignore => self.tcp.counters.tcp_listen_bad_segment += 1,
        }
    }

    /// A segment (`bytes`, parsed as `seg`) whose checksum is still to verify, for the
    /// connection in slot `i` (a moved marker's slot declines): offered to the engine's
    /// summing input (`tcp::Connection::handle_segment_summing`) with the sum of its
    /// pseudo-header and TCP header ([`header_sum`]); when the engine takes it, what follows
    /// a connection's input (`process_tcp`) follows. A predicted segment is ESTABLISHED, so
    /// no Fast Open SYN-ACK. Out of line, and everything it needs computed here: inlined
    /// into IP input (or with the header sum left to its caller), it grew IP input until
    /// `Ipv4Repr::parse` was no longer inlined (callgrind: +60 instructions per segment).
    #[inline(never)]
    fn summing_input(
        &mut self,
        now: u64,
        i: usize,
        bytes: &[u8],
        pair: &wire::IpPair,
        seg: &TcpRepr<'_>,
        rx: RxFrame<'_>,
    ) -> tcp::SummedInput {
        // The slot borrowed by field, so that it stays borrowed to the end.
        let Some(Socket::Tcp(TcpState::Conn(c))) = self.sockets.get_mut(i) else {
            return tcp::SummedInput::Declined;
        };
        // The header is what precedes the text `seg` carries.
        let header_len = bytes.len() - seg.payload.len();
        let Some(header_sum) = header_sum(bytes, header_len, pair) else {
            return tcp::SummedInput::Declined;
        };
        let got = c
            .conn
            .handle_segment_summing(now, seg, rx.meta.gro_mss_bytes, header_sum);
        if got != tcp::SummedInput::Taken {
            return got;
        }
        c.last_rx_ns = now;
        if let Some((r, conn)) = c.rare_if_any_and_conn_mut()
            && let Some(p) = r.plpmtud.as_deref_mut()
        {
            let e = p.after_input(now, conn);
            self.tcp.counters.count_plpmtud(e);
        }
        // `tcp_after_input` on the slot already borrowed (it is not looked up again).
        self.tcp.dirty.insert(i);
        let after = after_input_on_slot(self.tcp, i, c);
        self.tcp_after_input_finish(i, after);
        tcp::SummedInput::Taken
    }

    /// A frame for a moved-away connection: never processed here (no RST, no state), but
    /// dropped and counted, or queued for the new owner in arrival order when the driver set a
    /// destination. The forwarded frame is the received Ethernet header followed by `whole`
    /// (the IP datagram, reassembled if it came in fragments).
    pub(crate) fn tcp_moved_input(&mut self, forward: Option<u16>, whole: &[u8], rx: RxFrame<'_>) {
        let Some(dest) = forward else {
            self.tcp.counters.tcp_drop_moved += 1;
            return;
        };
        if self.tcp.forward.len() >= self.cfg.limits.tcp_moved_forward_frames_max {
            self.tcp.counters.tcp_moved_forward_full += 1;
            return;
        }
        let eth = rx.frame.get(..ETHERNET_HEADER_LEN).unwrap_or(&[]);
        let mut frame = Vec::with_capacity(eth.len() + whole.len());
        frame.extend_from_slice(eth);
        frame.extend_from_slice(whole);
        // Rebuilt from the datagram: the offsets no longer describe it, but the hash and the
        // checksum verdicts do — the IP header and segment are the same bytes (`rx.meta` of a
        // reassembled datagram is already hash-only). Keeping a verdict matters when the
        // port trusted the OS's word for a checksum left partial by a sender on this host:
        // verified again, such a frame would be dropped at every retransmission.
        let meta = wire::RxMeta {
            csum: rx.meta.csum,
            ..rx.meta.hash_only()
        };
        self.tcp.forward.push_back((dest, frame, meta));
        self.tcp.counters.tcp_moved_forwarded += 1;
    }

    pub(crate) fn moved_mut(&mut self, i: usize) -> Option<&mut MovedMarker> {
        match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Moved(m))) => Some(m),
            _ => None,
        }
    }

    /// Removes the moved marker in slot `i` (import, release or expiry) and frees its slot.
    pub(crate) fn tcp_drop_marker(&mut self, i: usize) {
        let Some(m) = self.moved_mut(i) else {
            return;
        };
        let (key, expires_ns) = (m.key, m.expires_ns);
        // The wheel holds the marker's expiry until it pops it (`tcp_handle_timeout` then
        // drops the marker at once).
        debug_assert!(self.tcp.timers.get(i).is_none_or(|t| t == expires_ns));
        self.tcp.timers.remove(i);
        self.tcp.conns.remove(key.table_hash, i);
        self.tcp.moved -= 1;
        self.free_slot(i);
    }

    /// A SYN on a listening port: a new child in SYN-RECEIVED, parked in the backlog; past the
    /// SYN backlog, a stateless SYN-cookie SYN-ACK (RFC 4987 §3.6); past the accept backlog,
    /// a counted drop (the peer retransmits its SYN; by then the application may have
    /// accepted).
    pub(crate) fn tcp_open_child(&mut self, now: u64, li: usize, key: FlowKey, syn: &TcpRepr<'_>) {
        self.tcp_open_child_with(now, li, key, syn, None);
    }

    /// [`TcpCx::tcp_open_child`], with the child's initial sequence number given (`iss`: a
    /// SYN that reopens a 4-tuple in TIME-WAIT starts past the old incarnation, RFC 6191)
    /// instead of the generator's.
    pub(crate) fn tcp_open_child_with(
        &mut self,
        now: u64,
        li: usize,
        key: FlowKey,
        syn: &TcpRepr<'_>,
        iss: Option<SeqNumber>,
    ) {
        if !self.tcp_overload_admit(now, key.tuple().remote.ip()) {
            return;
        }
        let (load, limits) = self.tcp.listener_load(self.sockets, li);
        let Some(l) = self.listener_mut(li) else {
            return;
        };
        let base = l.config;
        let config = self.tcp.config_for(&base, key.tuple().local.is_ipv4());
        let action = admit_syn(load, limits);
        if action == SynAction::Drop {
            self.tcp.counters.tcp_listen_backlog_full += 1;
            return;
        }
        if action == SynAction::Cookie {
            let (l_ep, r_ep) = (
                endpoint_bytes(key.tuple().local.ip()),
                endpoint_bytes(key.tuple().remote.ip()),
            );
            let local = Endpoint {
                addr: l_ep.0.get(..l_ep.1).unwrap_or(&[]),
                port: key.tuple().local.port(),
            };
            let remote = Endpoint {
                addr: r_ep.0.get(..r_ep.1).unwrap_or(&[]),
                port: key.tuple().remote.port(),
            };
            let iss =
                self.tcp
                    .cookies
                    .generate(now, local, remote, syn.seq_number, syn.max_seg_size);
            // The same per-tuple timestamp offset `from_syn_cookie` will get, so the
            // timestamp clock is continuous across the stateless handshake.
            let (_, ts_offset) = self.tcp.isn_for(now, &key.tuple());
            let syn_ack = SynCookies::syn_ack(&config, syn, iss, now, ts_offset);
            self.egress.send_tcp(
                now,
                key.tuple().local.ip(),
                key.tuple().remote.ip(),
                &syn_ack,
            );
            self.tcp.counters.tcp_syn_cookies_sent += 1;
            return;
        }
        let (generated, ts_offset) = self.tcp.isn_for(now, &key.tuple());
        let iss = iss.unwrap_or(generated);
        let decision = self.fastopen_decision(li, &key, syn);
        let Ok((conn, syn_data)) =
            Connection::accept_fast_open(now, &config, syn, iss, ts_offset, decision)
        else {
            self.tcp.counters.tcp_listen_bad_segment += 1;
            return;
        };
        self.tcp_insert_child(now, li, key, conn);
        self.fastopen_note_child(li, &key, decision, syn_data);
    }

    /// An ACK on a listening port that may complete a SYN-cookie handshake. True when it did
    /// (the connection now exists, established); false when it is no valid cookie.
    pub(crate) fn tcp_open_from_cookie(
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
            endpoint_bytes(key.tuple().local.ip()),
            endpoint_bytes(key.tuple().remote.ip()),
        );
        let local = Endpoint {
            addr: l_ep.0.get(..l_ep.1).unwrap_or(&[]),
            port: key.tuple().local.port(),
        };
        let remote = Endpoint {
            addr: r_ep.0.get(..r_ep.1).unwrap_or(&[]),
            port: key.tuple().remote.port(),
        };
        let Some(cookie) = self.tcp.cookies.validate(now, local, remote, ack) else {
            return false;
        };
        if !self.tcp_overload_admit(now, key.tuple().remote.ip()) {
            // Valid, but its source holds its share of a table under pressure: dropped.
            return true;
        }
        let (load, limits) = self.tcp.listener_load(self.sockets, li);
        let Some(l) = self.listener_mut(li) else {
            return false;
        };
        if !admit_cookie(load, limits) {
            // Valid, but nowhere to put it: drop; the peer's retransmission may fit later.
            self.tcp.counters.tcp_listen_backlog_full += 1;
            return true;
        }
        let base = l.config;
        let config = self.tcp.config_for(&base, key.tuple().local.is_ipv4());
        let (_, ts_offset) = self.tcp.isn_for(now, &key.tuple());
        let conn = Connection::from_syn_cookie(now, &config, ack, &cookie, ts_offset);
        self.tcp.counters.tcp_syn_cookies_accepted += 1;
        self.tcp_insert_child(now, li, key, conn);
        true
    }

    /// Puts a passive-open child in a slot, the table and its listener's backlog, counted
    /// against its source (`TcpTable::per_source`).
    pub(crate) fn tcp_insert_child(&mut self, now: u64, li: usize, key: FlowKey, conn: Connection) {
        // `SO_ZEROCOPY` and the other options of `tcp_notify` are inherited.
        let inherited = self
            .listener_mut(li)
            .map(|l| l.sock_opts)
            .filter(|o| *o != crate::tcp_notify::SockOpts::default())
            .map(|o| Box::new(crate::tcp_notify::SockExt::new(o, conn.send_queue_bytes())));
        // Slot indexes fit a `u32` (socket handles carry them so).
        let parent = u32::try_from(li).ok();
        let sock = ConnSock::new(
            key,
            platform::huge_box::HugeBox::new(conn),
            now,
            parent,
            true,
            inherited,
        );
        let Ok(h) = self.sockets.alloc(Socket::Tcp(TcpState::Conn(sock))) else {
            self.tcp.counters.tcp_conn_table_full += 1;
            return;
        };
        *self
            .tcp
            .per_source
            .entry(key.tuple().remote.ip())
            .or_insert(0) += 1;
        let ci = h.index as usize;
        self.tcp.conns.insert(key.table_hash, ci);
        if let Some(l) = self.listener_mut(li) {
            l.pending.push_back(ci);
        }
        self.tcp_after_input(ci);
    }

    /// Keeps the timer index in step with the engine's deadline for connection `i`.
    pub(crate) fn tcp_rearm(&mut self, i: usize) {
        let Some(Socket::Tcp(TcpState::Conn(c))) = self.sockets.get_mut(i) else {
            return;
        };
        rearm(&mut self.tcp.timers, i, c);
    }

    /// After any input to connection `i`: mark it for output, re-arm its timer and turn its
    /// events into readiness.
    ///
    /// The per-segment case — the buffers' storage unchanged, no socket extension, no
    /// listener waiting for the connection — is finished on the one borrow of the slot:
    /// its events become readiness there, exactly as [`TcpCx::tcp_after_input_events`]
    /// would turn them (which every other case runs).
    pub(crate) fn tcp_after_input(&mut self, i: usize) {
        self.tcp.dirty.insert(i);
        // `tcp_rearm` and `tcp_mem_account` on one borrow of the slot (the per-segment path
        // looks the slot up once for both).
        let Some(Socket::Tcp(TcpState::Conn(c))) = self.sockets.get_mut(i) else {
            return;
        };
        let after = after_input_on_slot(self.tcp, i, c);
        self.tcp_after_input_finish(i, after);
    }

    /// What follows [`after_input_on_slot`] (the slot's borrow ended): the readiness it
    /// gathered reported, or the general second half run.
    #[inline(always)]
    fn tcp_after_input_finish(&mut self, i: usize, after: AfterInput) {
        match after {
            AfterInput::Ready(readiness) => {
                if !readiness.is_empty() {
                    self.sockets.notify(i, readiness);
                }
            }
            AfterInput::MemChanged => {
                self.tcp_mem_judge();
                self.tcp_after_input_events(i);
            }
            AfterInput::General => self.tcp_after_input_events(i),
        }
    }

    /// The second half of [`TcpCx::tcp_after_input`] in general: connection `i`'s events
    /// turned into readiness (its own, or its listener's while it waits for `accept`), the
    /// socket extension's progress reported.
    #[inline(never)]
    fn tcp_after_input_events(&mut self, i: usize) {
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
            let has_ext = c.has_ext();
            let parent = c.parent.map(|p| p as usize);
            if has_ext && self.tcp_notify_progress(i, None) {
                readiness |= Readiness::ERROR_QUEUE;
            }
            parent
        };
        if established {
            self.tcp.counters.tcp_connections_established += 1;
        }
        match parent {
            // A child waiting for accept: its listener becomes readable once it is
            // established; its own events are reported after `accept`.
            Some(li) => {
                self.sockets.add_pending(i, readiness);
                if established {
                    self.sockets.notify(li, Readiness::READABLE);
                }
            }
            None => {
                if !readiness.is_empty() {
                    self.sockets.notify(i, readiness);
                }
            }
        }
    }

    /// Answers a segment nobody wants with a RST (never to broadcast/multicast destinations,
    /// RFC 1122 §4.2.3.10).
    pub(crate) fn reply_rst(&mut self, now: u64, meta: IpMeta, seg: &TcpRepr<'_>) {
        let Some(rst) = reset_reply(seg) else {
            self.tcp.counters.tcp_rx_no_listener_rst_ignored += 1;
            return;
        };
        if !meta.dst_unicast {
            self.tcp.counters.tcp_rx_no_listener_rst_ignored += 1;
            return;
        }
        self.egress.send_tcp(now, meta.dst, meta.src, &rst);
        self.tcp.counters.tcp_rx_no_listener_rst_sent += 1;
    }

    /// Path MTU discovery (RFC 1191, RFC 8201): an ICMP "fragmentation needed" / "packet too
    /// big" saying the path to `remote` carries datagrams of at most `mtu` bytes. Acted on only
    /// when the quoted sequence number is in flight (RFC 5927 §4.1), so a forged error must
    /// guess it; the MTU is floored at 576 bytes for IPv4 (the datagram every host accepts,
    /// RFC 791) and 1,280 for IPv6 (RFC 8200 §5), so no error can shrink segments below that.
    /// The connection's send MSS goes down and its first unacknowledged segment is sent again
    /// at the new size (`tcp_path_mtu_reductions`; an error that changes nothing is counted
    /// `tcp_path_mtu_ignored`, one quoting no segment in flight `tcp_icmp_out_of_window`).
    /// In SYN-SENT a SYN that carried data goes again at once without it, and with
    /// `StackConfig::tcp_syn_mss_follows_path_mtu` later SYNs announce the path's MSS.
    pub(crate) fn tcp_path_mtu(
        &mut self,
        local: SocketAddr,
        remote: SocketAddr,
        quoted_seq: Option<u32>,
        mtu: u32,
    ) -> bool {
        let key = self.tcp.flow_key(FourTuple { local, remote }, None);
        let Some(i) = self.tcp.lookup(self.sockets, &key) else {
            return false;
        };
        let follow = self.cfg.tcp_syn_mss_follows_path_mtu;
        let Some(c) = self.conn_mut(i) else {
            return false;
        };
        let (una, nxt, _) = c.conn.sequence_state();
        let in_flight = quoted_seq.is_some_and(|s| SeqNumber(s).ge(una) && SeqNumber(s).lt(nxt));
        if !in_flight {
            self.tcp.counters.tcp_icmp_out_of_window += 1;
            return true;
        }
        if !c.sock_opts().pmtu.accepts_path_mtu() {
            // `IP_MTU_DISCOVER` `Dont` or `Probe`: the socket does not learn the path's MTU.
            self.tcp.counters.tcp_path_mtu_ignored += 1;
            return true;
        }
        let (floor, headers) = if remote.is_ipv4() {
            (576, IPV4_HEADER_LEN + TCP_HEADER_MIN)
        } else {
            (1280, IPV6_HEADER_LEN + TCP_HEADER_MIN)
        };
        let mtu = usize::try_from(mtu).unwrap_or(usize::MAX).max(floor);
        let mss = u16::try_from(mtu.saturating_sub(headers)).unwrap_or(u16::MAX);
        let capped = follow && c.conn.cap_announced_mss(mss);
        let reduced = c.conn.reduce_path_mss(mss);
        if capped {
            self.tcp.counters.tcp_path_mtu_syn_mss_capped += 1;
        }
        if reduced {
            self.tcp.counters.tcp_path_mtu_reductions += 1;
            self.tcp_after_input(i);
        } else {
            self.tcp.counters.tcp_path_mtu_ignored += 1;
        }
        true
    }

    /// An ICMP destination-unreachable or time-exceeded about a segment we sent (`q`).
    /// RFC 5927 §4.1: acted on only when the quoted sequence number is in flight
    /// (SND.UNA ≤ seq < SND.NXT); any other is dropped (`tcp_icmp_out_of_window`, Linux
    /// `OutOfWindowIcmps`). A connection still opening — SYN-SENT, or a Fast Open child not
    /// yet accepted — ends on a hard error (RFC 1122 §4.2.3.9), or on any error with
    /// `StackConfig::tcp_icmp_errors_abort_opening` (Linux `tcp_v4_err`): no RST, the
    /// error is the socket's, reported once after the data already received. With that
    /// setting, an error Linux calls fatal for a request (`QuotedError::drops_request`)
    /// quoting exactly the SYN-ACK of an ordinary child still in SYN-RECEIVED drops the child
    /// (Linux `tcp_req_err`). Other errors are soft: counted, the connection goes on.
    pub(crate) fn tcp_icmp_error(&mut self, q: &QuotedError) -> bool {
        let key = self.tcp.flow_key(
            FourTuple {
                local: q.local,
                remote: q.remote,
            },
            None,
        );
        let Some(i) = self.tcp.lookup(self.sockets, &key) else {
            return false;
        };
        let linux = self.cfg.tcp_icmp_errors_abort_opening;
        let Some(c) = self.conn_mut(i) else {
            return false;
        };
        let (una, nxt, _) = c.conn.sequence_state();
        let Some(seq) = q.seq.map(SeqNumber).filter(|&s| s.ge(una) && s.lt(nxt)) else {
            self.tcp.counters.tcp_icmp_out_of_window += 1;
            return true;
        };
        let state = c.conn.state();
        let unaccepted = c.parent.is_some();
        let fast_open_child = c.conn.is_fast_open_child();
        let opening = state == State::SynSent
            || (state == State::SynReceived && unaccepted && fast_open_child);
        let request = state == State::SynReceived && unaccepted && !fast_open_child;
        if opening && (q.hard || linux) {
            c.error = Some(SocketError::Unreachable);
            c.conn.abort_silently();
            self.tcp.counters.tcp_icmp_opens_aborted += 1;
            self.tcp_after_input(i);
            if !unaccepted {
                self.sockets.notify(i, Readiness::ERROR);
            }
        } else if linux && request && q.drops_request && seq == una {
            c.conn.abort_silently();
            self.tcp.counters.tcp_icmp_requests_dropped += 1;
            self.tcp_after_input(i);
        } else if !q.hard {
            self.tcp.counters.tcp_icmp_soft_errors += 1;
        }
        self.tcp.counters.icmp_errors_to_sockets += 1;
        true
    }

    // ------------------------------------------------------------------ timers

    pub(crate) fn tcp_handle_timeout(&mut self, now: u64) {
        // Everything due, earliest first (ties by slot index): deterministic order. Collected
        // first so a connection whose deadline does not move cannot loop here.
        self.tcp_time_wait_expire(now);
        let mut due = std::mem::take(&mut self.tcp.due_scratch);
        due.clear();
        self.tcp.timers.pop_due(now, &mut due);
        // Popped entries left the wheel: `armed_ns` must say so, so the re-arm after the
        // engine ran puts back whatever deadline it still has (one that did not move fires
        // at the next call, as before).
        for &i in &due {
            if let Some(c) = self.conn_mut(i) {
                c.armed_ns = NOT_ARMED;
            }
        }
        for (k, &i) in due.iter().enumerate() {
            // The next due connection's state is asked for while this one runs.
            self.prefetch_next_due(due.get(k + 1).copied());
            if self.moved_mut(i).is_some() {
                self.tcp_drop_marker(i);
                self.tcp.counters.tcp_moved_expired += 1;
                continue;
            }
            if let Some(c) = self.conn_mut(i) {
                let timeouts_before = c.conn.counters().rto_expirations;
                c.conn.handle_timeout(now);
                // RFC 1122 §4.2.3.5: retransmitted by timeout R1 times, pass negative advice
                // to IP, which re-validates the next hop (§2.3.2.1; `Egress::advise_unreachable`).
                let timed_out = c.conn.counters().rto_expirations != timeouts_before;
                let open = c.conn.state() != State::Closed;
                // Packetization-layer PMTUD (RFC 4821/8899): a black hole, or a size tried
                // upward that did not pass.
                let pl = (timed_out && open)
                    .then(|| {
                        let (rare, conn) = c.rare_and_conn_mut();
                        let pl = tcp::plpmtud::Plpmtud::after_timeout(&mut rare.plpmtud, conn);
                        c.rare_tidy();
                        pl
                    })
                    .flatten();
                let doubt = (timed_out && open && c.conn.path_in_doubt())
                    .then(|| c.key().tuple().remote.ip());
                self.tcp.counters.count_plpmtud(pl);
                if let Some(remote) = doubt {
                    self.egress.advise_unreachable(now, remote);
                }
                self.tcp_zero_window_check(now, i);
            }
            self.tcp_after_input(i);
        }
        due.clear();
        self.tcp.due_scratch = due;
        self.tcp_idle_sweep(now);
    }

    // ------------------------------------------------------------------ application calls
}

/// How [`TcpCx::tcp_after_input`] ends for a connection, decided on its slot.
pub(crate) enum AfterInput {
    /// The per-segment case (buffers' storage unchanged, no socket extension, no listener
    /// waiting for it): the readiness its events made, to report.
    Ready(Readiness),
    /// The buffers' storage changed (accounted already): the memory judge, then the
    /// general second half.
    MemChanged,
    /// The general second half (`TcpCx::tcp_after_input_events`).
    General,
}

/// `TcpCx::tcp_after_input`'s work on connection `i`'s slot `c` once it is marked dirty:
/// the timer re-armed, the buffers' storage accounted, and in the per-segment case the
/// events turned into readiness (`tcp_connections_established` counted) exactly as
/// `TcpCx::tcp_after_input_events` would; the caller finishes with
/// `TcpCx::tcp_after_input_finish`.
#[inline(always)]
fn after_input_on_slot(tcp: &mut TcpTable, i: usize, c: &mut ConnSock) -> AfterInput {
    rearm(&mut tcp.timers, i, c);
    let now_bytes = c.conn.buffer_allocated_bytes();
    let old = core::mem::replace(&mut c.mem_bytes, now_bytes);
    if now_bytes != old {
        tcp.mem_bytes = tcp.mem_bytes - old + now_bytes;
        return AfterInput::MemChanged;
    }
    if c.has_ext() || c.parent.is_some() {
        return AfterInput::General;
    }
    let mut readiness = Readiness::NONE;
    while let Some(e) = c.conn.poll_event() {
        if e == Event::Connected {
            cold_path();
            tcp.counters.tcp_connections_established += 1;
        }
        readiness |= readiness_of(e);
    }
    AfterInput::Ready(readiness)
}

/// Puts connection `i`'s deadline (none unless it is in the table) in `timers`, if it
/// changed (`TcpTable::timers`' invariant with `ConnSock::armed_ns`).
#[inline(always)]
fn rearm(timers: &mut crate::timer_wheel::TimerWheel, i: usize, c: &mut ConnSock) {
    let want = if c.in_table {
        c.conn
            .poll_timeout()
            .map_or(NOT_ARMED, |t| t.min(NOT_ARMED - 1))
    } else {
        NOT_ARMED
    };
    let old = core::mem::replace(&mut c.armed_ns, want);
    if old == want {
        return;
    }
    if want == NOT_ARMED {
        timers.remove(i);
    } else {
        timers.insert(i, want);
    }
}
