//! Self-description of a [`Connection`] for benchmarks and checkers: where each part of the TCB
//! sits in memory, and the first violated TCB invariant.

use super::*;

impl Connection {
    /// Where each part of the TCB sits, as `(name, offset, size)` in bytes, in offset order
    /// (for the TCB size benchmark). Parts are the groups of
    /// `tcb.rs` and the cold fields; padding between them is not listed.
    pub fn layout() -> Vec<(&'static str, usize, usize)> {
        use core::mem::{offset_of, size_of};
        macro_rules! parts {
            ($($name:ident: $ty:ty),* $(,)?) => {{
                // Exhaustive: a part added to `Connection` must be listed here too.
                #[allow(dead_code)]
                fn exhaustive(c: &Connection) {
                    let Connection { $($name: _),* } = c;
                }
                vec![$((stringify!($name), offset_of!(Connection, $name), size_of::<$ty>())),*]
            }};
        }
        let mut v = parts! {
            state: State,
            rack_deadline_ns: u64,
            earliest_deadline_ns: u64,
            snd: SendSeq,
            rcv: RecvSeq,
            opts: Options,
            ecn: EcnState,
            ts: Timestamps,
            rec: Recovery,
            cc: Congestion,
            rtt: RttEstimator,
            timers: Timers,
            app: AppFlags,
            out: Output,
            out_rare: super::OutputRare,
            local_port: u16,
            remote_port: u16,
            config: crate::config::SharedConfig,
            send_buf: Ring,
            recv_buf: Ring,
            ooo: OooQueue,
            scoreboard: OooQueue,
            rack: Option<Rack>,
            info: Option<super::chrono::InfoState>,
            hystart: Option<Box<crate::cc::Hystart>>,
            records: Option<Box<super::records::RecordEnds>>,
            skb: Option<Box<super::sndbuf::SkbQueue>>,
            snd_sml: SeqNumber,
            send_cut: bool,
            counters: super::HotCounters,
            counters_rare: Option<Box<Counters>>,
        };
        v.sort_by_key(|&(_, offset, _)| offset);
        v
    }

    /// The first violated TCB invariant, if any (for checkers in tests and simulations; cheap
    /// enough to call after every input).
    pub fn invariant_violation(&self) -> Option<&'static str> {
        if self.earliest_deadline_ns != self.deadlines_min_ns() {
            return Some("stored earliest deadline is not the deadlines' minimum");
        }
        if self.out.rare_owed
            != (self.out_rare.rst_pending.is_some() || self.out_rare.dsack.is_some())
        {
            return Some("out.rare_owed disagrees with the rare output owed");
        }
        if self.out.held != self.held_hints() {
            return Some("out.held disagrees with the state it summarizes");
        }
        if self.snd.nxt.lt(self.snd.una) {
            return Some("SND.NXT < SND.UNA");
        }
        if self.snd.max.lt(self.snd.nxt) {
            return Some("SND.MAX < SND.NXT");
        }
        if self.state.is_synchronized() {
            if self.rcv.adv.lt(self.rcv.nxt) {
                return Some("advertised right edge behind RCV.NXT");
            }
            let promised = u64::from(fwd(self.rcv.nxt, self.rcv.adv)) + self.recv_buf.len() as u64;
            if promised > u64::from(self.config.recv_buffer_bytes) {
                return Some("advertised window exceeds free receive buffer");
            }
            if self.snd.buf_seq.gt(self.snd.una) {
                return Some("send buffer starts after SND.UNA");
            }
        }
        if self.recv_buf.len() > self.config.recv_buffer_bytes as usize {
            return Some("receive buffer over capacity");
        }
        if self.ooo.bytes() > self.config.ooo_bytes_max
            || self.ooo.ranges().len() > usize::from(self.config.ooo_segments_max)
        {
            return Some("out-of-order queue over its caps");
        }
        if self.ooo.fin().is_some_and(|f| f.le(self.rcv.nxt)) {
            return Some("out-of-order FIN left behind RCV.NXT");
        }
        if self.scoreboard.ranges().len() > usize::from(SCOREBOARD_RANGES_MAX) {
            return Some("SACK scoreboard over its cap");
        }
        let rack = self.rack.as_ref();
        if let Some(v) = rack.and_then(Rack::invariant_violation) {
            return Some(v);
        }
        if self.rack_active() && self.state.is_synchronized() && self.state != State::Closed {
            let flight = (self.snd.una != self.snd.max).then_some((self.snd.una, self.snd.max));
            if rack.and_then(Rack::covered) != flight {
                return Some("RACK transmit records do not cover [SND.UNA, SND.MAX)");
            }
        }
        if self.cc.cwnd_bytes() == 0 {
            return Some("zero congestion window");
        }
        None
    }
}
