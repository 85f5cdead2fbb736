//! The move protocol: a RETA bucket and its live connections move from one shard to another
//! (DESIGN "Rebalancing", with the handoff walk of "Handoff protocol").
//!
//! The walk, for bucket `b` moving from shard A to shard B:
//!
//! 1. The driver gives B [`Msg::MoveIn`]. B starts *holding* every frame of `b` its NIC queue
//!    yields, points its stack's RSS home entry `b` at itself, and sends [`Msg::MoveOut`] to A.
//! 2. The driver points the NIC's RETA entry `b` at B while it carries `MoveOut` (so B already
//!    holds when the first frame of `b` reaches it).
//! 3. A points its RSS home entry `b` at B (its active opens no longer pick ports in `b`) and
//!    exports each connection of `b` it can move at a safe point: the application's
//!    connections that are synchronized and whose application state the instance hands over
//!    ([`app::App::export_conn`]), and established children waiting in a listener's backlog.
//!    Each leaves a moved marker forwarding to B, and goes to B as [`Msg::Conn`]; B imports it
//!    at once and gives the application its state ([`app::App::import_conn`]).
//! 4. Frames of `b` still in A's receive path reach the markers and are forwarded to B (after
//!    the `Conn` they follow, on the same ordered channel), where they are processed at once.
//! 5. Once A's receive path has drained since `MoveOut` (its NIC queue is empty and the driver
//!    said its port is: [`crate::Shard::note_port_empty`]), A exports what became movable
//!    meanwhile and sends [`Msg::MoveDone`] naming the connections it keeps (in a handshake,
//!    closing, or refused by the application). B sets forward markers for those to A, then
//!    processes the frames it held, oldest first, and stops holding.
//! 6. A keeps watching what it kept: a connection that becomes movable moves (as in 3; B's
//!    forward marker gives way to the import), one that ends is [`Msg::Released`] so B drops
//!    its marker.
//!
//! Invariants (DESIGN handoff 1–9): one owner at a time (A processes a connection until it
//! exports it; B processes it from the import on; frames in between are forwarded or held,
//! never processed twice, never answered with RST); arrival order kept (held frames are
//! newer than anything A forwards before `MoveDone`); move messages are never dropped (they
//! are bounded by the connections of one bucket).

use std::collections::VecDeque;

use app::{App, Ctx, Moved};
use stack::{BucketConn, FourTuple, MoveClass};

use crate::Shard;
use crate::msg::{ConnMove, FrameMsg, MovedOwner, Msg};

/// Most migration-time samples a shard keeps (the latest ones).
pub const MOVE_SAMPLES_MAX: usize = 4096;

/// What the move protocol counted on one shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveCounters {
    /// Buckets this shard took over ([`Msg::MoveIn`]) / gave away ([`Msg::MoveOut`]).
    pub buckets_in: u64,
    pub buckets_out: u64,
    /// Buckets whose move finished here ([`Msg::MoveDone`] received).
    pub buckets_done: u64,
    /// Application connections exported / imported with their state.
    pub conns_out: u64,
    pub conns_in: u64,
    /// Connections no application named (unaccepted in a backlog, or closed by the
    /// application and finishing) exported / imported.
    pub unowned_out: u64,
    pub unowned_in: u64,
    /// Connections kept by their old owner when their bucket moved (counted once each).
    pub kept: u64,
    /// Kept connections that moved later, once movable.
    pub kept_moved_later: u64,
    /// Kept connections that ended on the old owner ([`Msg::Released`] sent).
    pub released: u64,
    /// Connections the application chose to keep (`export_conn` returned `None`).
    pub app_refused: u64,
    /// Exports the stack refused after the application handed over its state (the state was
    /// given back; the connection stays).
    pub export_failed: u64,
    /// Imports that failed: the connection is lost here and counted (its peer's next segment
    /// is answered as for any unknown connection).
    pub import_failed: u64,
    /// Frames held while a bucket moved in, and held frames dropped because the hold queue was
    /// full (left to the peer's retransmission).
    pub frames_held: u64,
    pub hold_drop_full: u64,
    /// Frames forwarded to the old owner for connections it kept (counted by the stack as
    /// moved-forwarded too).
    pub move_msgs_refused: u64,
}

/// A bucket moving in: its frames wait here until the old owner's `MoveDone`.
#[derive(Debug)]
pub(crate) struct Hold {
    bucket: u16,
    from: u16,
    frames: VecDeque<FrameMsg>,
}

/// A bucket moving out: `MoveDone` waits for the receive path to drain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Outgoing {
    bucket: u16,
    to: u16,
    port_clear: bool,
}

/// A connection kept when its bucket moved: where its bucket went, and whether to try moving
/// it again (not after the application refused).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Kept {
    tuple: FourTuple,
    bucket: u16,
    to: u16,
    retry: bool,
}

/// The move protocol's state on one shard.
#[derive(Debug, Default)]
pub(crate) struct Moves {
    pub(crate) holding: Vec<Hold>,
    pub(crate) outgoing: Vec<Outgoing>,
    pub(crate) kept: Vec<Kept>,
    pub(crate) counters: MoveCounters,
    /// Export-to-import times (ns) of the latest connections imported here, oldest first.
    pub(crate) samples_ns: VecDeque<u64>,
    /// Reused by bucket scans.
    scratch: Vec<BucketConn>,
}

impl Moves {
    /// True while a bucket is held, moving out, or a kept connection is watched.
    pub(crate) fn active(&self) -> bool {
        !self.holding.is_empty() || !self.outgoing.is_empty() || !self.kept.is_empty()
    }
}

impl<A: App> Shard<A> {
    /// What the move protocol counted here.
    pub fn move_counters(&self) -> MoveCounters {
        self.moves.counters
    }

    /// Export-to-import times (ns) of the latest connections that moved in (at most
    /// [`MOVE_SAMPLES_MAX`]), oldest first. Meaningful when the shards' clocks share an origin
    /// (the simulator; the runtime's shards of one host).
    pub fn move_samples_ns(&self) -> impl Iterator<Item = u64> + '_ {
        self.moves.samples_ns.iter().copied()
    }

    /// Buckets being held here, moving out from here, and connections kept here after their
    /// bucket left.
    pub fn moves_in_progress(&self) -> (usize, usize, usize) {
        (
            self.moves.holding.len(),
            self.moves.outgoing.len(),
            self.moves.kept.len(),
        )
    }

    /// True while RETA entry `bucket` is moving in or out here, or a connection of it is kept
    /// here: a driver must not start another move of it until no shard says so (one move of a
    /// bucket at a time keeps every forward marker pointing at the connection's owner).
    pub fn bucket_busy(&self, bucket: u16) -> bool {
        self.moves.holding.iter().any(|h| h.bucket == bucket)
            || self.moves.outgoing.iter().any(|o| o.bucket == bucket)
            || self.moves.kept.iter().any(|k| k.bucket == bucket)
    }

    /// The driver's port has no frame waiting for this shard (it read until empty): a bucket
    /// moving out can finish once the NIC queue has drained too. Drivers without a port queue
    /// of their own (the simulator feeds the NIC directly) call it before every iteration.
    /// The flag it sets is read by the move steps only, never by [`Shard::poll_timeout`], so
    /// the cached deadline stays.
    pub fn note_port_empty(&mut self) {
        for o in &mut self.moves.outgoing {
            o.port_clear = true;
        }
    }

    /// The RETA entry of a frame's hash.
    fn bucket_of(&self, hash: u32) -> u16 {
        (hash as usize & (self.reta_entries - 1)) as u16
    }

    /// The hold (index) of a bucket moving in that a frame with `hash` belongs to.
    pub(crate) fn held_bucket(&self, hash: Option<u32>) -> Option<usize> {
        let b = self.bucket_of(hash?);
        self.moves.holding.iter().position(|h| h.bucket == b)
    }

    /// Holds a polled frame of a bucket moving in (hold `i`), or drops it (counted) when the
    /// hold is full.
    pub(crate) fn hold_frame(&mut self, i: usize, frame: FrameMsg) {
        let full = self
            .moves
            .holding
            .get(i)
            .is_none_or(|h| h.frames.len() >= self.hold_frames_max);
        if full {
            self.moves.counters.hold_drop_full += 1;
            self.nic.recycle(frame.frame);
            return;
        }
        self.moves.counters.frames_held += 1;
        if let Some(h) = self.moves.holding.get_mut(i) {
            h.frames.push_back(frame);
        }
    }

    /// A move-protocol message (see the module docs for the walk).
    pub(crate) fn handle_move_msg(&mut self, now_ns: u64, msg: Msg) {
        let me = self.info.shard;
        match msg {
            Msg::MoveIn { bucket, from } => {
                if from == me || self.moves.holding.iter().any(|h| h.bucket == bucket) {
                    self.moves.counters.move_msgs_refused += 1;
                    return;
                }
                self.moves.counters.buckets_in += 1;
                self.moves.holding.push(Hold {
                    bucket,
                    from,
                    frames: VecDeque::new(),
                });
                self.point_home(bucket, me);
                if self.sw_reta.is_some() {
                    // Every shard forwards by its software RETA: they all follow (after this
                    // shard holds, so what they now send here waits for the move).
                    for s in (0..self.info.shards).filter(|&s| s != me && s != from) {
                        self.send_msg(s, Msg::RetaEntry { bucket, shard: me });
                    }
                }
                self.send_msg(from, Msg::MoveOut { bucket, to: me });
            }
            Msg::MoveOut { bucket, to } => {
                if to == me {
                    self.moves.counters.move_msgs_refused += 1;
                    return;
                }
                self.moves.counters.buckets_out += 1;
                self.point_home(bucket, to);
                let _kept = self.move_bucket(now_ns, bucket, to, false);
                self.moves.outgoing.push(Outgoing {
                    bucket,
                    to,
                    port_clear: false,
                });
            }
            Msg::Conn(m) => self.import_conn(now_ns, *m),
            Msg::MoveDone { bucket, kept } => {
                let Some(pos) = self.moves.holding.iter().position(|h| h.bucket == bucket) else {
                    self.moves.counters.move_msgs_refused += 1;
                    return;
                };
                let hold = self.moves.holding.remove(pos);
                for t in kept {
                    // A live connection here for a kept tuple cannot be: the bucket was the
                    // old owner's. Refused markers are counted by the stack.
                    let _ = self.stack.tcp_forward_unowned(now_ns, t, hold.from);
                }
                self.moves.counters.buckets_done += 1;
                for f in hold.frames {
                    self.counters.rx_packets += u64::from(f.meta.coalesced_segments.max(1));
                    self.stack.receive(now_ns, &f.frame, &f.meta);
                    self.nic.recycle(f.frame);
                }
            }
            Msg::Released { tuple } => {
                // Already imported (the connection moved after all) or expired: nothing to do.
                let _ = self.stack.tcp_release_moved(tuple);
            }
            Msg::RetaEntry { bucket, shard } => self.point_home(bucket, shard),
            Msg::Frame(_) | Msg::Forwarded(_) | Msg::Neighbour(_) | Msg::Steer(_) => {}
        }
    }

    /// Points this shard's view of RETA entry `bucket` at `shard`: the stack's RSS home (source
    /// ports of active opens) and the software RETA.
    fn point_home(&mut self, bucket: u16, shard: u16) {
        // No RSS home (no RSS key configured): nothing to point.
        let _ = self.stack.set_rss_home_entry(usize::from(bucket), shard);
        if let Some(r) = &mut self.sw_reta {
            let _ = r.set(usize::from(bucket), shard);
        }
        // ATR entries of the bucket name the old owner; its connections move with the bucket
        // (or are forwarded to by the new owner's markers), so the RETA decides again.
        if let Some(s) = &mut self.sw_steer {
            s.forget_bucket(self.reta_entries, bucket);
        }
    }

    /// Exports every movable connection of `bucket` to `to`; returns the ones kept (and, when
    /// `record`, remembers them for later moves or release).
    fn move_bucket(&mut self, now_ns: u64, bucket: u16, to: u16, record: bool) -> Vec<FourTuple> {
        let mut list = std::mem::take(&mut self.moves.scratch);
        list.clear();
        self.stack
            .tcp_bucket_conns(self.reta_entries, usize::from(bucket), &mut list);
        let mut kept = Vec::new();
        for c in list.drain(..) {
            match self.try_move(now_ns, c, bucket, to) {
                MoveOutcome::Moved | MoveOutcome::Gone => {}
                MoveOutcome::Kept { retry } => {
                    kept.push(c.tuple);
                    if record {
                        self.moves.counters.kept += 1;
                        self.moves.kept.push(Kept {
                            tuple: c.tuple,
                            bucket,
                            to,
                            retry,
                        });
                    }
                }
            }
        }
        self.moves.scratch = list;
        kept
    }

    /// Moves one connection of a bucket to `to` if it can move now.
    fn try_move(&mut self, now_ns: u64, c: BucketConn, bucket: u16, to: u16) -> MoveOutcome {
        let me = self.info.shard;
        match c.class {
            MoveClass::Marker => MoveOutcome::Gone,
            MoveClass::Pinned
            | MoveClass::Owned {
                synchronized: false,
                ..
            } => MoveOutcome::Kept { retry: true },
            MoveClass::Backlog | MoveClass::Orphan => {
                match self.stack.tcp_export_unowned(now_ns, c.tuple) {
                    Ok((snapshot, kind)) => {
                        let _ = self.stack.tcp_set_moved_forward(c.tuple, to);
                        self.moves.counters.unowned_out += 1;
                        let owner = MovedOwner::Unowned(kind);
                        self.send_conn(to, bucket, c.tuple, snapshot, owner);
                        MoveOutcome::Moved
                    }
                    Err(_) => MoveOutcome::Kept { retry: true },
                }
            }
            MoveClass::Owned {
                handle,
                synchronized: true,
            } => {
                let mut ctx = Ctx::new(now_ns, self.info, &mut self.stack);
                let conn = ctx.conn(handle);
                let Some(state) = self.app.export_conn(&mut ctx, conn, to) else {
                    self.moves.counters.app_refused += 1;
                    return MoveOutcome::Kept { retry: false };
                };
                match self.stack.tcp_export(now_ns, handle) {
                    Ok((tuple, snapshot)) => {
                        let _ = self.stack.tcp_set_moved_forward(tuple, to);
                        self.moves.counters.conns_out += 1;
                        self.send_conn(to, bucket, tuple, snapshot, MovedOwner::App(state));
                        MoveOutcome::Moved
                    }
                    Err(_) => {
                        self.moves.counters.export_failed += 1;
                        let mut ctx = Ctx::new(now_ns, self.info, &mut self.stack);
                        let moved = Moved {
                            from: me,
                            to: me,
                            state,
                        };
                        self.app.import_conn(&mut ctx, conn, moved);
                        MoveOutcome::Kept { retry: true }
                    }
                }
            }
        }
    }

    fn send_conn(
        &mut self,
        to: u16,
        bucket: u16,
        tuple: FourTuple,
        snapshot: tcp::ConnectionSnapshot,
        owner: MovedOwner,
    ) {
        let m = ConnMove {
            from: self.info.shard,
            bucket,
            tuple,
            snapshot,
            owner,
        };
        self.send_msg(to, Msg::Conn(Box::new(m)));
    }

    /// A connection arrives: import it, and give the application its state.
    fn import_conn(&mut self, now_ns: u64, m: ConnMove) {
        let me = self.info.shard;
        let waited_ns = now_ns.saturating_sub(m.snapshot.exported_at_ns);
        match m.owner {
            MovedOwner::App(state) => {
                match self.stack.tcp_import_owned(now_ns, m.tuple, m.snapshot) {
                    Ok(h) => {
                        self.moves.counters.conns_in += 1;
                        let mut ctx = Ctx::new(now_ns, self.info, &mut self.stack);
                        let conn = ctx.conn(h);
                        let moved = Moved {
                            from: m.from,
                            to: me,
                            state,
                        };
                        self.app.import_conn(&mut ctx, conn, moved);
                    }
                    Err(_) => self.moves.counters.import_failed += 1,
                }
            }
            MovedOwner::Unowned(kind) => {
                match self
                    .stack
                    .tcp_import_unowned(now_ns, m.tuple, &m.snapshot, kind)
                {
                    Ok(()) => self.moves.counters.unowned_in += 1,
                    Err(_) => self.moves.counters.import_failed += 1,
                }
            }
        }
        if self.moves.samples_ns.len() >= MOVE_SAMPLES_MAX {
            self.moves.samples_ns.pop_front();
        }
        self.moves.samples_ns.push_back(waited_ns);
    }

    /// Per iteration while moves are active: finishes buckets moving out whose receive path
    /// drained, and moves or releases kept connections. Returns the work done.
    pub(crate) fn step_moves(&mut self, now_ns: u64) -> usize {
        let mut work = 0;
        if !self.moves.outgoing.is_empty() && self.nic.rx_pending(0) == 0 {
            let mut i = 0;
            while i < self.moves.outgoing.len() {
                let o = self.moves.outgoing[i];
                if !o.port_clear {
                    i += 1;
                    continue;
                }
                self.moves.outgoing.remove(i);
                let kept = self.move_bucket(now_ns, o.bucket, o.to, true);
                self.send_msg(
                    o.to,
                    Msg::MoveDone {
                        bucket: o.bucket,
                        kept,
                    },
                );
                work += 1;
            }
        }
        if !self.moves.kept.is_empty() {
            work += self.step_kept(now_ns);
        }
        work
    }

    /// Kept connections: move the ones that became movable, release the ones that ended.
    fn step_kept(&mut self, now_ns: u64) -> usize {
        let mut work = 0;
        let mut i = 0;
        while i < self.moves.kept.len() {
            let k = self.moves.kept[i];
            let class = self.stack.tcp_move_class(k.tuple);
            let done = match class {
                None | Some(MoveClass::Marker) => {
                    self.moves.counters.released += 1;
                    self.send_msg(k.to, Msg::Released { tuple: k.tuple });
                    true
                }
                Some(MoveClass::Pinned)
                | Some(MoveClass::Owned {
                    synchronized: false,
                    ..
                }) => false,
                Some(class) if k.retry => {
                    let bucket = k.bucket;
                    let c = BucketConn {
                        tuple: k.tuple,
                        class,
                    };
                    match self.try_move(now_ns, c, bucket, k.to) {
                        MoveOutcome::Moved | MoveOutcome::Gone => {
                            self.moves.counters.kept_moved_later += 1;
                            true
                        }
                        MoveOutcome::Kept { retry } => {
                            self.moves.kept[i].retry = retry;
                            false
                        }
                    }
                }
                Some(_) => false,
            };
            if done {
                self.moves.kept.swap_remove(i);
                work += 1;
            } else {
                i += 1;
            }
        }
        work
    }
}

enum MoveOutcome {
    Moved,
    Gone,
    Kept { retry: bool },
}
