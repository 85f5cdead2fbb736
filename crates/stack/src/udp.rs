//! The UDP part of the stack (RFC 768): input demultiplexing to bound sockets (exact
//! address first, then the wildcard), hard ICMP errors recorded on the sending socket, and
//! the socket calls (bind, send, receive). UDP sockets live in the socket table; this part
//! owns its counters and reaches the sockets through the table's methods.
//!
//! [`UdpCx`] is the part at work with the socket table and the egress part it borrows.

use core::net::{IpAddr, SocketAddr};
use std::collections::VecDeque;

use wire::{IpPair, IpProtocol, UdpPacket, UdpRepr};

use crate::config::StackConfig;
use crate::counters::Counters;
use crate::egress::Egress;
use crate::ip_in::{IpMeta, RxFrame};
use crate::socket::{Readiness, SocketError, SocketHandle, SocketOption, UdpDatagram, UdpSocket};
use crate::sockets::{PortKind, Socket, Sockets, overlaps};

/// The UDP part's state: its counters (the sockets are in the socket table).
#[derive(Debug, Default)]
pub(crate) struct Udp {
    /// The counters this part increments; `Stack::counters` sums every part's.
    counters: Counters,
}

impl Udp {
    /// This part's counters.
    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
    }
}

/// The UDP part with the parts it borrows for one call.
pub(crate) struct UdpCx<'a> {
    pub(crate) cfg: &'a StackConfig,
    pub(crate) udp: &'a mut Udp,
    pub(crate) sockets: &'a mut Sockets,
    pub(crate) egress: &'a mut Egress,
}

impl UdpCx<'_> {
    /// Delivers a UDP datagram to its socket. False when no socket is bound to its
    /// destination (the caller answers with a port unreachable, RFC 1122 §4.1.3.1: v4 code 3;
    /// RFC 4443 §3.1 v6 code 4).
    pub(crate) fn process(&mut self, meta: IpMeta, payload: &[u8], rx: RxFrame<'_>) -> bool {
        let Some(pair) = meta.pair() else {
            return true;
        };
        let Ok(view) = UdpPacket::new_checked(payload) else {
            self.udp.counters.rx_drop_udp_malformed += 1;
            return true;
        };
        // The NIC's verdict decides whether the checksum is verified here (`Stack::receive`).
        let Some(caps) = rx.l4_caps(self.cfg.checksums, &mut self.udp.counters) else {
            self.udp.counters.rx_drop_udp_malformed += 1;
            return true;
        };
        let Ok(udp) = UdpRepr::parse(&view, &pair, caps) else {
            self.udp.counters.rx_drop_udp_malformed += 1;
            return true;
        };
        let Some(index) = find_udp_socket(self.sockets, meta.dst, udp.dst_port) else {
            self.udp.counters.udp_rx_no_socket += 1;
            return false;
        };
        let dgram = UdpDatagram {
            src: SocketAddr::new(meta.src, udp.src_port),
            dst: SocketAddr::new(meta.dst, udp.dst_port),
            payload: udp.payload.to_vec(),
        };
        let Some(Socket::Udp(sock)) = self.sockets.get_mut(index) else {
            return true;
        };
        if sock.rx.len() >= sock.rx_max {
            self.udp.counters.udp_rx_socket_full += 1;
            return true;
        }
        sock.rx.push_back(dgram);
        self.udp.counters.udp_rx_delivered += 1;
        self.sockets.notify(index, Readiness::READABLE);
        true
    }

    /// A hard ICMP error for a UDP socket bound to `local`: recorded (see
    /// [`Stack::take_error`]) and reported as [`Readiness::ERROR`].
    pub(crate) fn icmp_error(&mut self, local: SocketAddr, hard: bool) -> bool {
        let Some(i) = find_udp_socket(self.sockets, local.ip(), local.port()) else {
            return false;
        };
        if hard {
            if let Some(Socket::Udp(u)) = self.sockets.get_mut(i) {
                u.error = Some(SocketError::Unreachable);
            }
            self.sockets.notify(i, Readiness::ERROR);
        }
        self.udp.counters.icmp_errors_to_sockets += 1;
        true
    }

    /// Binds a UDP socket. Port 0 picks an ephemeral port; an unspecified IP accepts datagrams
    /// for every address of its family.
    pub(crate) fn bind(&mut self, local: SocketAddr) -> Result<SocketHandle, SocketError> {
        let ip = local.ip();
        if !ip.is_unspecified() && !self.egress.is_our_ip(ip) {
            return Err(SocketError::AddrNotAvailable);
        }
        let port = if local.port() == 0 {
            self.sockets
                .pick_ephemeral(|s, p| !udp_port_in_use(s, ip, p))
                .ok_or(SocketError::NoFreePort)?
        } else {
            if udp_port_in_use(self.sockets, ip, local.port()) {
                return Err(SocketError::AddrInUse);
            }
            local.port()
        };
        self.sockets.alloc(Socket::Udp(UdpSocket {
            local: SocketAddr::new(ip, port),
            rx: VecDeque::new(),
            rx_max: self.cfg.limits.udp_rx_queue_datagrams_max,
            error: None,
        }))
    }

    /// Sends one datagram. The source is the bound address, or the best address for `dst`.
    pub(crate) fn send_to(
        &mut self,
        now: u64,
        h: SocketHandle,
        dst: SocketAddr,
        payload: &[u8],
    ) -> Result<(), SocketError> {
        let i = self.sockets.index(h)?;
        let local = match self.sockets.get(i) {
            Some(Socket::Udp(u)) => u.local,
            _ => return Err(SocketError::WrongSocketType),
        };
        if local.is_ipv4() != dst.is_ipv4() {
            return Err(SocketError::AddrNotAvailable);
        }
        let src = if local.ip().is_unspecified() {
            self.egress
                .select_source(dst.ip())
                .ok_or(SocketError::NoRoute)?
        } else {
            local.ip()
        };
        let repr = UdpRepr {
            src_port: local.port(),
            dst_port: dst.port(),
            payload,
        };
        let pair = match (src, dst.ip()) {
            (IpAddr::V4(s), IpAddr::V4(d)) => IpPair::V4 { src: s, dst: d },
            (IpAddr::V6(s), IpAddr::V6(d)) => IpPair::V6 { src: s, dst: d },
            _ => return Err(SocketError::AddrNotAvailable),
        };
        let mut buf = vec![0u8; repr.buffer_len()];
        repr.emit(
            &mut UdpPacket::new_unchecked(&mut buf[..]),
            &pair,
            self.cfg.checksums,
        )
        .map_err(|_| SocketError::MessageTooBig)?;
        match pair {
            IpPair::V4 { src, dst } => {
                if buf.len() + 20 > 65_535 {
                    return Err(SocketError::MessageTooBig);
                }
                self.egress
                    .send_ipv4(now, src, dst, IpProtocol::UDP, false, 0, &buf);
            }
            IpPair::V6 { src, dst } => {
                self.egress.send_ipv6(
                    now,
                    src,
                    dst,
                    IpProtocol::UDP,
                    self.cfg.hop_limit,
                    wire::Ecn::NotEct,
                    &buf,
                );
            }
        }
        self.udp.counters.udp_tx_datagrams += 1;
        Ok(())
    }

    /// Takes the oldest queued datagram; `WouldBlock` when none is queued.
    pub(crate) fn recv_from(&mut self, h: SocketHandle) -> Result<UdpDatagram, SocketError> {
        let i = self.sockets.index(h)?;
        match self.sockets.get_mut(i) {
            Some(Socket::Udp(u)) => u.rx.pop_front().ok_or(SocketError::WouldBlock),
            _ => Err(SocketError::WrongSocketType),
        }
    }

    /// The UDP side of `Stack::set_option` for the socket in slot `i`.
    pub(crate) fn set_option(&mut self, i: usize, opt: SocketOption) -> Result<(), SocketError> {
        let udp_max = self.cfg.limits.udp_rx_queue_datagrams_max;
        match (self.sockets.get_mut(i), opt) {
            (Some(Socket::Udp(u)), SocketOption::UdpRxQueueDatagrams(n)) => {
                u.rx_max = n.min(udp_max);
                Ok(())
            }
            _ => Err(SocketError::WrongSocketType),
        }
    }
}

/// The socket bound to exactly (`dst`, `port`), else one bound to the wildcard address of
/// the same family on `port`.
pub(crate) fn find_udp_socket(sockets: &Sockets, dst: IpAddr, port: u16) -> Option<usize> {
    let mut wildcard = None;
    for &i in sockets.bound_to(PortKind::Udp, port) {
        let Some(Socket::Udp(s)) = sockets.get(i) else {
            continue;
        };
        if s.local.is_ipv4() != dst.is_ipv4() {
            continue;
        }
        if s.local.ip() == dst {
            return Some(i);
        }
        if s.local.ip().is_unspecified() && wildcard.is_none() {
            wildcard = Some(i);
        }
    }
    wildcard
}

/// True when a UDP socket already uses `port` on an address overlapping `ip`.
pub(crate) fn udp_port_in_use(sockets: &Sockets, ip: IpAddr, port: u16) -> bool {
    sockets
        .bound_to(PortKind::Udp, port)
        .iter()
        .any(|&i| match sockets.get(i) {
            Some(Socket::Udp(u)) => overlaps(u.local.ip(), ip),
            _ => false,
        })
}
