//! Ring storage back from idle connections (issue 17 item 2): a connection that has received
//! nothing for [`IDLE_RELEASE_NS`] and whose rings hold nothing (everything sent was
//! acknowledged, everything received was read, nothing out of order) gives their storage
//! back (`tcp::Connection::release_idle_buffers`: minimum-size buffers to the per-thread
//! pool, larger ones to the allocator); its next write allocates again. An idle
//! established connection then costs its TCB and table entries only, however much it carried.
//!
//! A sweep, not a timer per connection: when the TCP part's timers run
//! (`tcp_handle_timeout`), at most once per [`SWEEP_PERIOD_NS`] of the clock, the next
//! [`SWEEP_SLOTS_MAX`] socket slots are looked at, round-robin from a cursor, so a table of
//! 100,000 slots is walked about once a second, and the sweep never adds a deadline of its
//! own (`poll_timeout` is unchanged). Releasing whenever a ring empties was measured and
//! rejected: +7.7 % instructions per frame in the scaling benchmark's request/response,
//! whose every exchange empties four rings (see `tcp::ring`).

use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::TcpState;

/// A connection idle (nothing received) this long with empty rings gives their storage
/// back.
pub const IDLE_RELEASE_NS: u64 = 1_000_000_000;

/// At most one sweep per this much of the clock.
pub const SWEEP_PERIOD_NS: u64 = 10_000_000;

/// Socket slots one sweep looks at.
pub const SWEEP_SLOTS_MAX: usize = 1024;

impl TcpCx<'_> {
    /// One step of the idle sweep at `now` (see the module documentation).
    pub(crate) fn tcp_idle_sweep(&mut self, now: u64) {
        if now < self.tcp.idle_sweep_next_ns {
            return;
        }
        self.tcp.idle_sweep_next_ns = now.saturating_add(SWEEP_PERIOD_NS);
        let n = self.sockets.slot_count();
        if n == 0 {
            return;
        }
        let mut i = self.tcp.idle_sweep_cursor;
        for _ in 0..SWEEP_SLOTS_MAX.min(n) {
            if i >= n {
                i = 0;
            }
            let released = match self.sockets.get_mut(i) {
                Some(Socket::Tcp(TcpState::Conn(c)))
                    if c.mem_bytes > 0 && now.saturating_sub(c.last_rx_ns) >= IDLE_RELEASE_NS =>
                {
                    c.conn.release_idle_buffers()
                }
                _ => 0,
            };
            if released > 0 {
                self.tcp.counters.tcp_idle_buffers_released += 1;
                self.tcp.counters.tcp_idle_buffer_bytes_released += released as u64;
                self.tcp_mem_account(i);
            }
            i += 1;
        }
        self.tcp.idle_sweep_cursor = i;
    }
}
