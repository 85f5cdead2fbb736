//! [`TcpInfo`]: a read-only picture of a connection with the meanings and units of Linux's
//! `struct tcp_info` (`getsockopt(TCP_INFO)`, `include/uapi/linux/tcp.h`), computed from the
//! TCB on demand. Nothing here changes the connection.
//!
//! Linux counts its flight in packets; this engine counts bytes. The packet counts here are
//! derived: a byte range of `n` bytes counts as `ceil(n / mss)` segments (the RACK transmit
//! records give the segment boundaries where RACK runs), so a flight of full-sized segments
//! gives Linux's figures exactly and a flight of small segments may count fewer.

use super::chrono::{Chrono, InfoState};
use super::*;

/// Linux `TCP_INFINITE_SSTHRESH`: `tcpi_snd_ssthresh` before the first congestion event.
pub const TCP_INFINITE_SSTHRESH: u32 = 0x7fff_ffff;

/// Linux `tcpi_options` bits (`TCPI_OPT_*`).
pub mod tcpi_opt {
    /// Timestamps negotiated.
    pub const TIMESTAMPS: u8 = 1;
    /// SACK negotiated.
    pub const SACK: u8 = 2;
    /// Window scaling negotiated.
    pub const WSCALE: u8 = 4;
    /// ECN negotiated (RFC 3168).
    pub const ECN: u8 = 8;
    /// Data arrived with an ECT or CE codepoint (Linux `TCP_ECN_SEEN`).
    pub const ECN_SEEN: u8 = 16;
    /// The SYN's data was accepted (TCP Fast Open, RFC 7413): set by the host stack, which
    /// keeps that fact (`Connection::tcp_info` leaves it clear).
    pub const SYN_DATA: u8 = 32;
}

/// Linux's congestion-avoidance states (`enum tcp_ca_state`), `tcpi_ca_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum CaState {
    /// Nothing suspicious.
    Open = 0,
    /// Duplicate ACKs or SACKed data seen, no loss yet.
    Disorder = 1,
    /// Window being reduced after an ECN-Echo (RFC 3168 §6.1.2).
    Cwr = 2,
    /// Fast recovery.
    Recovery = 3,
    /// Recovering from a retransmission timeout.
    Loss = 4,
}

/// A connection as Linux's `struct tcp_info` reports it. Field names are Linux's without the
/// `tcpi_` prefix, with the unit appended where Linux's has one (`rto_us` is `tcpi_rto`).
/// Counts of segments ("packets") are derived from bytes as the module documentation says.
///
/// Invariants: `unacked ≥ sacked` where both are known; `lost`, `sacked`, `retrans` and
/// `min_rtt_us` are `None` where the engine does not track them (a connection without RACK,
/// i.e. without SACK), never a guess.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpInfo {
    /// Linux state number: 1 ESTABLISHED, 2 SYN_SENT, 3 SYN_RECV, 4 FIN_WAIT1, 5 FIN_WAIT2,
    /// 6 TIME_WAIT, 7 CLOSE, 8 CLOSE_WAIT, 9 LAST_ACK, 11 CLOSING (10 LISTEN is the stack's).
    pub state: u8,
    /// [`CaState`] as its number.
    pub ca_state: u8,
    /// Consecutive retransmission timeouts (SYN retransmissions during the handshake).
    pub retransmits: u8,
    /// Unanswered zero-window or keepalive probes.
    pub probes: u8,
    /// Exponential backoff of the timer in use (persist while probing, else RTO).
    pub backoff: u8,
    /// `TCPI_OPT_*` bits ([`tcpi_opt`]).
    pub options: u8,
    /// Shift applied to the peer's window.
    pub snd_wscale: u8,
    /// Shift the peer applies to ours.
    pub rcv_wscale: u8,
    /// Current retransmission timeout, backoff included.
    pub rto_us: u32,
    /// Delayed-ACK timeout.
    pub ato_us: u32,
    /// Payload per segment we send (Linux `mss_cache`: send MSS less the options every
    /// segment carries).
    pub snd_mss: u32,
    /// The largest payload the peer sent so far; before any, Linux's initial estimate
    /// `min(advmss, snd_mss, 536)`.
    pub rcv_mss: u32,
    /// Segments sent and not cumulatively acknowledged (Linux `packets_out`).
    pub unacked: u32,
    /// Of those, segments the peer SACKed.
    pub sacked: Option<u32>,
    /// Of those, segments deemed lost (retransmitted or not) and not SACKed.
    pub lost: Option<u32>,
    /// Of those, retransmitted segments not yet delivered.
    pub retrans: Option<u32>,
    /// Always 0 (Linux dropped FACK in 4.15 and reports 0).
    pub fackets: u32,
    /// Time since data was last sent.
    pub last_data_sent_ms: u32,
    /// Smoothed RTT (0 before the first sample).
    pub rtt_us: u32,
    /// RTT variation (0 before the first sample).
    pub rttvar_us: u32,
    /// Slow start threshold in segments; [`TCP_INFINITE_SSTHRESH`] before the first
    /// congestion event.
    pub snd_ssthresh: u32,
    /// Congestion window in segments (`cwnd_bytes / snd_mss`, rounded down).
    pub snd_cwnd: u32,
    /// The MSS we announced (Linux `advmss`).
    pub advmss: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Sequence space acknowledged by the peer beyond our SYN (data, and the FIN once acked).
    pub bytes_acked: u64,
    /// Sequence space received in order beyond the peer's SYN.
    pub bytes_received: u64,
    /// Payload bytes sent, retransmissions included.
    pub bytes_sent: u64,
    /// Payload bytes retransmitted.
    pub bytes_retrans: u64,
    /// Segments sent (any kind).
    pub segs_out: u32,
    /// Segments received (any kind).
    pub segs_in: u32,
    /// Bytes written by the application and not sent yet.
    pub notsent_bytes: u32,
    /// Windowed minimum RTT (RACK's), once sampled.
    pub min_rtt_us: Option<u32>,
    /// The peer's window, scaled.
    pub snd_wnd: u32,
    /// The window we last advertised, scaled: right edge less RCV.NXT.
    pub rcv_wnd: u32,
    /// D-SACK blocks received.
    pub dsack_dups: u32,
    /// Reordering degree in segments (Linux `tp->reordering`): 3 until SACKs show data
    /// delivered further below the highest SACKed sequence, at most 300.
    pub reordering: u32,
    /// Times reordering was seen: SACKs or cumulative ACKs that delivered
    /// never-retransmitted data below the highest SACKed sequence (Linux `tp->reord_seen`).
    pub reord_seen: u32,
    /// Segments delivered to the peer, acknowledged or SACKed (Linux `tp->delivered`): the
    /// SYN (or SYN-ACK) once acknowledged, then `ceil(bytes / MSS)` of each ACK's newly
    /// delivered bytes, and a FIN acknowledged alone.
    pub delivered: u32,
    /// Of those, delivered by ACKs carrying ECE (Linux `delivered_ce`).
    pub delivered_ce: u32,
    /// Segments received carrying data.
    pub data_segs_in: u32,
    /// Segments sent carrying data, retransmissions included.
    pub data_segs_out: u32,
    /// Time since data last arrived (or the handshake completed).
    pub last_data_recv_ms: u32,
    /// Time with data queued or in flight, the two limited times below included (Linux
    /// `tcpi_busy_time`).
    pub busy_time_us: u64,
    /// Of that, time new data waited for the peer's window alone.
    pub rwnd_limited_us: u64,
    /// Of that, time the application waited for send buffer space.
    pub sndbuf_limited_us: u64,
}

fn sat_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl State {
    /// The number Linux gives this state (`TCP_ESTABLISHED` = 1, ...).
    pub fn linux_number(self) -> u8 {
        match self {
            State::Established => 1,
            State::SynSent => 2,
            State::SynReceived => 3,
            State::FinWait1 => 4,
            State::FinWait2 => 5,
            State::TimeWait => 6,
            State::Closed => 7,
            State::CloseWait => 8,
            State::LastAck => 9,
            State::Closing => 11,
        }
    }
}

impl Connection {
    /// Bytes written and never sent (Linux `write_seq - snd_nxt`, `tcpi_notsent_bytes`):
    /// beyond the highest sequence number sent, so bytes a timeout sends again are not
    /// counted.
    pub fn notsent_bytes(&self) -> usize {
        let send_end = self.snd.buf_seq + self.send_buf.len() as u32;
        let sent_edge = if self.snd.max.lt(self.snd.buf_seq) {
            self.snd.buf_seq
        } else {
            self.snd.max
        };
        fwd(sent_edge, send_end) as usize
    }

    /// The connection as Linux's `tcp_info` would report it at `now` (see [`TcpInfo`]).
    pub fn tcp_info(&self, now: u64) -> TcpInfo {
        let mss = u32::from(self.eff_mss());
        let flight = fwd(self.snd.una, self.snd.max);
        let (unacked, sacked, lost, retrans) = match self.rack.as_ref() {
            Some(r) if self.rack_active() => {
                let (out, lost, retrans) = r.info_segments(&self.scoreboard, mss);
                let sacked = self
                    .scoreboard
                    .ranges()
                    .iter()
                    .map(|b| (b.right.diff(b.left).max(0) as u32).div_ceil(mss))
                    .sum::<u32>();
                (out, Some(sacked), Some(lost), Some(retrans))
            }
            // RACK runs on every SACK connection that sent data; before any, nothing is out.
            None if self.rack_active() => (flight.div_ceil(mss), Some(0), Some(0), Some(0)),
            _ => (flight.div_ceil(mss), None, None, None),
        };
        let synchronized = self.state.is_synchronized();
        let rto_recovery = self.rack.as_ref().is_some_and(|r| r.rto_recovery);
        let ca_state = if rto_recovery
            || (!self.rack_active() && self.rtt.backoff_shift > 0 && flight > 0 && synchronized)
        {
            CaState::Loss
        } else if self.rec.in_recovery {
            CaState::Recovery
        } else if self.ecn_in_cwr() {
            CaState::Cwr
        } else if self.rec.dupacks > 0 || !self.scoreboard.is_empty() {
            CaState::Disorder
        } else {
            CaState::Open
        };
        let mut options = 0;
        if self.opts.ts_ok {
            options |= tcpi_opt::TIMESTAMPS;
        }
        if self.opts.sack_ok {
            options |= tcpi_opt::SACK;
        }
        if self.opts.peer_offered_ws.is_some() || self.opts.snd_wscale > 0 {
            options |= tcpi_opt::WSCALE;
        }
        if self.ecn_ok() {
            options |= tcpi_opt::ECN;
        }
        if self.ecn.flags & ecn_flag::SEEN != 0 {
            options |= tcpi_opt::ECN_SEEN;
        }

        let ssthresh = self.cc.ssthresh_bytes();
        let snd_ssthresh = if ssthresh == u32::MAX {
            TCP_INFINITE_SSTHRESH
        } else {
            (ssthresh / mss).min(TCP_INFINITE_SSTHRESH)
        };
        let advmss = u32::from(self.config.mss_bytes);
        let rcv_mss = match self.rcv.mss_seen {
            0 => advmss.min(mss).min(536),
            seen => u32::from(seen),
        };
        let probing = self.out.held & held::PERSIST != 0;
        let retransmits = if synchronized {
            self.rtt.backoff_shift
        } else {
            self.timers.syn_retries
        };
        let rtt_us = |ns: u64| sat_u32(ns / 1000);
        let fresh;
        let x = match self.info.as_ref() {
            Some(x) => x,
            None => {
                // Nothing sent, received or acknowledged yet: every count is 0, the degree
                // Linux's initial one, and data "last arrived" at the connection's start.
                fresh = InfoState::new(self.timers.last_tx_ns);
                &fresh
            }
        };
        let rwnd_limited_ns = x.elapsed_ns(now, Chrono::RwndLimited);
        let sndbuf_limited_ns = x.elapsed_ns(now, Chrono::SndbufLimited);
        TcpInfo {
            state: self.state.linux_number(),
            ca_state: ca_state as u8,
            retransmits,
            probes: self.timers.persist_shift.max(self.timers.keepalive_probes),
            backoff: if probing {
                self.timers.persist_shift
            } else {
                self.rtt.backoff_shift
            },
            options,
            snd_wscale: self.opts.snd_wscale,
            rcv_wscale: self.opts.rcv_wscale,
            rto_us: rtt_us(self.rtt.rto_ns(self.config.rto_bounds())),
            ato_us: rtt_us(self.config.delayed_ack_ns),
            snd_mss: mss,
            rcv_mss,
            unacked,
            sacked,
            lost,
            retrans,
            fackets: 0,
            last_data_sent_ms: sat_u32(now.saturating_sub(self.timers.last_tx_ns) / NS_PER_MS),
            rtt_us: if self.rtt.has_sample {
                rtt_us(self.rtt.srtt_ns())
            } else {
                0
            },
            rttvar_us: if self.rtt.has_sample {
                rtt_us(self.rtt.rttvar_ns())
            } else {
                0
            },
            snd_ssthresh,
            snd_cwnd: self.cc.cwnd_bytes() / mss,
            advmss,
            total_retrans: sat_u32(self.rare_counter(|k| k.retransmitted_segments)),
            // Distances in sequence space taken modulo 2^32, plus the passes counted: exact
            // past 2 GiB (where a signed difference turns negative) and past 4 GiB.
            bytes_acked: if self.snd.una == self.snd.iss {
                0 // our SYN is not acknowledged yet
            } else {
                (self.rare_counter(|k| k.snd_una_wraps) << 32)
                    + u64::from(self.snd.una.0.wrapping_sub((self.snd.iss + 1).0))
            },
            bytes_received: if synchronized || self.state == State::SynReceived {
                (self.rare_counter(|k| k.rcv_nxt_wraps) << 32)
                    + u64::from(self.rcv.nxt.0.wrapping_sub((self.rcv.irs + 1).0))
            } else {
                0
            },
            bytes_sent: self.hot_total(|k| k.tx_payload_bytes, |k| k.tx_payload_bytes),
            bytes_retrans: self.rare_counter(|k| k.retransmitted_bytes),
            segs_out: sat_u32(self.hot_total(|k| k.tx_segments, |k| k.tx_segments)),
            segs_in: sat_u32(self.hot_total(|k| k.rx_segments, |k| k.rx_segments)),
            notsent_bytes: sat_u32(self.notsent_bytes() as u64),
            min_rtt_us: self.rack_min_rtt_ns().map(rtt_us),
            snd_wnd: self.snd.wnd,
            rcv_wnd: if synchronized {
                fwd(self.rcv.nxt, self.rcv.adv)
            } else {
                0
            },
            dsack_dups: sat_u32(self.rare_counter(|k| k.rx_dsack_blocks)),
            reordering: x.reordering,
            reord_seen: sat_u32(x.reordering_events),
            delivered: sat_u32(x.delivered_segments),
            delivered_ce: sat_u32(self.rare_counter(|k| k.delivered_ce_segments)),
            data_segs_in: x.rx_data_segments,
            data_segs_out: sat_u32(x.tx_data_segments),
            last_data_recv_ms: sat_u32(now.saturating_sub(x.last_data_rx_ns) / NS_PER_MS),
            busy_time_us: (x.elapsed_ns(now, Chrono::Busy) + rwnd_limited_ns + sndbuf_limited_ns)
                / 1000,
            rwnd_limited_us: rwnd_limited_ns / 1000,
            sndbuf_limited_us: sndbuf_limited_ns / 1000,
        }
    }
}
