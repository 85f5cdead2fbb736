//! The two hooks between a connection and its compact TIME-WAIT record
//! ([`crate::time_wait`]): taking the record when the connection is done with everything
//! else, and rebuilding a TIME-WAIT connection from a record (to move it as a snapshot).

use super::*;
use crate::time_wait::{TW_TS_OK, TW_TS_STALE, TimeWait, ts_recent_stale};

impl Connection {
    /// In TIME-WAIT with nothing left to send (the ACK of the peer's FIN has left): the
    /// compact record of the connection and its 2·MSL deadline; the connection itself is
    /// CLOSED from here (normally, as when TIME-WAIT runs out) and may be dropped. `None` in
    /// any other situation (the connection is unchanged).
    pub fn take_time_wait(&mut self, now: u64) -> Option<(TimeWait, u64)> {
        if self.state != State::TimeWait
            || self.out.ack_due != AckDue::None
            || self.rst_pending().is_some()
        {
            return None;
        }
        let expiry_ns = self.timers.time_wait_deadline_ns;
        let window = self.advertise_window();
        let snd_ws = self.opts.snd_wscale.min(14);
        let max_wnd_scaled = self
            .snd
            .max_wnd
            .div_ceil(1u32 << snd_ws)
            .min(u32::from(u16::MAX)) as u16;
        let mut flags = 0;
        if self.opts.ts_ok {
            flags |= TW_TS_OK;
            if ts_recent_stale(now, self.ts.recent_age_ns) {
                flags |= TW_TS_STALE;
            }
        }
        let tw = TimeWait {
            snd_nxt: self.snd.max,
            rcv_nxt: self.rcv.nxt,
            ts_recent: self.ts.recent,
            ts_offset: self.ts.offset,
            window,
            max_wnd_scaled,
            flags,
            wscales: (self.opts.rcv_wscale.min(14) << 4) | snd_ws,
        };
        self.enter_closed(CloseReason::Normal);
        Some((tw, expiry_ns))
    }

    /// A connection in TIME-WAIT rebuilt from its record, as the application closed it:
    /// both FINs exchanged and acknowledged, nothing buffered, TIME-WAIT until `expiry_ns`.
    /// Made to be exported ([`Connection::export`]) when its 4-tuple moves to another owner.
    pub fn from_time_wait(
        now: u64,
        config: &Config,
        local_port: u16,
        remote_port: u16,
        tw: &TimeWait,
        expiry_ns: u64,
    ) -> Connection {
        // ISS two below SND.NXT: the send buffer starts at SND.NXT − 1, the FIN's sequence
        // number, and the FIN is acknowledged (`snd.buf_seq = snd.una − 1`).
        let mut c = Connection::new(
            now,
            config,
            local_port,
            remote_port,
            tw.snd_nxt - 2,
            tw.ts_offset,
        );
        let snd_ws = tw.wscales & 0x0f;
        let rcv_ws = tw.wscales >> 4;
        c.state = State::TimeWait;
        c.snd.una = tw.snd_nxt;
        c.snd.nxt = tw.snd_nxt;
        c.snd.max = tw.snd_nxt;
        c.snd.wl2 = tw.snd_nxt;
        c.snd.max_wnd = u32::from(tw.max_wnd_scaled) << snd_ws;
        c.rec.recover = tw.snd_nxt;
        c.rec.high_rxt = tw.snd_nxt;
        c.rec.tlp_last_seq = tw.snd_nxt;
        c.rec.flight_max_seq = tw.snd_nxt;
        c.rcv.nxt = tw.rcv_nxt;
        c.rcv.irs = tw.rcv_nxt - 2;
        c.rcv.adv = tw.rcv_nxt + tw.rcv_wnd_bytes();
        c.opts.snd_wscale = snd_ws;
        c.opts.rcv_wscale = rcv_ws;
        c.opts.ts_ok = tw.flags & TW_TS_OK != 0;
        c.opts.sack_ok = false;
        c.ts.recent = tw.ts_recent;
        c.ts.recent_age_ns = if tw.flags & TW_TS_STALE != 0 { 0 } else { now };
        c.ts.last_ack_sent = tw.rcv_nxt;
        c.app.fin_queued = true;
        c.app.fin_received = true;
        c.app.app_closed = true;
        c.set_deadline(Deadline::TimeWait, expiry_ns);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time_wait::TimeWait;
    use wire::tcp::SeqNumber;

    #[test]
    fn a_rebuilt_time_wait_connection_gives_back_its_record() {
        let tw = TimeWait {
            snd_nxt: SeqNumber(70_000),
            rcv_nxt: SeqNumber(123),
            ts_recent: 99,
            ts_offset: 7,
            window: 512,
            max_wnd_scaled: 300,
            flags: TW_TS_OK,
            wscales: 0x72,
        };
        let mut c = Connection::from_time_wait(5, &Config::default(), 1, 2, &tw, 60_000);
        assert_eq!(c.state(), State::TimeWait);
        assert_eq!(c.invariant_violation(), None);
        let (back, expiry) = c.take_time_wait(5).expect("record");
        // The window is what the connection would advertise next: its empty receive buffer,
        // never less than the record's.
        assert!(back.window >= tw.window, "{back:?}");
        assert_eq!(
            (
                TimeWait {
                    window: tw.window,
                    ..back
                },
                expiry
            ),
            (tw, 60_000)
        );
        assert_eq!(c.state(), State::Closed);
    }
}
