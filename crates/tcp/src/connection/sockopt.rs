//! Socket options that change a live connection's configuration: the user timeout
//! (RFC 5482, Linux `TCP_USER_TIMEOUT`), keepalive (RFC 9293 §3.8.4; Linux
//! `SO_KEEPALIVE`, `TCP_KEEPIDLE`, `TCP_KEEPINTVL`, `TCP_KEEPCNT`) and the SYN retries
//! (Linux `TCP_SYNCNT`).

use super::*;
use crate::config::KeepaliveConfig;

impl Connection {
    /// Sets (`Some`) or clears the user timeout: how long sent data may stay unacknowledged
    /// before the connection is abandoned. Takes effect at once: the deadline is derived
    /// from the time the oldest unacknowledged data was sent ([`Connection::poll_timeout`]).
    pub fn set_user_timeout(&mut self, user_timeout_ns: Option<u64>) {
        if self.config.user_timeout_ns != user_timeout_ns {
            self.config_mut().user_timeout_ns = user_timeout_ns;
        }
    }

    /// How many times the SYN (or SYN-ACK) is sent again before the open times out (Linux
    /// `TCP_SYNCNT`); counts the retransmissions already made. Takes effect at the next
    /// retransmission timeout.
    pub fn set_syn_retries(&mut self, syn_retries_max: u8) {
        if self.config.syn_retries_max != syn_retries_max {
            self.config_mut().syn_retries_max = syn_retries_max;
        }
    }

    /// Turns keepalive on with `keepalive`'s timing, or off (`None`). On a connection that
    /// can probe (synchronized and not in TIME-WAIT) the idle time restarts at `now`, and
    /// unanswered probes are forgotten.
    pub fn set_keepalive(&mut self, now: u64, keepalive: Option<KeepaliveConfig>) {
        if self.config.keepalive != keepalive {
            self.config_mut().keepalive = keepalive;
        }
        self.timers.keepalive_probes = 0;
        self.out.held &= !held::PROBED;
        self.set_deadline(Deadline::Keepalive, NEVER);
        if self.state.keepalive_may_probe() {
            self.start_keepalive(now);
        }
    }
}
