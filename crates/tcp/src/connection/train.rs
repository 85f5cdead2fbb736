//! Trains: a run of full-MSS segments of new data decided, and the connection's state advanced,
//! once for the whole run (Linux `tcp_write_xmit` sends an skb list the same way; TAS's fast
//! path emits from a per-flow template). The caller then writes one frame per segment from the
//! header [`Connection::poll_transmit_train`] returns, patching the sequence number and the
//! PSH flag ([`TxTrain::segment`]), and copies each payload with
//! [`Connection::train_payload`].
//!
//! Invariant: a train of `k` segments leaves the connection exactly as `k` calls of
//! [`Connection::poll_transmit`] would (each returning one full segment), and its segments are
//! those calls' segments byte for byte. It is offered only in the steady bulk state, where the
//! per-segment path would take the same branch `k` times; anything else returns `None` and
//! the caller uses `poll_transmit` (the twin test `trains_match_single_segments_*` in
//! `tests/train.rs` drives both and compares frames and the whole `Connection`).

use wire::tcp::{TcpFlags, TcpRepr};

use super::*;

/// A train of full segments of new data, already accounted as sent.
#[derive(Debug, Clone, Copy)]
pub struct TxTrain {
    /// The first segment's header (ACK, acknowledgment, window, timestamps: the same in every
    /// segment); `payload` empty.
    pub header: TcpRepr<'static>,
    /// Segments in the train (≥ 1).
    pub segments: u16,
    /// Payload bytes of every segment (the effective MSS).
    pub seg_bytes: u16,
    /// Whether the last segment carries PSH (it empties the send buffer).
    pub psh_last: bool,
    /// Send-buffer offset of the first segment's payload.
    offset: usize,
}

impl TxTrain {
    /// The header of segment `j` (0-based): the first one's, with the sequence number moved on
    /// and PSH on the last when it empties the send buffer.
    #[inline]
    pub fn segment(&self, j: u16) -> TcpRepr<'static> {
        let mut h = self.header;
        h.seq_number += u32::from(j) * u32::from(self.seg_bytes);
        if self.psh_last && j + 1 == self.segments {
            h.flags |= TcpFlags::PSH;
        }
        h
    }
}

impl Connection {
    /// Whether a train could go at all: at least two full segments of unsent data. Reads only
    /// fields every send reads anyway, so a caller tests it before anything costlier (the
    /// route, [`Connection::poll_transmit_train`]'s state checks): request/response traffic,
    /// whose writes are shorter than two segments, stops here. `false` implies
    /// `poll_transmit_train` would return `None`; `true` decides nothing.
    #[inline]
    pub fn train_candidate(&self) -> bool {
        if self.snd.nxt.lt(self.snd.buf_seq) {
            return false;
        }
        let offset = fwd(self.snd.buf_seq, self.snd.nxt) as usize;
        self.send_buf.len().saturating_sub(offset) >= 2 * usize::from(self.eff_mss())
    }

    /// The train of full segments `poll_transmit` would return one after another now, at most
    /// `segments_max` of them; `None` (nothing changed)
    /// when the connection is not in the steady bulk state or fewer than two segments may
    /// leave, or when a segment's options and payload (the send MSS) would not fit
    /// `option_and_payload_room_bytes` (the caller's frame less its IP and bare TCP headers:
    /// there the per-segment path decides). On `Some`, the connection is advanced as if every segment had been returned by
    /// `poll_transmit`: the caller must emit all of them.
    ///
    /// The steady bulk state: ESTABLISHED or CLOSE-WAIT (or FIN-WAIT-1 and LAST-ACK before
    /// the FIN leaves: the segment that carries it is never in a train), nothing to reset, retransmit, probe or
    /// acknowledge twice, not in recovery, SND.NXT = SND.MAX, no ECN, no SACK blocks owed, no
    /// record boundaries, no skb accounting, no Fast Open data pending.
    pub fn poll_transmit_train(
        &mut self,
        now: u64,
        segments_max: u16,
        option_and_payload_room_bytes: usize,
    ) -> Option<TxTrain> {
        // `train_candidate`'s promise, checked by every debug run that sends a train.
        let candidate = cfg!(debug_assertions) && self.train_candidate();
        if segments_max < 2
            || !matches!(
                self.state,
                State::Established | State::CloseWait | State::FinWait1 | State::LastAck
            )
            || self.rst_pending().is_some()
            || self.rec.rtx_pending
            || self.rec.in_recovery
            || self.out.dupacks_owed > 0
            || self.out.probe_pending
            || self.rec.tlp_pending
            || self.snd.nxt != self.snd.max
            || self.snd.nxt.lt(self.snd.buf_seq)
            || self.ecn.flags != 0
            || self.records.is_some()
            || self.out.held & held::SKB != 0
            || (self.opts.sack_ok && (self.ooo_holds_ranges() || self.dsack_owed()))
            || self
                .info
                .as_ref()
                .is_some_and(|i| i.syn_data_end().is_some())
        {
            return None;
        }
        let mss = self.eff_mss();
        let seg_room = self
            .opts
            .snd_mss
            .saturating_sub(if self.opts.ts_ok { TS_OPTION_BYTES } else { 0 })
            .max(1);
        if mss != seg_room || usize::from(self.opts.snd_mss) > option_and_payload_room_bytes {
            return None;
        }
        let mss32 = u32::from(mss);
        let offset = fwd(self.snd.buf_seq, self.snd.nxt) as usize;
        let unsent = self.send_buf.len().saturating_sub(offset) as u32;
        if unsent < 2 * mss32 {
            return None;
        }
        // A restart after idle (RFC 5681 §4.1) is the per-segment path's.
        if self.config.restart_after_idle
            && self.snd.una == self.snd.nxt
            && self.snd.wnd > 0
            && now.saturating_sub(self.timers.last_tx_ns)
                > self.rtt.rto_ns(self.config.rto_bounds())
        {
            return None;
        }
        // Each call's window is the previous one's less the segment it sent (the flight grows
        // by what SND.NXT moves; the duplicate-ACK allowance stays), so the full segments
        // that may go are the first call's window in whole segments.
        let usable = self.usable_window();
        let mut k = (unsent / mss32).min(usable / mss32);
        // The segment that empties the buffer with a FIN queued carries the FIN: left to the
        // per-segment path.
        if self.app.fin_queued && k * mss32 == unsent {
            k -= 1;
        }
        let k = k.min(u32::from(segments_max)) as u16;
        if k < 2 {
            return None;
        }
        // From here on, what the `k` calls do, once. `send_new_data`'s chronographs: every
        // call sees unsent data, a window that lets a full segment go (not rwnd-limited)
        // and the same sndbuf-limited state, so one call leaves what `k` leave.
        let rwnd_limited = self.rwnd_limited(unsent);
        self.chrono_on_output(now, rwnd_limited, unsent);
        // `data_segment`'s header: the same for every segment at this `now`.
        let seq0 = self.snd.nxt;
        let mut r = self.base_repr(seq0);
        r.flags = TcpFlags::ACK;
        r.ack_number = self.rcv.nxt;
        r.window_len = self.advertise_window();
        self.fill_options(now, &mut r, true);
        let bytes = u32::from(k) * mss32;
        let end = seq0 + bytes;
        let psh_last = offset + bytes as usize == self.send_buf.len() && !self.app.more;
        if self.rack_active() {
            // RFC 8985 §6.1: one record per segment, as `k` transmissions leave them.
            let merges = self
                .rack_state(now)
                .on_send_run(seq0, mss32, u32::from(k), now);
            self.count_rare(u64::from(merges), |c| &mut c.rack_records_merged);
        }
        if self.timers.rtt_timed().is_none() && !self.opts.ts_ok {
            // The first segment starts the measurement; the others find it running.
            self.timers.time_rtt(seq0 + mss32, now);
        }
        if self.snd.una == self.snd.max {
            self.timers.unacked_since_ns = now;
        }
        self.snd.nxt = end;
        self.arm_rtx_after_send(now);
        // `note_flight` per segment leaves what one call at the last segment's end leaves
        // (its tests are monotone in the flight, and each trigger sets the record to it).
        self.note_flight(end);
        self.rec.tlp_last_seq = end - mss32;
        self.set_deadline(Deadline::Tlp, NEVER);
        self.snd.max = end;
        self.on_ack_sent();
        self.timers.last_tx_ns = now;
        self.count_hot(u32::from(k), |c| &mut c.tx_segments);
        let quickack = self.config.quickack_segments > 0;
        let ato_ns = self.config.delayed_ack_ns;
        let info = self.info_mut(now);
        info.tx_data_segments += u64::from(k);
        if quickack && info.ato_started && now.saturating_sub(info.last_data_rx_ns) < ato_ns {
            info.pingpong = true;
        }
        self.count_hot(bytes, |c| &mut c.tx_payload_bytes);
        debug_assert!(
            candidate || !cfg!(debug_assertions),
            "a train went where train_candidate said none could"
        );
        Some(TxTrain {
            header: r,
            segments: k,
            seg_bytes: mss,
            psh_last,
            offset,
        })
    }

    /// Copies segment `j`'s payload of `train` into `buf` (at least `train.seg_bytes` long);
    /// returns the bytes copied (`seg_bytes`, or fewer only when `buf` is shorter).
    #[inline]
    pub fn train_payload(&self, train: &TxTrain, j: u16, buf: &mut [u8]) -> usize {
        let n = usize::from(train.seg_bytes).min(buf.len());
        let at = train.offset + usize::from(j) * usize::from(train.seg_bytes);
        self.send_buf
            .read_at(at, buf.get_mut(..n).unwrap_or(&mut []))
    }
}
