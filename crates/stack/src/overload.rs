//! The connection overload policy: when the socket table is under pressure, the peers that
//! hold it idle lose their connections and the source that holds too much of it is refused,
//! so overload degrades service for the abuser rather than for everyone.
//!
//! Everything here runs on a *passive open* (a SYN on a listening port, or the ACK that
//! completes a SYN-cookie handshake) and only when the table holds at least
//! `sockets_max · tcp_reclaim_high_water_pct / 100` sockets — never per segment. Per segment,
//! a connection only stores the time it last received something (`ConnSock::last_rx_ns`).
//!
//! - **Reclaim** (`Limits::tcp_reclaim_*`): one walk over the table picks the reclaimable
//!   passive connections and resets the best of them, enough to bring the table a 32nd of
//!   its size below the high-water mark, so one walk pays for that many admissions. The order
//!   is by class, then oldest idle first (then slot, so it is deterministic):
//!   1. TIME-WAIT, at any age (released without a RST, as Linux's `tcp_max_tw_buckets`);
//!   2. connections in the handshake, or synchronized with no payload ever exchanged, idle
//!      past `tcp_reclaim_unused_ns`;
//!   3. any other connection idle past `tcp_reclaim_idle_ns`.
//!
//!   Idle means nothing received for that long and nothing in flight or queued to send:
//!   connections with data outstanding are left to their own timers (retransmission, user
//!   timeout, persist). A connection the application holds is aborted (RST) and reported
//!   `CLOSED`; its slot comes back when the application closes it. A walk that finds fewer
//!   victims than it wanted is not repeated for [`RECLAIM_RESCAN_NS`].
//! - **Per-source share** (`Limits::tcp_source_share_pct`): under pressure, after reclaiming,
//!   a source already holding its share of the table is refused (`tcp_source_limit`), while
//!   other sources are admitted. Below the mark no source is limited: a load generator or a
//!   NAT with many connections from one address is served normally until the table fills.
//!
//! Connections our applications open (active opens) are neither reclaimed nor counted: the
//! peers that can fill the table from outside are the ones the policy is for.

use core::net::IpAddr;

use tcp::State;

use crate::config::Limits;
use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{ConnSock, TcpState};

/// After a reclaim walk that found fewer victims than it wanted, no walk for this long (a
/// table full of connections that are not reclaimable yet is not walked for every SYN).
pub const RECLAIM_RESCAN_NS: u64 = 100_000_000;

const CLASS_TIME_WAIT: u8 = 0;
const CLASS_UNUSED: u8 = 1;
const CLASS_IDLE: u8 = 2;

/// `pct` percent of `n`, at least 1 (`pct` above 100 counts as 100).
fn share_of(n: usize, pct: u8) -> usize {
    (n.saturating_mul(usize::from(pct.min(100))) / 100).max(1)
}

/// The reclaim class of connection `c` at `now` (lower goes first), or `None` when it is
/// not reclaimable: active opens, connections leaving the table, and connections with
/// something in flight or queued, or not idle long enough.
fn reclaim_class(c: &ConnSock, now: u64, limits: &Limits) -> Option<u8> {
    if !c.passive || !c.in_table {
        return None;
    }
    let idle_ns = now.saturating_sub(c.last_rx_ns);
    match c.conn.state() {
        State::TimeWait => return Some(CLASS_TIME_WAIT),
        State::SynReceived => {
            return (idle_ns >= limits.tcp_reclaim_unused_ns).then_some(CLASS_UNUSED);
        }
        // No FIN of ours in flight in these states; the send queue says whether data is.
        State::Established | State::CloseWait | State::FinWait2 => {}
        _ => return None,
    }
    if c.conn.send_queue_bytes() != 0 {
        return None;
    }
    let counters = c.conn.counters();
    if counters.rx_payload_bytes == 0 && counters.tx_payload_bytes == 0 {
        (idle_ns >= limits.tcp_reclaim_unused_ns).then_some(CLASS_UNUSED)
    } else {
        (idle_ns >= limits.tcp_reclaim_idle_ns).then_some(CLASS_IDLE)
    }
}

impl TcpCx<'_> {
    /// Before a passive open from `source`: refused in the high memory state
    /// (`tcp_mem_refused_conn`, see `tcp_mem`); under table pressure, reclaim idle connections,
    /// then refuse `source` if it holds its share of the table. False: refused, counted
    /// `tcp_source_limit`; the caller drops the segment (the peer may retry later).
    pub(crate) fn tcp_overload_admit(&mut self, now: u64, source: IpAddr) -> bool {
        if !self.tcp_mem_admit() {
            return false;
        }
        let limits = &self.cfg.limits;
        let high = share_of(limits.sockets_max, limits.tcp_reclaim_high_water_pct);
        if self.sockets.len() < high {
            return true;
        }
        if limits.tcp_reclaim_high_water_pct < 100 {
            self.tcp_reclaim(now, high);
        }
        let limits = &self.cfg.limits;
        if limits.tcp_source_share_pct >= 100 {
            return true;
        }
        let share = share_of(limits.sockets_max, limits.tcp_source_share_pct);
        let held = self.tcp.source_connections(source);
        if usize::try_from(held).unwrap_or(usize::MAX) >= share {
            self.tcp.counters.tcp_source_limit += 1;
            return false;
        }
        true
    }

    /// One reclaim walk (see the module documentation): resets the best reclaimable
    /// connections, enough to bring the table to `high` less a 32nd of the table.
    #[cold]
    fn tcp_reclaim(&mut self, now: u64, high: usize) {
        if now < self.tcp.reclaim_next_scan_ns {
            return;
        }
        self.tcp.counters.tcp_reclaim_scans += 1;
        let low = high.saturating_sub((self.cfg.limits.sockets_max / 32).max(1));
        let want = self.sockets.len().saturating_sub(low).max(1);
        let mut victims = core::mem::take(&mut self.tcp.reclaim_scratch);
        victims.clear();
        let limits = &self.cfg.limits;
        victims.extend(self.sockets.iter_indexed().filter_map(|(i, s)| match s {
            Socket::Tcp(TcpState::Conn(c)) => {
                reclaim_class(c, now, limits).map(|class| (class, c.last_rx_ns, i))
            }
            _ => None,
        }));
        if victims.len() > want {
            victims.select_nth_unstable(want - 1);
            victims.truncate(want);
        } else {
            self.tcp.reclaim_next_scan_ns = now.saturating_add(RECLAIM_RESCAN_NS);
        }
        victims.sort_unstable();
        for &(class, _, i) in &victims {
            let Some(c) = self.conn_mut(i) else {
                continue;
            };
            c.conn.abort();
            let counter = match class {
                CLASS_TIME_WAIT => &mut self.tcp.counters.tcp_reclaimed_time_wait,
                CLASS_UNUSED => &mut self.tcp.counters.tcp_reclaimed_unused,
                _ => &mut self.tcp.counters.tcp_reclaimed_idle,
            };
            *counter += 1;
            self.tcp_after_input(i);
            // Sends the RST and frees the slot unless the application holds the handle.
            self.tcp_flush_one(now, i);
        }
        victims.clear();
        self.tcp.reclaim_scratch = victims;
    }
}

impl TcpCx<'_> {
    /// After connection `i`'s timers fired: tracks how long it has been stalled at a zero
    /// send window with data queued and no acknowledgment, and aborts it (RST, counted
    /// `tcp_zero_window_aborts`) past `Limits::tcp_zero_window_max_ns`. Timer path only.
    pub(crate) fn tcp_zero_window_check(&mut self, now: u64, i: usize) {
        let Some(limit_ns) = self.cfg.limits.tcp_zero_window_max_ns else {
            return;
        };
        let Some(c) = self.conn_mut(i) else {
            return;
        };
        let stalled = c.conn.state().is_synchronized()
            && c.conn.send_window_bytes() == 0
            && c.conn.send_queue_bytes() > 0;
        if !stalled {
            c.zero_window = None;
            return;
        }
        let una = c.conn.sequence_state().0;
        match c.zero_window {
            Some((since_ns, at)) if at == una => {
                if now.saturating_sub(since_ns) >= limit_ns {
                    c.conn.abort();
                    self.tcp.counters.tcp_zero_window_aborts += 1;
                }
            }
            _ => c.zero_window = Some((now, una)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::share_of;

    #[test]
    fn shares_are_at_least_one_and_capped_at_the_whole() {
        assert_eq!(share_of(1024, 25), 256);
        assert_eq!(share_of(1024, 90), 921);
        assert_eq!(share_of(3, 10), 1);
        assert_eq!(share_of(64, 200), 64);
    }
}
