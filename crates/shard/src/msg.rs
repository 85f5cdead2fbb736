//! The typed messages that cross a shard's border.
//!
//! Everything one shard (or, later, an offload engine) tells another travels as a [`Msg`] over a
//! bounded single-producer/single-consumer ring of the driver's: `runtime` uses lock-free rings
//! between threads, `sim` delivers them on the virtual clock. The shard core produces them
//! ([`crate::Shard::poll_msg`]) and consumes them ([`crate::Shard::handle_msg`]); it never
//! knows how they travel. Every kind is counted on both sides ([`MsgCounters`]).
//!
//! A connection's move between shards is one more kind of message, not one more channel: the
//! move protocol of live rebalancing ([`Msg::MoveIn`], [`Msg::MoveOut`], [`Msg::Conn`],
//! [`Msg::MoveDone`], [`Msg::Released`]; see `crate::moves` for the walk and its invariants).

use app::ConnState;
use stack::FourTuple;

/// A frame that crosses shards, with what the NIC learnt when it received it.
#[derive(Debug)]
pub struct FrameMsg {
    /// The whole Ethernet frame, in a buffer of the sending shard's pool; the receiving shard
    /// recycles it into its own pool once processed.
    pub frame: Vec<u8>,
    /// What the NIC learnt when it received the frame: the RSS hash ("hash once": the
    /// receiver does not hash again) and the checksum verdicts (the receiving stack does not
    /// verify again what the NIC verified). Invariant: it describes `frame`'s bytes (a frame
    /// the stack rebuilt carries [`stack::RxMeta::hash_only`]).
    pub meta: stack::RxMeta,
}

/// One message between shards (or between a shard and an engine).
#[derive(Debug)]
pub enum Msg {
    /// A frame polled by a shard that does not own its flow, sent to the owner chosen by the
    /// software RETA (fewer hardware queues than shards, or a kernel-side spread that does not
    /// follow our RETA). A new arrival: held like one from the NIC while its bucket moves in.
    Frame(FrameMsg),
    /// A frame a moved marker caught, for the connection's new owner: older than anything the
    /// new owner holds for its bucket, so processed at once (DESIGN handoff invariant 4).
    Forwarded(FrameMsg),
    /// A RETA entry now names `shard` (a bucket moved there): every shard's software RETA and
    /// RSS home follow, so frames of the bucket reach the new owner and no active open picks a
    /// port in it elsewhere.
    RetaEntry { bucket: u16, shard: u16 },
    /// A copy of an ARP or IPv6 neighbour-discovery frame: every shard shares the host's
    /// addresses, so every shard's neighbour cache must learn what one shard received.
    Neighbour(FrameMsg),
    /// The driver (a rebalancer) → RETA entry `bucket`'s new owner: hold the bucket's frames
    /// from now on, then ask `from`, the old owner, to move out ([`Msg::MoveOut`]).
    MoveIn { bucket: u16, from: u16 },
    /// New owner → old owner. The driver points RETA entry `bucket` at `to` while it carries
    /// this message (after the new owner holds, before the old owner exports). The old owner
    /// exports the bucket's connections to `to`, forwards what still reaches it, and answers
    /// [`Msg::MoveDone`] once its receive path has drained.
    MoveOut { bucket: u16, to: u16 },
    /// Old owner → new owner: one live connection of a moving bucket.
    Conn(Box<ConnMove>),
    /// Old owner → new owner: every frame of `bucket` that reached the old owner has been
    /// handled or forwarded; `kept` are the bucket's connections the old owner keeps (in their
    /// handshake, closing, or not movable by the application): the new owner forwards their
    /// frames to it. The new owner then processes the frames it held, in arrival order.
    MoveDone { bucket: u16, kept: Vec<FourTuple> },
    /// Old owner → new owner: a connection it kept has ended (or moved): stop forwarding.
    Released { tuple: FourTuple },
    /// A shard opened a connection (ATR, [`crate::steer`]): its replies are the opener's,
    /// whichever shard polls them. Sent before the SYN leaves.
    Steer(crate::steer::AtrLearn),
}

/// One connection moving between shards with its RETA bucket.
pub struct ConnMove {
    /// The shard it leaves.
    pub from: u16,
    pub bucket: u16,
    pub tuple: FourTuple,
    /// The TCP state, frozen at a safe point (no ACK owed: DESIGN handoff invariant 6).
    pub snapshot: tcp::ConnectionSnapshot,
    /// Who held it on the old owner.
    pub owner: MovedOwner,
}

/// Who held a moving connection on the shard it leaves.
pub enum MovedOwner {
    /// The application, and this is what its old instance handed over
    /// ([`app::App::export_conn`]).
    App(ConnState),
    /// Nobody: it waited in a listener's backlog, or the application had closed it.
    Unowned(stack::Unowned),
}

impl core::fmt::Debug for ConnMove {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("ConnMove")
            .field("from", &self.from)
            .field("bucket", &self.bucket)
            .field("tuple", &self.tuple)
            .field(
                "owner",
                &match &self.owner {
                    MovedOwner::App(_) => "app",
                    MovedOwner::Unowned(stack::Unowned::Backlog) => "backlog",
                    MovedOwner::Unowned(stack::Unowned::Orphan) => "orphan",
                },
            )
            .finish_non_exhaustive()
    }
}

impl Msg {
    /// The message's kind, for counters and traces.
    pub fn kind(&self) -> MsgKind {
        match self {
            Msg::Frame(_) | Msg::Forwarded(_) => MsgKind::Frame,
            Msg::Neighbour(_) => MsgKind::Neighbour,
            Msg::MoveIn { .. }
            | Msg::MoveOut { .. }
            | Msg::Conn(_)
            | Msg::MoveDone { .. }
            | Msg::Released { .. }
            | Msg::RetaEntry { .. } => MsgKind::Move,
            Msg::Steer(_) => MsgKind::Steer,
        }
    }

    /// The frame buffer a message carries, if any (a driver that must drop a message returns
    /// the buffer to a pool with it).
    pub fn into_buffer(self) -> Option<Vec<u8>> {
        match self {
            Msg::Frame(f) | Msg::Forwarded(f) | Msg::Neighbour(f) => Some(f.frame),
            _ => None,
        }
    }
}

/// The kinds of [`Msg`], as a plain tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MsgKind {
    Frame,
    Neighbour,
    /// The move protocol's messages (rebalancing).
    Move,
    /// ATR entries ([`Msg::Steer`]).
    Steer,
}

/// Messages sent and received by kind, and the ones dropped.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MsgCounters {
    /// Frames forwarded to their owning shard.
    pub frames_tx: u64,
    pub frames_rx: u64,
    /// Neighbour-frame copies sent to / received from other shards.
    pub neighbour_tx: u64,
    pub neighbour_rx: u64,
    /// Move-protocol messages sent / received (connections, bucket control).
    pub move_tx: u64,
    pub move_rx: u64,
    /// ATR entries sent to / received from other shards.
    pub steer_tx: u64,
    pub steer_rx: u64,
    /// Messages the shard could not queue: its outbox was full (the driver did not drain it).
    pub drop_outbox_full: u64,
    /// Messages for a shard index outside the host (a software RETA naming a shard the host
    /// does not have).
    pub drop_no_such_shard: u64,
}

impl MsgCounters {
    /// Messages handed to the driver.
    pub fn tx(&self) -> u64 {
        self.frames_tx + self.neighbour_tx + self.move_tx + self.steer_tx
    }

    /// Messages taken from the driver.
    pub fn rx(&self) -> u64 {
        self.frames_rx + self.neighbour_rx + self.move_rx + self.steer_rx
    }

    pub(crate) fn count_tx(&mut self, kind: MsgKind) {
        match kind {
            MsgKind::Frame => self.frames_tx += 1,
            MsgKind::Neighbour => self.neighbour_tx += 1,
            MsgKind::Move => self.move_tx += 1,
            MsgKind::Steer => self.steer_tx += 1,
        }
    }

    pub(crate) fn count_rx(&mut self, kind: MsgKind) {
        match kind {
            MsgKind::Frame => self.frames_rx += 1,
            MsgKind::Neighbour => self.neighbour_rx += 1,
            MsgKind::Move => self.move_rx += 1,
            MsgKind::Steer => self.steer_rx += 1,
        }
    }
}
