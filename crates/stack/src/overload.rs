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
//!   2. *unused* connections (in the handshake, or synchronized with no payload ever
//!      exchanged) from a source holding more than its share of the table (see below), idle
//!      past [`RECLAIM_OVER_SHARE_UNUSED_NS`] (`tcp_reclaimed_over_share`): the share is
//!      enforced only above the mark, so a flood from one address may take the table up to
//!      the mark; without this class the headroom above it (a tenth of the table) is all that
//!      is left for every other client, and a second source within its share could fill it
//!      and lock everyone else out until the flood's connections aged past
//!      `tcp_reclaim_unused_ns`;
//!   3. unused connections from any source, idle past `tcp_reclaim_unused_ns`;
//!   4. any other connection idle past `tcp_reclaim_idle_ns`.
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
//! - **Stalled connections under memory high** (`tcp_mem`): a passive open refused because
//!   the TCP buffer memory is at its high mark walks the table (at most once per
//!   [`RECLAIM_RESCAN_NS`]) and resets passive connections stalled at a zero send window with
//!   data queued and no acknowledgment for at least [`RECLAIM_STALLED_NS`], oldest stall
//!   first, until what they hold brings the sum back below the pressure mark
//!   (`tcp_reclaimed_stalled`). Peers that stopped reading are what fills the budget (each
//!   pins its whole send buffer); without this, they would keep every new client out until
//!   the HTTP send timeout (60 s) or the zero-window limit (`Limits::tcp_zero_window_max_ns`,
//!   whose tracking this reuses: off, nothing counts as stalled) ended them. The refused
//!   peer's retransmitted SYN finds room.
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

/// Under pressure, an unused connection (no payload either way, nothing queued) from a
/// source holding more than its share of the table is reclaimed once it has received
/// nothing for this long (`tcp_reclaimed_over_share`): long enough for a real client to send
/// its request after the handshake, short enough that a flood's excess goes within a second.
pub const RECLAIM_OVER_SHARE_UNUSED_NS: u64 = 1_000_000_000;

/// In the high memory state, a passive connection stalled at a zero send window (data
/// queued, nothing acknowledged) at least this long may be reset to bring the budget back
/// under pressure (`tcp_reclaimed_stalled`). A slow reader acknowledges something at least
/// every few hundred milliseconds, which restarts the clock.
pub const RECLAIM_STALLED_NS: u64 = 2_000_000_000;

const CLASS_TIME_WAIT: u8 = 0;
const CLASS_OVER_SHARE: u8 = 1;
const CLASS_UNUSED: u8 = 2;
const CLASS_IDLE: u8 = 3;

/// `pct` percent of `n`, at least 1 (`pct` above 100 counts as 100).
fn share_of(n: usize, pct: u8) -> usize {
    (n.saturating_mul(usize::from(pct.min(100))) / 100).max(1)
}

/// The reclaim class of connection `c` at `now` (lower goes first), or `None` when it is
/// not reclaimable: active opens, connections leaving the table, and connections with
/// something in flight or queued, or not idle long enough. `over_share`: its source holds
/// more than its share of the table.
fn reclaim_class(c: &ConnSock, now: u64, limits: &Limits, over_share: bool) -> Option<u8> {
    if !c.passive || !c.in_table {
        return None;
    }
    let idle_ns = now.saturating_sub(c.last_rx_ns);
    let unused = |idle_ns: u64| {
        if over_share && idle_ns >= RECLAIM_OVER_SHARE_UNUSED_NS {
            Some(CLASS_OVER_SHARE)
        } else {
            (idle_ns >= limits.tcp_reclaim_unused_ns).then_some(CLASS_UNUSED)
        }
    };
    match c.conn.state() {
        State::TimeWait => return Some(CLASS_TIME_WAIT),
        State::SynReceived => return unused(idle_ns),
        // No FIN of ours in flight in these states; the send queue says whether data is.
        State::Established | State::CloseWait | State::FinWait2 => {}
        _ => return None,
    }
    if c.conn.send_queue_bytes() != 0 {
        return None;
    }
    let counters = c.conn.counters();
    if counters.rx_payload_bytes == 0 && counters.tx_payload_bytes == 0 {
        unused(idle_ns)
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
            self.tcp_mem_reclaim_stalled(now);
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
        // Sources over their share (`None`: no per-source limit).
        let share = (limits.tcp_source_share_pct < 100)
            .then(|| share_of(limits.sockets_max, limits.tcp_source_share_pct));
        let tcp = &*self.tcp;
        victims.extend(self.sockets.iter_indexed().filter_map(|(i, s)| match s {
            Socket::Tcp(TcpState::Conn(c)) => {
                let over_share = share.is_some_and(|share| {
                    let held = tcp.source_connections(c.key().tuple().remote.ip());
                    usize::try_from(held).unwrap_or(usize::MAX) > share
                });
                reclaim_class(c, now, limits, over_share).map(|class| (class, c.last_rx_ns, i))
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
                CLASS_OVER_SHARE => &mut self.tcp.counters.tcp_reclaimed_over_share,
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
    /// In the high memory state: resets stalled passive connections, oldest stall first,
    /// until they held enough to bring the sum below the pressure mark (module
    /// documentation). At most one walk per [`RECLAIM_RESCAN_NS`].
    #[cold]
    fn tcp_mem_reclaim_stalled(&mut self, now: u64) {
        if now < self.tcp.mem_reclaim_next_scan_ns {
            return;
        }
        self.tcp.mem_reclaim_next_scan_ns = now.saturating_add(RECLAIM_RESCAN_NS);
        let excess = self
            .tcp
            .mem_bytes
            .saturating_sub(self.cfg.limits.tcp_mem_pressure_bytes);
        let mut victims = core::mem::take(&mut self.tcp.reclaim_scratch);
        victims.clear();
        victims.extend(self.sockets.iter_indexed().filter_map(|(i, s)| match s {
            Socket::Tcp(TcpState::Conn(c)) if c.passive && c.in_table => {
                match c.rare().and_then(|r| r.zero_window) {
                    Some((since_ns, _)) if now.saturating_sub(since_ns) >= RECLAIM_STALLED_NS => {
                        Some((0, since_ns, i))
                    }
                    _ => None,
                }
            }
            _ => None,
        }));
        victims.sort_unstable_by_key(|&(_, since_ns, i)| (since_ns, i));
        let mut freed = 0usize;
        for &(_, _, i) in &victims {
            if freed > excess {
                break;
            }
            let Some(c) = self.conn_mut(i) else {
                continue;
            };
            freed += c.mem_bytes;
            c.conn.abort();
            self.tcp.counters.tcp_reclaimed_stalled += 1;
            self.tcp_after_input(i);
            // Sends the RST and frees the slot (and its rings) unless the application holds
            // the handle; then when it closes it.
            self.tcp_flush_one(now, i);
        }
        victims.clear();
        self.tcp.reclaim_scratch = victims;
    }

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
            if let Some(r) = c.rare_if_any_mut() {
                r.zero_window = None;
            }
            c.rare_tidy();
            return;
        }
        let una = c.conn.sequence_state().0;
        match c.rare().and_then(|r| r.zero_window) {
            Some((since_ns, at)) if at == una => {
                if now.saturating_sub(since_ns) >= limit_ns {
                    c.conn.abort();
                    self.tcp.counters.tcp_zero_window_aborts += 1;
                }
            }
            _ => c.rare_mut().zero_window = Some((now, una)),
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
