//! Per-connection configuration: every knob, with its unit in its name and its default documented.

use std::sync::Arc;

/// Nanoseconds per millisecond.
pub const NS_PER_MS: u64 = 1_000_000;
/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

/// Which congestion controller a connection runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CongestionControl {
    /// NewReno: RFC 5681 slow start / congestion avoidance with RFC 6582 fast recovery.
    #[default]
    NewReno,
    /// CUBIC (RFC 9438).
    Cubic,
}

/// Whether connections use Explicit Congestion Notification (RFC 3168), the three settings
/// of Linux's `net.ipv4.tcp_ecn`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum EcnMode {
    /// No ECN: our SYNs do not ask for it and an ECN-setup SYN gets a plain SYN-ACK
    /// (`tcp_ecn=0`).
    #[default]
    Off,
    /// Ask for ECN on active opens and agree on passive ones (`tcp_ecn=1`).
    On,
    /// Agree when the peer asks, never ask (`tcp_ecn=2`, Linux's default).
    Accept,
}

impl EcnMode {
    /// The mode for Linux's `tcp_ecn` value (0, 1 or 2); `None` for anything else.
    pub fn from_linux_sysctl(v: u8) -> Option<EcnMode> {
        match v {
            0 => Some(EcnMode::Off),
            1 => Some(EcnMode::On),
            2 => Some(EcnMode::Accept),
            _ => None,
        }
    }
}

/// Keepalive parameters (RFC 9293 §3.8.4; RFC 1122 §4.2.3.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepaliveConfig {
    /// Idle time before the first probe. RFC 1122 requires the default to be ≥ 2 hours.
    pub idle_ns: u64,
    /// Time between unanswered probes.
    pub interval_ns: u64,
    /// Unanswered probes after which the connection times out.
    pub probes_max: u8,
}

impl Default for KeepaliveConfig {
    fn default() -> Self {
        KeepaliveConfig {
            idle_ns: 7200 * NS_PER_S,
            interval_ns: 75 * NS_PER_S,
            probes_max: 9,
        }
    }
}

/// Configuration of one connection. Taken by the connection at open (validated) and held
/// behind an [`Arc`]: connections opened from the same validated configuration may share one
/// (see [`SharedConfig`]), and a socket option that changes one connection's configuration
/// copies it first (`Arc::make_mut`), so later changes to the caller's copy, or to another
/// connection's, have no effect.
///
/// Invariants (enforced by [`Config::validated`], which every constructor applies):
/// `mss_bytes ≥ peer_mss_floor_bytes ≥ 64`, `rto_min_ns ≤ rto_initial_ns ≤ rto_max_ns`,
/// buffers ≥ one segment, `initial_window_segments ≥ 1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Config {
    /// The MSS we advertise and the largest payload we send (before options are subtracted).
    /// Default 1460 (Ethernet MTU 1500 − 40 bytes of IPv4 and TCP headers).
    pub mss_bytes: u16,
    /// The peer's MSS assumed when its SYN carries no MSS option (RFC 9293 §3.7.1: 536 for
    /// IPv4; the stack sets 1220 for IPv6). Default 536.
    pub default_peer_mss_bytes: u16,
    /// The smallest send MSS we accept from a peer: a smaller advertised MSS is raised to this
    /// floor so a hostile peer cannot make us send tiny segments. Default 216.
    pub peer_mss_floor_bytes: u16,
    /// Initial congestion window in segments (RFC 6928). Default 10.
    pub initial_window_segments: u16,
    /// Lower bound of the retransmission timeout (RFC 6298 §2.4 says 1 s; 200 ms is the common
    /// practice for modern networks). Default 200 ms.
    pub rto_min_ns: u64,
    /// Apply `rto_min_ns` to the variance term of the RTO (RTO = SRTT + max(4·RTTVAR,
    /// rto_min)) instead of to the whole RTO (RFC 6298 §2.4), as Linux does; see
    /// [`crate::rtt::RtoBounds::min_bounds_variance`]. Default false.
    pub rto_min_bounds_variance: bool,
    /// Upper bound of the retransmission timeout, including backoff (RFC 6298 §2.5). Default 60 s.
    pub rto_max_ns: u64,
    /// RTO before the first RTT sample (RFC 6298 §2.1). Default 1 s.
    pub rto_initial_ns: u64,
    /// Longest an ACK is delayed (RFC 9293 §3.8.6.3 allows up to 500 ms). Default 40 ms.
    pub delayed_ack_ns: u64,
    /// Quick-ACK mode: the first this-many data segments of a connection (and the next ones
    /// after out-of-order data arrives) are each acknowledged at once instead of every second
    /// full-sized segment. Linux does this (`tcp_enter_quickack_mode`/`tcp_incr_quickack` in
    /// `net/ipv4/tcp_input.c`, up to `TCP_MAX_QUICKACKS` = 16, fewer when the receive window
    /// holds fewer than 32 segments) so a young connection's slow start is not held back by
    /// delayed ACKs. RFC 5681 §4.2 and RFC 9293 §3.8.6.3 permit acking more often than every
    /// second segment. Default 0: off, every second full-sized segment or `delayed_ack_ns`.
    ///
    /// As in Linux, quick-ACK mode is suspended while the connection is interactive
    /// (`inet_csk_in_pingpong_mode`): once we send data within `delayed_ack_ns` of the last
    /// data received (or of the handshake's completion), the peer's next data waits for the
    /// delayed ACK, which our reply usually carries; a delayed ACK that its timer had to send
    /// ends interactive mode.
    pub quickack_segments: u16,
    /// Disable the Nagle algorithm (RFC 9293 §3.7.4). Default false.
    pub nodelay: bool,
    /// Minshall's variant of the Nagle algorithm (draft-minshall-nagle; Linux
    /// `tcp_nagle_check`/`tcp_minshall_check`): a short segment waits only while an earlier
    /// *short* segment is unacknowledged, not while any data is. A write's short tail then
    /// leaves at once behind its full segments, and a request-response exchange of several
    /// segments is not held a round trip for its last one; the limit Nagle exists for (at
    /// most one small segment in flight) still holds. Default false: RFC 9293 §3.7.4's rule
    /// (no short segment while anything is unacknowledged).
    pub nagle_minshall: bool,
    /// TIME-WAIT duration, 2·MSL (RFC 9293 §3.4.2). Default 60 s. Also bounds FIN-WAIT-2
    /// after a full `close()` (nobody could use the connection any more).
    pub time_wait_ns: u64,
    /// Send buffer capacity: unacknowledged plus unsent bytes. Default 256 KiB. Under
    /// [`Config::send_buffer_skb_accounting`] it is Linux's `sk_sndbuf` instead: a charge
    /// limit in which each skb costs its payload plus
    /// [`crate::connection::SKB_OVERHEAD_BYTES`].
    pub send_buffer_bytes: u32,
    /// Linux's send-buffer accounting (`tcp_sendmsg_locked`, `sk_stream_memory_free`,
    /// `sk_stream_is_writeable`), `connection/sndbuf.rs`: a write is admitted skb by skb (up
    /// to the size goal, 64 KB or half the peer's largest window), a new skb only while the
    /// charge (payload plus a fixed overhead per skb, the skbs split where segments leave as
    /// TSO packets) is below [`Config::send_buffer_bytes`] and the unsent bytes below the
    /// notsent mark, so a write overshoots the buffer by up to one size goal; the socket is
    /// writable again only when the free charge is at least half the charge in use, and a
    /// writer that found no room is woken once (an edge) when it is. Off (the default): the
    /// buffer holds exactly `send_buffer_bytes` of payload and is writable while any byte
    /// fits (RFC 9293 leaves buffering to the implementation).
    pub send_buffer_skb_accounting: bool,
    /// With [`Config::send_buffer_skb_accounting`]: the buffer grows to twice the congestion
    /// window's worth of skbs while the window is not full (Linux `tcp_sndbuf_expand` from
    /// `tcp_new_space`, up to `tcp_wmem[2]`, 4 MiB). Linux turns it off for a socket whose
    /// application set `SO_SNDBUF` (`SOCK_SNDBUF_LOCK`); so does the stack's
    /// `SendBufferBytes` option. Default true.
    pub send_buffer_autotune: bool,
    /// With [`Config::send_buffer_skb_accounting`]: the fewest segments a TSO packet is
    /// sized for (Linux `net.ipv4.tcp_min_tso_segs`, default 2); packets are otherwise sized
    /// for a millisecond of the pacing rate (`tcp_tso_autosize`). Each packet is an skb of
    /// its own, charged its overhead.
    pub tso_min_segments: u8,
    /// Receive buffer capacity: received bytes not yet read plus out-of-order bytes; also the
    /// largest window we advertise. Default 256 KiB.
    pub recv_buffer_bytes: u32,
    /// Most out-of-order ranges kept (each a separate hole-bounded run). 0 disables the
    /// out-of-order queue. Default 8.
    pub ooo_segments_max: u16,
    /// Most out-of-order bytes kept. Default 128 KiB.
    pub ooo_bytes_max: u32,
    /// Offer window scaling (RFC 7323 §2). Default true.
    pub window_scale: bool,
    /// Offer timestamps (RFC 7323 §3). Default true.
    pub timestamps: bool,
    /// Offer SACK (RFC 2018). Default true.
    pub sack: bool,
    /// RFC 3465's L: most bytes one ACK may add to cwnd in slow start, in segments. Default 1
    /// (RFC 5681 §3.1 equation 2, cwnd += min(N, SMSS)); 0 removes the limit, as Linux's
    /// `tcp_slow_start` does (cwnd grows by every segment an ACK covers, up to ssthresh), which
    /// doubles cwnd per round trip even when the peer acknowledges every second or fourth
    /// segment.
    pub slow_start_increase_limit_segments: u16,
    /// Grow cwnd only while it limits the sender (RFC 7661 §4.3; Linux `tcp_is_cwnd_limited`):
    /// after a window in which the sender filled cwnd, or, in slow start, while cwnd is below
    /// twice the most data in flight of the last round trip. An application-limited sender
    /// then keeps its cwnd instead of inflating it with ACKs for little data. Default false
    /// (cwnd grows on every ACK, RFC 5681).
    pub cwnd_growth_requires_limited: bool,
    /// Count bytes the peer SACKed earlier again when the cumulative ACK covers them, in the
    /// bytes an ACK lets cwnd grow by. Default true: RFC 5681 §3.1's N counts every byte the
    /// cumulative ACK newly covers. `false` counts only bytes not SACKed before, as Linux
    /// does (cwnd grows by `delivered`, and SACKed segments were delivered when SACKed, on
    /// duplicate ACKs that do not grow cwnd), so a reordered window does not inflate cwnd.
    pub ack_counts_previously_sacked_bytes: bool,
    /// Restart from the initial window after an idle period longer than the RTO (RFC 5681
    /// §4.1, a SHOULD: the ACK clock is lost while idle). Default true. Linux makes it the
    /// sysctl `tcp_slow_start_after_idle` (on by default; the Google corpus's defaults turn it
    /// off).
    pub restart_after_idle: bool,
    /// A zero-window probe carries the next octet of data (RFC 9293 §3.8.6.1: "transmit at
    /// least one octet of new data"). Default true. `false` probes as Linux does
    /// (`tcp_xmit_probe_skb`): a bare ACK with SEG.SEQ = SND.UNA − 1, which the peer must
    /// answer with its current window, and which puts no data beyond a zero window.
    pub zero_window_probe_carries_data: bool,
    /// Proportional rate reduction in SACK recovery (RFC 6937): instead of sending whatever
    /// the pipe allows once cwnd is cut to ssthresh, send in proportion to what the peer
    /// reports delivered, so the flight shrinks smoothly to ssthresh; below ssthresh, grow
    /// back by at most what was delivered, plus one segment on an ACK that advances SND.UNA
    /// (the slow-start reduction bound with the "safe ACK" refinement Linux uses and
    /// draft-ietf-tcpm-prr-rfc6937bis adopts). Default false.
    pub prr: bool,
    /// RACK loss detection (RFC 8985 §6) on SACK connections, in place of the DupAck
    /// threshold (RFC 6675 §5's three duplicate ACKs and IsLost): every segment's latest
    /// transmission time is recorded (§6.1), and a segment is deemed lost once a segment sent
    /// after it was delivered (cumulatively or by SACK) and `RACK.rtt + RACK.reo_wnd` have
    /// passed since it was sent (§6.2); a reordering timer makes that judgement when no ACK
    /// comes (§6.2 step 5). The reordering window is `min_RTT/4`, zero while no reordering
    /// has been seen and three segments are SACKed or recovery is under way, and grows with
    /// DSACKs (§6.2 step 4). Lost segments are retransmitted under the recovery in force
    /// (RFC 6675's pipe, [`Config::prr`] when on), and a retransmission that is lost again is
    /// found the same way and sent again before the RTO. Connections without SACK keep the
    /// DupAck threshold. Default true: RACK-TLP is standards track, and the engine's tests and
    /// the simulator's soak (loss, reordering, duplication) pass with it.
    pub rack: bool,
    /// When one ACK delivers several segments, take `RACK.rtt` from the last one visited in
    /// sequence order (newly SACKed segments first, then the cumulatively acknowledged
    /// ones), as Linux's `tcp_rack_advance` does, instead of from the most recently sent one
    /// (RFC 8985 §6.2 step 2 visits segments in order of transmission). The two differ when
    /// an ACK covers a retransmission and, above it, an original sent earlier: Linux then
    /// waits longer before deeming the rest of that earlier flight lost. Default false.
    pub rack_rtt_from_last_in_sequence: bool,
    /// Grow cwnd on an ACK that only SACKs new data once the reordering degree
    /// (`tcpi_reordering`) exceeds its initial 3 (Linux `tcp_may_raise_cwnd`: with reordering
    /// seen, any forward progress may raise cwnd, by the segments newly delivered). RFC 5681
    /// grows cwnd only on ACKs that acknowledge new data cumulatively. Outside loss recovery
    /// only, and subject to [`Config::cwnd_growth_requires_limited`]. Default false.
    pub cwnd_grows_on_sack_when_reordering: bool,
    /// CUBIC's HyStart as Linux's `tcp_cubic.c` runs it (`hystart_update`, both detectors of
    /// `hystart_detect=3`; [`crate::cc::Hystart`]): in slow start with cwnd ≥ 16 segments,
    /// end slow start with ssthresh = cwnd when the smallest RTT of a round's first 8 ACKs
    /// exceeds the connection's smallest by clamp(min/8, 4 ms, 16 ms) (delay increase), or
    /// when ACKs at most 2 ms apart keep arriving for more than half the minimum RTT after
    /// the round began (ACK train). RFC 9438 §4.10 lets CUBIC leave slow start early with a
    /// HyStart; the RFC it names is RFC 9406's HyStart++, which this is not. Only with
    /// [`CongestionControl::Cubic`]. Default false (slow start ends at the first loss).
    pub hystart: bool,
    /// Congestion controller. Default NewReno.
    pub congestion_control: CongestionControl,
    /// Challenge ACKs allowed per second per connection (RFC 5961 §7), ACKs that answer an
    /// unacceptable bare ACK included. Default 10.
    pub challenge_acks_per_s_max: u32,
    /// Answer a segment whose ACK acknowledges data not yet sent (SEG.ACK > SND.NXT) with an
    /// ACK before dropping it, as RFC 9293 §3.10.7.4 ("send an ACK, drop the segment") and RFC
    /// 5961 §5.2 require; the ACK is rate limited like a challenge ACK. `false` drops such a
    /// segment silently, as Linux does (`tcp_ack` returns `TCP_ACK_UNSENT_DATA` and the segment
    /// is discarded): it saves an ACK towards a blind attacker at the cost of telling a confused
    /// peer nothing. Either way the drop is counted (`rx_drop_ack_unsent`) and nothing of the
    /// segment (its timestamp, text or FIN) is taken. Default true.
    pub ack_unsent_data_replies: bool,
    /// Accept a segment without a timestamp option on a connection that negotiated
    /// timestamps, as Linux does (it checks PAWS only on segments that carry one). Default
    /// false: such a segment is dropped and counted (`rx_drop_missing_ts`), as RFC 7323 §3.2
    /// says a TCP SHOULD; both leave the connection up (the RFC's MUST NOT abort).
    pub accept_missing_timestamps: bool,
    /// Answer new data that arrives after the application closed the connection (FIN-WAIT-1
    /// or FIN-WAIT-2 after `close`) with a RST and drop the connection, as RFC 1122
    /// §4.2.2.13 says a TCP SHOULD ("to show that data was lost") and Linux does
    /// (`tcp_rcv_state_process`, `LINUX_MIB_TCPABORTONDATA`). Default false: the data is
    /// acknowledged and discarded (`rx_discard_after_close_bytes`) and the close finishes
    /// gracefully.
    pub reset_on_data_after_close: bool,
    /// In SYN-SENT, refuse a SYN-ACK whose timestamp option echoes (non-zero) a value our
    /// timestamp clock has not shown since the connection was opened, as Linux does
    /// (`tcp_rcv_synsent_state_process`, `LINUX_MIB_PAWSACTIVEREJECTED`): it answers with a
    /// RST at the segment's acknowledgment number and stays in SYN-SENT (a late SYN-ACK of an
    /// older connection, or a forged one, is not taken). RFC 7323 asks no such check of a
    /// SYN-ACK. Counted `rx_drop_syn_ack_bad_echo`. Default false.
    pub syn_ack_checks_ts_echo: bool,
    /// Keepalive; `None` disables it. Default `None`.
    pub keepalive: Option<KeepaliveConfig>,
    /// Abort when sent data stays unacknowledged this long (RFC 9293 §3.8.3, "R2"; RFC 5482).
    /// `None` disables it. Default 300 s.
    pub user_timeout_ns: Option<u64>,
    /// SYN (or SYN-ACK) retransmissions before the open fails. Default 6.
    pub syn_retries_max: u8,
    /// Tail loss probe (RFC 8985 §7): when data is outstanding and nothing else is to be sent,
    /// send one probe after the probe timeout (PTO, below) instead of waiting for the RTO. Only
    /// on SACK connections, like [`Config::rack`], whose other half it is: a flight whose last
    /// segments or only ACK were lost draws no duplicate ACK, and without a probe only the RTO
    /// (200 ms at least) would repair it. Default true.
    pub tail_loss_probe: bool,
    /// Added to 2·SRTT in the PTO when more than one segment is in flight (with one segment,
    /// RFC 8985's WCDelAckT, 200 ms, is added instead: the peer may hold its ACK that long). Default 0, as
    /// RFC 8985 §7.2; Linux adds `TCP_TIMEOUT_MIN`, two 1 ms ticks (`tcp_schedule_loss_probe`).
    ///
    /// 32 bits (up to 4.29 s) keep the configuration small.
    pub tlp_pto_extra_ns: u32,
    /// Lower bound of the PTO. Default 10 ms, the floor of the original TLP proposal
    /// (draft-dukkipati-tcpm-tcp-loss-probe), which keeps a probe from racing an ACK that a
    /// jittery path delays; Linux dropped it for data-centre RTTs (0 there).
    pub tlp_pto_floor_ns: u32,
    /// Packetization-layer path MTU discovery (RFC 4821/8899, [`crate::plpmtud`]): after
    /// repeated timeouts of full-size segments (a path that drops large packets and sends no
    /// ICMP), lower the send MSS, then search upward for the largest size that passes.
    /// Default false (Linux `tcp_mtu_probing` = 0).
    pub plpmtud: bool,
    /// Explicit Congestion Notification (RFC 3168): whether SYNs ask for it and whether a
    /// peer's request is agreed to. Once negotiated, new data leaves with ECT(0), a CE mark
    /// received is echoed with ECE until the peer's CWR, and an ECE reduces the window once
    /// per window of data (with [`Config::prr`], proportionally, as Linux's CWR state).
    /// Default [`EcnMode::Off`].
    pub ecn: EcnMode,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            mss_bytes: 1460,
            default_peer_mss_bytes: 536,
            peer_mss_floor_bytes: 216,
            initial_window_segments: 10,
            rto_min_ns: 200 * NS_PER_MS,
            rto_min_bounds_variance: false,
            rto_max_ns: 60 * NS_PER_S,
            rto_initial_ns: NS_PER_S,
            delayed_ack_ns: 40 * NS_PER_MS,
            quickack_segments: 0,
            nodelay: false,
            nagle_minshall: false,
            time_wait_ns: 60 * NS_PER_S,
            send_buffer_bytes: 256 * 1024,
            send_buffer_skb_accounting: false,
            send_buffer_autotune: true,
            tso_min_segments: 2,
            recv_buffer_bytes: 256 * 1024,
            ooo_segments_max: 8,
            ooo_bytes_max: 128 * 1024,
            window_scale: true,
            timestamps: true,
            sack: true,
            slow_start_increase_limit_segments: 1,
            cwnd_growth_requires_limited: false,
            ack_counts_previously_sacked_bytes: true,
            restart_after_idle: true,
            zero_window_probe_carries_data: true,
            prr: false,
            rack: true,
            rack_rtt_from_last_in_sequence: false,
            cwnd_grows_on_sack_when_reordering: false,
            hystart: false,
            congestion_control: CongestionControl::NewReno,
            challenge_acks_per_s_max: 10,
            ack_unsent_data_replies: true,
            accept_missing_timestamps: false,
            reset_on_data_after_close: false,
            syn_ack_checks_ts_echo: false,
            keepalive: None,
            user_timeout_ns: Some(300 * NS_PER_S),
            syn_retries_max: 6,
            tail_loss_probe: true,
            tlp_pto_extra_ns: 0,
            tlp_pto_floor_ns: 10 * NS_PER_MS as u32,
            plpmtud: false,
            ecn: EcnMode::Off,
        }
    }
}

/// A validated configuration that connections share: the stack keeps one per listener and
/// family (a bounded cache, `stack::tcp_sockets`), so per-segment reads of the configuration
/// hit one cache line that every connection uses instead of a copy in each TCB (issue 17
/// item 2).
pub type SharedConfig = Arc<Config>;

/// What a connection's constructors accept as its configuration: a plain `&Config` (copied,
/// validated, a new [`SharedConfig`] of the connection's own) or a `&SharedConfig`, shared as
/// it is when it is already valid ([`Config::validated`] leaves it unchanged) and otherwise
/// replaced by a validated copy.
pub trait IntoSharedConfig {
    /// The validated configuration to hold.
    fn into_shared(self) -> SharedConfig;
}

impl IntoSharedConfig for &Config {
    fn into_shared(self) -> SharedConfig {
        Arc::new(self.validated())
    }
}

impl IntoSharedConfig for &SharedConfig {
    fn into_shared(self) -> SharedConfig {
        let v = self.validated();
        if v == **self {
            Arc::clone(self)
        } else {
            Arc::new(v)
        }
    }
}

/// Smallest MSS any configuration may use.
pub const MSS_MIN_BYTES: u16 = 64;
/// Largest receive buffer: the biggest window RFC 7323 §2.3 can express (2^30).
pub const RECV_BUFFER_MAX_BYTES: u32 = 1 << 30;

/// Payload a send buffer under [`Config::send_buffer_skb_accounting`] may hold beyond its
/// `send_buffer_bytes`: Linux admits a new skb while the charge is below the limit, so the
/// last one overshoots by up to a size goal (64 KB), and a write keeps filling its tail skb
/// while the segments before it leave (`tcp_push_one`), by up to one more.
pub const SEND_BUFFER_SKB_OVERSHOOT_BYTES_MAX: u32 = 2 * 65_536;

impl Config {
    /// The RTO's bounds and rule, for the RTT estimator (read per use: a TCB holds no copy).
    #[inline]
    pub fn rto_bounds(&self) -> crate::rtt::RtoBounds {
        crate::rtt::RtoBounds {
            min_ns: self.rto_min_ns,
            max_ns: self.rto_max_ns,
            min_bounds_variance: self.rto_min_bounds_variance,
        }
    }

    /// The payload the send ring may hold: `send_buffer_bytes`, plus
    /// [`SEND_BUFFER_SKB_OVERSHOOT_BYTES_MAX`] under skb accounting.
    pub fn send_ring_capacity_bytes(&self) -> usize {
        let extra = if self.send_buffer_skb_accounting {
            SEND_BUFFER_SKB_OVERSHOOT_BYTES_MAX
        } else {
            0
        };
        self.send_buffer_bytes.saturating_add(extra) as usize
    }

    /// The configuration with every field forced into its valid range; constructors call this,
    /// so an inconsistent configuration never reaches the engine.
    pub fn validated(mut self) -> Config {
        self.mss_bytes = self.mss_bytes.max(MSS_MIN_BYTES);
        self.peer_mss_floor_bytes = self
            .peer_mss_floor_bytes
            .clamp(MSS_MIN_BYTES, self.mss_bytes);
        self.default_peer_mss_bytes = self.default_peer_mss_bytes.max(self.peer_mss_floor_bytes);
        self.initial_window_segments = self.initial_window_segments.max(1);
        self.rto_min_ns = self.rto_min_ns.max(1);
        self.rto_max_ns = self.rto_max_ns.max(self.rto_min_ns);
        self.rto_initial_ns = self.rto_initial_ns.clamp(self.rto_min_ns, self.rto_max_ns);
        let mss = u32::from(self.mss_bytes);
        self.send_buffer_bytes = self.send_buffer_bytes.max(mss);
        self.tso_min_segments = self.tso_min_segments.max(1);
        self.recv_buffer_bytes = self.recv_buffer_bytes.clamp(mss, RECV_BUFFER_MAX_BYTES);
        self.ooo_bytes_max = self.ooo_bytes_max.min(self.recv_buffer_bytes);
        self.time_wait_ns = self.time_wait_ns.max(1);
        if let Some(ka) = &mut self.keepalive {
            ka.idle_ns = ka.idle_ns.max(1);
            ka.interval_ns = ka.interval_ns.max(1);
            ka.probes_max = ka.probes_max.max(1);
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validated_repairs_inconsistent_rto_bounds() {
        let c = Config {
            rto_min_ns: 10,
            rto_max_ns: 5,
            rto_initial_ns: 1,
            ..Config::default()
        }
        .validated();
        assert!(c.rto_min_ns <= c.rto_initial_ns && c.rto_initial_ns <= c.rto_max_ns);
    }

    #[test]
    fn validated_keeps_defaults_unchanged() {
        assert_eq!(Config::default().validated(), Config::default());
    }
}
