//! The TCP output path of [`Egress`]: the fast path that writes Ethernet, IP and TCP headers
//! in front of a payload already in its frame buffer, the copy path for the stack's own
//! segments, and the IP header fields a connection chooses ([`TcpIpFields`]).

use core::net::IpAddr;

use wire::{Ecn, IpPair, IpProtocol, TcpPacket, TcpRepr, TxMeta};

use super::tcp_headers::{FrameHeaders, write_headers};
use super::{ETHERNET_HEADER_LEN, Egress, IPV4_HEADER_LEN, IPV6_HEADER_LEN, TCP_HEADER_MAX};

/// The IP header fields of a TCP segment that its connection chooses; the rest are the
/// stack's (addresses, hop limit, identification).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct TcpIpFields {
    /// The ECN codepoint (RFC 3168 §5).
    pub(crate) ecn: Ecn,
    /// IPv4 only: `IP_TOS` with its ECN bits clear (the DSCP and the two bits beside it).
    pub(crate) tos: u8,
    /// IPv4 only: the DF bit.
    pub(crate) dont_frag: bool,
}

impl TcpIpFields {
    /// Not-ECT, TOS 0, DF: what a segment without a socket (an RST for nobody) carries.
    pub(crate) const PLAIN: TcpIpFields = TcpIpFields {
        ecn: Ecn::NotEct,
        tos: 0,
        dont_frag: true,
    };
}

/// `seg` without its payload, so the frame buffer the payload lives in can be written.
pub(crate) fn header_only(seg: &TcpRepr<'_>) -> TcpRepr<'static> {
    TcpRepr {
        src_port: seg.src_port,
        dst_port: seg.dst_port,
        seq_number: seg.seq_number,
        ack_number: seg.ack_number,
        flags: seg.flags,
        window_len: seg.window_len,
        urgent_pointer: seg.urgent_pointer,
        max_seg_size: seg.max_seg_size,
        window_scale: seg.window_scale,
        sack_permitted: seg.sack_permitted,
        sack_blocks: seg.sack_blocks,
        timestamp: seg.timestamp,
        fast_open: None,
        payload: &[],
    }
}

/// The address pair of a segment from `src` to `dst`; `None` when their families differ.
pub(crate) fn tcp_pair(src: IpAddr, dst: IpAddr) -> Option<IpPair> {
    match (src, dst) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => Some(IpPair::V4 { src, dst }),
        (IpAddr::V6(src), IpAddr::V6(dst)) => Some(IpPair::V6 { src, dst }),
        _ => None,
    }
}

impl Egress {
    /// Emits one segment from `src` to `dst` (DF set for IPv4: TCP sizes segments to the MSS),
    /// not ECN-capable (the stack's own RSTs, SYN-cookie SYN-ACKs and TIME-WAIT ACKs).
    pub(crate) fn send_tcp(&mut self, now: u64, src: IpAddr, dst: IpAddr, seg: &TcpRepr<'_>) {
        let Some(pair) = tcp_pair(src, dst) else {
            return;
        };
        let ip_len = if src.is_ipv4() {
            IPV4_HEADER_LEN
        } else {
            IPV6_HEADER_LEN
        };
        let payload_at =
            ETHERNET_HEADER_LEN + ip_len + seg.header_len_in(self.cfg.tcp_option_layout);
        let n = seg.payload.len();
        let mut frame = self.take_frame_buf(payload_at + n);
        if let Some(dst) = frame.get_mut(payload_at..) {
            dst.copy_from_slice(seg.payload);
        }
        let header = header_only(seg);
        self.send_tcp_frame(
            now,
            &pair,
            &header,
            frame,
            payload_at,
            n,
            0,
            TcpIpFields::PLAIN,
        );
    }

    /// Emits one segment whose `n` payload bytes already sit at `frame[payload_at..]`
    /// (`header.payload` is empty): the TCP, IP and Ethernet headers are written in front of
    /// the payload, in the same buffer, and the frame is queued. When the headers do not end
    /// exactly at `payload_at` the payload is moved once. Anything but a unicast datagram
    /// within the MTU to a resolved neighbour takes `send_tcp_via_ip`, which keeps every
    /// drop counter and the neighbour queue.
    ///
    /// `gso_size_bytes` > 0 (TSO on, [`crate::config::TxOffloadCaps`]): a payload of more than
    /// that many bytes leaves as one frame beyond the MTU for the device to cut into
    /// segments of `gso_size_bytes` ([`TxMeta`]); such a frame never takes the slow path (the
    /// TCP flush builds none while the neighbour is unresolved, [`Egress::tso_route_ready`];
    /// should one meet an unresolved neighbour anyway it is dropped and counted
    /// `tx_drop_too_big`, and TCP retransmits). Its TCP checksum is left partial, as is every fast-path segment's
    /// when the device completes TCP checksums.
    ///
    /// `ip` holds the IP header fields the connection chooses: the ECN codepoint the TCP
    /// engine chose for the segment (`tcp::Connection::transmit_ecn`; IPv4 TOS, IPv6 traffic
    /// class, RFC 3168 §5), and for IPv4 the socket's `IP_TOS` and DF (`IP_MTU_DISCOVER`).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_tcp_frame(
        &mut self,
        now: u64,
        pair: &IpPair,
        header: &TcpRepr<'static>,
        mut frame: Vec<u8>,
        payload_at: usize,
        n: usize,
        gso_size_bytes: u16,
        ip: TcpIpFields,
    ) {
        debug_assert!(header.payload.is_empty());
        let pair = *pair;
        let (dst, ip_len) = match pair {
            IpPair::V4 { dst, .. } => (IpAddr::V4(dst), IPV4_HEADER_LEN),
            IpPair::V6 { dst, .. } => (IpAddr::V6(dst), IPV6_HEADER_LEN),
        };
        let layout = self.cfg.tcp_option_layout;
        let tcp_len = header.header_len_in(layout);
        let ip_payload_len = tcp_len + n;
        let gso = gso_size_bytes > 0 && n > usize::from(gso_size_bytes);
        let fits = if gso {
            ip_len + ip_payload_len <= 65_535
        } else {
            ip_len + ip_payload_len <= usize::from(self.mtu_bytes)
        };
        let route = match self.unicast_next_hop_cached(dst) {
            Some(hop) if fits && tcp_len <= TCP_HEADER_MAX => self
                .neighbors
                .lookup_for_send(now, hop)
                .map(|(mac, refresh)| (mac, refresh.then_some(hop))),
            _ => None,
        };
        if gso && route.is_none() {
            self.counters.tx_drop_too_big += 1;
            return self.recycle(frame);
        }
        let Some((mac, refresh)) = route else {
            // The slow path copies the payload out; rare (resolution, broadcast, oversize).
            let payload = frame.get(payload_at..payload_at + n).unwrap_or(&[]);
            let seg = TcpRepr { payload, ..*header };
            self.send_tcp_via_ip(now, pair, &seg, ip);
            return self.recycle(frame);
        };
        if self.tx.len() >= self.tx_queue_max {
            self.counters.tx_drop_queue_full += 1;
            return self.recycle(frame);
        }
        self.tx_header_guess = tcp_len;
        let tcp_at = ETHERNET_HEADER_LEN + ip_len;
        let want_at = tcp_at + tcp_len;
        let frame_len = want_at + n;
        if want_at != payload_at {
            if frame.len() < frame_len {
                frame.resize(frame_len, 0);
            }
            frame.copy_within(payload_at..payload_at + n, want_at);
        }
        frame.truncate(frame_len);
        let partial = gso || self.cfg.tx_offload.tcp_csum;
        let checksums = self.checksums;
        let ident = self.ipv4_ident;
        let h = FrameHeaders {
            src_mac: self.mac,
            dst_mac: mac,
            pair,
            ident,
            hop_limit: self.hop_limit,
            ip,
            tcp_caps: FrameHeaders::tcp_caps_for(checksums, partial),
            ip_caps: checksums,
        };
        if !write_headers(&mut frame, &h, header, layout) {
            return self.recycle(frame);
        }
        if !pair.is_ipv6() {
            self.ipv4_ident = self.ipv4_ident.wrapping_add(1);
        }
        let meta = TxMeta {
            gso_size_bytes: if gso { gso_size_bytes } else { 0 },
            l4_csum_partial: partial,
        };
        if gso {
            self.counters.tx_tso_frames += 1;
            self.counters.tx_tso_segments += n.div_ceil(usize::from(gso_size_bytes)) as u64;
        }
        if partial {
            self.counters.tx_csum_partial_frames += 1;
        }
        self.tx.push_back((frame, meta));
        if let Some(hop) = refresh {
            self.send_refresh_request(hop, mac);
        }
    }

    /// Emits one segment as an IP datagram through `send_ipv4`/`send_ipv6` (fragmentation,
    /// neighbour queueing, broadcast and loopback handling, their drop counters).
    fn send_tcp_via_ip(&mut self, now: u64, pair: IpPair, seg: &TcpRepr<'_>, ip: TcpIpFields) {
        let layout = self.cfg.tcp_option_layout;
        let mut buf = vec![0u8; seg.buffer_len_in(layout)];
        if seg
            .emit_in(
                &mut TcpPacket::new_unchecked(&mut buf[..]),
                &pair,
                self.checksums,
                layout,
            )
            .is_err()
        {
            return;
        }
        match pair {
            IpPair::V4 { src, dst } => {
                let tos = ip.tos | ip.ecn.bits();
                self.send_ipv4(now, src, dst, IpProtocol::TCP, ip.dont_frag, tos, &buf)
            }
            IpPair::V6 { src, dst } => {
                self.send_ipv6(now, src, dst, IpProtocol::TCP, self.hop_limit, ip.ecn, &buf)
            }
        }
    }
}
