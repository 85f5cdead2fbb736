//! One receive queue: a bounded descriptor ring and its receive-coalescing (GRO/RSC) contexts.
//!
//! The coalescing model and merge rules are documented on [`crate::GroConfig`].

use std::collections::VecDeque;

use rss::SteerHow;
use wire::checksum;
use wire::{CsumVerdict, IpPair, IpProtocol, RxChecksum, RxMeta, TcpFlags, TcpPacket};

use crate::config::GroConfig;
use crate::counters::QueueCounters;
use crate::layout::{L3, Layout, fix_ip_length};
use crate::pool::BufferPool;

/// A received packet as the driver finds it in the ring: the frame plus what the NIC learned.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RxDescriptor {
    /// The frame (Ethernet header first). A coalesced frame is one valid Ethernet/IP/TCP frame.
    pub frame: Vec<u8>,
    /// What the NIC learnt from its one parse of the frame, for the stack
    /// (`stack::Stack::receive` takes it as is): the RSS hash and its type ("hash once": the
    /// stack reuses it for its connection lookup), the checksum verdicts, the VLAN tag, the
    /// header offsets and, for a coalesced frame, its segment count and `gso_size`.
    ///
    /// Invariant: the verdicts describe `frame` as it is now. A coalesced frame's checksums
    /// are filled by the NIC when it closes the group, so both are `Good` (the IPv4 header
    /// only for IPv4); every segment merged into it had verified good.
    pub meta: RxMeta,
    /// Queue the packet was steered to.
    pub queue: u16,
    /// Which rule chose the queue.
    pub steered_by: SteerHow,
    /// When the (first) segment arrived.
    pub arrival_ns: u64,
}

/// Why a coalesced group was closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FlushReason {
    PushFin,
    Short,
    Gap,
    HeaderChange,
    Flags,
    Size,
    Timer,
    Poll,
    Evict,
}

/// What happened to a frame offered to the queue.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Accept {
    /// Took a slot of its own.
    Queued,
    /// Appended to an open group.
    Coalesced,
    /// No free slot.
    RingFull,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct FlowKey {
    addrs: IpPair,
    src_port: u16,
    dst_port: u16,
}

/// An open coalesced group. Invariant: `slot_abs` names an open slot in the ring.
#[derive(Clone, Debug)]
struct GroCtx {
    key: FlowKey,
    slot_abs: u64,
    layout: Layout,
    /// Byte offset of the TCP header in the frame.
    tcp_header_len: usize,
    next_seq: u32,
    mss_bytes: usize,
    segments: u16,
    opened_ns: u64,
    /// Frame offset of the TSval field, when the options carry a Timestamps option.
    tsval_off: Option<usize>,
    last_tsval: u32,
    /// Folded sum of the merged payload so far (RFC 1071), so closing needs no pass over it.
    payload_sum: u16,
    /// Merged payload bytes so far.
    payload_bytes: usize,
}

#[derive(Clone, Debug)]
struct Slot {
    desc: RxDescriptor,
    open: bool,
}

/// Steering and verification results that travel with a frame into the ring.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub queue: u16,
    pub steered_by: SteerHow,
    /// The descriptor's metadata (one segment).
    pub meta: RxMeta,
    /// Folded sum of the TCP segment's bytes, from checksum verification.
    pub tcp_sum: Option<u16>,
    /// When the frame arrived.
    pub arrival_ns: u64,
}

/// The receive ring plus GRO contexts of one queue.
///
/// Invariants: `slots.len() <= capacity`; the slot at absolute index `i` is
/// `slots[i - head_abs]`; every context names a distinct open slot, and every open slot has
/// exactly one context; `contexts.len() <= gro.flows_max`.
#[derive(Clone, Debug)]
pub(crate) struct RxQueue {
    slots: VecDeque<Slot>,
    head_abs: u64,
    capacity: usize,
    contexts: Vec<GroCtx>,
}

impl RxQueue {
    pub(crate) fn new(capacity: usize) -> Self {
        RxQueue {
            slots: VecDeque::with_capacity(capacity),
            head_abs: 0,
            capacity,
            contexts: Vec::new(),
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.slots.len()
    }

    /// Earliest flush-timer deadline of an open group.
    pub(crate) fn gro_deadline_ns(&self, gro: &GroConfig) -> Option<u64> {
        self.contexts
            .iter()
            .map(|c| c.opened_ns.saturating_add(gro.flush_timeout_ns))
            .min()
    }

    /// Closes groups whose flush timer expired.
    pub(crate) fn on_timer(&mut self, now_ns: u64, gro: &GroConfig, c: &mut QueueCounters) {
        while let Some(i) = self
            .contexts
            .iter()
            .position(|x| now_ns >= x.opened_ns.saturating_add(gro.flush_timeout_ns))
        {
            self.close(i, FlushReason::Timer, c);
        }
    }

    /// Closes every open group (start of a poll, or GRO switched off).
    pub(crate) fn close_all(&mut self, reason: FlushReason, c: &mut QueueCounters) {
        while !self.contexts.is_empty() {
            self.close(0, reason, c);
        }
    }

    /// Moves up to `budget` closed descriptors to `out`; returns how many.
    pub(crate) fn take(&mut self, budget: usize, out: &mut Vec<RxDescriptor>) -> usize {
        let mut n = 0;
        while n < budget {
            match self.slots.front() {
                Some(s) if !s.open => {}
                _ => break,
            }
            let Some(slot) = self.slots.pop_front() else {
                break;
            };
            self.head_abs += 1;
            out.push(slot.desc);
            n += 1;
        }
        n
    }

    /// Offers a received frame. `layout` is `None` for non-IP frames.
    pub(crate) fn accept(
        &mut self,
        mut frame: Vec<u8>,
        layout: Option<&Layout>,
        meta: Arrival,
        gro: &GroConfig,
        c: &mut QueueCounters,
        pool: &mut BufferPool,
    ) -> Accept {
        let now_ns = meta.arrival_ns;
        let tcp = layout.and_then(|l| tcp_info(&frame, l, meta.meta.csum, meta.tcp_sum));
        let key = tcp.as_ref().map(|t| t.key);
        let ctx_idx = key.and_then(|k| self.contexts.iter().position(|x| x.key == k));

        let gro_tcp = match (tcp.as_ref(), layout) {
            (Some(t), Some(l)) if gro.enabled => Some((t, l)),
            _ => None,
        };
        if let Some((t, l)) = gro_tcp {
            if let Some(i) = ctx_idx {
                match self.try_merge(i, &frame, l, t, gro, pool) {
                    Ok(close_after) => {
                        c.rx_coalesced_segments += 1;
                        if let Some(reason) = close_after {
                            self.close(i, reason, c);
                        }
                        pool.give(frame);
                        return Accept::Coalesced;
                    }
                    Err(reason) => self.close(i, reason, c),
                }
            }
            if t.coalescible {
                if self.slots.len() >= self.capacity {
                    pool.give(frame);
                    return Accept::RingFull;
                }
                frame.truncate(l.ip_end);
                let ends_now = t.flags.intersects(TcpFlags::PSH | TcpFlags::FIN);
                let slot_abs = self.head_abs + self.slots.len() as u64;
                self.slots.push_back(Slot {
                    desc: descriptor(frame, meta, now_ns),
                    open: !ends_now,
                });
                if !ends_now {
                    if self.contexts.len() >= gro.flows_max {
                        // Evict the oldest group (Linux GRO flushes the oldest when its
                        // per-NAPI list is full).
                        let oldest = self
                            .contexts
                            .iter()
                            .enumerate()
                            .min_by_key(|(_, x)| x.opened_ns)
                            .map(|(i, _)| i);
                        if let Some(i) = oldest {
                            self.close(i, FlushReason::Evict, c);
                        }
                    }
                    self.contexts.push(GroCtx {
                        key: t.key,
                        slot_abs,
                        layout: *l,
                        tcp_header_len: t.header_len,
                        next_seq: t.seq.wrapping_add(t.payload_len as u32),
                        mss_bytes: t.payload_len,
                        segments: 1,
                        opened_ns: now_ns,
                        tsval_off: t.tsval_off,
                        last_tsval: t.tsval,
                        payload_sum: t.payload_sum,
                        payload_bytes: t.payload_len,
                    });
                }
                return Accept::Queued;
            }
            // Not coalescible (SYN/RST/URG/CWR, no payload, bad checksum…): alone.
        } else if let Some(i) = ctx_idx {
            // GRO off while a group is open cannot happen (switching off closes them), but a
            // flow's other packets must never overtake its group: close it first.
            self.close(i, FlushReason::Flags, c);
        }
        if self.slots.len() >= self.capacity {
            pool.give(frame);
            return Accept::RingFull;
        }
        self.slots.push_back(Slot {
            desc: descriptor(frame, meta, now_ns),
            open: false,
        });
        Accept::Queued
    }

    /// Appends `frame` to group `i` if the merge rules allow. `Ok(Some(reason))`: merged, and
    /// the group must close now. `Err(reason)`: not merged; the group must close.
    fn try_merge(
        &mut self,
        i: usize,
        frame: &[u8],
        l: &Layout,
        t: &TcpInfo,
        gro: &GroConfig,
        pool: &mut BufferPool,
    ) -> Result<Option<FlushReason>, FlushReason> {
        let ctx = self.contexts.get(i).ok_or(FlushReason::Flags)?;
        if !t.coalescible {
            return Err(FlushReason::Flags);
        }
        if t.seq != ctx.next_seq {
            return Err(FlushReason::Gap);
        }
        let idx = usize::try_from(ctx.slot_abs.saturating_sub(self.head_abs)).unwrap_or(usize::MAX);
        let held = &self.slots.get(idx).ok_or(FlushReason::Flags)?.desc.frame;
        if !headers_match(
            held,
            &ctx.layout,
            ctx.tcp_header_len,
            ctx.tsval_off,
            frame,
            l,
            t,
        ) {
            return Err(FlushReason::HeaderChange);
        }
        if ctx.tsval_off.is_some() && (t.tsval.wrapping_sub(ctx.last_tsval) as i32) < 0 {
            // RFC 7323 §5.3 (PAWS): a TSval going backwards is not "the same flow state".
            return Err(FlushReason::HeaderChange);
        }
        if t.payload_len > ctx.mss_bytes
            || held.len().saturating_sub(ctx.layout.l3_off) + t.payload_len > gro.ip_bytes_max
            || ctx.segments == u16::MAX
        {
            return Err(FlushReason::Size);
        }
        let payload = frame
            .get(t.payload_off..t.payload_off + t.payload_len)
            .ok_or(FlushReason::Flags)?;
        let flags_off = ctx.layout.l4_off + 13;
        let ctx = self.contexts.get_mut(i).ok_or(FlushReason::Flags)?;
        let slot = self.slots.get_mut(idx).ok_or(FlushReason::Flags)?;
        let held = &mut slot.desc.frame;
        if held.capacity() < held.len() + payload.len() {
            // Move the group into a pool buffer of the largest group's size rather than grow
            // (reallocate) the frame it started in: one copy per group, and no allocation once
            // the pool holds group buffers.
            let mut group = pool.take(ctx.layout.l3_off + gro.ip_bytes_max);
            group.extend_from_slice(held);
            pool.give(std::mem::replace(held, group));
        }
        held.extend_from_slice(payload);
        if let Some(b) = held.get_mut(flags_off) {
            *b |= t.flags.0 & (TcpFlags::PSH.0 | TcpFlags::FIN.0);
        }
        ctx.segments += 1;
        ctx.next_seq = ctx.next_seq.wrapping_add(t.payload_len as u32);
        ctx.last_tsval = t.tsval;
        // RFC 1071 §2(B): a piece that starts at an odd offset contributes its sum byte-swapped.
        let piece = if ctx.payload_bytes % 2 == 1 {
            t.payload_sum.swap_bytes()
        } else {
            t.payload_sum
        };
        ctx.payload_sum = checksum::combine(&[ctx.payload_sum, piece]);
        ctx.payload_bytes += t.payload_len;
        let room = gro
            .ip_bytes_max
            .saturating_sub(held.len().saturating_sub(ctx.layout.l3_off));
        Ok(if t.flags.intersects(TcpFlags::PSH | TcpFlags::FIN) {
            Some(FlushReason::PushFin)
        } else if t.payload_len < ctx.mss_bytes {
            Some(FlushReason::Short)
        } else if room < ctx.mss_bytes {
            Some(FlushReason::Size)
        } else {
            None
        })
    }

    /// Closes group `i`: fixes the merged frame and makes its slot visible to polls.
    fn close(&mut self, i: usize, reason: FlushReason, c: &mut QueueCounters) {
        if i >= self.contexts.len() {
            return;
        }
        let ctx = self.contexts.swap_remove(i);
        let counter = match reason {
            FlushReason::PushFin => &mut c.gro_flush_push_fin,
            FlushReason::Short => &mut c.gro_flush_short,
            FlushReason::Gap => &mut c.gro_flush_gap,
            FlushReason::HeaderChange => &mut c.gro_flush_header_change,
            FlushReason::Flags => &mut c.gro_flush_flags,
            FlushReason::Size => &mut c.gro_flush_size,
            FlushReason::Timer => &mut c.gro_flush_timer,
            FlushReason::Poll => &mut c.gro_flush_poll,
            FlushReason::Evict => &mut c.gro_flush_evict,
        };
        *counter += 1;
        let idx = usize::try_from(ctx.slot_abs.saturating_sub(self.head_abs)).unwrap_or(usize::MAX);
        let Some(slot) = self.slots.get_mut(idx) else {
            return;
        };
        slot.open = false;
        if ctx.segments > 1 {
            let d = &mut slot.desc;
            fix_ip_length(&mut d.frame, &ctx.layout);
            fill_merged_tcp_checksum(&mut d.frame, &ctx);
            d.meta.coalesced_segments = ctx.segments;
            d.meta.gro_mss_bytes = u16::try_from(ctx.mss_bytes).unwrap_or(u16::MAX);
            // The NIC filled both checksums just now, over the merged bytes.
            d.meta.csum = RxChecksum {
                ip: if ctx.layout.l3 == L3::V4 {
                    CsumVerdict::Good
                } else {
                    CsumVerdict::Unknown
                },
                l4: CsumVerdict::Good,
            };
        }
    }
}

fn descriptor(frame: Vec<u8>, a: Arrival, now_ns: u64) -> RxDescriptor {
    RxDescriptor {
        frame,
        meta: RxMeta {
            coalesced_segments: 1,
            gro_mss_bytes: 0,
            ..a.meta
        },
        queue: a.queue,
        steered_by: a.steered_by,
        arrival_ns: now_ns,
    }
}

/// What GRO needs from a TCP segment.
#[derive(Clone, Copy, Debug)]
struct TcpInfo {
    key: FlowKey,
    seq: u32,
    flags: TcpFlags,
    header_len: usize,
    payload_off: usize,
    payload_len: usize,
    tsval_off: Option<usize>,
    tsval: u32,
    /// Folded sum of the payload (valid when `coalescible`).
    payload_sum: u16,
    coalescible: bool,
}

fn tcp_info(frame: &[u8], l: &Layout, csum: RxChecksum, tcp_sum: Option<u16>) -> Option<TcpInfo> {
    let tcp = l.tcp(frame)?;
    let header_len = tcp.header_len();
    let payload_off = l.l4_off + header_len;
    let payload_len = l.ip_end.saturating_sub(payload_off);
    let flags = tcp.flags();
    let (opts_ok, ts) = find_tsval(tcp.options());
    let tsval_off = ts.map(|o| l.l4_off + 20 + o);
    let tsval = tsval_off
        .and_then(|o| frame.get(o..o + 4))
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map_or(0, u32::from_be_bytes);
    let ip_ok = l.l3 == L3::V6 || csum.ip == CsumVerdict::Good;
    let forbidden = TcpFlags::SYN | TcpFlags::RST | TcpFlags::URG | TcpFlags::CWR;
    // The payload's sum is the segment's sum minus its header's (one's complement: add the
    // complement). The header is a multiple of 4 bytes, so the payload starts word-aligned.
    let header = frame.get(l.l4_off..payload_off).unwrap_or(&[]);
    let payload_sum = tcp_sum.map(|seg| checksum::combine(&[seg, !checksum::sum(header)]));
    let coalescible = opts_ok
        && payload_sum.is_some()
        && ip_ok
        && !l.ip_options
        && csum.l4 == CsumVerdict::Good
        && payload_len > 0
        && flags.contains(TcpFlags::ACK)
        && !flags.intersects(forbidden);
    Some(TcpInfo {
        key: FlowKey {
            addrs: l.addrs,
            src_port: tcp.src_port(),
            dst_port: tcp.dst_port(),
        },
        seq: tcp.seq_number().0,
        flags,
        header_len,
        payload_off,
        payload_len,
        tsval_off,
        tsval,
        payload_sum: payload_sum.unwrap_or(0),
        coalescible,
    })
}

/// Walks TCP options (RFC 9293 §3.1): returns whether they are well formed, and the offset
/// (within the options) of a Timestamps option's TSval (RFC 7323 §3: kind 8, length 10).
fn find_tsval(opts: &[u8]) -> (bool, Option<usize>) {
    let mut i = 0;
    let mut ts = None;
    while let Some(&kind) = opts.get(i) {
        match kind {
            0 => break,
            1 => i += 1,
            _ => {
                let Some(&len) = opts.get(i + 1) else {
                    return (false, None);
                };
                let len = usize::from(len);
                if len < 2 || i + len > opts.len() {
                    return (false, None);
                }
                if kind == 8 {
                    if len != 10 {
                        return (false, None);
                    }
                    ts = Some(i + 2);
                }
                i += len;
            }
        }
    }
    (true, ts)
}

/// Rule 2 of the module docs: headers identical except lengths, IPv4 ID, checksums, sequence
/// number, PSH/FIN and the TSval. Compared as slices between the fields that may differ.
fn headers_match(
    held: &[u8],
    hl: &Layout,
    held_tcp_len: usize,
    tsval_off: Option<usize>,
    frame: &[u8],
    l: &Layout,
    t: &TcpInfo,
) -> bool {
    if hl.l3_off != l.l3_off || hl.l4_off != l.l4_off || held_tcp_len != t.header_len {
        return false;
    }
    let (l3, l4, end) = (l.l3_off, l.l4_off, l.l4_off + t.header_len);
    let same = |r: core::ops::Range<usize>| match (held.get(r.clone()), frame.get(r)) {
        (Some(a), Some(b)) => a == b,
        _ => false,
    };
    let ip_same = match l.l3 {
        // Skips total length, identification, header checksum (RFC 791 §3.1).
        L3::V4 => same(l3..l3 + 2) && same(l3 + 6..l3 + 10) && same(l3 + 12..l4),
        // Skips payload length (RFC 8200 §3).
        L3::V6 => same(l3..l3 + 4) && same(l3 + 6..l4),
    };
    let flags_same = match (held.get(l4 + 13), frame.get(l4 + 13)) {
        (Some(a), Some(b)) => (a ^ b) & !(TcpFlags::PSH.0 | TcpFlags::FIN.0) == 0,
        _ => false,
    };
    // Options: all bytes but the TSval.
    let opts_same = match tsval_off {
        Some(o) => same(l4 + 20..o) && same(o + 4..end),
        None => same(l4 + 20..end),
    };
    same(0..l3)
        && ip_same
        && same(l4..l4 + 4) // ports
        && same(l4 + 8..l4 + 13) // ACK number, data offset
        && flags_same
        && same(l4 + 14..l4 + 16) // window
        && same(l4 + 18..l4 + 20) // urgent pointer
        && opts_same
}

/// Fills the TCP checksum of a merged frame from the header and the running payload sum
/// (RFC 9293 §3.1), without another pass over the payload.
fn fill_merged_tcp_checksum(frame: &mut [u8], ctx: &GroCtx) {
    let l4_off = ctx.layout.l4_off;
    let Some(l4) = frame.get_mut(l4_off..) else {
        return;
    };
    let seg_len = u32::try_from(l4.len()).unwrap_or(u32::MAX);
    let mut tcp = TcpPacket::new_unchecked(l4);
    tcp.set_checksum(0);
    let l4 = tcp.into_inner();
    let header_sum = checksum::sum(l4.get(..ctx.tcp_header_len).unwrap_or(&[]));
    let ph = ctx.layout.addrs.pseudo_header_sum(IpProtocol::TCP, seg_len);
    let total = checksum::combine(&[ph, header_sum, ctx.payload_sum]);
    TcpPacket::new_unchecked(l4).set_checksum(checksum::finish(total));
}
