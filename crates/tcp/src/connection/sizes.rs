//! Settings that change a live connection's segment size or buffers: the MSS cap of an
//! active open (`TCP_MAXSEG`), path MTU discovery's reduction, the send buffer's size.

use super::*;

impl Connection {
    /// Caps the MSS we announce in our SYN and the payload we send (Linux `TCP_MAXSEG`,
    /// `tp->rx_opt.user_mss`), for an active open before its SYN left; a passive open takes
    /// the cap from its [`Config::mss_bytes`]. Values below [`crate::config::MSS_MIN_BYTES`]
    /// are raised to it (Linux rejects them with `EINVAL`; the floor keeps the invariant).
    /// `InvalidState` once the SYN was sent.
    pub fn set_mss_cap(&mut self, mss_bytes: u16) -> Result<(), Error> {
        if self.state != State::SynSent || self.snd.nxt != self.snd.iss {
            return Err(Error::InvalidState);
        }
        let c = Config {
            mss_bytes: mss_bytes.min(self.config.mss_bytes),
            ..*self.config
        }
        .validated();
        self.replace_config(c);
        self.opts.snd_mss = self.opts.snd_mss.min(self.config.mss_bytes);
        Ok(())
    }
    /// Path MTU discovery (RFC 1191 §6.3, RFC 8201 §5.2): an ICMP "fragmentation needed" /
    /// "packet too big" for a segment in flight says the path carries at most `mss_bytes` of
    /// TCP payload plus options per segment (the next-hop MTU less the IP and TCP headers;
    /// the caller validated the quote, RFC 5927, and applied the floor). Lowers the send MSS,
    /// never raises it, and retransmits the first unacknowledged segment at the new size at
    /// once; not a congestion signal (cwnd is untouched). Returns whether the MSS went down.
    ///
    /// In SYN-SENT the SYN is all that is in flight: when it carried data (an active Fast
    /// Open, RFC 7413) the SYN goes again at once without its data, which follows the
    /// handshake at the new size (Linux `tcp_simple_retransmit` for SYN data); a bare SYN is
    /// not resent. The MSS the SYN announces is unchanged (see
    /// [`Connection::cap_announced_mss`]), so the peer's SYN-ACK sets the send MSS anew.
    pub fn reduce_path_mss(&mut self, mss_bytes: u16) -> bool {
        let mss = mss_bytes.max(crate::config::MSS_MIN_BYTES);
        if self.state == State::SynSent {
            if mss >= self.opts.snd_mss {
                return false;
            }
            self.opts.snd_mss = mss;
            if self.snd.nxt != self.snd.iss && self.snd.max != self.snd.iss + 1 {
                // The SYN carried data: send the SYN again now (no backoff, no data: a SYN
                // after the first carries none, `syn_segment_with_data`).
                self.snd.nxt = self.snd.iss;
            }
            return true;
        }
        if !self.state.is_synchronized() || mss >= self.opts.snd_mss {
            return false;
        }
        self.opts.snd_mss = mss;
        if self.snd.una != self.snd.max {
            // Everything in flight was sent too large: go back and send it again at the new
            // size, as after a timeout but without its congestion response or backoff
            // (Linux `tcp_simple_retransmit`). The scoreboard goes with it, as RACK's view.
            self.snd.nxt = self.snd.una;
            self.rec.recover = self.snd.max;
            self.rec.rtx_pending = false;
            self.scoreboard.clear();
            if let Some(r) = self.rack.as_mut() {
                r.on_rto();
            }
        }
        true
    }

    /// In SYN-SENT, caps the MSS the SYNs sent from now on announce, and so the send MSS the
    /// SYN-ACK leaves (`Config::mss_bytes`), at `mss_bytes` (floored at
    /// [`crate::config::MSS_MIN_BYTES`]): Linux announces the route's MSS, which follows a
    /// path MTU learnt before the handshake completed (`tcp_advertise_mss`). RFC 1191 §3.1
    /// asks for an MSS from the interface's MTU instead. False in any other state.
    pub fn cap_announced_mss(&mut self, mss_bytes: u16) -> bool {
        if self.state != State::SynSent {
            return false;
        }
        let c = Config {
            mss_bytes: mss_bytes.min(self.config.mss_bytes),
            ..*self.config
        }
        .validated();
        self.replace_config(c);
        true
    }

    /// Resizes the send buffer (Linux `SO_SNDBUF` on a live socket): unacknowledged plus
    /// unsent bytes. Never below one MSS ([`Config::validated`]) nor below what it holds.
    pub fn set_send_buffer(&mut self, send_buffer_bytes: u32) {
        let c = Config {
            send_buffer_bytes,
            ..*self.config
        }
        .validated();
        self.replace_config(c);
        self.send_buf
            .set_capacity(self.config.send_ring_capacity_bytes());
        self.note_send_storage();
    }

    /// The application sets the send buffer (Linux `SO_SNDBUF`): as
    /// [`Connection::set_send_buffer`], and autotuning stops for good
    /// ([`Config::send_buffer_autotune`]; Linux `SOCK_SNDBUF_LOCK`).
    pub fn set_send_buffer_by_application(&mut self, send_buffer_bytes: u32) {
        if self.config.send_buffer_autotune {
            self.config_mut().send_buffer_autotune = false;
        }
        self.set_send_buffer(send_buffer_bytes);
    }
}
