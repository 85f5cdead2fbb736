//! A byte encoding of [`ConnectionSnapshot`], for the handoff rings (DESIGN "Handoff protocol").
//!
//! # Format, version 5
//!
//! Little-endian throughout. A 12-byte header, then the body:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 4 | magic `b"RSCS"` ([`SNAPSHOT_MAGIC`]) |
//! | 4 | 2 | version, [`SNAPSHOT_VERSION`] |
//! | 6 | 2 | reserved, 0 |
//! | 8 | 4 | body length in bytes (what follows the header) |
//! | 12 | … | body |
//!
//! The body holds every field of the snapshot, group by group in the order the type declares
//! them (`exported_at_ns`, `config`, `state`, ports, `snd`, `rcv`, `opts`, `ts`, `rec`, `cc`,
//! `rtt`, `rack_path`, `timers`, `app`, `ecn`), then `counters` (a `u16` count, which must equal
//! [`Counters::LEN`], and that many `u64`s), then the three byte buffers (`send_unacked`,
//! `send_unsent`, `recv_unread`), each a `u32` length and the bytes, then `record_ends` (a
//! `u16` count, at most [`crate::RECORDS_OUTSTANDING_MAX`], and that many sequence numbers)
//! and `socket_ext` (a `u32` length, at most [`crate::SOCKET_EXT_BYTES_MAX`], and the bytes). Inside a group, fields
//! follow their declaration order; integers have their Rust width, sequence numbers are `u32`,
//! `bool` is one byte 0 or 1, `Option<T>` is a tag byte 0 (`None`) or 1 followed by `T`, and
//! enums are one byte numbering their variants in declaration order.
//!
//! The encoding is canonical: every value has exactly one encoding, and the decoder accepts
//! nothing else (a `bool` of 2, an unknown tag, a non-zero reserved field, a body longer or
//! shorter than its fields are all refused). So `decode` succeeding on `b` means
//! `encode(decode(b)) == b[..used]`.
//!
//! # What `decode` guarantees
//!
//! It never panics and never allocates more than the input holds. It refuses, with a
//! [`CodecError`]: input that ends early, a wrong magic or version, a length that disagrees
//! with the fields, out-of-range tags, buffers longer than [`SNAPSHOT_BUFFER_BYTES_MAX`] or
//! than the snapshot's own configuration allows (`config.validated()`'s buffer sizes, as
//! import applies them), a zero congestion window or slow-start threshold, and any snapshot
//! [`ConnectionSnapshot::check`] (the checks of [`crate::Connection::import`]) refuses.
//! A decoded snapshot therefore imports, unless the importer's own state says otherwise.

use wire::tcp::SeqNumber;

use crate::cc::{Congestion, CongestionParts};
use crate::config::{Config, CongestionControl, EcnMode, KeepaliveConfig};
use crate::connection::{
    AppFlags, CloseReason, Counters, EcnState, Options, Recovery, RecvSeq, SendSeq, State, Timers,
    Timestamps, ecn_flag,
};
use crate::rack::RackPathState;
use crate::rtt::RttEstimator;
use crate::snapshot::{ConnectionSnapshot, SnapshotError};

/// The first four bytes of every encoded snapshot.
pub const SNAPSHOT_MAGIC: [u8; 4] = *b"RSCS";
/// The format version this code writes and reads; a change of layout changes it.
pub const SNAPSHOT_VERSION: u16 = 5;
/// Header bytes before the body.
pub const SNAPSHOT_HEADER_BYTES: usize = 12;
/// Absolute cap on each of the three byte buffers, whatever the configuration says: the
/// largest window RFC 7323 can express (2^30 bytes).
pub const SNAPSHOT_BUFFER_BYTES_MAX: u32 = crate::config::RECV_BUFFER_MAX_BYTES;

/// Why bytes do not decode to a snapshot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CodecError {
    /// The input ends inside the encoding.
    Truncated,
    /// The first four bytes are not [`SNAPSHOT_MAGIC`].
    BadMagic,
    /// A version this code does not read.
    UnsupportedVersion(u16),
    /// The header's body length disagrees with the fields (or the reserved field is not 0).
    BadLength,
    /// A field holds a value outside its range (a `bool` other than 0/1, an unknown enum or
    /// option tag, a counter count other than [`Counters::LEN`], a zero window).
    InvalidField(&'static str),
    /// A byte buffer is longer than [`SNAPSHOT_BUFFER_BYTES_MAX`] or than the snapshot's
    /// configuration allows.
    BufferTooLong(&'static str),
    /// The fields decode but contradict each other ([`ConnectionSnapshot::check`]).
    Inconsistent(SnapshotError),
}

impl core::fmt::Display for CodecError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            CodecError::Truncated => f.write_str("snapshot encoding is truncated"),
            CodecError::BadMagic => f.write_str("not a snapshot encoding (bad magic)"),
            CodecError::UnsupportedVersion(v) => write!(f, "unsupported snapshot version {v}"),
            CodecError::BadLength => f.write_str("snapshot length disagrees with its fields"),
            CodecError::InvalidField(name) => write!(f, "snapshot field {name} out of range"),
            CodecError::BufferTooLong(name) => write!(f, "snapshot buffer {name} too long"),
            CodecError::Inconsistent(e) => write!(f, "snapshot inconsistent: {e}"),
        }
    }
}

impl std::error::Error for CodecError {}

/// Little-endian appends to a caller's vector.
struct Writer<'a>(&'a mut Vec<u8>);

impl Writer<'_> {
    fn u8(&mut self, v: u8) {
        self.0.push(v);
    }
    fn u16(&mut self, v: u16) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u32(&mut self, v: u32) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn u64(&mut self, v: u64) {
        self.0.extend_from_slice(&v.to_le_bytes());
    }
    fn bool(&mut self, v: bool) {
        self.u8(u8::from(v));
    }
    fn seq(&mut self, v: SeqNumber) {
        self.u32(v.0);
    }
    fn opt_u64(&mut self, v: Option<u64>) {
        match v {
            None => self.u8(0),
            Some(x) => {
                self.u8(1);
                self.u64(x);
            }
        }
    }
    fn bytes(&mut self, b: &[u8]) {
        // Callers bound buffers by `SNAPSHOT_BUFFER_BYTES_MAX` (< 2^32) before encoding.
        self.u32(b.len() as u32);
        self.0.extend_from_slice(b);
    }
}

/// Checked little-endian reads from a slice. Invariant: `pos ≤ buf.len()`.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], CodecError> {
        if self.buf.len() - self.pos < n {
            return Err(CodecError::Truncated);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], CodecError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, CodecError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, CodecError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, CodecError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, CodecError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn bool(&mut self, name: &'static str) -> Result<bool, CodecError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(CodecError::InvalidField(name)),
        }
    }
    fn seq(&mut self) -> Result<SeqNumber, CodecError> {
        Ok(SeqNumber(self.u32()?))
    }
    /// An option tag: `Ok(true)` when a value follows.
    fn tag(&mut self, name: &'static str) -> Result<bool, CodecError> {
        self.bool(name)
    }
    fn opt_u64(&mut self, name: &'static str) -> Result<Option<u64>, CodecError> {
        Ok(if self.tag(name)? {
            Some(self.u64()?)
        } else {
            None
        })
    }
    /// A length-prefixed buffer of at most `max_bytes`.
    fn bytes(&mut self, name: &'static str, max_bytes: u64) -> Result<Vec<u8>, CodecError> {
        let len = self.u32()?;
        if len > SNAPSHOT_BUFFER_BYTES_MAX || u64::from(len) > max_bytes {
            return Err(CodecError::BufferTooLong(name));
        }
        Ok(self.take(len as usize)?.to_vec())
    }
}

fn cc_algorithm_code(a: CongestionControl) -> u8 {
    match a {
        CongestionControl::NewReno => 0,
        CongestionControl::Cubic => 1,
    }
}

fn ecn_mode_code(m: EcnMode) -> u8 {
    match m {
        EcnMode::Off => 0,
        EcnMode::On => 1,
        EcnMode::Accept => 2,
    }
}

fn ecn_mode(code: u8) -> Result<EcnMode, CodecError> {
    match code {
        0 => Ok(EcnMode::Off),
        1 => Ok(EcnMode::On),
        2 => Ok(EcnMode::Accept),
        _ => Err(CodecError::InvalidField("config.ecn")),
    }
}

/// The ECN bits a snapshot may carry (`snapshot::moved_ecn`): none without `OK`.
fn ecn_flags(bits: u8) -> Result<u8, CodecError> {
    let carried = ecn_flag::OK | ecn_flag::SEEN | ecn_flag::DEMAND_CWR | ecn_flag::QUEUE_CWR;
    if bits & !carried != 0 || (bits != 0 && bits & ecn_flag::OK == 0) {
        return Err(CodecError::InvalidField("ecn.flags"));
    }
    Ok(bits)
}

fn cc_algorithm(code: u8, name: &'static str) -> Result<CongestionControl, CodecError> {
    match code {
        0 => Ok(CongestionControl::NewReno),
        1 => Ok(CongestionControl::Cubic),
        _ => Err(CodecError::InvalidField(name)),
    }
}

const STATES: [State; 10] = [
    State::Closed,
    State::SynSent,
    State::SynReceived,
    State::Established,
    State::FinWait1,
    State::FinWait2,
    State::CloseWait,
    State::Closing,
    State::LastAck,
    State::TimeWait,
];

/// The variant's position in [`STATES`]; an exhaustive `match`, so a variant added to
/// `State` does not compile until it has a code (and a place in `STATES`).
fn state_code(s: State) -> u8 {
    match s {
        State::Closed => 0,
        State::SynSent => 1,
        State::SynReceived => 2,
        State::Established => 3,
        State::FinWait1 => 4,
        State::FinWait2 => 5,
        State::CloseWait => 6,
        State::Closing => 7,
        State::LastAck => 8,
        State::TimeWait => 9,
    }
}

const CLOSE_REASONS: [CloseReason; 4] = [
    CloseReason::Normal,
    CloseReason::Reset,
    CloseReason::TimedOut,
    CloseReason::Aborted,
];

/// 0 for `None`, else the reason's position in [`CLOSE_REASONS`] plus one.
fn close_reason_code(r: Option<CloseReason>) -> u8 {
    match r {
        None => 0,
        Some(CloseReason::Normal) => 1,
        Some(CloseReason::Reset) => 2,
        Some(CloseReason::TimedOut) => 3,
        Some(CloseReason::Aborted) => 4,
    }
}

fn encode_config(w: &mut Writer<'_>, c: &Config) {
    // Named without `..`: a field added to `Config` does not compile until it is encoded.
    let Config {
        mss_bytes,
        default_peer_mss_bytes,
        peer_mss_floor_bytes,
        initial_window_segments,
        rto_min_ns,
        rto_min_bounds_variance,
        rto_max_ns,
        rto_initial_ns,
        delayed_ack_ns,
        quickack_segments,
        nodelay,
        nagle_minshall,
        time_wait_ns,
        send_buffer_bytes,
        send_buffer_skb_accounting,
        send_buffer_autotune,
        tso_min_segments,
        recv_buffer_bytes,
        ooo_segments_max,
        ooo_bytes_max,
        window_scale,
        timestamps,
        sack,
        slow_start_increase_limit_segments,
        cwnd_growth_requires_limited,
        ack_counts_previously_sacked_bytes,
        restart_after_idle,
        zero_window_probe_carries_data,
        prr,
        rack,
        rack_rtt_from_last_in_sequence,
        cwnd_grows_on_sack_when_reordering,
        hystart,
        congestion_control,
        challenge_acks_per_s_max,
        ack_unsent_data_replies,
        accept_missing_timestamps,
        reset_on_data_after_close,
        syn_ack_checks_ts_echo,
        keepalive,
        user_timeout_ns,
        syn_retries_max,
        tail_loss_probe,
        tlp_pto_extra_ns,
        tlp_pto_floor_ns,
        plpmtud,
        ecn,
    } = *c;
    w.u16(mss_bytes);
    w.u16(default_peer_mss_bytes);
    w.u16(peer_mss_floor_bytes);
    w.u16(initial_window_segments);
    w.u64(rto_min_ns);
    w.bool(rto_min_bounds_variance);
    w.u64(rto_max_ns);
    w.u64(rto_initial_ns);
    w.u64(delayed_ack_ns);
    w.u16(quickack_segments);
    w.bool(nodelay);
    w.bool(nagle_minshall);
    w.u64(time_wait_ns);
    w.u32(send_buffer_bytes);
    w.bool(send_buffer_skb_accounting);
    w.bool(send_buffer_autotune);
    w.u8(tso_min_segments);
    w.u32(recv_buffer_bytes);
    w.u16(ooo_segments_max);
    w.u32(ooo_bytes_max);
    w.bool(window_scale);
    w.bool(timestamps);
    w.bool(sack);
    w.u16(slow_start_increase_limit_segments);
    w.bool(cwnd_growth_requires_limited);
    w.bool(ack_counts_previously_sacked_bytes);
    w.bool(restart_after_idle);
    w.bool(zero_window_probe_carries_data);
    w.bool(prr);
    w.bool(rack);
    w.bool(rack_rtt_from_last_in_sequence);
    w.bool(cwnd_grows_on_sack_when_reordering);
    w.bool(hystart);
    w.u8(cc_algorithm_code(congestion_control));
    w.u32(challenge_acks_per_s_max);
    w.bool(ack_unsent_data_replies);
    w.bool(accept_missing_timestamps);
    w.bool(reset_on_data_after_close);
    w.bool(syn_ack_checks_ts_echo);
    match keepalive {
        None => w.u8(0),
        Some(KeepaliveConfig {
            idle_ns,
            interval_ns,
            probes_max,
        }) => {
            w.u8(1);
            w.u64(idle_ns);
            w.u64(interval_ns);
            w.u8(probes_max);
        }
    }
    w.opt_u64(user_timeout_ns);
    w.u8(syn_retries_max);
    w.bool(tail_loss_probe);
    w.u32(tlp_pto_extra_ns);
    w.u32(tlp_pto_floor_ns);
    w.bool(plpmtud);
    w.u8(ecn_mode_code(ecn));
}

fn decode_config(r: &mut Reader<'_>) -> Result<Config, CodecError> {
    Ok(Config {
        mss_bytes: r.u16()?,
        default_peer_mss_bytes: r.u16()?,
        peer_mss_floor_bytes: r.u16()?,
        initial_window_segments: r.u16()?,
        rto_min_ns: r.u64()?,
        rto_min_bounds_variance: r.bool("config.rto_min_bounds_variance")?,
        rto_max_ns: r.u64()?,
        rto_initial_ns: r.u64()?,
        delayed_ack_ns: r.u64()?,
        quickack_segments: r.u16()?,
        nodelay: r.bool("config.nodelay")?,
        nagle_minshall: r.bool("config.nagle_minshall")?,
        time_wait_ns: r.u64()?,
        send_buffer_bytes: r.u32()?,
        send_buffer_skb_accounting: r.bool("config.send_buffer_skb_accounting")?,
        send_buffer_autotune: r.bool("config.send_buffer_autotune")?,
        tso_min_segments: r.u8()?,
        recv_buffer_bytes: r.u32()?,
        ooo_segments_max: r.u16()?,
        ooo_bytes_max: r.u32()?,
        window_scale: r.bool("config.window_scale")?,
        timestamps: r.bool("config.timestamps")?,
        sack: r.bool("config.sack")?,
        slow_start_increase_limit_segments: r.u16()?,
        cwnd_growth_requires_limited: r.bool("config.cwnd_growth_requires_limited")?,
        ack_counts_previously_sacked_bytes: r.bool("config.ack_counts_previously_sacked_bytes")?,
        restart_after_idle: r.bool("config.restart_after_idle")?,
        zero_window_probe_carries_data: r.bool("config.zero_window_probe_carries_data")?,
        prr: r.bool("config.prr")?,
        rack: r.bool("config.rack")?,
        rack_rtt_from_last_in_sequence: r.bool("config.rack_rtt_from_last_in_sequence")?,
        cwnd_grows_on_sack_when_reordering: r.bool("config.cwnd_grows_on_sack_when_reordering")?,
        hystart: r.bool("config.hystart")?,
        congestion_control: cc_algorithm(r.u8()?, "config.congestion_control")?,
        challenge_acks_per_s_max: r.u32()?,
        ack_unsent_data_replies: r.bool("config.ack_unsent_data_replies")?,
        accept_missing_timestamps: r.bool("config.accept_missing_timestamps")?,
        reset_on_data_after_close: r.bool("config.reset_on_data_after_close")?,
        syn_ack_checks_ts_echo: r.bool("config.syn_ack_checks_ts_echo")?,
        keepalive: if r.tag("config.keepalive")? {
            Some(KeepaliveConfig {
                idle_ns: r.u64()?,
                interval_ns: r.u64()?,
                probes_max: r.u8()?,
            })
        } else {
            None
        },
        user_timeout_ns: r.opt_u64("config.user_timeout_ns")?,
        syn_retries_max: r.u8()?,
        tail_loss_probe: r.bool("config.tail_loss_probe")?,
        tlp_pto_extra_ns: r.u32()?,
        tlp_pto_floor_ns: r.u32()?,
        plpmtud: r.bool("config.plpmtud")?,
        ecn: ecn_mode(r.u8()?)?,
    })
}

impl ConnectionSnapshot {
    /// Appends the snapshot's encoding (module documentation: format version 5) to `out`.
    ///
    /// Every snapshot encodes; one whose buffers exceed [`SNAPSHOT_BUFFER_BYTES_MAX`] (which
    /// no export produces) encodes but does not decode.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        out.extend_from_slice(&SNAPSHOT_MAGIC);
        out.extend_from_slice(&SNAPSHOT_VERSION.to_le_bytes());
        out.extend_from_slice(&0u16.to_le_bytes());
        out.extend_from_slice(&0u32.to_le_bytes());
        let mut w = Writer(out);
        // The guard: every field named, so a field added to the snapshot or one of its
        // groups does not compile until it is encoded.
        let ConnectionSnapshot {
            exported_at_ns,
            config,
            state,
            local_port,
            remote_port,
            snd,
            rcv,
            opts,
            ts,
            rec,
            cc,
            rtt,
            rack_path,
            timers,
            app,
            ecn,
            send_unacked,
            send_unsent,
            recv_unread,
            counters,
            record_ends,
            socket_ext,
        } = self;
        w.u64(*exported_at_ns);
        encode_config(&mut w, config);
        w.u8(state_code(*state));
        w.u16(*local_port);
        w.u16(*remote_port);
        let SendSeq {
            una,
            nxt,
            max,
            wnd,
            wl1,
            wl2,
            max_wnd,
            buf_seq,
            iss,
        } = *snd;
        for s in [una, nxt, max] {
            w.seq(s);
        }
        w.u32(wnd);
        w.seq(wl1);
        w.seq(wl2);
        w.u32(max_wnd);
        w.seq(buf_seq);
        w.seq(iss);
        let RecvSeq {
            nxt,
            adv,
            irs,
            mss_seen,
        } = *rcv;
        w.seq(nxt);
        w.seq(adv);
        w.seq(irs);
        w.u16(mss_seen);
        let Options {
            snd_mss,
            snd_wscale,
            rcv_wscale,
            ts_ok,
            sack_ok,
            peer_offered_ws,
        } = *opts;
        w.u16(snd_mss);
        w.u8(snd_wscale);
        w.u8(rcv_wscale);
        w.bool(ts_ok);
        w.bool(sack_ok);
        match peer_offered_ws {
            None => w.u8(0),
            Some(s) => {
                w.u8(1);
                w.u8(s);
            }
        }
        let Timestamps {
            offset,
            recent,
            recent_age_ns,
            last_ack_sent,
            rtx_floor,
        } = *ts;
        w.u32(offset);
        w.u32(recent);
        w.u64(recent_age_ns);
        w.seq(last_ack_sent);
        w.u32(rtx_floor);
        let Recovery {
            in_recovery,
            recover,
            dupacks,
            rtx_pending,
            high_rxt,
            prr_delivered_bytes,
            prr_out_bytes,
            prr_recover_fs_bytes,
            tlp_pending,
            tlp_sent,
            tlp_last_seq,
            flight_max_bytes,
            flight_max_seq,
            cwnd_limited,
        } = *rec;
        w.bool(in_recovery);
        w.seq(recover);
        w.u8(dupacks);
        w.bool(rtx_pending);
        w.seq(high_rxt);
        w.u32(prr_delivered_bytes);
        w.u32(prr_out_bytes);
        w.u32(prr_recover_fs_bytes);
        w.bool(tlp_pending);
        w.bool(tlp_sent);
        w.seq(tlp_last_seq);
        w.u32(flight_max_bytes);
        w.seq(flight_max_seq);
        w.bool(cwnd_limited);
        let CongestionParts {
            algorithm,
            cwnd_bytes,
            ssthresh_bytes,
            ca_acked_bytes,
            cubic_w_max_bytes,
            cubic_epoch_start_ns,
            cubic_k_ns,
            cubic_w_est_bytes,
        } = cc.parts();
        w.u8(cc_algorithm_code(algorithm));
        w.u32(cwnd_bytes);
        w.u32(ssthresh_bytes);
        w.u32(ca_acked_bytes);
        w.u32(cubic_w_max_bytes);
        w.opt_u64(cubic_epoch_start_ns);
        w.u64(cubic_k_ns);
        w.u32(cubic_w_est_bytes);
        let RttEstimator {
            srtt_us,
            rttvar_us,
            base_rto_us,
            backoff_shift,
            has_sample,
        } = *rtt;
        w.u32(srtt_us);
        w.u32(rttvar_us);
        w.u32(base_rto_us);
        w.u8(backoff_shift);
        w.bool(has_sample);
        let RackPathState {
            min_rtt_ns,
            min_rtt_age_ns,
            reordering_seen,
            reo_wnd_mult,
            reo_wnd_persist,
        } = *rack_path;
        w.opt_u64(min_rtt_ns);
        w.u64(min_rtt_age_ns);
        w.bool(reordering_seen);
        w.u8(reo_wnd_mult);
        w.u8(reo_wnd_persist);
        let Timers {
            rtx_deadline_ns,
            persist_deadline_ns,
            delack_deadline_ns,
            keepalive_deadline_ns,
            time_wait_deadline_ns,
            tlp_deadline_ns,
            unacked_since_ns,
            last_tx_ns,
            persist_shift,
            syn_retries,
            keepalive_probes,
            rtt_timed_end,
            rtt_timed_sent_ns,
        } = *timers;
        for t in [
            rtx_deadline_ns,
            persist_deadline_ns,
            delack_deadline_ns,
            keepalive_deadline_ns,
            time_wait_deadline_ns,
            tlp_deadline_ns,
            unacked_since_ns,
            last_tx_ns,
        ] {
            w.u64(t);
        }
        w.u8(persist_shift);
        w.u8(syn_retries);
        w.u8(keepalive_probes);
        w.seq(rtt_timed_end);
        w.u64(rtt_timed_sent_ns);
        let AppFlags {
            fin_queued,
            fin_received,
            app_closed,
            cork,
            more,
            push_pending,
            close_reason,
        } = *app;
        for b in [
            fin_queued,
            fin_received,
            app_closed,
            cork,
            more,
            push_pending,
        ] {
            w.bool(b);
        }
        w.u8(close_reason_code(close_reason));
        // `rx` is the segment in process: always Not-ECT at export.
        let EcnState {
            flags,
            rx: _,
            cwr_end,
        } = *ecn;
        w.u8(flags);
        w.seq(cwr_end);
        w.u16(Counters::LEN as u16);
        counters.for_each(|v| w.u64(v));
        w.bytes(send_unacked);
        w.bytes(send_unsent);
        w.bytes(recv_unread);
        // Bounded by `check` (RECORDS_OUTSTANDING_MAX < 2^16); a larger list encodes a count
        // the decoder refuses.
        w.u16(u16::try_from(record_ends.len()).unwrap_or(u16::MAX));
        for &end in record_ends {
            w.seq(end);
        }
        w.bytes(socket_ext);
        let body = out.len() - start - SNAPSHOT_HEADER_BYTES;
        // Three buffers under 2^30 each plus a fixed part: below 2^32 for any snapshot that
        // decodes; a larger one gets a length the decoder refuses.
        let body = u32::try_from(body).unwrap_or(u32::MAX);
        out[start + 8..start + 12].copy_from_slice(&body.to_le_bytes());
    }

    /// Decodes one snapshot from the start of `bytes`, returning it and the bytes it used
    /// (what follows is left to the caller). Never panics; see the module documentation for
    /// what it refuses.
    pub fn decode(bytes: &[u8]) -> Result<(ConnectionSnapshot, usize), CodecError> {
        let mut h = Reader { buf: bytes, pos: 0 };
        if h.array::<4>()? != SNAPSHOT_MAGIC {
            return Err(CodecError::BadMagic);
        }
        let version = h.u16()?;
        if version != SNAPSHOT_VERSION {
            return Err(CodecError::UnsupportedVersion(version));
        }
        if h.u16()? != 0 {
            return Err(CodecError::BadLength);
        }
        let body_len = h.u32()? as usize;
        let body = h.take(body_len)?;
        let mut r = Reader { buf: body, pos: 0 };
        let s = decode_body(&mut r)?;
        if r.pos != body.len() {
            return Err(CodecError::BadLength);
        }
        s.check().map_err(CodecError::Inconsistent)?;
        Ok((s, SNAPSHOT_HEADER_BYTES + body_len))
    }
}

fn decode_body(r: &mut Reader<'_>) -> Result<ConnectionSnapshot, CodecError> {
    let exported_at_ns = r.u64()?;
    let config = decode_config(r)?;
    let state = *STATES
        .get(usize::from(r.u8()?))
        .ok_or(CodecError::InvalidField("state"))?;
    let local_port = r.u16()?;
    let remote_port = r.u16()?;
    let snd = SendSeq {
        una: r.seq()?,
        nxt: r.seq()?,
        max: r.seq()?,
        wnd: r.u32()?,
        wl1: r.seq()?,
        wl2: r.seq()?,
        max_wnd: r.u32()?,
        buf_seq: r.seq()?,
        iss: r.seq()?,
    };
    let rcv = RecvSeq {
        nxt: r.seq()?,
        adv: r.seq()?,
        irs: r.seq()?,
        mss_seen: r.u16()?,
    };
    let opts = Options {
        snd_mss: r.u16()?,
        snd_wscale: r.u8()?,
        rcv_wscale: r.u8()?,
        ts_ok: r.bool("opts.ts_ok")?,
        sack_ok: r.bool("opts.sack_ok")?,
        peer_offered_ws: if r.tag("opts.peer_offered_ws")? {
            Some(r.u8()?)
        } else {
            None
        },
    };
    let ts = Timestamps {
        offset: r.u32()?,
        recent: r.u32()?,
        recent_age_ns: r.u64()?,
        last_ack_sent: r.seq()?,
        rtx_floor: r.u32()?,
    };
    let rec = Recovery {
        in_recovery: r.bool("rec.in_recovery")?,
        recover: r.seq()?,
        dupacks: r.u8()?,
        rtx_pending: r.bool("rec.rtx_pending")?,
        high_rxt: r.seq()?,
        prr_delivered_bytes: r.u32()?,
        prr_out_bytes: r.u32()?,
        prr_recover_fs_bytes: r.u32()?,
        tlp_pending: r.bool("rec.tlp_pending")?,
        tlp_sent: r.bool("rec.tlp_sent")?,
        tlp_last_seq: r.seq()?,
        flight_max_bytes: r.u32()?,
        flight_max_seq: r.seq()?,
        cwnd_limited: r.bool("rec.cwnd_limited")?,
    };
    let cc = CongestionParts {
        algorithm: cc_algorithm(r.u8()?, "cc.algorithm")?,
        cwnd_bytes: r.u32()?,
        ssthresh_bytes: r.u32()?,
        ca_acked_bytes: r.u32()?,
        cubic_w_max_bytes: r.u32()?,
        cubic_epoch_start_ns: r.opt_u64("cc.cubic_epoch_start_ns")?,
        cubic_k_ns: r.u64()?,
        cubic_w_est_bytes: r.u32()?,
    };
    // A zero window would stall the connection for good; no event produces one.
    if cc.cwnd_bytes == 0 {
        return Err(CodecError::InvalidField("cc.cwnd_bytes"));
    }
    if cc.ssthresh_bytes == 0 {
        return Err(CodecError::InvalidField("cc.ssthresh_bytes"));
    }
    let rtt = RttEstimator {
        srtt_us: r.u32()?,
        rttvar_us: r.u32()?,
        base_rto_us: r.u32()?,
        backoff_shift: r.u8()?,
        has_sample: r.bool("rtt.has_sample")?,
    };
    let rack_path = RackPathState {
        min_rtt_ns: r.opt_u64("rack_path.min_rtt_ns")?,
        min_rtt_age_ns: r.u64()?,
        reordering_seen: r.bool("rack_path.reordering_seen")?,
        reo_wnd_mult: r.u8()?,
        reo_wnd_persist: r.u8()?,
    };
    let timers = Timers {
        rtx_deadline_ns: r.u64()?,
        persist_deadline_ns: r.u64()?,
        delack_deadline_ns: r.u64()?,
        keepalive_deadline_ns: r.u64()?,
        time_wait_deadline_ns: r.u64()?,
        tlp_deadline_ns: r.u64()?,
        unacked_since_ns: r.u64()?,
        last_tx_ns: r.u64()?,
        persist_shift: r.u8()?,
        syn_retries: r.u8()?,
        keepalive_probes: r.u8()?,
        rtt_timed_end: r.seq()?,
        rtt_timed_sent_ns: r.u64()?,
    };
    let app = AppFlags {
        fin_queued: r.bool("app.fin_queued")?,
        fin_received: r.bool("app.fin_received")?,
        app_closed: r.bool("app.app_closed")?,
        cork: r.bool("app.cork")?,
        more: r.bool("app.more")?,
        push_pending: r.bool("app.push_pending")?,
        close_reason: match r.u8()? {
            0 => None,
            n => Some(
                *CLOSE_REASONS
                    .get(usize::from(n) - 1)
                    .ok_or(CodecError::InvalidField("app.close_reason"))?,
            ),
        },
    };
    let ecn = EcnState {
        flags: ecn_flags(r.u8()?)?,
        rx: wire::Ecn::NotEct,
        cwr_end: r.seq()?,
    };
    if usize::from(r.u16()?) != Counters::LEN {
        return Err(CodecError::InvalidField("counters"));
    }
    let mut counters = Counters::default();
    let mut failed = None;
    counters.for_each_mut(|c| match r.u64() {
        Ok(v) => *c = v,
        Err(e) => {
            failed.get_or_insert(e);
        }
    });
    if let Some(e) = failed {
        return Err(e);
    }
    // Buffers: bounded by the configuration as import applies it, before any copy.
    let valid = config.validated();
    let send_max = valid.send_ring_capacity_bytes() as u64;
    let send_unacked = r.bytes("send_unacked", send_max)?;
    let send_unsent = r.bytes("send_unsent", send_max - send_unacked.len() as u64)?;
    let recv_unread = r.bytes("recv_unread", u64::from(valid.recv_buffer_bytes))?;
    let records = usize::from(r.u16()?);
    if records > crate::RECORDS_OUTSTANDING_MAX {
        return Err(CodecError::InvalidField("record_ends"));
    }
    let mut record_ends = Vec::with_capacity(records);
    for _ in 0..records {
        record_ends.push(r.seq()?);
    }
    let socket_ext = r.bytes("socket_ext", crate::SOCKET_EXT_BYTES_MAX as u64)?;
    Ok(ConnectionSnapshot {
        exported_at_ns,
        config,
        state,
        local_port,
        remote_port,
        snd,
        rcv,
        opts,
        ts,
        rec,
        cc: Congestion::from_parts(cc),
        rtt,
        rack_path,
        timers,
        app,
        ecn,
        send_unacked,
        send_unsent,
        recv_unread,
        counters,
        record_ends,
        socket_ext,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_encode_in_declaration_order_and_count() {
        let mut c = Counters::default();
        let mut i = 0;
        c.for_each_mut(|v| {
            i += 1;
            *v = i;
        });
        assert_eq!(i as usize, Counters::LEN);
        let named = c.named();
        assert_eq!(named.len(), Counters::LEN);
        assert!(
            named
                .iter()
                .enumerate()
                .all(|(k, (_, v))| *v == k as u64 + 1)
        );
    }

    #[test]
    fn every_state_and_close_reason_has_a_code() {
        for (k, s) in STATES.iter().enumerate() {
            assert_eq!(usize::from(state_code(*s)), k);
        }
        assert_eq!(close_reason_code(None), 0);
        for (k, r) in CLOSE_REASONS.iter().enumerate() {
            assert_eq!(usize::from(close_reason_code(Some(*r))), k + 1);
        }
    }
}
