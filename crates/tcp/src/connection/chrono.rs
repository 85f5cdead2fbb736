//! What `tcp_info` reports beyond the TCB proper: the sender's chronographs (Linux
//! `tcp_chrono_start`/`tcp_chrono_stop`: how long the connection was busy sending, and how
//! much of that the peer's window or the send buffer held it back), the reordering degree
//! Linux calls `tp->reordering` (`tcp_check_sack_reordering`) and when data last arrived.
//!
//! Nothing here changes what the connection sends; it only observes. The state is cold (read
//! by `tcp_info`, written a few times per flight), boxed because the 1 KiB TCB has no room
//! for it (created when the handshake completes, or by the first data before that), and does
//! not move with a snapshot: an imported connection starts its chronographs, reordering
//! degree and these counts afresh.

use super::*;

/// Linux `sysctl_tcp_reordering`: the reordering degree before any is measured, in segments.
pub(crate) const REORDERING_INITIAL_SEGMENTS: u32 = 3;
/// Linux `sysctl_tcp_max_reordering`: the degree never exceeds this many segments.
pub(crate) const REORDERING_MAX_SEGMENTS: u32 = 300;

/// Which chronograph runs (Linux `enum tcp_chrono`). A later kind outranks an earlier one:
/// starting a higher kind replaces the running one, stopping a kind that does not run does
/// nothing.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub(crate) enum Chrono {
    /// Nothing queued or in flight.
    Idle = 0,
    /// Data queued or in flight.
    Busy = 1,
    /// Data waits for the peer's window (the congestion window would let it go).
    RwndLimited = 2,
    /// The application waits for send buffer space.
    SndbufLimited = 3,
}

/// The chronographs, the reordering degree, the time of the last data received and the
/// segment counts `tcp_info` reports.
///
/// Invariants: `chrono_start_ns` is the time `chrono` started (meaningless while `Idle`);
/// `chrono_ns[k - 1]` is the time spent in kind `k` by its finished periods; `reordering`
/// lies in `REORDERING_INITIAL_SEGMENTS..=REORDERING_MAX_SEGMENTS` and never decreases; the
/// counts only increase.
#[derive(Debug, Clone)]
#[repr(C)]
pub(crate) struct InfoState {
    /// The end of the data our Fast Open SYN carried, while the SYN-ACK left some of it
    /// unacknowledged and `syn_data_unacked` is set: a segment that sends it again ends
    /// there, as the SYN's own did (Linux retransmits the SYN's data buffer whole,
    /// `tcp_rcv_fastopen_synack`). Cleared once acknowledged. Two fields, not an
    /// `Option<SeqNumber>`: that one's 4-byte tag would be `Option<InfoState>`'s niche, read
    /// per data segment; now the niche is `ato_started`, the first `bool`, which a data
    /// segment writes anyway ([`InfoState::syn_data_end`]).
    syn_data_end_seq: SeqNumber,
    pub(crate) chrono: Chrono,
    /// The delayed-ACK engine is running (Linux: `icsk_ack.ato` is no longer 0): data has
    /// arrived, or the SYN-ACK found an application write waiting for the connection (data
    /// queued beyond what our SYN carried, all of which it acknowledged; Linux
    /// `sk_write_pending` in `tcp_rcv_synsent_state_process`). Until then no reply makes the
    /// connection interactive. The first `bool` here: `Option<InfoState>`'s niche.
    pub(crate) ato_started: bool,
    /// `syn_data_end_seq` holds a value.
    syn_data_unacked: bool,
    /// A write found the send buffer full; the sndbuf-limited chronograph starts at the
    /// next output (application calls carry no clock).
    pub(crate) sndbuf_full: bool,
    /// Interactive (ping-pong) mode, Linux `inet_csk_in_pingpong_mode`: with `ato_started`,
    /// data was sent within the delayed-ACK time of the last data received (or of the
    /// handshake's completion), so the peer's next data is answered by our next reply and
    /// quick-ACK mode is suspended ([`crate::Config::quickack_segments`]). Left when a
    /// delayed ACK had to be sent by its timer. Only set while quick-ACK mode is configured.
    pub(crate) pingpong: bool,
    /// Linux `tp->reordering`, in segments.
    pub(crate) reordering: u32,
    /// Segments received carrying data (a GRO frame counts once), saturating at
    /// `u32::MAX` as `tcpi_data_segs_in` does (a `u32`: four bytes written per segment,
    /// not eight).
    pub(crate) rx_data_segments: u32,
    /// Segments sent carrying data, retransmissions included, a TSO segment as the wire
    /// segments it is cut into.
    pub(crate) tx_data_segments: u64,
    /// When in-order or out-of-order data last arrived, or the handshake completed.
    pub(crate) last_data_rx_ns: u64,
    pub(crate) chrono_start_ns: u64,
    /// Segments delivered to the peer, acknowledged or SACKed (Linux `tp->delivered`): the
    /// SYN (or SYN-ACK) once acknowledged, then `ceil(bytes / MSS)` of each ACK's newly
    /// delivered bytes, and a FIN acknowledged alone.
    pub(crate) delivered_segments: u64,
    pub(crate) chrono_ns: [u64; 3],
    /// SACKs or cumulative ACKs that delivered never-retransmitted data below the highest
    /// SACKed sequence (Linux `tp->reord_seen`).
    pub(crate) reordering_events: u64,
}

impl InfoState {
    pub(crate) fn new(now: u64) -> InfoState {
        InfoState {
            delivered_segments: 0,
            rx_data_segments: 0,
            tx_data_segments: 0,
            reordering_events: 0,
            chrono_ns: [0; 3],
            chrono_start_ns: now,
            last_data_rx_ns: now,
            reordering: REORDERING_INITIAL_SEGMENTS,
            chrono: Chrono::Idle,
            sndbuf_full: false,
            ato_started: false,
            pingpong: false,
            syn_data_end_seq: SeqNumber(0),
            syn_data_unacked: false,
        }
    }

    /// The end of the Fast Open SYN's data still unacknowledged, if any.
    pub(crate) fn syn_data_end(&self) -> Option<SeqNumber> {
        self.syn_data_unacked.then_some(self.syn_data_end_seq)
    }

    /// Sets (or, with `None`, clears) [`InfoState::syn_data_end`].
    pub(crate) fn set_syn_data_end(&mut self, end: Option<SeqNumber>) {
        self.syn_data_unacked = end.is_some();
        self.syn_data_end_seq = end.unwrap_or(SeqNumber(0));
    }

    fn set(&mut self, now: u64, kind: Chrono) {
        if self.chrono != Chrono::Idle {
            let i = self.chrono as usize - 1;
            self.chrono_ns[i] =
                self.chrono_ns[i].saturating_add(now.saturating_sub(self.chrono_start_ns));
        }
        self.chrono = kind;
        self.chrono_start_ns = now;
    }

    /// Linux `tcp_chrono_start`: `kind` runs unless a higher kind already does.
    pub(crate) fn start(&mut self, now: u64, kind: Chrono) {
        if kind > self.chrono {
            self.set(now, kind);
        }
    }

    /// Linux `tcp_chrono_stop`: with nothing queued or in flight every chronograph stops;
    /// otherwise a running `kind` falls back to `Busy`.
    pub(crate) fn stop(&mut self, now: u64, kind: Chrono, queues_empty: bool) {
        if queues_empty {
            if self.chrono != Chrono::Idle {
                self.set(now, Chrono::Idle);
            }
        } else if self.chrono == kind {
            self.set(now, Chrono::Busy);
        }
    }

    /// Time spent in `kind` up to `now`, the running period included.
    pub(crate) fn elapsed_ns(&self, now: u64, kind: Chrono) -> u64 {
        let done = self.chrono_ns[kind as usize - 1];
        if self.chrono == kind {
            done.saturating_add(now.saturating_sub(self.chrono_start_ns))
        } else {
            done
        }
    }
}

impl Connection {
    /// The `tcp_info` state, created on first use (`now` starts its clocks).
    pub(super) fn info_mut(&mut self, now: u64) -> &mut InfoState {
        self.info.get_or_insert_with(|| InfoState::new(now))
    }

    /// True when nothing is queued or in flight (Linux `tcp_rtx_and_write_queues_empty`).
    pub(super) fn send_queues_empty(&self) -> bool {
        self.send_buf.is_empty() && self.snd.una == self.snd.max
    }

    /// The chronographs after an output decision: busy while anything is queued or in
    /// flight, rwnd-limited while unsent data waits only for the peer's window, sndbuf-limited
    /// from a write that found the buffer full until room is made.
    pub(super) fn chrono_on_output(&mut self, now: u64, rwnd_limited: bool, unsent: u32) {
        if self.send_queues_empty() {
            if let Some(info) = self.info.as_mut() {
                info.stop(now, Chrono::Busy, true);
            }
            return;
        }
        let sndbuf_limited = self.sndbuf_limited_now(unsent);
        let info = self.info_mut(now);
        info.start(now, Chrono::Busy);
        if rwnd_limited {
            info.start(now, Chrono::RwndLimited);
        } else {
            info.stop(now, Chrono::RwndLimited, false);
        }
        if sndbuf_limited {
            info.start(now, Chrono::SndbufLimited);
        }
    }

    /// An ACK freed send buffer space: the sndbuf-limited chronograph stops (under skb
    /// accounting only when the socket becomes writable, `sndbuf.rs`), and every one stops
    /// once nothing is left.
    #[inline(always)]
    pub(super) fn chrono_on_ack(&mut self, now: u64, freed: bool) {
        let freed = freed && self.out.held & held::SKB == 0;
        // Idle, nothing freed: nothing to stop (`stop` changes only a running chronograph),
        // and the send queues (another line) need not be read.
        if !freed && self.info.as_ref().is_none_or(|i| i.chrono == Chrono::Idle) {
            return;
        }
        let empty = self.send_queues_empty();
        let Some(info) = self.info.as_mut() else {
            return;
        };
        if freed {
            info.sndbuf_full = false;
            info.stop(now, Chrono::SndbufLimited, empty);
        }
        if empty {
            info.stop(now, Chrono::Busy, true);
        }
    }

    /// Linux `tcp_check_sack_reordering`: data at `low_seq` was delivered after data up to
    /// `fack` (the highest SACKed sequence); the reordering degree grows to the distance in
    /// segments when that exceeds it, and each such event counts.
    pub(super) fn note_reordering(&mut self, now: u64, low_seq: SeqNumber, fack: SeqNumber) {
        if !low_seq.lt(fack) {
            return;
        }
        let mss = u32::from(self.eff_mss()).max(1);
        let metric = fwd(low_seq, fack);
        let info = self.info_mut(now);
        if metric > info.reordering.saturating_mul(mss) {
            info.reordering = metric.div_ceil(mss).min(REORDERING_MAX_SEGMENTS);
        }
        info.reordering_events += 1;
    }

    /// The highest sequence number the peer SACKed, or SND.UNA when it SACKed nothing
    /// (Linux `tcp_highest_sack_seq`).
    pub(super) fn highest_sacked(&self) -> SeqNumber {
        self.scoreboard
            .ranges()
            .iter()
            .map(|b| b.right)
            .fold(self.snd.una, |a, b| if b.gt(a) { b } else { a })
    }

    /// Whether any byte of `[left, right)` was sent more than once.
    pub(super) fn retransmitted_in(&self, left: SeqNumber, right: SeqNumber) -> bool {
        match self.rack.as_ref() {
            Some(r) => r.retransmitted_in(left, right),
            // Without RACK's records: anything below the highest retransmission.
            None => {
                self.rare_counter(|k| k.retransmitted_segments) > 0 && left.lt(self.rec.high_rxt)
            }
        }
    }
}
