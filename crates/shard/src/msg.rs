//! The typed messages that cross a shard's border.
//!
//! Everything one shard (or, later, an offload engine) tells another travels as a [`Msg`] over a
//! bounded single-producer/single-consumer ring of the driver's: `runtime` uses lock-free rings
//! between threads, `sim` delivers them on the virtual clock. The shard core produces them
//! ([`crate::Shard::poll_msg`]) and consumes them ([`crate::Shard::handle_msg`]); it never
//! knows how they travel. Every kind is counted on both sides ([`MsgCounters`]).
//!
//! The handoff protocol's commands (DESIGN "Handoff protocol", seed 002 Figures 4 and 5) are
//! added here as their issues land: a connection's move between shards or to an offload engine
//! is one more kind of message, not one more channel.

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
    /// follow our RETA).
    Frame(FrameMsg),
    /// A copy of an ARP or IPv6 neighbour-discovery frame: every shard shares the host's
    /// addresses, so every shard's neighbour cache must learn what one shard received.
    Neighbour(FrameMsg),
}

impl Msg {
    /// The message's kind, for counters and traces.
    pub fn kind(&self) -> MsgKind {
        match self {
            Msg::Frame(_) => MsgKind::Frame,
            Msg::Neighbour(_) => MsgKind::Neighbour,
        }
    }

    /// The frame buffer a message carries, if any (a driver that must drop a message returns
    /// the buffer to a pool with it).
    pub fn into_buffer(self) -> Option<Vec<u8>> {
        match self {
            Msg::Frame(f) | Msg::Neighbour(f) => Some(f.frame),
        }
    }
}

/// The kinds of [`Msg`], as a plain tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MsgKind {
    Frame,
    Neighbour,
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
    /// Messages the shard could not queue: its outbox was full (the driver did not drain it).
    pub drop_outbox_full: u64,
    /// Messages for a shard index outside the host (a software RETA naming a shard the host
    /// does not have).
    pub drop_no_such_shard: u64,
}

impl MsgCounters {
    /// Messages handed to the driver.
    pub fn tx(&self) -> u64 {
        self.frames_tx + self.neighbour_tx
    }

    /// Messages taken from the driver.
    pub fn rx(&self) -> u64 {
        self.frames_rx + self.neighbour_rx
    }

    pub(crate) fn count_tx(&mut self, kind: MsgKind) {
        match kind {
            MsgKind::Frame => self.frames_tx += 1,
            MsgKind::Neighbour => self.neighbour_tx += 1,
        }
    }

    pub(crate) fn count_rx(&mut self, kind: MsgKind) {
        match kind {
            MsgKind::Frame => self.frames_rx += 1,
            MsgKind::Neighbour => self.neighbour_rx += 1,
        }
    }
}
