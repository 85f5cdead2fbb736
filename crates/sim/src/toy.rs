//! Small hosts for testing the simulator itself and for showing how a soak checker looks.
//!
//! - [`SeqSender`] sends numbered frames (8-byte big-endian sequence number, then padding).
//! - [`Recorder`] records every frame it receives with its arrival time.
//! - [`Relay`] forwards frames between its two ports (a router in a dumbbell topology).
//! - [`GbnSender`] / [`GbnReceiver`]: a go-back-N reliable transfer with a 64-bit checksum,
//!   cumulative ACKs and a fixed retransmission timeout. The receiver's delivered bytes must
//!   equal the sender's bytes exactly — the property the TCP soak checks later.

use crate::host::{Host, PortId};
use crate::trace::Fnv64;
use core::any::Any;
use std::collections::VecDeque;

/// Sends `count` frames numbered 0.. on `port`, `interval_ns` apart (all at once if 0).
/// Frame `i` is `i` as 8 big-endian bytes followed by zero padding up to `frame_len_bytes`.
#[derive(Clone, Debug)]
pub struct SeqSender {
    port: PortId,
    count: u64,
    frame_len_bytes: usize,
    interval_ns: u64,
    next_seq: u64,
    /// When the next frame may go (ns).
    next_send_ns: u64,
}

impl SeqSender {
    /// Frames shorter than 8 bytes are sent as 8 bytes.
    pub fn new(port: PortId, count: u64, frame_len_bytes: usize, interval_ns: u64) -> Self {
        Self {
            port,
            count,
            frame_len_bytes: frame_len_bytes.max(8),
            interval_ns,
            next_seq: 0,
            next_send_ns: 0,
        }
    }

    /// Frames sent so far.
    pub fn sent(&self) -> u64 {
        self.next_seq
    }
}

impl Host for SeqSender {
    fn handle_frame(&mut self, _now_ns: u64, _port: PortId, _frame: &[u8]) {}

    fn handle_timeout(&mut self, _now_ns: u64) {}

    fn poll_transmit(&mut self, now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        if self.next_seq >= self.count || now_ns < self.next_send_ns {
            return None;
        }
        let mut frame = vec![0u8; self.frame_len_bytes];
        if let Some(head) = frame.get_mut(..8) {
            head.copy_from_slice(&self.next_seq.to_be_bytes());
        }
        self.next_seq += 1;
        self.next_send_ns = now_ns.saturating_add(self.interval_ns);
        Some((self.port, frame))
    }

    fn poll_timeout(&self) -> Option<u64> {
        (self.next_seq < self.count && self.interval_ns > 0).then_some(self.next_send_ns)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A frame as a [`Recorder`] saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Received {
    /// Arrival instant.
    pub at_ns: u64,
    /// Port it arrived on.
    pub port: PortId,
    /// The bytes.
    pub frame: Vec<u8>,
}

impl Received {
    /// The [`SeqSender`] sequence number in the first 8 bytes, if the frame is long enough.
    pub fn seq(&self) -> Option<u64> {
        let head: [u8; 8] = self.frame.get(..8)?.try_into().ok()?;
        Some(u64::from_be_bytes(head))
    }
}

/// Records every frame it receives; never sends.
#[derive(Clone, Debug, Default)]
pub struct Recorder {
    /// Everything received, in arrival order.
    pub frames: Vec<Received>,
}

impl Recorder {
    /// Sequence numbers in arrival order (frames too short to carry one are skipped).
    pub fn seqs(&self) -> Vec<u64> {
        self.frames.iter().filter_map(Received::seq).collect()
    }
}

impl Host for Recorder {
    fn handle_frame(&mut self, now_ns: u64, port: PortId, frame: &[u8]) {
        self.frames.push(Received {
            at_ns: now_ns,
            port,
            frame: frame.to_vec(),
        });
    }

    fn handle_timeout(&mut self, _now_ns: u64) {}

    fn poll_transmit(&mut self, _now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        None
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// A two-port store-and-forward relay: every frame received on port 0 leaves on port 1 and
/// vice versa, unchanged, at the instant it arrived. With links of different rates on each
/// side, the egress link's transmit queue becomes the bottleneck queue of a classic
/// dumbbell topology.
#[derive(Clone, Debug, Default)]
pub struct Relay {
    pending: VecDeque<(PortId, Vec<u8>)>,
    /// Frames forwarded.
    pub forwarded: u64,
    /// Frames received on a port other than 0 or 1 (discarded).
    pub frames_unknown_port: u64,
}

impl Host for Relay {
    fn handle_frame(&mut self, _now_ns: u64, port: PortId, frame: &[u8]) {
        let out = match port {
            PortId(0) => PortId(1),
            PortId(1) => PortId(0),
            _ => {
                self.frames_unknown_port += 1;
                return;
            }
        };
        self.pending.push_back((out, frame.to_vec()));
    }

    fn handle_timeout(&mut self, _now_ns: u64) {}

    fn poll_transmit(&mut self, _now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        let next = self.pending.pop_front()?;
        self.forwarded += 1;
        Some(next)
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

// Go-back-N frame format (all integers big-endian):
//   kind: u8 (1 = data, 2 = ack) | seq: u32 | payload (data only) | fnv64 of all before: u64
// For an ack, `seq` is the next chunk the receiver expects (cumulative).
const GBN_KIND_DATA: u8 = 1;
const GBN_KIND_ACK: u8 = 2;
const GBN_HEADER_BYTES: usize = 5;
const GBN_TRAILER_BYTES: usize = 8;

fn gbn_encode(kind: u8, seq: u32, payload: &[u8]) -> Vec<u8> {
    let mut f = Vec::with_capacity(GBN_HEADER_BYTES + payload.len() + GBN_TRAILER_BYTES);
    f.push(kind);
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend_from_slice(payload);
    let sum = Fnv64::hash(&f);
    f.extend_from_slice(&sum.to_be_bytes());
    f
}

/// A checked go-back-N frame, or `None` if it is short or its checksum fails.
fn gbn_decode(frame: &[u8]) -> Option<(u8, u32, &[u8])> {
    let body_len = frame.len().checked_sub(GBN_TRAILER_BYTES)?;
    let (body, trailer) = frame.split_at_checked(body_len)?;
    let sum = u64::from_be_bytes(trailer.try_into().ok()?);
    if Fnv64::hash(body) != sum {
        return None;
    }
    let (&kind, rest) = body.split_first()?;
    let (seq_bytes, payload) = rest.split_at_checked(4)?;
    let seq = u32::from_be_bytes(seq_bytes.try_into().ok()?);
    Some((kind, seq, payload))
}

/// Go-back-N sender: chunks `data` into `chunk_bytes` pieces, keeps up to `window_chunks`
/// unacknowledged, and after `rto_ns` without progress resends everything from the oldest
/// unacknowledged chunk.
#[derive(Clone, Debug)]
pub struct GbnSender {
    port: PortId,
    data: Vec<u8>,
    chunk_bytes: usize,
    window_chunks: u32,
    rto_ns: u64,
    /// Oldest unacknowledged chunk. Invariant: `base <= next <= chunks()`.
    base: u32,
    /// Next chunk to (re)send.
    next: u32,
    /// Retransmission deadline while chunks are outstanding.
    rto_deadline_ns: Option<u64>,
    /// Frames sent, retransmissions included.
    pub frames_sent: u64,
    /// Timeouts that caused a go-back.
    pub timeouts: u64,
    /// Received frames that failed the checksum or were not ACKs.
    pub frames_bad: u64,
}

impl GbnSender {
    /// `chunk_bytes` and `window_chunks` are raised to at least 1.
    pub fn new(
        port: PortId,
        data: Vec<u8>,
        chunk_bytes: usize,
        window_chunks: u32,
        rto_ns: u64,
    ) -> Self {
        Self {
            port,
            data,
            chunk_bytes: chunk_bytes.max(1),
            window_chunks: window_chunks.max(1),
            rto_ns,
            base: 0,
            next: 0,
            rto_deadline_ns: None,
            frames_sent: 0,
            timeouts: 0,
            frames_bad: 0,
        }
    }

    fn chunks(&self) -> u32 {
        u32::try_from(self.data.len().div_ceil(self.chunk_bytes)).unwrap_or(u32::MAX)
    }

    /// Whether every chunk has been acknowledged.
    pub fn done(&self) -> bool {
        self.base >= self.chunks()
    }
}

impl Host for GbnSender {
    fn handle_frame(&mut self, now_ns: u64, _port: PortId, frame: &[u8]) {
        let Some((GBN_KIND_ACK, ack, _)) = gbn_decode(frame) else {
            self.frames_bad += 1;
            return;
        };
        // Cumulative ACK: ignore old ones and ones for chunks never sent.
        if ack > self.base && ack <= self.chunks() {
            self.base = ack;
            self.next = self.next.max(self.base);
            self.rto_deadline_ns = (self.base < self.next).then(|| now_ns + self.rto_ns);
        }
    }

    fn handle_timeout(&mut self, now_ns: u64) {
        if self.rto_deadline_ns.is_some_and(|t| t <= now_ns) {
            self.timeouts += 1;
            self.next = self.base;
            self.rto_deadline_ns = None;
        }
    }

    fn poll_transmit(&mut self, now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        let limit = self
            .chunks()
            .min(self.base.saturating_add(self.window_chunks));
        if self.next >= limit {
            return None;
        }
        let start = (self.next as usize).saturating_mul(self.chunk_bytes);
        let end = start.saturating_add(self.chunk_bytes).min(self.data.len());
        let payload = self.data.get(start..end)?;
        let frame = gbn_encode(GBN_KIND_DATA, self.next, payload);
        self.next += 1;
        self.frames_sent += 1;
        if self.rto_deadline_ns.is_none() {
            self.rto_deadline_ns = Some(now_ns + self.rto_ns);
        }
        Some((self.port, frame))
    }

    fn poll_timeout(&self) -> Option<u64> {
        self.rto_deadline_ns
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

/// Go-back-N receiver: accepts only the next expected chunk, delivers it in order, and
/// answers every valid data frame with a cumulative ACK.
#[derive(Clone, Debug, Default)]
pub struct GbnReceiver {
    port: PortId,
    /// Next chunk expected.
    expected: u32,
    /// Bytes delivered to the "application", in order.
    pub delivered: Vec<u8>,
    /// Valid data frames for chunks already delivered or not yet due (discarded).
    pub frames_out_of_order: u64,
    /// Frames that failed the checksum or were not data.
    pub frames_bad: u64,
    acks_pending: VecDeque<u32>,
}

impl GbnReceiver {
    /// A receiver answering on `port`.
    pub fn new(port: PortId) -> Self {
        Self {
            port,
            ..Self::default()
        }
    }
}

impl Host for GbnReceiver {
    fn handle_frame(&mut self, _now_ns: u64, _port: PortId, frame: &[u8]) {
        let Some((GBN_KIND_DATA, seq, payload)) = gbn_decode(frame) else {
            self.frames_bad += 1;
            return;
        };
        if seq == self.expected {
            self.delivered.extend_from_slice(payload);
            self.expected += 1;
        } else {
            self.frames_out_of_order += 1;
        }
        self.acks_pending.push_back(self.expected);
    }

    fn handle_timeout(&mut self, _now_ns: u64) {}

    fn poll_transmit(&mut self, _now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        let ack = self.acks_pending.pop_front()?;
        Some((self.port, gbn_encode(GBN_KIND_ACK, ack, &[])))
    }

    fn poll_timeout(&self) -> Option<u64> {
        None
    }

    fn as_any(&self) -> &dyn Any {
        self
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gbn_frame_round_trips_and_any_single_bit_flip_is_rejected() {
        let f = gbn_encode(GBN_KIND_DATA, 7, b"hello");
        assert_eq!(gbn_decode(&f), Some((GBN_KIND_DATA, 7, &b"hello"[..])));
        for byte in 0..f.len() {
            for bit in 0..8 {
                let mut g = f.clone();
                if let Some(b) = g.get_mut(byte) {
                    *b ^= 1 << bit;
                }
                assert_eq!(gbn_decode(&g), None, "flip byte {byte} bit {bit}");
            }
        }
        assert_eq!(gbn_decode(&f[..3]), None);
        assert_eq!(gbn_decode(&[]), None);
    }
}
