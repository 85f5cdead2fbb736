//! The egress side of a TCP train (`tcp_train.rs`): the route, the neighbour and the frame
//! headers' fixed fields looked up once for the run, then one frame per segment.
//!
//! Invariant: the frames queued, and every effect on the egress part (IPv4 identification,
//! the header-room guess, counters), are those of one [`Egress::send_tcp_frame`] per segment.
//! A train is only sent where each of those calls would take its fast path without side
//! trips: IPv4, a resolved unicast next hop whose neighbour entry needs no refresh now
//! ([`Egress::train_route`]), room in the transmit queue, frames within the MTU.

use core::net::{IpAddr, Ipv4Addr};

use wire::{EthernetAddress, IpPair, TcpRepr, TxMeta, checksum};

use super::tcp_headers::{FrameHeaders, write_headers};
use super::{ETHERNET_HEADER_LEN, Egress, IPV4_HEADER_LEN, TcpIpFields};

impl Egress {
    /// The neighbour MAC a train to `dst` goes to: only when a frame to it now would take the
    /// fast path with no neighbour refresh to send (the neighbour cache's last answer, still
    /// valid, [`crate::neighbor::NeighborCache::cached_for_send`]). `None`: the per-segment
    /// path sends, and resolves or refreshes the neighbour as it does.
    #[inline]
    pub(crate) fn train_route(&mut self, now: u64, dst: Ipv4Addr) -> Option<EthernetAddress> {
        let hop = self.unicast_next_hop_cached(IpAddr::V4(dst))?;
        self.neighbors.cached_for_send(now, hop)
    }

    /// Queues `segments` IPv4 frames to `dst_mac` ([`Egress::train_route`], asked at the same
    /// `now`) of `seg_bytes` payload each: segment `j`'s header is `header(j)` (its `payload`
    /// empty) and `copy(j, dst)` writes its payload into `dst` (`seg_bytes` long), returning
    /// the bytes written. The caller has checked the transmit queue has room for them all and
    /// that each fits the MTU.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn send_tcp_train(
        &mut self,
        pair: &IpPair,
        dst_mac: EthernetAddress,
        segments: u16,
        seg_bytes: usize,
        header: impl Fn(u16) -> TcpRepr<'static>,
        mut copy: impl FnMut(u16, &mut [u8]) -> usize,
        ip: TcpIpFields,
    ) {
        let tcp_len = header(0).header_len_in(self.cfg.tcp_option_layout);
        let partial = self.cfg.tx_offload.tcp_csum;
        let checksums = self.checksums;
        let mut h = FrameHeaders {
            src_mac: self.mac,
            dst_mac,
            pair: *pair,
            ident: 0,
            hop_limit: self.hop_limit,
            ip,
            tcp_caps: FrameHeaders::tcp_caps_for(checksums, partial),
            ip_caps: checksums,
        };
        self.tx_header_guess = tcp_len;
        let payload_at = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + tcp_len;
        let meta = TxMeta {
            gso_size_bytes: 0,
            l4_csum_partial: partial,
        };
        let layout = self.cfg.tcp_option_layout;
        let mut template: Option<Template> = None;
        for j in 0..segments {
            let mut frame = self.pool.take(payload_at + seg_bytes);
            let n = copy(j, frame.get_mut(payload_at..).unwrap_or_default());
            frame.truncate(payload_at + n);
            if self.tx.len() >= self.tx_queue_max {
                // Not reached: the caller sized the train to the queue's room.
                self.counters.tx_drop_queue_full += 1;
                self.recycle(frame);
                continue;
            }
            h.ident = self.ipv4_ident;
            let seg = header(j);
            // The first frame through the fixed writer; the others (of the same length) from
            // its headers, patched.
            match template.as_ref().filter(|t| t.frame_len == frame.len()) {
                Some(t) => t.write(&mut frame, h.ident, &seg),
                None => {
                    if !write_headers(&mut frame, &h, &seg, layout) {
                        self.recycle(frame);
                        continue;
                    }
                    template = Template::new(&frame, payload_at, &h);
                }
            }
            self.ipv4_ident = self.ipv4_ident.wrapping_add(1);
            if partial {
                self.counters.tx_csum_partial_frames += 1;
            }
            self.tx.push_back((frame, meta));
        }
    }
}

/// Bytes of the longest headers a template holds: Ethernet, IPv4, TCP with NOP NOP TS.
const TEMPLATE_BYTES_MAX: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 32;

/// A train's first IPv4 frame's headers, and the sums of the words every frame of the train
/// shares, so the next frames of the same length are written by copying them and patching the
/// identification, the sequence number, the flags and the two checksums.
///
/// Invariant: [`Template::write`] writes the bytes [`write_headers`] would for the same frame
/// with `ident` and `seg` (the fields of `seg` other than the sequence number and flags, and
/// the frame's length, being the first frame's); the twin test in `tests/train.rs` checks it
/// frame by frame.
struct Template {
    head: [u8; TEMPLATE_BYTES_MAX],
    /// Header bytes (where the payload starts).
    head_len: usize,
    /// The whole frame's length: the template is only for frames as long.
    frame_len: usize,
    /// Native-order sum of the IPv4 header's words but the identification and the checksum.
    ip_base: u64,
    /// Native-order sum of the pseudo-header and the TCP header's words but the sequence
    /// number, data offset and flags, and the checksum.
    tcp_base: u64,
    ip_fill: bool,
    tcp_fill: bool,
}

/// Bytes of the headers without TCP options.
const BARE_HEADERS_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + 20;

/// Copies the first `N` bytes of `head` to the front of `frame`; false when `frame` is
/// shorter.
#[inline(always)]
fn copy_head<const N: usize>(frame: &mut [u8], head: &[u8; TEMPLATE_BYTES_MAX]) -> bool {
    match (frame.first_chunk_mut::<N>(), head.first_chunk::<N>()) {
        (Some(dst), Some(src)) => {
            *dst = *src;
            true
        }
        _ => false,
    }
}

/// The native-order 16-bit word at `at` (0 past the end).
#[inline(always)]
fn ne16(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 2) {
        Some(&[x, y]) => u64::from(u16::from_ne_bytes([x, y])),
        _ => 0,
    }
}

/// Frame offsets of the fields a template patches.
const IDENT_AT: usize = ETHERNET_HEADER_LEN + 4;
const IP_CSUM_AT: usize = ETHERNET_HEADER_LEN + 10;
const TCP_AT: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
const SEQ_AT: usize = TCP_AT + 4;
const FLAGS_WORD_AT: usize = TCP_AT + 12;
const TCP_CSUM_AT: usize = TCP_AT + 16;

impl Template {
    /// The template of `frame`, whose headers the fixed writer wrote with `h` and whose
    /// payload starts at `head_len`; `None` when they do not fit one (a TCP header other than
    /// 20 bytes or 32 with timestamps: each frame then has its headers written whole).
    fn new(frame: &[u8], head_len: usize, h: &FrameHeaders) -> Option<Template> {
        if head_len != BARE_HEADERS_LEN && head_len != TEMPLATE_BYTES_MAX {
            return None;
        }
        let mut head = [0u8; TEMPLATE_BYTES_MAX];
        head.get_mut(..head_len)?
            .copy_from_slice(frame.get(..head_len)?);
        let ip_base = (ETHERNET_HEADER_LEN..TCP_AT)
            .step_by(2)
            .filter(|&at| at != IDENT_AT && at != IP_CSUM_AT)
            .map(|at| ne16(&head, at))
            .sum();
        let tcp_bytes = u16::try_from(frame.len() - TCP_AT).ok()?;
        // Pseudo-header: the two addresses (the IPv4 header's last 8 bytes), zero and the
        // protocol, the TCP length.
        let pseudo = (TCP_AT - 8..TCP_AT)
            .step_by(2)
            .map(|at| ne16(&head, at))
            .sum::<u64>()
            + u64::from(u16::from_ne_bytes([0, wire::IpProtocol::TCP.0]))
            + u64::from(u16::from_ne_bytes(tcp_bytes.to_be_bytes()));
        let tcp_base = pseudo
            + (TCP_AT..head_len)
                .step_by(2)
                .filter(|&at| {
                    at != SEQ_AT && at != SEQ_AT + 2 && at != FLAGS_WORD_AT && at != TCP_CSUM_AT
                })
                .map(|at| ne16(&head, at))
                .sum::<u64>();
        Some(Template {
            head,
            head_len,
            frame_len: frame.len(),
            ip_base,
            tcp_base,
            ip_fill: h.ip_caps.fill_tx,
            tcp_fill: h.tcp_caps.fill_tx,
        })
    }

    /// Writes the headers of a frame of `frame_len` bytes whose payload is in place.
    #[inline]
    fn write(&self, frame: &mut [u8], ident: u16, seg: &TcpRepr<'static>) {
        // Copies of a constant length (moves, no `memcpy` call): the two header lengths.
        let copied = match self.head_len {
            TEMPLATE_BYTES_MAX => copy_head::<TEMPLATE_BYTES_MAX>(frame, &self.head),
            BARE_HEADERS_LEN => copy_head::<BARE_HEADERS_LEN>(frame, &self.head),
            _ => false,
        };
        // Every field patched lies in the bare headers.
        let Some(head) = frame
            .first_chunk_mut::<BARE_HEADERS_LEN>()
            .filter(|_| copied)
        else {
            return;
        };
        head[IDENT_AT..IDENT_AT + 2].copy_from_slice(&ident.to_be_bytes());
        if self.ip_fill {
            let sum = self.ip_base + ne16(head, IDENT_AT);
            let csum = checksum::finish(u16::from_be(checksum::fold(sum)));
            head[IP_CSUM_AT..IP_CSUM_AT + 2].copy_from_slice(&csum.to_be_bytes());
        }
        head[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seg.seq_number.0.to_be_bytes());
        head[FLAGS_WORD_AT + 1] = seg.flags.0;
        if self.tcp_fill {
            let sum = self.tcp_base
                + ne16(head, SEQ_AT)
                + ne16(head, SEQ_AT + 2)
                + ne16(head, FLAGS_WORD_AT);
            let payload = frame.get(self.head_len..).unwrap_or(&[]);
            let sum = sum + u64::from(checksum::sum(payload).to_be());
            let csum = checksum::finish(u16::from_be(checksum::fold(sum)));
            if let Some(c) = frame.get_mut(TCP_CSUM_AT..TCP_CSUM_AT + 2) {
                c.copy_from_slice(&csum.to_be_bytes());
            }
        }
    }
}
