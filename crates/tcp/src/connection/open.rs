//! Opening a connection: an active open (`connect`), a passive one from a SYN (`accept`) or
//! from a returning SYN cookie (`from_syn_cookie`), and what the peer's SYN negotiates.

use wire::tcp::{SeqNumber, TcpRepr};

use super::*;

impl Connection {
    /// Active open (RFC 9293 §3.10.1): the connection starts in SYN-SENT and its first
    /// `poll_transmit` yields the SYN. `iss` should come from [`crate::isn::IsnGenerator`];
    /// `ts_offset` is a per-connection random offset for the timestamp clock (RFC 7323 §7.1).
    pub fn connect(
        now: u64,
        config: impl IntoSharedConfig,
        local_port: u16,
        remote_port: u16,
        iss: SeqNumber,
        ts_offset: u32,
    ) -> Connection {
        let mut c = Connection::new(now, config, local_port, remote_port, iss, ts_offset);
        c.state = State::SynSent;
        c.ecn_on_connect();
        c.opts.ts_ok = c.config.timestamps;
        c.opts.sack_ok = c.config.sack;
        c.opts.rcv_wscale = if c.config.window_scale {
            wscale_for(c.config.recv_buffer_bytes)
        } else {
            0
        };
        c
    }

    /// Passive open from a received SYN (RFC 9293 §3.10.7.2): the connection starts in
    /// SYN-RECEIVED and its first `poll_transmit` yields the SYN-ACK. The stack owns LISTEN and
    /// calls this for a SYN on a listening port.
    pub fn accept(
        now: u64,
        config: impl IntoSharedConfig,
        syn: &TcpRepr<'_>,
        iss: SeqNumber,
        ts_offset: u32,
    ) -> Result<Connection, AcceptError> {
        if !syn.flags.contains(TcpFlags::SYN) || syn.flags.intersects(TcpFlags::ACK | TcpFlags::RST)
        {
            return Err(AcceptError::NotSyn);
        }
        let mut c = Connection::new(now, config, syn.dst_port, syn.src_port, iss, ts_offset);
        c.state = State::SynReceived;
        c.rcv.irs = syn.seq_number;
        c.rcv.nxt = syn.seq_number + 1;
        c.rcv.adv = c.rcv.nxt;
        c.ts.last_ack_sent = c.rcv.nxt;
        c.negotiate_from_syn(now, syn, true);
        c.ecn_on_syn_received(syn);
        // RFC 7323 §2.2: the window field of a SYN is never scaled.
        c.snd.wnd = u32::from(syn.window_len);
        c.snd.max_wnd = c.snd.wnd;
        c.snd.wl1 = syn.seq_number;
        c.snd.wl2 = iss;
        c.count_hot(1, |k| &mut k.rx_segments);
        Ok(c)
    }

    /// Passive open completed by a SYN cookie (RFC 4987 §3.6): `ack` is the segment that
    /// completed the handshake and `cookie` what [`crate::isn::SynCookies::validate`] recovered
    /// from it. The connection starts ESTABLISHED with the cookie's MSS and without window
    /// scaling, timestamps or SACK unless the cookie carried them in the timestamp echo (see
    /// [`crate::isn::SynCookies::syn_ack`]); `ack` itself, and any data it carries, is
    /// processed.
    pub fn from_syn_cookie(
        now: u64,
        config: impl IntoSharedConfig,
        ack: &TcpRepr<'_>,
        cookie: &crate::isn::ValidCookie,
        ts_offset: u32,
    ) -> Connection {
        let mut c = Connection::new(
            now,
            config,
            ack.dst_port,
            ack.src_port,
            cookie.iss,
            ts_offset,
        );
        c.state = State::Established;
        c.rcv.irs = cookie.irs;
        c.rcv.nxt = cookie.irs + 1;
        // The SYN-ACK (`SynCookies::syn_ack`) offered this unscaled window.
        c.rcv.adv = c.rcv.nxt + c.config.recv_buffer_bytes.min(0xffff);
        c.ts.last_ack_sent = c.rcv.nxt;
        c.snd.una = cookie.iss + 1;
        c.snd.nxt = c.snd.una;
        c.snd.max = c.snd.una;
        c.snd.buf_seq = c.snd.una;
        c.rec.recover = c.snd.una;
        c.rec.high_rxt = c.snd.una;
        c.opts.snd_mss = cookie
            .mss
            .max(c.config.peer_mss_floor_bytes)
            .min(c.config.mss_bytes);
        c.cc = Congestion::new(
            c.config.congestion_control,
            c.config.initial_window_segments,
            u32::from(c.eff_mss()),
        );
        if let (Some(opts), Some(ts)) = (cookie.options, ack.timestamp) {
            if c.config.timestamps {
                c.opts.ts_ok = true;
                c.ts.recent = ts.tsval;
                c.ts.recent_age_ns = now;
            }
            if let (Some(ws), true) = (opts.peer_wscale, c.config.window_scale) {
                c.opts.snd_wscale = ws.min(WSCALE_MAX);
                c.opts.rcv_wscale = wscale_for(c.config.recv_buffer_bytes);
            }
            c.opts.sack_ok = opts.sack && c.config.sack;
            c.cc = Congestion::new(
                c.config.congestion_control,
                c.config.initial_window_segments,
                u32::from(c.eff_mss()),
            );
        }
        // Not a SYN: the window field is scaled (RFC 7323 §2.2).
        c.snd.wnd = u32::from(ack.window_len) << c.opts.snd_wscale;
        c.snd.max_wnd = c.snd.wnd;
        c.snd.wl1 = ack.seq_number;
        c.snd.wl2 = ack.ack_number;
        c.push_event(Event::Connected);
        c.push_event(Event::Writable);
        c.start_keepalive(now);
        let info = c.info_mut(now);
        info.delivered_segments += 1;
        info.last_data_rx_ns = now;
        c.handle_segment(now, ack);
        c
    }

    /// Applies the options of the peer's SYN or SYN-ACK. `passive` says whether we are the
    /// responder (then we agree to whatever we also enable) or the initiator (then both sides
    /// must have offered it).
    pub(super) fn negotiate_from_syn(&mut self, now: u64, syn: &TcpRepr<'_>, passive: bool) {
        // RFC 9293 §3.7.1: absent MSS option means the default; RFC 6691 floor against tiny MSS.
        let peer_mss = syn
            .max_seg_size
            .unwrap_or(self.config.default_peer_mss_bytes);
        self.opts.snd_mss = peer_mss
            .max(self.config.peer_mss_floor_bytes)
            .min(self.config.mss_bytes);
        // RFC 7323 §2.2: scaling is on only if both SYNs carry the option.
        let offered_ws = if passive {
            self.config.window_scale
        } else {
            self.opts.rcv_wscale > 0 || self.config.window_scale
        };
        match (syn.window_scale, offered_ws) {
            (Some(ws), true) => {
                self.opts.snd_wscale = ws.min(WSCALE_MAX);
                if passive {
                    self.opts.rcv_wscale = wscale_for(self.config.recv_buffer_bytes);
                }
                self.opts.peer_offered_ws = Some(ws);
            }
            _ => {
                self.opts.snd_wscale = 0;
                self.opts.rcv_wscale = 0;
            }
        }
        // RFC 7323 §3.2: timestamps only if both SYNs carry them.
        match (syn.timestamp, self.config.timestamps) {
            (Some(ts), true) => {
                self.opts.ts_ok = true;
                self.ts.recent = ts.tsval;
                self.ts.recent_age_ns = now;
            }
            _ => self.opts.ts_ok = false,
        }
        // RFC 2018 §2: SACK only if both SYNs carry SACK-permitted.
        self.opts.sack_ok = syn.sack_permitted && self.config.sack;
        self.cc = Congestion::new(
            self.config.congestion_control,
            self.config.initial_window_segments,
            u32::from(self.eff_mss()),
        );
    }

    // ------------------------------------------------------------------ getters
}
