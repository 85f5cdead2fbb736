//! Linux's send-buffer accounting, skb by skb ([`Config::send_buffer_skb_accounting`]).
//!
//! The facts, from Linux's `tcp_sendmsg_locked`, `tcp_write_xmit`, `tso_fragment`,
//! `sk_stream_memory_free`, `sk_stream_write_space`, `tcp_check_space`, `tcp_new_space`
//! and `tcp_sndbuf_expand`:
//!
//! - **Admission.** A write appends to the last skb of the write queue while it holds fewer
//!   than the *size goal* (`tcp_xmit_size_goal`: 64 KB of whole segments, or half the
//!   largest window the peer offered when that is smaller) and none of it has left; it starts
//!   a new skb only while the charge (`sk_wmem_queued`) is below `sk_sndbuf` and the unsent
//!   bytes below the notsent mark (`sk_stream_memory_free`). So a write overshoots the
//!   buffer by up to one size goal, and stops short of it when the skbs' overhead fills it.
//! - **Charge.** Each skb costs its payload plus [`SKB_OVERHEAD_BYTES`] (its `truesize`);
//!   acknowledged bytes are uncharged as they are acknowledged (`tcp_trim_head`), an skb's
//!   overhead when all of it is (`tcp_clean_rtx_queue`).
//! - **Packets.** Data leaves in TSO packets, each an skb of its own: a packet that ends
//!   inside an skb splits it (`tso_fragment`: one more overhead). A packet carries at most
//!   half the congestion window and what it leaves free (`tcp_cwnd_test`), and at most the
//!   segments a millisecond of the pacing rate carries (`tcp_tso_autosize`, at least
//!   [`Config::tso_min_segments`]). While a write fills the skb at the head of the unsent
//!   data, each full skb sends one packet at once (`tcp_push_one`) and the rest of it goes
//!   on filling: this model splits the packet off during admission, exactly where the
//!   transmission that follows the call will cut it.
//! - **Writability.** The socket is writable when the free charge is at least half the
//!   charge in use, a new skb would be admitted, and twice the unsent bytes are below the
//!   notsent mark (`__sk_stream_is_writeable` with `wake`). A write that found no room marks
//!   the socket (`SOCK_NOSPACE`); after the next input and its output the stack checks once
//!   (`tcp_check_space`): the buffer first grows to twice the congestion window's worth of
//!   worst-case skbs when the window is not full and autotuning is on
//!   ([`Config::send_buffer_autotune`], `tcp_sndbuf_expand`), then a writable socket loses
//!   the mark and reports [`Event::Writable`] — one edge per wait, as Linux's wake-up.
//! - **`tcpi_sndbuf_limited`** runs from an output that sent the last queued byte while the
//!   window was not full and the socket was marked (`tcp_cwnd_validate`) until the mark is
//!   cleared.
//!
//! Not modelled: Linux's TSO deferral (`tcp_tso_should_defer`, which may hold a packet for
//! a larger one; the stack sends what the windows allow), and splits of retransmissions.
//!
//! Invariants: `ends` is strictly increasing, every end lies in `(buf_seq, write_end]` once
//! pruned, the last is the write end when any byte is queued, `ends.len() ≤ SKBS_MAX`;
//! `packet_end ≤ write_end` after pruning.

use std::collections::VecDeque;

use super::*;

/// What Linux charges an skb beyond its payload on x86-64: `SKB_TRUESIZE` of the
/// `MAX_TCP_HEADER` head `tcp_stream_alloc_skb` allocates — a 1 KiB kmalloc for 320 bytes
/// of headroom and the 320-byte `skb_shared_info`, leaving a 704-byte head — plus the
/// 256-byte `struct sk_buff` (704 + 320 + 256). Payload lives in page fragments, charged
/// byte for byte.
pub const SKB_OVERHEAD_BYTES: u32 = 1280;
/// Linux `MAX_TCP_HEADER` on x86-64.
const MAX_TCP_HEADER_BYTES: u32 = 320;
/// Linux `SKB_DATA_ALIGN(sizeof(struct skb_shared_info))` on x86-64.
const SKB_SHARED_INFO_BYTES: u32 = 320;
/// Linux `SKB_DATA_ALIGN(sizeof(struct sk_buff))` on x86-64.
const SK_BUFF_BYTES: u32 = 256;
/// Linux `GSO_MAX_SIZE`: the largest TSO packet and size goal.
const GSO_MAX_BYTES: u32 = 65_536;
/// Linux `tcp_wmem[2]` (4 MiB): the most autotuning grows a send buffer to.
pub const SEND_BUFFER_AUTOTUNE_MAX_BYTES: u32 = 4 << 20;
/// Linux `TCP_INIT_CWND`: the segments autotuning provides for at least.
const INIT_CWND_SEGMENTS: u32 = 10;
/// Skb records a connection keeps at most; beyond them a packet no longer splits its skb
/// (the charge then counts one overhead fewer per packet: the accounting grows coarser,
/// never unbounded).
const SKBS_MAX: usize = 8192;
/// Linux `TCP_MSS_DEFAULT`: a peer window up to this is not halved for the size goal.
const TCP_MSS_DEFAULT_BYTES: u32 = 536;
/// Linux `tcp_tso_rtt_log` (9): below 2^9 µs of minimum RTT a packet may carry more than a
/// millisecond of the pacing rate (`tcp_tso_autosize`).
const TSO_RTT_LOG: u32 = 9;

/// The skbs of the send queue (see the module documentation).
#[derive(Debug, Clone)]
pub(crate) struct SkbQueue {
    /// The end of each skb, oldest first; the first starts at `snd.buf_seq`.
    ends: VecDeque<SeqNumber>,
    /// Data before this was cut into packets (sent, or leaving with the call's output).
    packet_end: SeqNumber,
    /// Linux `SOCK_NOSPACE`: a write found no room, and no wake-up has been given since.
    pub(crate) nospace: bool,
    /// An input was processed since the last check of the mark (`tcp_check_space`).
    space_check_due: bool,
    /// The notsent mark the stack applies (`TCP_NOTSENT_LOWAT`; `u32::MAX`: none).
    notsent_lowat: u32,
}

impl Connection {
    /// The skb queue, made on first use (every queued byte in one skb, all packetized up to
    /// SND.NXT).
    fn skb_queue(&mut self) -> &mut SkbQueue {
        let write_end = self.write_end();
        let nxt = self.snd.nxt.max(self.snd.buf_seq);
        self.out.held |= held::SKB;
        self.skb.get_or_insert_with(|| {
            let mut ends = VecDeque::new();
            if write_end.gt(nxt) {
                ends.push_back(nxt);
                ends.push_back(write_end);
            } else if !self.send_buf.is_empty() {
                ends.push_back(write_end);
            }
            ends.retain(|e| e.gt(self.snd.buf_seq));
            Box::new(SkbQueue {
                ends,
                packet_end: nxt,
                nospace: false,
                space_check_due: false,
                notsent_lowat: u32::MAX,
            })
        })
    }

    /// The sequence number after the last byte written.
    fn write_end(&self) -> SeqNumber {
        self.snd.buf_seq + self.send_buf.len() as u32
    }

    /// Forgets the skbs every byte of which is acknowledged.
    fn skb_prune(&mut self) {
        let base = self.snd.buf_seq;
        let write_end = self.write_end();
        if let Some(q) = self.skb.as_mut() {
            while q.ends.front().is_some_and(|e| !e.gt(base)) {
                q.ends.pop_front();
            }
            if q.packet_end.lt(base) {
                q.packet_end = base;
            }
            if q.packet_end.gt(write_end) {
                q.packet_end = write_end;
            }
        }
    }

    /// The send queue's charge (Linux `sk_wmem_queued`): the payload held, plus
    /// [`SKB_OVERHEAD_BYTES`] per skb under skb accounting.
    pub fn send_queue_charge_bytes(&self) -> u64 {
        let skbs = match self.skb.as_ref() {
            Some(q) => {
                let base = self.snd.buf_seq;
                q.ends.iter().filter(|e| e.gt(base)).count() as u64
            }
            None => 0,
        };
        self.send_buf.len() as u64 + skbs * u64::from(SKB_OVERHEAD_BYTES)
    }

    /// The size goal of an skb (Linux `tcp_xmit_size_goal`): whole segments up to 64 KB, or
    /// up to half the largest window the peer offered when that is smaller.
    fn skb_size_goal(&self) -> u32 {
        let mss = u32::from(self.eff_mss()).max(1);
        let max_wnd = self.snd.max_wnd;
        let cutoff = if max_wnd > TCP_MSS_DEFAULT_BYTES {
            max_wnd / 2
        } else {
            max_wnd
        };
        let goal = if cutoff > 0 && GSO_MAX_BYTES > cutoff {
            cutoff
        } else {
            GSO_MAX_BYTES
        };
        (goal / mss * mss).max(mss)
    }

    /// The segments a TSO packet carries at most (Linux `tcp_tso_autosize`): a millisecond
    /// (1/1024 s) of the pacing rate — twice cwnd per smoothed RTT in slow start, 1.2 times
    /// after (`tcp_update_pacing_rate`) — plus 64 KB halved per 512 µs of minimum RTT;
    /// unlimited (64 KB) before an RTT sample; at least [`Config::tso_min_segments`].
    fn skb_tso_segments(&self) -> u32 {
        let mss = u64::from(self.eff_mss()).max(1);
        let bytes = match self.srtt_ns() {
            None => u64::from(GSO_MAX_BYTES),
            Some(srtt_ns) => {
                let srtt_us = (srtt_ns / 1000).max(1);
                let cwnd = u64::from(self.cc.cwnd_bytes());
                let ratio_pct = if cwnd < u64::from(self.cc.ssthresh_bytes()) / 2 {
                    200
                } else {
                    120
                };
                let rate_bytes_per_s = cwnd * ratio_pct * 10_000 / srtt_us;
                let min_rtt_us = self.rack_min_rtt_ns().unwrap_or(srtt_ns) / 1000;
                let r = min_rtt_us >> TSO_RTT_LOG;
                let bonus = if r < 32 {
                    u64::from(GSO_MAX_BYTES >> r)
                } else {
                    0
                };
                ((rate_bytes_per_s >> 10) + bonus).min(u64::from(GSO_MAX_BYTES))
            }
        };
        ((bytes / mss) as u32).max(u32::from(self.config.tso_min_segments))
    }

    /// The length of the packet that leaves at `start` (≥ SND.NXT; what lies between SND.NXT
    /// and `start` leaves first) when `usable` new bytes may leave from `start`: within its
    /// skb, half the congestion window and what it leaves free, and [`Self::skb_tso_segments`].
    fn skb_packet_len(&self, start: SeqNumber, usable: u32) -> u32 {
        let mss = u32::from(self.eff_mss()).max(1);
        let Some(q) = self.skb.as_ref() else {
            return 0;
        };
        let Some(&skb_end) = q.ends.iter().find(|e| e.gt(start)) else {
            return 0;
        };
        let cwnd_segs = (self.cc.cwnd_bytes() / mss).max(1);
        let flight_segs = fwd(self.snd.una, start).div_ceil(mss);
        if flight_segs >= cwnd_segs {
            return 0;
        }
        let quota = (cwnd_segs / 2).max(1).min(cwnd_segs - flight_segs);
        let segs = quota.min(self.skb_tso_segments());
        fwd(start, skb_end)
            .min(segs.saturating_mul(mss))
            .min(usable)
    }

    /// Cuts the skb holding `at` in two there (nothing when `at` is an end already, or at
    /// [`SKBS_MAX`]).
    fn skb_split_at(&mut self, at: SeqNumber) {
        let Some(q) = self.skb.as_mut() else {
            return;
        };
        if q.ends.len() >= SKBS_MAX {
            return;
        }
        if let Some(i) = q.ends.iter().position(|e| !e.lt(at))
            && q.ends.get(i) != Some(&at)
        {
            q.ends.insert(i, at);
        }
    }

    /// Admission under skb accounting (see the module documentation): queues what Linux's
    /// `tcp_sendmsg_locked` would take of `data`; marks the socket when it took less.
    pub(super) fn skb_admit(&mut self, data: &[u8]) -> usize {
        self.skb_queue();
        self.skb_prune();
        let goal = self.skb_size_goal();
        let mss = u32::from(self.eff_mss()).max(1);
        let mut n = 0;
        while n < data.len() {
            let write_end = self.write_end();
            let Some(q) = self.skb.as_ref() else { break };
            let sent_to = q.packet_end.max(self.snd.nxt);
            let tail_start = match q.ends.len() {
                0 => None,
                k => Some(
                    k.checked_sub(2)
                        .and_then(|i| q.ends.get(i))
                        .copied()
                        .unwrap_or(self.snd.buf_seq),
                ),
            };
            let ends_record = self.records.is_some() && self.record_room(write_end) == Some(0);
            let tail_room = match tail_start {
                Some(s) if !s.lt(sent_to) && !ends_record => goal.saturating_sub(fwd(s, write_end)),
                _ => 0,
            };
            let left = &data[n..];
            let took = if tail_room > 0 {
                let k = self
                    .send_buf
                    .push(left.get(..tail_room as usize).unwrap_or(left));
                if let Some(e) = self.skb.as_mut().and_then(|q| q.ends.back_mut()) {
                    *e += k as u32;
                }
                k
            } else {
                // A new skb (`sk_stream_memory_free`).
                let unsent = fwd(sent_to, write_end);
                let full = self.send_queue_charge_bytes()
                    >= u64::from(self.config.send_buffer_bytes)
                    || unsent >= q.notsent_lowat
                    || q.ends.len() >= SKBS_MAX;
                if full {
                    break;
                }
                let k = self
                    .send_buf
                    .push(left.get(..goal as usize).unwrap_or(left));
                if k > 0
                    && let Some(q) = self.skb.as_mut()
                {
                    q.ends.push_back(write_end + k as u32);
                }
                k
            };
            if took == 0 {
                break;
            }
            n += took;
            // A full skb at the head of the unsent data sends one packet now
            // (`tcp_push_one`); the rest of it goes on filling.
            let write_end = self.write_end();
            let Some(q) = self.skb.as_ref() else { break };
            let k = q.ends.len();
            let tail_start = q
                .ends
                .get(k.wrapping_sub(2))
                .copied()
                .unwrap_or(self.snd.buf_seq);
            let sent_to = q.packet_end.max(self.snd.nxt);
            if fwd(tail_start, write_end) >= goal && tail_start == sent_to {
                let usable = self
                    .usable_window()
                    .saturating_sub(fwd(self.snd.nxt, sent_to));
                let len = self.skb_packet_len(sent_to, usable);
                if len >= mss {
                    let end = sent_to + len;
                    self.skb_split_at(end);
                    if let Some(q) = self.skb.as_mut() {
                        q.packet_end = end;
                    }
                }
            }
        }
        if n < data.len()
            && let Some(q) = self.skb.as_mut()
        {
            q.nospace = true;
        }
        n
    }

    /// New data of `len` bytes leaves at SND.NXT: a packet that starts here is sized as
    /// Linux's `tcp_write_xmit` would size it, and splits its skb where it ends.
    pub(super) fn skb_on_send(&mut self, len: u32) {
        let nxt = self.snd.nxt;
        if nxt != self.snd.max {
            return;
        }
        let Some(q) = self.skb.as_ref() else { return };
        if nxt.lt(q.packet_end) {
            return;
        }
        let plen = self.skb_packet_len(nxt, self.usable_window()).max(len);
        let end = nxt + plen;
        self.skb_split_at(end);
        if let Some(q) = self.skb.as_mut() {
            q.packet_end = end;
        }
    }

    /// An input was processed: the mark is checked after the output that follows it.
    pub(super) fn skb_on_input(&mut self) {
        if let Some(q) = self.skb.as_mut() {
            q.space_check_due = true;
        }
    }

    /// The notsent mark in force (`TCP_NOTSENT_LOWAT`, else the stack's default; `u32::MAX`:
    /// none), for admission and writability under skb accounting.
    pub fn set_notsent_lowat(&mut self, lowat_bytes: u32) {
        if self.config.send_buffer_skb_accounting {
            self.skb_queue().notsent_lowat = lowat_bytes;
        }
    }

    /// Whether a socket with notsent mark `lowat_bytes` (`u32::MAX`: none) reports itself
    /// writable: under skb accounting Linux's `__sk_stream_is_writeable(sk, 1)`, else room
    /// for a byte and twice the unsent bytes below the mark.
    pub fn send_writable(&self, lowat_bytes: u32) -> bool {
        let notsent_ok = 2 * (self.notsent_bytes() as u64) < u64::from(lowat_bytes);
        if !self.config.send_buffer_skb_accounting {
            return self.send_capacity_bytes() > 0 && notsent_ok;
        }
        if self.app.fin_queued {
            return false;
        }
        let charge = self.send_queue_charge_bytes();
        let sndbuf = u64::from(self.config.send_buffer_bytes);
        charge < sndbuf && sndbuf - charge >= charge / 2 && notsent_ok
    }

    /// After an input's output (Linux `tcp_check_space`): a marked socket first lets its
    /// buffer grow (`tcp_new_space`), then, once writable, loses the mark, reports
    /// [`Event::Writable`] and stops the sndbuf-limited chronograph.
    pub(super) fn skb_check_space(&mut self, now: u64) {
        let Some(q) = self.skb.as_mut() else { return };
        if !q.space_check_due {
            return;
        }
        q.space_check_due = false;
        if !q.nospace {
            return;
        }
        let lowat = q.notsent_lowat;
        self.skb_prune();
        self.skb_autotune();
        if self.send_writable(lowat) {
            if let Some(q) = self.skb.as_mut() {
                q.nospace = false;
            }
            self.push_event(Event::Writable);
            let empty = self.send_queues_empty();
            if let Some(info) = self.info.as_mut() {
                info.stop(now, chrono::Chrono::SndbufLimited, empty);
            }
        }
    }

    /// Linux `tcp_sndbuf_expand` (from `tcp_init_buffer_space` and `tcp_new_space`), when
    /// autotuning is on and the congestion window is not full: room for twice the larger of
    /// cwnd, [`INIT_CWND_SEGMENTS`] and the reordering degree plus one, in worst-case skbs
    /// (one segment each, its head a power-of-two allocation), up to
    /// [`SEND_BUFFER_AUTOTUNE_MAX_BYTES`]; never shrinks.
    pub(super) fn skb_autotune(&mut self) {
        if !self.config.send_buffer_skb_accounting || !self.config.send_buffer_autotune {
            return;
        }
        let mss = u32::from(self.eff_mss()).max(1);
        let cwnd_segs = self.cc.cwnd_bytes() / mss;
        if fwd(self.snd.una, self.snd.nxt).div_ceil(mss) >= cwnd_segs {
            return;
        }
        let per_mss = (u32::from(self.opts.snd_mss.max(self.eff_mss()))
            + MAX_TCP_HEADER_BYTES
            + SKB_SHARED_INFO_BYTES)
            .next_power_of_two()
            + SK_BUFF_BYTES;
        let reordering = self.info.as_ref().map_or(3, |i| i.reordering);
        let segs = cwnd_segs.max(INIT_CWND_SEGMENTS).max(reordering + 1);
        let want = 2u32
            .saturating_mul(segs)
            .saturating_mul(per_mss)
            .min(SEND_BUFFER_AUTOTUNE_MAX_BYTES);
        if want > self.config.send_buffer_bytes {
            self.config_mut().send_buffer_bytes = want;
            self.send_buf
                .set_capacity(self.config.send_ring_capacity_bytes());
            self.note_send_storage();
        }
    }

    /// Whether the sndbuf-limited chronograph starts at this output (Linux
    /// `tcp_cwnd_validate`): under skb accounting, the socket is marked, no byte is left
    /// unsent and the congestion window is not full; otherwise a write found the buffer full.
    pub(super) fn sndbuf_limited_now(&self, unsent: u32) -> bool {
        match self.skb.as_ref() {
            Some(q) => {
                let flight = fwd(self.snd.una, self.snd.nxt);
                q.nospace
                    && unsent == 0
                    && flight > 0
                    && flight.saturating_add(u32::from(self.eff_mss())) <= self.cc.cwnd_bytes()
            }
            None => self.info.as_ref().is_some_and(|i| i.sndbuf_full),
        }
    }
}
