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
        self.config = Config {
            mss_bytes: mss_bytes.min(self.config.mss_bytes),
            ..self.config
        }
        .validated();
        self.opts.snd_mss = self.opts.snd_mss.min(self.config.mss_bytes);
        Ok(())
    }
    /// Path MTU discovery (RFC 1191 §6.3, RFC 8201 §5.2): an ICMP "fragmentation needed" /
    /// "packet too big" for a segment in flight says the path carries at most `mss_bytes` of
    /// TCP payload plus options per segment (the next-hop MTU less the IP and TCP headers;
    /// the caller validated the quote, RFC 5927, and applied the floor). Lowers the send MSS,
    /// never raises it, and retransmits the first unacknowledged segment at the new size at
    /// once; not a congestion signal (cwnd is untouched). Returns whether the MSS went down.
    pub fn reduce_path_mss(&mut self, mss_bytes: u16) -> bool {
        let mss = mss_bytes.max(crate::config::MSS_MIN_BYTES);
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

    /// Resizes the send buffer (Linux `SO_SNDBUF` on a live socket): unacknowledged plus
    /// unsent bytes. Never below one MSS ([`Config::validated`]) nor below what it holds.
    pub fn set_send_buffer(&mut self, send_buffer_bytes: u32) {
        self.config = Config {
            send_buffer_bytes,
            ..self.config
        }
        .validated();
        self.send_buf
            .set_capacity(self.config.send_ring_capacity_bytes());
    }

    /// The application sets the send buffer (Linux `SO_SNDBUF`): as
    /// [`Connection::set_send_buffer`], and autotuning stops for good
    /// ([`Config::send_buffer_autotune`]; Linux `SOCK_SNDBUF_LOCK`).
    pub fn set_send_buffer_by_application(&mut self, send_buffer_bytes: u32) {
        self.config.send_buffer_autotune = false;
        self.set_send_buffer(send_buffer_bytes);
    }
}
