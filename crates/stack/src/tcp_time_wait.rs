//! TIME-WAIT records in the TCP part (issue 17 item 2): a connection the application closed
//! that reaches TIME-WAIT with nothing left to send leaves the connection table, frees its
//! TCB, rings and socket slot, and lives on as a compact record in `TcpTable::tw4`/`tw6`
//! ([`crate::time_wait`]) until 2·MSL pass:
//!
//! - input: a segment whose 4-tuple misses the connection table is looked up there before
//!   the listeners; the record answers it as the connection did ([`tcp::time_wait`]: the ACK
//!   of a retransmitted FIN, which restarts 2·MSL; PAWS; RST ignored, RFC 1337), and a SYN
//!   RFC 6191 allows goes to the listener of its port with an ISN past the old incarnation's;
//! - expiry: the records' queue gives the TCP part's earliest deadline with the wheel's
//!   (`TcpTable::tcp_poll_timeout`), and `tcp_handle_timeout` ends what is due;
//! - bound: `Limits::tcp_time_wait_max` records, the oldest evicted first;
//! - moves: a record in a moving bucket is rebuilt into a TIME-WAIT connection in a slot
//!   and exported like any connection the application closed (`tcp_move`).
//!
//! A connection whose handle the application still holds keeps its TCB in TIME-WAIT (its
//! handle reports it as before); closing the handle makes it a record.

use tcp::time_wait::{TimeWait, TwRules};
use tcp::{Connection, State};
use wire::TcpRepr;

use crate::ip_in::IpMeta;
use crate::socket::SocketError;
use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{
    FlowKey, FourTuple, MovedMarker, TcpState, TcpTable, rss_flow_hash, software_hash,
};

/// A TIME-WAIT record's family and position in its table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TwPos {
    V4(u32),
    V6(u32),
}

impl TcpTable {
    /// The record of `key`'s 4-tuple, if it is in TIME-WAIT here.
    #[inline]
    pub(crate) fn tw_find(&self, key: &FlowKey) -> Option<TwPos> {
        if key.tuple().local.is_ipv4() {
            self.tw4.find(key.table_hash, &key.tuple()).map(TwPos::V4)
        } else {
            self.tw6.find(key.table_hash, &key.tuple()).map(TwPos::V6)
        }
    }

    /// The earliest expiry of any record.
    pub(crate) fn tw_next_expiry_ns(&self) -> Option<u64> {
        let a = self
            .tw4
            .head()
            .and_then(|p| self.tw4.get(p))
            .map(|r| r.expiry_ns());
        let b = self
            .tw6
            .head()
            .and_then(|p| self.tw6.get(p))
            .map(|r| r.expiry_ns());
        match (a, b) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// The record that expires first, of either family.
    fn tw_oldest(&self) -> Option<TwPos> {
        let a = self
            .tw4
            .head()
            .map(|p| (self.tw4.get(p).map_or(0, |r| r.expiry_ns()), TwPos::V4(p)));
        let b = self
            .tw6
            .head()
            .map(|p| (self.tw6.get(p).map_or(0, |r| r.expiry_ns()), TwPos::V6(p)));
        match (a, b) {
            (Some(a), Some(b)) => Some(if b.0 < a.0 { b.1 } else { a.1 }),
            (a, b) => a.or(b).map(|x| x.1),
        }
    }

    /// The 4-tuple, record and expiry at `pos`.
    pub(crate) fn tw_get(&self, pos: TwPos) -> Option<(FourTuple, TimeWait, u64)> {
        match pos {
            TwPos::V4(p) => self.tw4.get(p).map(|r| (r.tuple(), r.tw, r.expiry_ns())),
            TwPos::V6(p) => self.tw6.get(p).map(|r| (r.tuple(), r.tw, r.expiry_ns())),
        }
    }

    /// Removes the record at `pos`; its 4-tuple, record and expiry.
    pub(crate) fn tw_remove(&mut self, pos: TwPos) -> (FourTuple, TimeWait, u64) {
        let (cfg, seed, by_flow) = (&*self.cfg, self.hash_seed, self.table_by_flow_hash);
        let h = |t: &FourTuple| table_hash_no_carry(cfg, seed, by_flow, t);
        match pos {
            TwPos::V4(p) => {
                let r = self.tw4.remove(p, &h);
                (r.tuple(), r.tw, r.expiry_ns())
            }
            TwPos::V6(p) => {
                let r = self.tw6.remove(p, &h);
                (r.tuple(), r.tw, r.expiry_ns())
            }
        }
    }

    /// Adds a record for `key` (not in the table), evicting the oldest records first while
    /// the table is at `limits.tcp_time_wait_max` (`tcp_time_wait_evicted`). False when it
    /// was not kept (a limit of 0).
    fn tw_insert(&mut self, key: &FlowKey, tw: TimeWait, expiry_ns: u64) -> bool {
        let max = self
            .cfg
            .limits
            .tcp_time_wait_max
            .min(crate::time_wait::MAX_RECORDS);
        while self.tw_len() >= max {
            let Some(oldest) = self.tw_oldest() else {
                break;
            };
            self.tw_remove(oldest);
            self.counters.tcp_time_wait_evicted += 1;
            self.counters.tcp_connections_closed += 1;
        }
        if max == 0 {
            self.counters.tcp_time_wait_evicted += 1;
            self.counters.tcp_connections_closed += 1;
            return false;
        }
        let (cfg, seed, by_flow) = (&*self.cfg, self.hash_seed, self.table_by_flow_hash);
        let h = |t: &FourTuple| table_hash_no_carry(cfg, seed, by_flow, t);
        let kept = if key.tuple().local.is_ipv4() {
            self.tw4
                .insert(key.table_hash, &key.tuple(), tw, expiry_ns, &h)
        } else {
            self.tw6
                .insert(key.table_hash, &key.tuple(), tw, expiry_ns, &h)
        };
        kept.is_some()
    }

    /// Heap bytes the TIME-WAIT records hold (both tables, spare capacity included).
    pub(crate) fn tw_heap_bytes(&self) -> usize {
        self.tw4.heap_bytes() + self.tw6.heap_bytes()
    }
}

/// [`TcpTable::flow_key`]'s table hash with no carried hash, from the parts it reads (so a
/// table borrowed mutably can still hash): the flow hash where the table is indexed by it,
/// else the keyed software hash.
fn table_hash_no_carry(
    cfg: &crate::config::StackConfig,
    seed: u32,
    by_flow_hash: bool,
    t: &FourTuple,
) -> u32 {
    if by_flow_hash && cfg.rss.is_some() {
        rss_flow_hash(cfg, seed, t)
    } else {
        software_hash(seed, t)
    }
}

impl TcpCx<'_> {
    /// After connection `i`'s output drained: when the application closed it and it is in
    /// TIME-WAIT, it becomes a record and its slot, TCB and rings are freed. True when it
    /// did (the slot is gone).
    pub(crate) fn tcp_time_wait_enter(&mut self, now: u64, i: usize) -> bool {
        let Some(c) = self.conn_mut(i) else {
            return false;
        };
        if c.conn.state() != State::TimeWait || !c.app_closed || c.parent.is_some() || !c.in_table {
            return false;
        }
        let Some((tw, expiry_ns)) = c.conn.take_time_wait(now) else {
            return false;
        };
        let key = c.key();
        c.in_table = false;
        self.tcp_rearm(i);
        self.tcp.conns.remove(key.table_hash, i);
        self.tcp.dirty.remove(i);
        if self.tcp.tw_insert(&key, tw, expiry_ns) {
            self.tcp.counters.tcp_time_wait_records += 1;
        }
        self.free_slot(i);
        true
    }

    /// A segment for a 4-tuple in TIME-WAIT (`pos`): the record's answer (an ACK, 2·MSL
    /// restarted), or, for a SYN RFC 6191 allows and a listener on its port, a new
    /// connection in its place.
    pub(crate) fn tcp_time_wait_segment(
        &mut self,
        now: u64,
        meta: IpMeta,
        key: FlowKey,
        pos: TwPos,
        seg: &TcpRepr<'_>,
    ) {
        let rules = TwRules {
            ack_unsent_data_replies: self.cfg.tcp.ack_unsent_data_replies,
        };
        let tcp = &mut *self.tcp;
        let rec = match pos {
            TwPos::V4(p) => tcp.tw4.get_mut(p).map(|r| &mut r.tw),
            TwPos::V6(p) => tcp.tw6.get_mut(p).map(|r| &mut r.tw),
        };
        let Some(rec) = rec else {
            return;
        };
        let input = rec.handle_segment(
            now,
            seg,
            rules,
            &mut tcp.tw_limiter,
            &mut tcp.counters_released,
        );
        let tw = *rec;
        if let Some(iss) = input.reopen {
            let listener = if meta.dst_unicast {
                self.tcp.find_listener(self.sockets, meta.dst, seg.dst_port)
            } else {
                None
            };
            if let Some(li) = listener {
                self.tcp.tw_remove(pos);
                self.tcp.counters.tcp_time_wait_reopened += 1;
                self.tcp.counters.tcp_connections_closed += 1;
                self.tcp_open_child_with(now, li, key, seg, Some(iss));
                return;
            }
        }
        if input.restart {
            let expiry = now.saturating_add(self.cfg.tcp.time_wait_ns);
            match pos {
                TwPos::V4(p) => self.tcp.tw4.restart(p, expiry),
                TwPos::V6(p) => self.tcp.tw6.restart(p, expiry),
            }
        }
        if input.ack {
            let ack = tw.ack_repr(
                now,
                key.tuple().local.port(),
                key.tuple().remote.port(),
                &mut self.tcp.counters_released,
            );
            self.egress
                .send_tcp(now, key.tuple().local.ip(), key.tuple().remote.ip(), &ack);
        }
    }

    /// Ends every record whose 2·MSL is over at `now`.
    pub(crate) fn tcp_time_wait_expire(&mut self, now: u64) {
        while let Some(pos) = self.tcp.tw_oldest() {
            let due = self
                .tcp
                .tw_get(pos)
                .is_some_and(|(_, _, expiry)| expiry <= now);
            if !due {
                break;
            }
            self.tcp.tw_remove(pos);
            self.tcp.counters.tcp_time_wait_expired += 1;
            self.tcp.counters.tcp_connections_closed += 1;
        }
    }

    /// Exports the record of `key` as a TIME-WAIT connection the application closed
    /// ([`tcp::Connection::from_time_wait`], then [`tcp::Connection::export`]): a bucket
    /// that moves takes its TIME-WAIT along, as it did when they were connections. A moved
    /// marker takes the 4-tuple, as for any export. `None` when `key` has no record;
    /// `TooManySockets` when no slot is free for the marker (the record stays).
    pub(crate) fn tcp_time_wait_export(
        &mut self,
        now: u64,
        key: &FlowKey,
    ) -> Option<Result<tcp::ConnectionSnapshot, SocketError>> {
        let pos = self.tcp.tw_find(key)?;
        let (tuple, tw, expiry_ns) = self.tcp.tw_get(pos)?;
        let config = self.tcp.config_for(&self.cfg.tcp, tuple.local.is_ipv4());
        let conn = Connection::from_time_wait(
            now,
            &config,
            tuple.local.port(),
            tuple.remote.port(),
            &tw,
            expiry_ns,
        );
        let snapshot = match conn.export(now) {
            Ok(s) => s,
            Err(_) => return Some(Err(SocketError::InvalidState)),
        };
        let expires_ns = now.saturating_add(self.cfg.limits.tcp_moved_marker_ns);
        let marker = TcpState::Moved(MovedMarker {
            key: *key,
            expires_ns,
            forward: None,
            bypass: None,
        });
        let h = match self.sockets.alloc(Socket::Tcp(marker)) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        self.tcp.tw_remove(pos);
        let i = h.index as usize;
        self.tcp.conns.insert(key.table_hash, i);
        self.tcp.moved += 1;
        self.tcp.timers.insert(i, expires_ns);
        self.tcp.counters.tcp_connections_exported += 1;
        Some(Ok(snapshot))
    }
}
