//! Per-connection counters: one per event and per drop path.
//!
//! Stored in two parts (issue 17 item 2): the few that an established connection's every
//! segment or exchange bumps ([`HotCounters`]) inline in the TCB, the rest in a box
//! allocated by the first rare event (`Connection::rare_counters`), read as zeros while
//! absent. [`crate::Connection::counters`] puts them together: what `tcp_info`, the stack's
//! sums and snapshots see is one [`Counters`], identical to a single store's.

/// Declares [`Counters`] from a list of documented names: the struct, `add` and `named`.
macro_rules! connection_counters {
    ($( $(#[$doc:meta])* $name:ident ),* $(,)?) => {
        /// Per-connection counters; every drop path has its own (FreeBSD `tcpstat` habit).
        /// All values only ever increase.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        pub struct Counters {
            $( $(#[$doc])* pub $name: u64, )*
        }

        impl Counters {
            /// Adds `other` counter by counter (totals over many connections).
            pub fn add(&mut self, other: &Counters) {
                $( self.$name += other.$name; )*
            }

            /// Every counter as `(name, value)`, in declaration order.
            pub fn named(&self) -> Vec<(&'static str, u64)> {
                vec![$( (stringify!($name), self.$name), )*]
            }

            /// How many counters there are.
            pub const LEN: usize = [$( stringify!($name), )*].len();

            /// Every counter's value, in declaration order (the snapshot codec's order).
            pub(crate) fn for_each(&self, mut f: impl FnMut(u64)) {
                $( f(self.$name); )*
            }

            /// Every counter, mutably, in declaration order (the snapshot codec's order).
            pub(crate) fn for_each_mut(&mut self, mut f: impl FnMut(&mut u64)) {
                $( f(&mut self.$name); )*
            }
        }
    };
}

connection_counters! {
    /// Segments handed to `handle_segment`.
    rx_segments,
    /// Segments returned by `poll_transmit`.
    tx_segments,
    /// Payload bytes accepted into the window (in order or out of order).
    rx_payload_bytes,
    /// Payload bytes sent, retransmissions included.
    tx_payload_bytes,
    /// Segments for other ports.
    rx_drop_wrong_port,
    /// Segments arriving in CLOSED.
    rx_drop_closed,
    /// Segments in SYN-SENT that carry neither an acceptable SYN nor an acceptable RST.
    rx_drop_syn_sent,
    /// RFC 7323 §5.3 R1: timestamp older than TS.Recent.
    rx_drop_paws,
    /// RFC 7323 §3.2: timestamps negotiated but the segment carries none.
    rx_drop_missing_ts,
    /// RFC 9293 §3.10.7.4: unacceptable sequence numbers.
    rx_drop_out_of_window,
    /// RST outside the window (RFC 5961 §3.2), silently dropped.
    rx_drop_rst_out_of_window,
    /// RST in TIME-WAIT, ignored (RFC 1337).
    rx_drop_rst_time_wait,
    /// SYN on a synchronized connection (answered with a challenge ACK, RFC 5961 §4).
    rx_drop_syn_in_window,
    /// Segments without ACK after SYN-SENT.
    rx_drop_no_ack,
    /// Unacceptable ACK in SYN-SENT or SYN-RECEIVED (answered with RST).
    rx_drop_bad_ack,
    /// SYN-ACK whose timestamp echo is no value our clock showed since the first SYN
    /// ([`crate::Config::syn_ack_checks_ts_echo`]; answered with RST).
    rx_drop_syn_ack_bad_echo,
    /// ACK for data never sent (RFC 5961 §5.2 / RFC 9293 §3.10.7.4).
    rx_drop_ack_unsent,
    /// ACK older than SND.UNA − MAX.SND.WND (RFC 5961 §5.2).
    rx_drop_ack_too_old,
    /// Out-of-order segments not kept: queue disabled or full (range cap).
    rx_drop_ooo_ranges,
    /// Out-of-order segments not kept: byte cap.
    rx_drop_ooo_bytes,
    /// Payload bytes beyond the advertised window, trimmed.
    rx_trim_beyond_window_bytes,
    /// Payload bytes already received (duplicates), trimmed.
    rx_duplicate_bytes,
    /// Data arriving after `close()`: acknowledged and discarded.
    rx_discard_after_close_bytes,
    /// Out-of-order segments kept.
    rx_ooo_segments,
    /// Duplicate ACKs received (RFC 5681 §2).
    dup_acks_rx,
    /// SACK blocks outside (SND.UNA, SND.MAX] or empty: ignored.
    rx_sack_blocks_invalid,
    /// Valid SACK blocks not recorded because the scoreboard is full.
    rx_sack_blocks_dropped,
    /// D-SACK blocks received (RFC 2883): the peer got some data twice.
    rx_dsack_blocks,
    /// Challenge ACKs sent (RFC 5961 §3–§5), and ACKs answering an unacceptable bare ACK,
    /// which share their budget.
    challenge_acks_sent,
    /// Those not sent because of the per-second limit (RFC 5961 §7).
    challenge_acks_suppressed,
    /// Retransmission timer expirations (RFC 6298 §5.4).
    rto_expirations,
    /// Tail loss probe timeouts (RFC 8985 §7.3).
    tail_loss_probes,
    /// Loss recovery episodes entered (RFC 5681 §3.2, RFC 6675 §5, RFC 8985 §6).
    fast_retransmits,
    /// Segments RACK deemed lost (RFC 8985 §6.2 step 5), on an ACK or at the reordering
    /// timer; one per transmit record (a segment, or several merged by the table's bound).
    rack_loss_marks,
    /// Of `rack_loss_marks`, retransmissions deemed lost again (found before the RTO).
    rack_lost_retransmits,
    /// RACK reordering timer expirations (RFC 8985 §6.2 step 5).
    rack_reo_timeouts,
    /// Merges of transmit records forced by the table's bound (`rack::RECORDS_MAX`): send
    /// times kept less precisely.
    rack_records_merged,
    /// Segments sent again (any cause).
    retransmitted_segments,
    /// Payload bytes sent again.
    retransmitted_bytes,
    /// Zero-window probes (RFC 9293 §3.8.6.1).
    window_probes_sent,
    /// Keepalive probes (RFC 9293 §3.8.4).
    keepalive_probes_sent,
    /// RTT samples fed to the estimator.
    rtt_samples,
    /// ACKs sent because the delayed-ACK timer fired.
    delayed_acks_sent,
    /// Segments that carried only an ACK.
    pure_acks_sent,
    /// RSTs sent.
    resets_sent,
    /// Times SND.UNA's distance from ISS + 1 passed a multiple of 2^32: with it
    /// `tcpi_bytes_acked` counts past 4 GiB.
    snd_una_wraps,
    /// Times RCV.NXT's distance from IRS + 1 passed a multiple of 2^32 (`tcpi_bytes_received`).
    rcv_nxt_wraps,
    /// Data segments that arrived with the CE codepoint on an ECN connection (RFC 3168 §5).
    rx_ce_segments,
    /// Segments sent with ECE set: the echo of a CE mark, repeated until the peer's CWR.
    tx_ece_segments,
    /// ACKs received with ECE set (on an ECN connection, SYN-ACKs aside).
    rx_ece_acks,
    /// Window reductions an ECN-Echo caused (at most one per window of data, §6.1.2).
    ecn_window_reductions,
    /// Segments delivered by ACKs that carried ECE (Linux `delivered_ce`,
    /// `tcpi_delivered_ce`).
    delivered_ce_segments,
}

/// Declares [`HotCounters`] from the names of the [`Counters`] every segment or exchange of an
/// established connection bumps (and a handshake, so an idle connection has no rare box).
macro_rules! hot_counters {
    ($( $name:ident ),* $(,)?) => {
        /// The counters kept inline in the TCB: the segments and payload bytes each way, RTT
        /// samples, pure and delayed ACKs, each as a 32-bit *delta* (issue 17 item 2: 28
        /// bytes in the hot lines instead of 56).
        ///
        /// Invariant: a counter's total is the rare store's field of the same name (a
        /// `u64`, zero while the box is absent) plus its delta here. A delta never wraps:
        /// an increment that would take it past `u32::MAX` first folds every delta into the
        /// rare store (`Connection::count_hot`), which happens at most once per 4 Gi
        /// increments of one counter. Reads ([`crate::Connection::counters`], `tcp_info`)
        /// add the two and change nothing.
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
        #[repr(C)]
        pub(crate) struct HotCounters {
            $( pub(crate) $name: u32, )*
        }

        impl HotCounters {
            /// Adds these deltas into `all` (the rare store's totals, or a copy of them).
            pub(crate) fn add_into(&self, all: &mut Counters) {
                $( all.$name += u64::from(self.$name); )*
            }

            /// Moves every delta into `all`'s totals, leaving the deltas at zero.
            pub(crate) fn fold_into(&mut self, all: &mut Counters) {
                self.add_into(all);
                *self = HotCounters::default();
            }

            /// Takes these counters out of `all` where each fits a delta (left at zero
            /// there); a total past `u32::MAX` stays in `all` with a zero delta.
            pub(crate) fn take_from(all: &mut Counters) -> HotCounters {
                let mut hot = HotCounters::default();
                $(
                    if let Ok(v) = u32::try_from(all.$name) {
                        hot.$name = v;
                        all.$name = 0;
                    }
                )*
                hot
            }
        }
    };
}

hot_counters! {
    rx_segments,
    tx_segments,
    rx_payload_bytes,
    tx_payload_bytes,
    rtt_samples,
    pure_acks_sent,
    delayed_acks_sent,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hot_counters_split_and_join_without_loss() {
        let mut all = Counters::default();
        let mut v = 1;
        all.for_each_mut(|c| {
            *c = v;
            v += 1;
        });
        all.tx_payload_bytes = u64::from(u32::MAX) + 7;
        let whole = all;
        let mut hot = HotCounters::take_from(&mut all);
        assert_eq!(u64::from(hot.rx_segments), whole.rx_segments);
        assert_eq!(all.rx_segments, 0, "a total that fits moves into the delta");
        assert_eq!(
            hot.tx_payload_bytes, 0,
            "a total past u32::MAX stays in the store"
        );
        assert_eq!(all.tx_payload_bytes, whole.tx_payload_bytes);
        assert_eq!(all.rx_drop_paws, whole.rx_drop_paws);
        let mut read = all;
        hot.add_into(&mut read);
        assert_eq!(read, whole, "store plus deltas is the whole");
        hot.fold_into(&mut all);
        assert_eq!(all, whole, "folding keeps every total");
        assert_eq!(hot, HotCounters::default());
    }
}
