//! The host stack of one shard as a thin owner of its parts. Each part lives in its own
//! module and writes only its own fields; `Stack` splits its borrows and delegates:
//!
//! - [`IpIn`] (`ip_in`): Ethernet, ARP hand-off, IPv4/IPv6 input, reassembly, dispatch;
//! - [`Egress`] (`egress`): the transmit queue, buffer pool, neighbour cache and ARP, IP
//!   identification, IP output and frame building — borrowed mutably by the parts that send;
//! - [`Icmp`] (`icmp`): echo, neighbour discovery messages, errors and their rate limit;
//! - [`Udp`] (`udp`) and the TCP table ([`TcpTable`], `tcp_sockets`/`tcp_input`/`tcp_api`),
//!   both over the socket table ([`Sockets`], `sockets`), which names sockets by handle.
//!
//! A part at work that needs another part gets it as a `&mut` in a context struct
//! ([`TcpCx`], [`UdpCx`], [`IcmpCx`]); cross-part effects go through the borrowed part's
//! methods. Counters are kept per part and summed by [`Stack::counters`].
//!
//! Driver contract: call `receive` for every frame and `handle_timeout` when the deadline from
//! `poll_timeout` passes; after either (and after any application call) drain
//! `poll_transmit`, `poll_event` (and `poll_forward` when connections move). `now` must never
//! go backwards.

mod rx_lookahead;

use core::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use wire::{EthernetAddress, IpProtocol, RxMeta, TxMeta};

use crate::config::StackConfig;
use crate::counters::Counters;
use crate::egress::Egress;
use crate::icmp::{Icmp, IcmpCx, QuotedError};
use crate::ip_in::{Deliver, Delivery, IpIn};
use crate::socket::{EchoReply, SocketError, SocketEvent, SocketHandle, SocketOption, UdpDatagram};
use crate::sockets::{Socket, Sockets};
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::TcpTable;
use crate::udp::{Udp, UdpCx};

pub use rx_lookahead::{FlowHint, RxLookahead};

/// The earlier of two optional deadlines (`None`: no deadline), as `[a, b].into_iter().flatten()
/// .min()` gives it, in a few instructions: the drivers' `poll_timeout`s combine their sources
/// with it.
#[inline(always)]
pub fn earliest_deadline(a: Option<u64>, b: Option<u64>) -> Option<u64> {
    match (a, b) {
        (Some(x), Some(y)) => Some(x.min(y)),
        (x, y) => x.or(y),
    }
}

/// One shard's host stack. See the module documentation for the driver contract.
pub struct Stack {
    ip_in: IpIn,
    /// Every other part, in one place so IP input reaches them all through one pointer.
    up: Upper,
}

impl core::fmt::Debug for Stack {
    // A summary: the socket buffers and queued frames would drown the output.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Stack")
            .field("mac", &self.up.cfg.interface.mac)
            .field("ipv4", &self.up.cfg.interface.ipv4)
            .field("ipv6", &self.up.cfg.interface.ipv6)
            .field("neighbors", &self.up.egress.neighbors().len())
            .field("reassembly", &self.ip_in.reasm().len())
            .field("tx_queued_frames", &self.up.egress.tx_len())
            .field("sockets", &self.up.sockets.len())
            .field("tcp", &self.up.tcp)
            .finish_non_exhaustive()
    }
}

/// Every part but IP input (and the configuration they share read-only): what IP input
/// delivers to. Owned here rather than borrowed part by part for each frame: building a
/// struct of six references per received frame cost ~10 instructions (callgrind bulk).
struct Upper {
    /// Shared read-only by every part.
    cfg: Arc<StackConfig>,
    egress: Egress,
    icmp: Icmp,
    udp: Udp,
    sockets: Sockets,
    tcp: TcpTable,
}

impl Upper {
    fn icmp_cx(&mut self) -> IcmpCx<'_> {
        IcmpCx {
            cfg: &self.cfg,
            icmp: &mut self.icmp,
            egress: &mut self.egress,
        }
    }

    fn udp_cx(&mut self) -> UdpCx<'_> {
        UdpCx {
            cfg: &self.cfg,
            udp: &mut self.udp,
            sockets: &mut self.sockets,
            egress: &mut self.egress,
        }
    }

    fn tcp_cx(&mut self) -> TcpCx<'_> {
        TcpCx {
            cfg: &self.cfg,
            tcp: &mut self.tcp,
            sockets: &mut self.sockets,
            egress: &mut self.egress,
        }
    }

    /// Hands a destination-unreachable error to the socket that sent the quoted packet
    /// (RFC 1122 §4.2.3.9, §4.1.3.3; RFC 5927 §4.1 checks in TCP).
    fn icmp_error_to_socket(&mut self, q: QuotedError) {
        let matched = match (q.protocol, q.mtu) {
            (IpProtocol::TCP, Some(mtu)) => {
                self.tcp_cx().tcp_path_mtu(q.local, q.remote, q.seq, mtu)
            }
            (IpProtocol::TCP, None) => self.tcp_cx().tcp_icmp_error(&q),
            (IpProtocol::UDP, _) => self.udp_cx().icmp_error(q.local, q.hard),
            _ => false,
        };
        if !matched {
            self.icmp.unmatched();
        }
    }
}

impl Deliver for Upper {
    /// Hands what IP input delivered to the part it is for. Always inlined into IP input's
    /// per-frame path: the `Delivery` is built and matched in the same function, so the TCP
    /// case is a direct call to `process_tcp` (out of line it cost ~58 instructions per
    /// frame copying the `Delivery` in; callgrind bulk).
    #[inline(always)]
    fn deliver(&mut self, now: u64, d: Delivery<'_>) {
        match d {
            Delivery::Arp(payload) => self.egress.process_arp(now, payload),
            Delivery::ProtocolUnreachable { meta, whole } => {
                self.icmp_cx().send_icmp_unreachable(now, meta, whole, 2, 0);
            }
            Delivery::Upper {
                meta,
                payload,
                whole,
                rx,
            } => match meta.protocol {
                IpProtocol::ICMP => {
                    if let Some(q) = self.icmp_cx().process_icmpv4(now, meta, payload) {
                        self.icmp_error_to_socket(q);
                    }
                }
                IpProtocol::ICMPV6 => {
                    if let Some(q) = self.icmp_cx().process_icmpv6(now, meta, payload) {
                        self.icmp_error_to_socket(q);
                    }
                }
                IpProtocol::UDP => {
                    if !self.udp_cx().process(meta, payload, rx) {
                        // RFC 1122 §4.1.3.1: port unreachable (v4 code 3; RFC 4443 §3.1 v6
                        // code 4).
                        self.icmp_cx().send_icmp_unreachable(now, meta, whole, 3, 4);
                    }
                }
                _ => self.tcp_cx().process_tcp(now, meta, payload, whole, rx),
            },
        }
    }
}

impl Stack {
    // ------------------------------------------------------------------ construction

    pub fn new(cfg: StackConfig) -> Stack {
        let cfg = Arc::new(cfg);
        Stack {
            ip_in: IpIn::new(Arc::clone(&cfg)),
            up: Upper {
                egress: Egress::new(Arc::clone(&cfg)),
                icmp: Icmp::new(&cfg),
                udp: Udp::default(),
                sockets: Sockets::new(cfg.limits.sockets_max),
                tcp: TcpTable::new(Arc::clone(&cfg)),
                cfg,
            },
        }
    }

    /// Every part but IP input.
    fn upper(&mut self) -> &mut Upper {
        &mut self.up
    }

    /// The TCP part with the parts it borrows (see [`TcpCx`]).
    pub(crate) fn tcp_cx(&mut self) -> TcpCx<'_> {
        self.up.tcp_cx()
    }

    fn udp_cx(&mut self) -> UdpCx<'_> {
        self.up.udp_cx()
    }

    /// The socket table and the TCP table, read-only (the queries of `tcp_api`).
    pub(crate) fn tcp_view(&self) -> (&TcpTable, &Sockets) {
        (&self.up.tcp, &self.up.sockets)
    }

    /// The configuration the stack runs with.
    pub fn config(&self) -> &StackConfig {
        &self.up.cfg
    }

    /// A snapshot of every counter (the sum of every part's).
    pub fn counters(&self) -> Counters {
        let mut c = self.ip_in.counters().clone();
        c.merge(self.up.egress.counters());
        c.merge(self.up.icmp.counters());
        c.merge(self.up.udp.counters());
        c.merge(&self.up.tcp.counters);
        c
    }

    /// The TCP engine's per-connection counters (retransmissions, timeouts, drops inside a
    /// connection, ...) summed over every connection this stack has held: those released so
    /// far and those still open. A connection exported to another stack counts here for what
    /// happened while it was here; the importer counts from the import on. Costs a walk over
    /// the socket table.
    pub fn tcp_counters(&self) -> tcp::Counters {
        self.up.tcp.engine_counters(&self.up.sockets)
    }

    /// The MAC the neighbour cache holds for `addr`, if resolved and unexpired.
    pub fn neighbor(&self, now: u64, addr: IpAddr) -> Option<EthernetAddress> {
        self.up.egress.neighbors().lookup(now, addr)
    }

    /// The MAC of `addr` on this link for a packet the caller sends itself (a forwarder):
    /// `Some` when resolved and unexpired, and then, once shortly before the entry expires, a
    /// unicast ARP request / neighbour solicitation re-validates it so a busy next hop never
    /// lapses. Allocates nothing unless that refresh frame is built.
    pub fn neighbor_for_send(&mut self, now: u64, addr: IpAddr) -> Option<EthernetAddress> {
        self.up.egress.neighbor_for_send(now, addr)
    }

    /// Starts resolving `addr` (an ARP request or a neighbour solicitation, retried by the
    /// stack's timers as for its own packets) unless the cache already holds an entry for it,
    /// resolved or in progress; no packet is parked. Returns whether a request was queued for
    /// transmission now. A cache full of unresolved entries refuses (counted
    /// `neighbor_cache_full`), so a flood towards unresolvable addresses is bounded by
    /// `Limits::neighbor_entries_max`.
    pub fn resolve_neighbor(&mut self, now: u64, addr: IpAddr) -> bool {
        self.up.egress.resolve_neighbor(now, addr)
    }

    /// Datagrams currently under reassembly.
    pub fn reassembly_in_progress(&self) -> usize {
        self.ip_in.reasm().len()
    }

    /// Bytes charged for datagrams under reassembly (never above `Limits::reasm_mem_max`).
    pub fn reassembly_bytes_held(&self) -> usize {
        self.ip_in.reasm().held_bytes()
    }

    /// Datagrams under reassembly from one source address.
    pub fn reassembly_in_progress_from(&self, src: IpAddr) -> usize {
        self.ip_in.reasm().source_len(src)
    }

    // ------------------------------------------------------------------ driver interface

    /// Processes one received Ethernet frame with what the NIC learnt about it (`meta`;
    /// [`RxMeta::NONE`] without a NIC).
    ///
    /// - `meta.hash`: the RSS hash the NIC computed (DESIGN principle 4, "hash once"); the TCP
    ///   connection table reuses it instead of hashing the flow again.
    /// - `meta.csum`: the NIC's checksum verdicts, trusted as given. `Good` skips the
    ///   stack's own verification of that layer (counted `rx_ipv4_csum_trusted` /
    ///   `rx_csum_trusted`), `Bad` drops the frame with the counter a failed software check
    ///   uses (`rx_drop_ipv4_bad_checksum`, `rx_drop_tcp_malformed`,
    ///   `rx_drop_udp_malformed`), `Unknown` is verified in software as configured
    ///   ([`StackConfig::checksums`]). The L4 verdict is used for TCP and UDP only, and
    ///   never for a datagram reassembled from fragments (the verdict covered one frame).
    ///
    /// The NIC is trusted: a caller must only pass a verdict that was established over these
    /// exact bytes (the `nic` model's descriptors are; a frame the caller rewrote is not).
    pub fn receive(&mut self, now: u64, frame: &[u8], meta: &RxMeta) {
        self.ip_in.receive(now, frame, meta, &mut self.up);
    }

    /// The next frame to put on the wire, if any. With transmit offloads configured
    /// ([`StackConfig::tx_offload`]) use [`Stack::poll_transmit_meta`]: a frame may then be
    /// a TSO frame beyond the MTU or carry a partial checksum, which only its `TxMeta` says.
    pub fn poll_transmit(&mut self, now: u64) -> Option<Vec<u8>> {
        self.poll_transmit_meta(now).map(|(f, _)| f)
    }

    /// The next frame to put on the wire with what it asks of the device (segmentation,
    /// checksum completion; [`TxMeta::NONE`] without transmit offloads).
    pub fn poll_transmit_meta(&mut self, now: u64) -> Option<(Vec<u8>, TxMeta)> {
        if self.up.egress.tx_len() == 0 {
            self.tcp_cx().tcp_flush(now);
        }
        self.up.egress.pop_frame()
    }

    /// Gives a frame buffer back once the driver is done with it (typically a frame from
    /// `poll_transmit` after the NIC sent it), so the transmit path can reuse it instead of
    /// allocating. Optional: buffers beyond a small bound, or oddly large ones, are dropped.
    pub fn recycle(&mut self, frame: Vec<u8>) {
        self.up.egress.recycle(frame);
    }

    /// The earliest time `handle_timeout` has work to do.
    ///
    /// Drivers ask after every activation (the simulator several times per frame): the four
    /// sources are combined pairwise ([`earliest_deadline`]) rather than through an iterator chain over
    /// an array of options, which cost ~100 instructions per call of its own.
    pub fn poll_timeout(&self) -> Option<u64> {
        earliest_deadline(
            earliest_deadline(
                self.up.egress.neighbors().poll_timeout(),
                self.up.egress.pool_poll_timeout(),
            ),
            earliest_deadline(
                self.ip_in.reasm().poll_timeout(),
                self.up.tcp.tcp_poll_timeout(),
            ),
        )
    }

    /// True when the stack holds nothing a driver's iteration would take from it without new
    /// input or a due timer ([`Stack::poll_timeout`]'s): no frame queued for transmission, no
    /// connection with output to flush, no readiness event, no frame caught mid-move waiting
    /// to be forwarded. Then `poll_transmit*`, `poll_event` and `poll_forward` would all
    /// return `None` and change nothing, so a driver whose NIC and application are idle too
    /// may skip the iteration (`shard::Shard::handle_timeout` does).
    pub fn is_quiescent(&self) -> bool {
        self.up.egress.tx_len() == 0
            && self.up.tcp.dirty.len() == 0
            && !self.up.sockets.has_events()
            && self.up.tcp.forward.is_empty()
    }

    /// Runs every timer due at `now`: the transmit buffer pool's trim, neighbour retries and
    /// expiry, reassembly timeouts, TCP timers (and moved markers' expiry).
    pub fn handle_timeout(&mut self, now: u64) {
        self.up.egress.handle_timeout(now);
        self.ip_in.handle_timeout(now);
        self.tcp_cx().tcp_handle_timeout(now);
    }

    /// The next readiness notification, if any.
    pub fn poll_event(&mut self) -> Option<SocketEvent> {
        self.up.sockets.poll_event()
    }

    // ------------------------------------------------------------------ ICMP

    /// The next echo reply received for a [`Stack::send_ping`].
    pub fn poll_echo_reply(&mut self) -> Option<EchoReply> {
        self.up.icmp.poll_echo_reply()
    }

    /// Sends an ICMP echo request to `dst` from the best source address. Replies show up in
    /// [`Stack::poll_echo_reply`].
    pub fn send_ping(
        &mut self,
        now: u64,
        dst: IpAddr,
        ident: u16,
        seq_no: u16,
        data: &[u8],
    ) -> Result<(), SocketError> {
        self.upper()
            .icmp_cx()
            .send_ping(now, dst, ident, seq_no, data)
    }

    // ------------------------------------------------------------------ UDP

    /// Binds a UDP socket. Port 0 picks an ephemeral port; an unspecified IP accepts datagrams
    /// for every address of its family.
    pub fn udp_bind(&mut self, local: SocketAddr) -> Result<SocketHandle, SocketError> {
        self.udp_cx().bind(local)
    }

    /// Sends one datagram. The source is the bound address, or the best address for `dst`.
    pub fn udp_send_to(
        &mut self,
        now: u64,
        h: SocketHandle,
        dst: SocketAddr,
        payload: &[u8],
    ) -> Result<(), SocketError> {
        self.udp_cx().send_to(now, h, dst, payload)
    }

    /// Takes the oldest queued datagram; `WouldBlock` when none is queued.
    pub fn udp_recv_from(&mut self, h: SocketHandle) -> Result<UdpDatagram, SocketError> {
        self.udp_cx().recv_from(h)
    }

    // ------------------------------------------------------------------ any socket

    /// The local address a socket is bound to.
    pub fn local_addr(&self, h: SocketHandle) -> Result<SocketAddr, SocketError> {
        let i = self.up.sockets.index(h)?;
        match self.up.sockets.get(i) {
            Some(Socket::Udp(u)) => Ok(u.local),
            Some(Socket::Tcp(t)) => Ok(t.local_addr()),
            None => Err(SocketError::InvalidHandle),
        }
    }

    /// Takes the pending error of a socket (`getsockopt(SO_ERROR)`): a hard ICMP error, or
    /// a TCP connection's reset or time-out not yet reported by another call; `None` after.
    pub fn take_error(&mut self, h: SocketHandle) -> Result<Option<SocketError>, SocketError> {
        let i = self.up.sockets.index(h)?;
        match self.up.sockets.get_mut(i) {
            Some(Socket::Udp(u)) => Ok(u.error.take()),
            Some(Socket::Tcp(t)) => Ok(t.take_error()),
            None => Err(SocketError::InvalidHandle),
        }
    }

    /// Applies an option. TCP options apply to a listener (for the connections it will
    /// accept); on a live connection `NoDelay`, `Cork`, `UserTimeoutNs` and
    /// `SendBufferBytes` can change, and `MaxSegment` before the SYN left (keepalive on a
    /// live connection: [`Stack::tcp_set_keepalive`]).
    pub fn set_option(&mut self, h: SocketHandle, opt: SocketOption) -> Result<(), SocketError> {
        let i = self.up.sockets.index(h)?;
        match self.up.sockets.get(i) {
            Some(Socket::Udp(_)) => self.udp_cx().set_option(i, opt),
            Some(Socket::Tcp(_)) => self.tcp_cx().set_option(i, opt),
            None => Err(SocketError::InvalidHandle),
        }
    }

    /// Closes a socket. UDP sockets and listeners go away at once (queued datagrams and
    /// unaccepted connections are dropped); a TCP connection starts its close handshake and
    /// its handle stays valid until it is released (see `tcp_release`).
    pub fn close(&mut self, now: u64, h: SocketHandle) -> Result<(), SocketError> {
        let i = self.up.sockets.index(h)?;
        match self.up.sockets.get(i) {
            Some(Socket::Udp(_)) => {
                self.up.sockets.free(i);
                Ok(())
            }
            Some(Socket::Tcp(_)) => self.tcp_cx().tcp_close(now, i),
            None => Err(SocketError::InvalidHandle),
        }
    }
}
