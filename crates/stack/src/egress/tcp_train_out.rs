//! The egress side of a TCP train (`tcp_train.rs`): the route, the neighbour and the frame
//! headers' fixed fields looked up once for the run, then one frame per segment.
//!
//! Invariant: the frames queued, and every effect on the egress part (IPv4 identification,
//! the header-room guess, counters, the neighbour refresh request and its place in the
//! queue, the buffer pool), are those of one [`Egress::send_tcp_frame`] per segment; where
//! the run could not be sent that way (no resolved unicast route, a frame over the MTU, a
//! header the fixed writer does not lay out) it is sent through `send_tcp_frame` itself.

use core::net::IpAddr;

use wire::{IpPair, TcpRepr, TxMeta};

use super::tcp_headers::{FrameHeaders, write_headers};
use super::{ETHERNET_HEADER_LEN, Egress, IPV4_HEADER_LEN, TCP_HEADER_MAX, TcpIpFields};

impl Egress {
    /// Queues `segments` frames of `seg_bytes` payload each: segment `j`'s header is
    /// `header(j)` (its `payload` empty) and `copy(j, dst)` writes its payload into `dst`
    /// (`seg_bytes` long), returning the bytes written. `mtu_room_bytes` is the payload room
    /// the per-segment path gives a frame (for the fallback).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_tcp_train(
        &mut self,
        now: u64,
        pair: &IpPair,
        segments: u16,
        seg_bytes: usize,
        header: impl Fn(u16) -> TcpRepr<'static>,
        mut copy: impl FnMut(u16, &mut [u8]) -> usize,
        ip: TcpIpFields,
        mtu_room_bytes: usize,
    ) {
        let first = header(0);
        let tcp_len = first.header_len_in(self.cfg.tcp_option_layout);
        let fixed = matches!(pair, IpPair::V4 { .. })
            && first.max_seg_size.is_none()
            && first.window_scale.is_none()
            && !first.sack_permitted
            && first.sack_blocks.iter().all(Option::is_none)
            && first.fast_open.is_none()
            && tcp_len <= TCP_HEADER_MAX
            && IPV4_HEADER_LEN + tcp_len + seg_bytes <= usize::from(self.mtu_bytes);
        let route = match pair {
            IpPair::V4 { dst, .. } if fixed => self
                .unicast_next_hop_cached(IpAddr::V4(*dst))
                .and_then(|hop| {
                    self.neighbors
                        .lookup_for_send(now, hop)
                        .map(|(mac, refresh)| (mac, refresh.then_some(hop)))
                }),
            _ => None,
        };
        let Some((mac, mut refresh)) = route else {
            // The per-segment path, frame by frame (it keeps every drop counter and queue).
            for j in 0..segments {
                let payload_at = ETHERNET_HEADER_LEN
                    + if pair.is_ipv6() {
                        super::IPV6_HEADER_LEN
                    } else {
                        IPV4_HEADER_LEN
                    }
                    + self.tx_header_guess;
                let mut frame = self.take_frame_buf(payload_at + mtu_room_bytes);
                let n = copy(j, frame.get_mut(payload_at..).unwrap_or_default());
                self.send_tcp_frame(now, pair, &header(j), frame, payload_at, n, 0, ip);
            }
            return;
        };
        let partial = self.cfg.tx_offload.tcp_csum;
        let checksums = self.checksums;
        let mut h = FrameHeaders {
            src_mac: self.mac,
            dst_mac: mac,
            pair: *pair,
            ident: 0,
            hop_limit: self.hop_limit,
            ip,
            tcp_caps: if partial {
                wire::ChecksumCaps {
                    fill_tx: false,
                    ..checksums
                }
            } else {
                checksums
            },
            ip_caps: checksums,
        };
        self.tx_header_guess = tcp_len;
        let payload_at = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + tcp_len;
        let meta = TxMeta {
            gso_size_bytes: 0,
            l4_csum_partial: partial,
        };
        for j in 0..segments {
            let mut frame = self.pool.take(payload_at + seg_bytes);
            let n = copy(j, frame.get_mut(payload_at..).unwrap_or_default());
            frame.truncate(payload_at + n);
            if self.tx.len() >= self.tx_queue_max {
                self.counters.tx_drop_queue_full += 1;
                self.recycle(frame);
                continue;
            }
            h.ident = self.ipv4_ident;
            if !write_headers(&mut frame, &h, &header(j), self.cfg.tcp_option_layout) {
                self.recycle(frame);
                continue;
            }
            self.ipv4_ident = self.ipv4_ident.wrapping_add(1);
            if partial {
                self.counters.tx_csum_partial_frames += 1;
            }
            self.tx.push_back((frame, meta));
            if let Some(hop) = refresh.take() {
                self.send_refresh_request(hop, mac);
            }
        }
    }
}
