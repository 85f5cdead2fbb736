//! TCP in the host stack: segment demultiplexing, RST for closed ports, and (with the `tcp`
//! engine) listeners, the connection table and the socket API.

use core::net::{IpAddr, SocketAddr};

use wire::{IpPair, IpProtocol, SeqNumber, TcpFlags, TcpPacket, TcpRepr};

use crate::socket::SocketError;
use crate::stack::{IpMeta, Stack};

/// Per-socket TCP state.
#[derive(Debug)]
pub(crate) struct TcpState {
    local: SocketAddr,
}

impl TcpState {
    pub(crate) fn local_addr(&self) -> SocketAddr {
        self.local
    }
}

/// Listeners and the connection table.
#[derive(Debug, Default)]
pub(crate) struct TcpTable {}

/// Builds the RST that answers `seg` when no connection or listener wants it
/// (RFC 9293 §3.10.7.1, "If the state is CLOSED"): with ACK set the RST takes its sequence
/// number from SEG.ACK; otherwise it carries sequence 0 and acknowledges SEG.SEQ + SEG.LEN.
/// `None` when `seg` is itself a RST ("An incoming segment containing a RST is discarded").
pub fn rst_for<'a>(seg: &TcpRepr<'_>) -> Option<TcpRepr<'a>> {
    if seg.flags.contains(TcpFlags::RST) {
        return None;
    }
    let (seq, ack, flags) = if seg.flags.contains(TcpFlags::ACK) {
        (seg.ack_number, SeqNumber(0), TcpFlags::RST)
    } else {
        let len = u32::try_from(seg.segment_len()).unwrap_or(u32::MAX);
        (SeqNumber(0), seg.seq_number + len, TcpFlags::RST | TcpFlags::ACK)
    };
    Some(TcpRepr {
        src_port: seg.dst_port,
        dst_port: seg.src_port,
        seq_number: seq,
        ack_number: ack,
        flags,
        window_len: 0,
        urgent_pointer: 0,
        max_seg_size: None,
        window_scale: None,
        sack_permitted: false,
        sack_blocks: [None; 4],
        timestamp: None,
        payload: &[],
    })
}

impl Stack {
    pub(crate) fn process_tcp(&mut self, now: u64, meta: IpMeta, payload: &[u8], _hash: Option<u32>) {
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
        self.reply_rst(now, meta, &seg);
    }

    /// Answers a segment nobody wants with a RST (never to broadcast/multicast destinations,
    /// RFC 1122 §4.2.3.10).
    pub(crate) fn reply_rst(&mut self, now: u64, meta: IpMeta, seg: &TcpRepr<'_>) {
        let Some(rst) = rst_for(seg) else {
            self.counters.tcp_rx_no_listener_rst_ignored += 1;
            return;
        };
        if !meta.dst_unicast {
            self.counters.tcp_rx_no_listener_rst_ignored += 1;
            return;
        }
        self.send_tcp(now, meta.dst, meta.src, &rst);
        self.counters.tcp_rx_no_listener_rst_sent += 1;
    }

    /// Emits one segment from `src` to `dst` (DF set for IPv4: TCP sizes segments to the MSS).
    pub(crate) fn send_tcp(&mut self, now: u64, src: IpAddr, dst: IpAddr, seg: &TcpRepr<'_>) {
        let pair = match (src, dst) {
            (IpAddr::V4(s), IpAddr::V4(d)) => IpPair::V4 { src: s, dst: d },
            (IpAddr::V6(s), IpAddr::V6(d)) => IpPair::V6 { src: s, dst: d },
            _ => return,
        };
        let mut buf = vec![0u8; seg.buffer_len()];
        if seg
            .emit(&mut TcpPacket::new_unchecked(&mut buf[..]), &pair, self.cfg.checksums)
            .is_err()
        {
            return;
        }
        match pair {
            IpPair::V4 { src, dst } => self.send_ipv4(now, src, dst, IpProtocol::TCP, true, &buf),
            IpPair::V6 { src, dst } => {
                self.send_ipv6(now, src, dst, IpProtocol::TCP, self.cfg.hop_limit, &buf)
            }
        }
    }

    pub(crate) fn tcp_close(&mut self, _now: u64, i: usize) -> Result<(), SocketError> {
        self.free_slot(i);
        Ok(())
    }

    pub(crate) fn tcp_flush(&mut self, _now: u64) {}

    pub(crate) fn tcp_poll_timeout(&self) -> Option<u64> {
        None
    }

    pub(crate) fn tcp_handle_timeout(&mut self, _now: u64) {}
}
