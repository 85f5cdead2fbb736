//! What a connection tells its owner without changing it: state, ports, the RTT and window
//! figures, negotiated options, queue sizes, recovery and RACK state.

use super::*;

impl Connection {
    /// Current state.
    pub fn state(&self) -> State {
        self.state
    }
    /// Local port.
    pub fn local_port(&self) -> u16 {
        self.local_port
    }
    /// Remote port.
    pub fn remote_port(&self) -> u16 {
        self.remote_port
    }
    /// Smoothed RTT, once sampled.
    pub fn srtt_ns(&self) -> Option<u64> {
        self.rtt.has_sample.then_some(self.rtt.srtt_ns())
    }
    /// Current retransmission timeout, backoff included.
    pub fn rto_ns(&self) -> u64 {
        self.rtt.rto_ns(self.config.rto_bounds())
    }
    /// Congestion window.
    pub fn cwnd_bytes(&self) -> u32 {
        self.cc.cwnd_bytes()
    }
    /// Slow start threshold.
    pub fn ssthresh_bytes(&self) -> u32 {
        self.cc.ssthresh_bytes()
    }
    /// The peer's current window (scaled).
    pub fn send_window_bytes(&self) -> u32 {
        self.snd.wnd
    }
    /// Effective payload per segment: send MSS minus the options every segment carries.
    pub fn eff_mss(&self) -> u16 {
        let opts = if self.opts.ts_ok { TS_OPTION_BYTES } else { 0 };
        self.opts.snd_mss.saturating_sub(opts).max(1)
    }
    /// Payload bytes each wire segment carries when its TCP header (options included) is
    /// `tcp_header_bytes` long: the send MSS less the options (RFC 9293 §3.7.1). What a
    /// device cutting a [`Connection::poll_transmit_tso`] segment uses as its `gso_size`.
    pub fn segment_payload_bytes(&self, tcp_header_bytes: usize) -> u16 {
        let opts = u16::try_from(tcp_header_bytes.saturating_sub(20)).unwrap_or(u16::MAX);
        self.opts.snd_mss.saturating_sub(opts).max(1)
    }
    /// Counters: the inline ones and the boxed rare ones (zeros while never counted) put
    /// together.
    pub fn counters(&self) -> Counters {
        let mut all = self.counters_rare.as_deref().copied().unwrap_or_default();
        self.counters.add_into(&mut all);
        all
    }
    /// Heap bytes the rare counters' box takes: 0 until a rare event was counted.
    pub fn counters_heap_bytes(&self) -> usize {
        self.counters_rare
            .as_ref()
            .map_or(0, |_| core::mem::size_of::<Counters>())
    }
    /// The configuration in force (validated).
    pub fn config(&self) -> &Config {
        &self.config
    }
    /// The configuration as held: shared with every connection opened or imported with an
    /// equal one, until a socket option gives this connection a copy of its own.
    pub fn shared_config(&self) -> &crate::config::SharedConfig {
        &self.config
    }
    /// Holds `shared` instead of this connection's configuration when the two are equal (the
    /// stack's import path: a moved connection then shares its new owner's). True when it
    /// did; otherwise nothing changes.
    pub fn share_config(&mut self, shared: &crate::config::SharedConfig) -> bool {
        if **shared != *self.config {
            return false;
        }
        self.config = std::sync::Arc::clone(shared);
        true
    }
    /// Why the connection closed, once it has.
    pub fn close_reason(&self) -> Option<CloseReason> {
        self.app.close_reason
    }
    /// Whether timestamps, SACK and window scaling were negotiated, and the two shifts.
    pub fn negotiated(&self) -> Negotiated {
        Negotiated {
            timestamps: self.opts.ts_ok,
            sack: self.opts.sack_ok,
            snd_wscale: self.opts.snd_wscale,
            rcv_wscale: self.opts.rcv_wscale,
            snd_mss: self.opts.snd_mss,
        }
    }
    /// Bytes queued for sending (unacknowledged plus unsent).
    pub fn send_queue_bytes(&self) -> usize {
        self.send_buf.len()
    }
    /// Free space in the send buffer.
    pub fn send_capacity_bytes(&self) -> usize {
        if self.app.fin_queued {
            0
        } else {
            self.send_buf.free()
        }
    }
    /// Bytes ready to be read.
    pub fn recv_queue_bytes(&self) -> usize {
        self.recv_buf.len()
    }
    /// Bytes held out of order.
    pub fn ooo_bytes(&self) -> u32 {
        self.ooo.bytes()
    }
    /// ISS, our initial sequence number.
    pub fn iss(&self) -> SeqNumber {
        self.snd.iss
    }

    /// SND.UNA, SND.NXT and RCV.NXT, for tests and diagnostics.
    pub fn sequence_state(&self) -> (SeqNumber, SeqNumber, SeqNumber) {
        (self.snd.una, self.snd.nxt, self.rcv.nxt)
    }
    /// True once the connection is CLOSED and has nothing left to send: the driver may drop it.
    pub fn is_finished(&self) -> bool {
        self.state == State::Closed && self.rst_pending().is_none()
    }

    /// True while in fast recovery.
    pub fn in_recovery(&self) -> bool {
        self.rec.in_recovery
    }

    /// Whether RACK loss detection runs on this connection: [`Config::rack`] is on and SACK
    /// was negotiated (RFC 8985 relies on SACK to learn what was delivered).
    pub fn rack_active(&self) -> bool {
        self.config.rack && self.opts.sack_ok
    }

    /// RACK's windowed minimum RTT (RFC 8985 §6.2 step 1), once sampled.
    pub fn rack_min_rtt_ns(&self) -> Option<u64> {
        self.rack.as_ref().and_then(|r| r.min_rtt_ns())
    }

    /// Whether RACK has seen data segment reordering on this connection (RFC 8985 §6.2
    /// step 3), which keeps its reordering window open.
    pub fn rack_reordering_seen(&self) -> bool {
        self.rack.as_ref().is_some_and(|r| r.reordering_seen())
    }
}
