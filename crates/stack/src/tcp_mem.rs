//! The stack-wide budget for TCP buffer memory, with pressure states like Linux's `tcp_mem`
//! (`Limits::tcp_mem_*_bytes`).
//!
//! What is counted is the storage the connections' send and receive rings have allocated
//! (rings allocate on the first write and grow by doubling up to their capacity, so an idle
//! connection costs nothing). Each connection records what it held when last looked at
//! (`ConnSock::mem_bytes`), after every input, application call and output that may have
//! written to its rings; the table keeps the sum (`TcpTable::mem_bytes`). Invariant:
//! `TcpTable::mem_bytes` = Σ `ConnSock::mem_bytes` over the connections in the socket table.
//! A connection's share leaves the sum when its slot is freed or exported, and its storage
//! goes back to the allocator with it.
//!
//! The states, re-judged whenever the sum changes (each entry counted):
//! - **normal** (`tcp_mem_normal_entered`): below `tcp_mem_pressure_bytes`, or back below
//!   `tcp_mem_low_bytes` after pressure (the hysteresis of Linux's `tcp_memory_pressure`);
//! - **pressure** (`tcp_mem_pressure_entered`): at or above `tcp_mem_pressure_bytes`. New
//!   connections get buffers of at most `tcp_mem_pressure_buffer_bytes` each way; on entry,
//!   the send buffer of every connection shrinks to what it holds (unacknowledged and unsent
//!   data, at least one MSS: `tcp_mem_send_buffers_shrunk`), so it grows no further, and
//!   what its ring allocated beyond that is freed. Back in normal, shrunk send buffers get
//!   their size back.
//! - **high** (`tcp_mem_high_entered`): at or above `tcp_mem_high_bytes`. Everything of
//!   pressure, and passive opens are refused (SYN or cookie ACK dropped,
//!   `tcp_mem_refused_conn`; the peer retries), active opens fail with
//!   [`SocketError::NoBufferSpace`], and a write that would allocate returns would-block
//!   (`tcp_mem_refused_write`): a connection may still fill storage it already has, and hold
//!   up to [`MEM_SEND_MIN_BYTES`] queued however high the sum (Linux's `tcp_wmem[0]`
//!   guarantee), so no connection is starved of the means to finish.

use tcp::Connection;

use crate::config::Limits;
use crate::socket::SocketError;
use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{ConnSock, TcpState};

/// Bytes a connection may always hold queued to send, whatever the memory state.
pub const MEM_SEND_MIN_BYTES: usize = 4096;

/// The memory state of the stack's TCP buffers (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub enum MemState {
    #[default]
    Normal,
    Pressure,
    High,
}

/// The state the sum `bytes` puts the stack in, coming from `from`.
pub fn mem_state_for(from: MemState, bytes: usize, limits: &Limits) -> MemState {
    if bytes >= limits.tcp_mem_high_bytes {
        MemState::High
    } else if bytes >= limits.tcp_mem_pressure_bytes {
        MemState::Pressure
    } else if from == MemState::Normal || bytes < limits.tcp_mem_low_bytes {
        MemState::Normal
    } else {
        // Between low and pressure, coming from above: still under pressure.
        MemState::Pressure
    }
}

impl TcpCx<'_> {
    /// Re-reads what connection `i`'s rings hold and moves the sum and the state with it.
    #[inline]
    pub(crate) fn tcp_mem_account(&mut self, i: usize) {
        let Some(Socket::Tcp(TcpState::Conn(c))) = self.sockets.get_mut(i) else {
            return;
        };
        let now_bytes = c.conn.buffer_allocated_bytes();
        if now_bytes == c.mem_bytes {
            return;
        }
        let old = core::mem::replace(&mut c.mem_bytes, now_bytes);
        self.tcp.mem_bytes = self.tcp.mem_bytes - old + now_bytes;
        self.tcp_mem_judge();
    }

    /// Sets the state for the current sum; on a change, counts it and applies it.
    pub(crate) fn tcp_mem_judge(&mut self) {
        let from = self.tcp.mem_state;
        let to = mem_state_for(from, self.tcp.mem_bytes, &self.cfg.limits);
        if to == from {
            return;
        }
        self.tcp.mem_state = to;
        let c = &mut self.tcp.counters;
        match to {
            MemState::Normal => c.tcp_mem_normal_entered += 1,
            MemState::Pressure => c.tcp_mem_pressure_entered += 1,
            MemState::High => c.tcp_mem_high_entered += 1,
        }
        if from == MemState::Normal {
            self.tcp_mem_shrink_all();
        } else if to == MemState::Normal {
            self.tcp_mem_restore_all();
        }
    }

    /// Entering pressure: every connection's send buffer shrinks to what it holds (at least
    /// one MSS), freeing storage allocated beyond that.
    #[cold]
    fn tcp_mem_shrink_all(&mut self) {
        let mut shrunk = 0u64;
        for (_, s) in self.sockets.iter_indexed_mut() {
            let Socket::Tcp(TcpState::Conn(c)) = s else {
                continue;
            };
            let size = c.conn.config().send_buffer_bytes;
            let held = c.conn.send_queue_bytes();
            if held >= size as usize {
                continue;
            }
            c.rare_mut().send_buffer_before_pressure.get_or_insert(size);
            c.conn
                .set_send_buffer(u32::try_from(held).unwrap_or(u32::MAX));
            shrunk += 1;
            let now_bytes = c.conn.buffer_allocated_bytes();
            self.tcp.mem_bytes = self.tcp.mem_bytes - c.mem_bytes + now_bytes;
            c.mem_bytes = now_bytes;
        }
        self.tcp.counters.tcp_mem_send_buffers_shrunk += shrunk;
        // Freeing may already bring the sum below `low`: judged again at the next change.
    }

    /// Back to normal: shrunk send buffers get their size back (storage grows again only as
    /// they are written), and with it a configuration equal to the one they shared before
    /// the shrink gave each a copy: shared again (`tcp_config_share`).
    #[cold]
    fn tcp_mem_restore_all(&mut self) {
        for (_, s) in self.sockets.iter_indexed_mut() {
            if let Socket::Tcp(TcpState::Conn(c)) = s
                && let Some(size) = c
                    .rare_if_any_mut()
                    .and_then(|r| r.send_buffer_before_pressure.take())
            {
                c.rare_tidy();
                c.conn.set_send_buffer(size);
                let shared = self.tcp.configs.get(*c.conn.config());
                c.conn.share_config(&shared);
            }
        }
    }

    /// Before a passive open: false (counted `tcp_mem_refused_conn`) in the high state.
    pub(crate) fn tcp_mem_admit(&mut self) -> bool {
        if self.tcp.mem_state == MemState::High {
            self.tcp.counters.tcp_mem_refused_conn += 1;
            return false;
        }
        true
    }

    /// Before an active open: `NoBufferSpace` (counted `tcp_mem_refused_conn`) in the high
    /// state.
    pub(crate) fn tcp_mem_admit_connect(&mut self) -> Result<(), SocketError> {
        if self.tcp_mem_admit() {
            Ok(())
        } else {
            Err(SocketError::NoBufferSpace)
        }
    }

    /// How many of `want` bytes connection `c` may queue now: all of them below the high
    /// state; in it, what fits the storage it has, or up to [`MEM_SEND_MIN_BYTES`] queued.
    /// Zero for a non-empty `want` is counted `tcp_mem_refused_write`.
    pub(crate) fn tcp_mem_send_allowance(&mut self, i: usize, want: usize) -> usize {
        if self.tcp.mem_state != MemState::High {
            return want;
        }
        let Some(Socket::Tcp(TcpState::Conn(c))) = self.sockets.get(i) else {
            return want;
        };
        let allowed = send_allowance(&c.conn).min(want);
        if allowed == 0 && want > 0 {
            self.tcp.counters.tcp_mem_refused_write += 1;
        }
        allowed
    }
}

/// In the high state: what fits the send ring's storage, or what keeps it under
/// [`MEM_SEND_MIN_BYTES`] queued, whichever is more.
fn send_allowance(conn: &Connection) -> usize {
    let guaranteed = MEM_SEND_MIN_BYTES.saturating_sub(conn.send_queue_bytes());
    conn.send_allocated_free_bytes().max(guaranteed)
}

/// A connection's share leaving the sum (its slot is freed or exported).
pub(crate) fn mem_forget(tcp: &mut crate::tcp_sockets::TcpTable, c: &ConnSock) {
    tcp.mem_bytes -= c.mem_bytes;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            tcp_mem_low_bytes: 100,
            tcp_mem_pressure_bytes: 200,
            tcp_mem_high_bytes: 300,
            ..Limits::default()
        }
    }

    #[test]
    fn states_follow_the_thresholds_with_hysteresis_between_low_and_pressure() {
        let l = limits();
        use MemState::*;
        assert_eq!(mem_state_for(Normal, 150, &l), Normal);
        assert_eq!(mem_state_for(Normal, 200, &l), Pressure);
        assert_eq!(mem_state_for(Normal, 300, &l), High);
        assert_eq!(mem_state_for(High, 250, &l), Pressure);
        assert_eq!(mem_state_for(High, 150, &l), Pressure);
        assert_eq!(mem_state_for(Pressure, 150, &l), Pressure);
        assert_eq!(mem_state_for(Pressure, 99, &l), Normal);
    }
}
