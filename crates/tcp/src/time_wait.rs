//! TIME-WAIT as a compact record (RFC 9293 §3.6; FreeBSD's `tcptw` is the model): once a
//! connection the application closed reaches TIME-WAIT, everything it still has to do —
//! acknowledge a retransmitted FIN (and restart 2·MSL), answer segments as TIME-WAIT does,
//! apply PAWS, recognise a new SYN that may reopen the 4-tuple, ignore a RST (RFC 1337) —
//! needs only the facts in [`TimeWait`]: 24 bytes, where the whole connection took about
//! 1 KiB and its buffers.
//!
//! [`TimeWait::handle_segment`] follows the engine's TIME-WAIT path in
//! `connection/input.rs` step by step (the same checks in the same order, the same
//! per-connection counters), so a peer sees the same replies from a record as it saw from
//! the full connection. What differs:
//! - ACKs carry no SACK blocks (a D-SACK for a duplicate FIN is not reported);
//! - the window acceptability test uses the window the record advertises (the last one the
//!   connection advertised, not any larger edge advertised before it);
//! - challenge ACKs share one limiter per table ([`AckLimiter`], the caller's), not one per
//!   connection: a flood aimed at many records is limited as a whole;
//! - TS.Recent's 24-day idle rule (RFC 7323 §5.5) is judged once, at the record's creation
//!   (a record lives 2·MSL);
//! - a SYN the rules of RFC 6191 allow asks the caller to reopen ([`TwInput::reopen`]), as
//!   Linux does: a newer timestamp, or a sequence number beyond RCV.NXT.
//!
//! The addresses, ports and expiry are the caller's (the stack's table keeps them).

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr, TcpTimestamp};

use crate::config::{NS_PER_MS, NS_PER_S};
use crate::connection::Counters;

/// The facts a connection in TIME-WAIT keeps (see the module documentation).
///
/// Invariants: `wscales` holds two window shifts ≤ 14 (receive in the high nibble, send in
/// the low); `flags` only the `TW_*` bits; without [`TW_TS_OK`] the timestamp fields are
/// unused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWait {
    /// SND.NXT (= SND.UNA: our FIN is acknowledged). The sequence number of our ACKs.
    pub snd_nxt: SeqNumber,
    /// RCV.NXT: just past the peer's FIN.
    pub rcv_nxt: SeqNumber,
    /// TS.Recent (RFC 7323 §4.3), when timestamps are in use.
    pub ts_recent: u32,
    /// Our timestamp clock's offset (RFC 7323 §7.1): TSval = ms clock + offset.
    pub ts_offset: u32,
    /// The window field our ACKs carry (already scaled down by the receive shift).
    pub window: u16,
    /// The peer's largest window, in units of its window scale (rounded up): how far back
    /// an acknowledgment may lie before it draws a challenge ACK (RFC 5961 §5.2).
    pub max_wnd_scaled: u16,
    /// `TW_*` bits.
    pub flags: u8,
    /// Receive window shift (high nibble) and send window shift (low nibble).
    pub wscales: u8,
}

/// Timestamps are in use on the connection (RFC 7323).
pub const TW_TS_OK: u8 = 0x01;
/// TS.Recent was older than 24 days at the record's creation: the next timestamp is taken
/// whatever its value (RFC 7323 §5.5).
pub const TW_TS_STALE: u8 = 0x02;

/// Challenge ACKs (RFC 5961 §7) allowed per second, over every record that shares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AckLimiter {
    /// Challenge ACKs per second.
    pub per_s_max: u32,
    window_start_ns: u64,
    in_window: u32,
}

impl AckLimiter {
    /// A limiter allowing `per_s_max` challenge ACKs per second.
    pub fn new(per_s_max: u32) -> AckLimiter {
        AckLimiter {
            per_s_max,
            window_start_ns: 0,
            in_window: 0,
        }
    }

    /// True when a challenge ACK may go at `now` (and counts it).
    fn allow(&mut self, now: u64) -> bool {
        if now.saturating_sub(self.window_start_ns) >= NS_PER_S {
            self.window_start_ns = now;
            self.in_window = 0;
        }
        if self.in_window < self.per_s_max {
            self.in_window += 1;
            true
        } else {
            false
        }
    }
}

/// What a segment made of a record ([`TimeWait::handle_segment`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TwInput {
    /// Send [`TimeWait::ack_repr`].
    pub ack: bool,
    /// A FIN arrived again: TIME-WAIT lasts 2·MSL from now (RFC 9293 §3.10.7.4).
    pub restart: bool,
    /// A SYN that may open a new incarnation of the 4-tuple (RFC 6191, RFC 9293 §3.6.1),
    /// with the initial sequence number to use (past anything this incarnation sent, as
    /// Linux's `tw_snd_nxt + 65535 + 2`). When no listener takes it, the caller sends the
    /// ACK instead (`ack` is set for that case).
    pub reopen: Option<SeqNumber>,
}

/// Settings the record's replies follow (the stack's `tcp::Config`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TwRules {
    /// An acknowledgment of data never sent draws a challenge ACK
    /// ([`crate::Config::ack_unsent_data_replies`]).
    pub ack_unsent_data_replies: bool,
}

/// RFC 7323 §5.5: TS.Recent older than this is no longer trusted.
const PAWS_IDLE_NS: u64 = 24 * 86_400 * 1_000_000_000;

fn ts_lt(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

fn seq_len(seg: &TcpRepr<'_>) -> u32 {
    seg.payload.len() as u32
        + u32::from(seg.flags.contains(TcpFlags::SYN))
        + u32::from(seg.flags.contains(TcpFlags::FIN))
}

impl TimeWait {
    /// Whether timestamps are in use.
    pub fn ts_ok(&self) -> bool {
        self.flags & TW_TS_OK != 0
    }

    fn rcv_wscale(&self) -> u8 {
        self.wscales >> 4
    }

    fn snd_wscale(&self) -> u8 {
        self.wscales & 0x0f
    }

    /// The receive window the record accepts segments in, bytes.
    pub fn rcv_wnd_bytes(&self) -> u32 {
        u32::from(self.window) << self.rcv_wscale()
    }

    /// RFC 9293 §3.10.7.4's four-case acceptability test against the advertised window.
    fn acceptable(&self, seq: SeqNumber, seg_len: u32) -> bool {
        let wnd = self.rcv_wnd_bytes();
        let adv = self.rcv_nxt + wnd;
        let in_wnd = |s: SeqNumber| self.rcv_nxt.le(s) && s.lt(adv);
        match (seg_len, wnd) {
            (0, 0) => seq == self.rcv_nxt,
            (0, _) => in_wnd(seq),
            (_, 0) => seq == self.rcv_nxt,
            (n, _) => in_wnd(seq) || in_wnd(seq + (n - 1)),
        }
    }

    /// The ACK owed to an unacceptable segment: a bare ACK is answered within the challenge
    /// budget, anything else always (as the engine's `ack_unacceptable`).
    fn ack_unacceptable(
        &self,
        now: u64,
        seg: &TcpRepr<'_>,
        limiter: &mut AckLimiter,
        counters: &mut Counters,
    ) -> bool {
        if seq_len(seg) == 0 {
            challenge(now, limiter, counters)
        } else {
            true
        }
    }

    /// One segment for this record's 4-tuple at `now`: updates the record (TS.Recent) and
    /// says what to do. Counts in `counters` what the engine counts on the same path.
    pub fn handle_segment(
        &mut self,
        now: u64,
        seg: &TcpRepr<'_>,
        rules: TwRules,
        limiter: &mut AckLimiter,
        counters: &mut Counters,
    ) -> TwInput {
        counters.rx_segments += 1;
        let flags = seg.flags;
        let rst = flags.contains(TcpFlags::RST);
        let mut out = TwInput::default();
        let ts_ok = self.ts_ok();
        // RFC 6191 (Linux's `tcp_timewait_state_process`): a SYN with a newer timestamp, or
        // beyond RCV.NXT, may open a new incarnation; an older timestamp never does.
        if flags.contains(TcpFlags::SYN) && !flags.intersects(TcpFlags::ACK | TcpFlags::RST) {
            let ts = seg.timestamp.filter(|_| ts_ok);
            let paws_reject =
                ts.is_some_and(|t| ts_lt(t.tsval, self.ts_recent) && self.flags & TW_TS_STALE == 0);
            let newer = ts.is_some_and(|t| ts_lt(self.ts_recent, t.tsval));
            if !paws_reject && (seg.seq_number.gt(self.rcv_nxt) || newer) {
                out.reopen = Some(self.snd_nxt + 65_537);
                out.ack = true;
                return out;
            }
        }
        // RFC 7323 §3.2: once negotiated, a non-RST segment without TSopt is dropped.
        if ts_ok && !rst && seg.timestamp.is_none() {
            counters.rx_drop_missing_ts += 1;
            return out;
        }
        // RFC 7323 §5.3 R1 (PAWS), before the acceptability test.
        if ts_ok && !rst {
            if let Some(ts) = seg.timestamp {
                if ts_lt(ts.tsval, self.ts_recent) {
                    if self.flags & TW_TS_STALE != 0 {
                        self.ts_recent = ts.tsval;
                        self.flags &= !TW_TS_STALE;
                    } else {
                        counters.rx_drop_paws += 1;
                        out.ack = self.ack_unacceptable(now, seg, limiter, counters);
                        return out;
                    }
                }
            }
        }
        if !self.acceptable(seg.seq_number, seq_len(seg)) {
            counters.rx_drop_out_of_window += 1;
            if rst {
                counters.rx_drop_rst_out_of_window += 1;
                return out;
            }
            // RFC 9293 §3.10.7.4: a retransmitted FIN restarts the 2 MSL timeout.
            out.restart = flags.contains(TcpFlags::FIN);
            out.ack = self.ack_unacceptable(now, seg, limiter, counters);
            return out;
        }
        if rst {
            // RFC 1337: a RST in TIME-WAIT is ignored (no assassination).
            counters.rx_drop_rst_time_wait += 1;
            return out;
        }
        if flags.contains(TcpFlags::SYN) {
            // RFC 5961 §4.2: a SYN in the window gets a challenge ACK.
            counters.rx_drop_syn_in_window += 1;
            out.ack = challenge(now, limiter, counters);
            return out;
        }
        if !flags.contains(TcpFlags::ACK) {
            counters.rx_drop_no_ack += 1;
            return out;
        }
        let ack = seg.ack_number;
        if ack.gt(self.snd_nxt) {
            counters.rx_drop_ack_unsent += 1;
            if rules.ack_unsent_data_replies {
                out.ack = challenge(now, limiter, counters);
            }
            return out;
        }
        let max_wnd = (u32::from(self.max_wnd_scaled) << self.snd_wscale()).max(1);
        if ack.lt(self.snd_nxt - max_wnd) {
            counters.rx_drop_ack_too_old += 1;
            out.ack = challenge(now, limiter, counters);
            return out;
        }
        // RFC 7323 §4.3 (3): TS.Recent follows a segment at or before the last ACK sent
        // (RCV.NXT: the FIN's ACK left before the record was made).
        if let (true, Some(ts)) = (ts_ok, seg.timestamp) {
            if !ts_lt(ts.tsval, self.ts_recent) && seg.seq_number.le(self.rcv_nxt) {
                self.ts_recent = ts.tsval;
            }
        }
        // The peer already sent its FIN: text is ignored; a FIN again restarts 2 MSL.
        if flags.contains(TcpFlags::FIN) {
            out.restart = true;
            out.ack = true;
        }
        out
    }

    /// The ACK the record sends: SEG.SEQ = SND.NXT, SEG.ACK = RCV.NXT, its window, and
    /// TSopt (TSval of our clock at `now`, TSecr = TS.Recent) when timestamps are in use.
    /// Counts it as the engine counts a pure ACK.
    pub fn ack_repr(
        &self,
        now: u64,
        local_port: u16,
        remote_port: u16,
        counters: &mut Counters,
    ) -> TcpRepr<'static> {
        counters.pure_acks_sent += 1;
        counters.tx_segments += 1;
        TcpRepr {
            timestamp: self.ts_ok().then(|| TcpTimestamp {
                tsval: ((now / NS_PER_MS) as u32).wrapping_add(self.ts_offset),
                tsecr: self.ts_recent,
            }),
            ..TcpRepr::bare(
                local_port,
                remote_port,
                self.snd_nxt,
                self.rcv_nxt,
                TcpFlags::ACK,
                self.window,
            )
        }
    }
}

/// RFC 5961 §7: a challenge ACK within the limiter's budget (counted either way).
fn challenge(now: u64, limiter: &mut AckLimiter, counters: &mut Counters) -> bool {
    if limiter.allow(now) {
        counters.challenge_acks_sent += 1;
        true
    } else {
        counters.challenge_acks_suppressed += 1;
        false
    }
}

/// `TS.Recent`'s age at `now` makes it stale (RFC 7323 §5.5).
pub(crate) fn ts_recent_stale(now: u64, recent_age_ns: u64) -> bool {
    now.saturating_sub(recent_age_ns) > PAWS_IDLE_NS
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    fn record(ts: bool) -> TimeWait {
        TimeWait {
            snd_nxt: SeqNumber(5000),
            rcv_nxt: SeqNumber(9000),
            ts_recent: 700,
            ts_offset: 100,
            window: 1000,
            max_wnd_scaled: 2000,
            flags: if ts { TW_TS_OK } else { 0 },
            wscales: 0x00,
        }
    }

    fn seg(seq: u32, ack: u32, flags: TcpFlags, tsval: Option<u32>) -> TcpRepr<'static> {
        TcpRepr {
            timestamp: tsval.map(|tsval| TcpTimestamp { tsval, tsecr: 0 }),
            ..TcpRepr::bare(80, 4000, SeqNumber(seq), SeqNumber(ack), flags, 100)
        }
    }

    fn run(tw: &mut TimeWait, now: u64, s: &TcpRepr<'_>) -> (TwInput, Counters) {
        let mut c = Counters::default();
        let mut lim = AckLimiter::new(10);
        let rules = TwRules {
            ack_unsent_data_replies: true,
        };
        (tw.handle_segment(now, s, rules, &mut lim, &mut c), c)
    }

    #[test]
    fn a_retransmitted_fin_is_acked_and_restarts_2msl() {
        let mut tw = record(false);
        let fin = seg(8999, 5000, TcpFlags::FIN | TcpFlags::ACK, None);
        let (r, c) = run(&mut tw, 0, &fin);
        assert!(r.ack && r.restart && r.reopen.is_none(), "{r:?}");
        assert_eq!(c.rx_drop_out_of_window, 1);
    }

    #[test]
    fn a_rst_is_ignored_in_and_out_of_the_window() {
        let mut tw = record(false);
        let (r, c) = run(&mut tw, 0, &seg(9000, 0, TcpFlags::RST, None));
        assert_eq!(r, TwInput::default());
        assert_eq!(c.rx_drop_rst_time_wait, 1);
        let (r, c) = run(&mut tw, 0, &seg(1, 0, TcpFlags::RST, None));
        assert_eq!(r, TwInput::default());
        assert_eq!(c.rx_drop_rst_out_of_window, 1);
    }

    #[test]
    fn paws_drops_an_old_timestamp_with_an_ack_and_keeps_ts_recent() {
        let mut tw = record(true);
        let old = seg(9000, 5000, TcpFlags::ACK | TcpFlags::FIN, Some(600));
        let (r, c) = run(&mut tw, 0, &old);
        assert!(r.ack && !r.restart, "{r:?}");
        assert_eq!((c.rx_drop_paws, tw.ts_recent), (1, 700));
        // Without a timestamp at all: dropped silently.
        let (r, c) = run(&mut tw, 0, &seg(9000, 5000, TcpFlags::ACK, None));
        assert_eq!((r, c.rx_drop_missing_ts), (TwInput::default(), 1));
    }

    #[test]
    fn a_stale_ts_recent_takes_the_next_timestamp() {
        let mut tw = record(true);
        tw.flags |= TW_TS_STALE;
        let (r, c) = run(&mut tw, 0, &seg(9000, 5000, TcpFlags::ACK, Some(5)));
        assert_eq!(
            (r, c.rx_drop_paws, tw.ts_recent),
            (TwInput::default(), 0, 5)
        );
        assert_eq!(tw.flags & TW_TS_STALE, 0);
    }

    #[test]
    fn a_syn_reopens_only_with_a_higher_sequence_or_a_newer_timestamp() {
        let syn = |seq, ts| seg(seq, 0, TcpFlags::SYN, ts);
        // No timestamps: the sequence number decides.
        let mut tw = record(false);
        assert_eq!(
            run(&mut tw, 0, &syn(9001, None)).0.reopen,
            Some(SeqNumber(5000 + 65_537))
        );
        let (r, c) = run(&mut tw, 0, &syn(100, None));
        assert_eq!(r.reopen, None);
        assert!(r.ack, "an old SYN is answered with an ACK");
        assert_eq!(c.rx_drop_out_of_window, 1);
        // Timestamps: a newer one reopens even below RCV.NXT; an older one never does.
        let mut tw = record(true);
        assert!(run(&mut tw, 0, &syn(100, Some(701))).0.reopen.is_some());
        assert_eq!(run(&mut tw, 0, &syn(9500, Some(600))).0.reopen, None);
        // A SYN-ACK never reopens.
        let mut tw = record(false);
        let synack = seg(9500, 5000, TcpFlags::SYN | TcpFlags::ACK, None);
        assert_eq!(run(&mut tw, 0, &synack).0.reopen, None);
    }

    #[test]
    fn challenge_acks_share_the_limiter_budget() {
        let mut tw = record(false);
        let mut c = Counters::default();
        let mut lim = AckLimiter::new(2);
        let rules = TwRules {
            ack_unsent_data_replies: true,
        };
        // A bare ACK out of the window: a challenge each, two per second.
        let bare = seg(1, 5000, TcpFlags::ACK, None);
        let acks: Vec<bool> = (0..4)
            .map(|_| tw.handle_segment(0, &bare, rules, &mut lim, &mut c).ack)
            .collect();
        assert_eq!(acks, [true, true, false, false]);
        assert_eq!((c.challenge_acks_sent, c.challenge_acks_suppressed), (2, 2));
        assert!(
            tw.handle_segment(1000 * MS, &bare, rules, &mut lim, &mut c)
                .ack
        );
    }

    #[test]
    fn an_in_window_ack_updates_ts_recent_and_draws_nothing() {
        let mut tw = record(true);
        let (r, _) = run(&mut tw, 0, &seg(9000, 5000, TcpFlags::ACK, Some(800)));
        assert_eq!((r, tw.ts_recent), (TwInput::default(), 800));
        let a = tw.ack_repr(3 * MS, 4000, 80, &mut Counters::default());
        assert_eq!(
            (a.seq_number, a.ack_number, a.window_len),
            (SeqNumber(5000), SeqNumber(9000), 1000)
        );
        assert_eq!(
            a.timestamp,
            Some(TcpTimestamp {
                tsval: 103,
                tsecr: 800
            })
        );
    }

    #[test]
    fn the_record_is_24_bytes() {
        assert_eq!(core::mem::size_of::<TimeWait>(), 24);
    }
}
