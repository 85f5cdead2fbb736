//! The handoff interface (seed 002 §3.3, Figures 4 and 5; DESIGN "Handoff protocol") as typed
//! commands with a byte encoding for the rings, and a checker of the conversation.
//!
//! Two directions, one enum each:
//!
//! - host → engine, [`HostCmd`] (the seed's `ch_nic_*`): `Handoff`, `Restore`, `Send`,
//!   `Recvd`, `Ctrl`, `Forward`, `Post`;
//! - engine → host, [`EngineCmd`] (the seed's `ch_os_*`): the answer to a handoff
//!   (`HandoffAccepted` with the connection's [`Cid`], or `HandoffRefused`), `Recv`, `Ack`,
//!   `Ctrl`, `Resource`, `Restore` (carrying the state).
//!
//! "Engine" is the offload engine or another shard. Byte counts follow seed §3.2: the user
//! data lives on the host, so a handed-off connection's send bytes (the snapshot's
//! `send_unacked` and `send_unsent`, then every `Send`) stay in the host's send buffer until
//! the engine `Ack`s them, and received bytes (the snapshot's `recv_unread`, then every
//! `Recv`) sit in the host's receive buffer, counted by the engine against its window until
//! the host reports them read with `Recvd`.
//!
//! [`codec`] gives each command a byte encoding ([`HostCmd::encode`], [`HostCmd::decode`] and
//! the same for [`EngineCmd`]); [`check`] follows a conversation from one side and refuses
//! out-of-order or malformed commands with typed, counted errors. Nothing here panics on any
//! input.

use core::net::SocketAddr;

pub use stack::FourTuple;
use tcp::{ConnectionSnapshot, KeepaliveConfig};

pub mod check;
pub mod codec;

pub use check::{CheckError, CidState, Conversation, HandoffCounters, HandoffError, Limits, Side};
pub use codec::DecodeError;

/// Most bytes of data (`Send`, `Recv`) or of one IP packet (`Forward`) a command carries:
/// 64 KiB, above the largest IP packet (65,535 bytes). Larger writes are split by the sender.
pub const PAYLOAD_BYTES_MAX: usize = 64 * 1024;

/// A connection's identifier on the engine, given by `HandoffAccepted`.
///
/// Invariant: an engine issues identifiers in increasing order and never reuses one within a
/// conversation, so a command for an identifier at or below the highest issued and no longer
/// held refers to a connection that is gone (not to a newer one).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Cid(pub u32);

/// The host's number for one `Handoff` request, echoed by the engine's answer.
///
/// Invariant: unique among the host's pending requests.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ReqId(pub u32);

/// Flags of a `Send` (the seed's `flags`: the kind of data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct SendFlags(u8);

impl SendFlags {
    /// No flags: the data may be pushed at once.
    pub const NONE: SendFlags = SendFlags(0);
    /// More data follows (`MSG_MORE`): a partial segment may wait for it.
    pub const MORE: SendFlags = SendFlags(1);
    /// Every flag this version knows; a decoder refuses other bits.
    pub const ALL: SendFlags = SendFlags(1);

    /// The flags as a byte.
    pub fn bits(self) -> u8 {
        self.0
    }
    /// The flags of `bits`, or `None` when an unknown bit is set.
    pub fn from_bits(bits: u8) -> Option<SendFlags> {
        (bits & !Self::ALL.0 == 0).then_some(SendFlags(bits))
    }
    /// Whether every flag of `other` is set.
    pub fn contains(self, other: SendFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// Flags of a `Recv` (the seed's `flags`: the kind of data).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct RecvFlags(u8);

impl RecvFlags {
    /// No flags.
    pub const NONE: RecvFlags = RecvFlags(0);
    /// The data ends with a segment that carried PSH: a reader waiting for more may wake.
    pub const PUSH: RecvFlags = RecvFlags(1);
    /// Every flag this version knows; a decoder refuses other bits.
    pub const ALL: RecvFlags = RecvFlags(1);

    /// The flags as a byte.
    pub fn bits(self) -> u8 {
        self.0
    }
    /// The flags of `bits`, or `None` when an unknown bit is set.
    pub fn from_bits(bits: u8) -> Option<RecvFlags> {
        (bits & !Self::ALL.0 == 0).then_some(RecvFlags(bits))
    }
    /// Whether every flag of `other` is set.
    pub fn contains(self, other: RecvFlags) -> bool {
        self.0 & other.0 == other.0
    }
}

/// What the host asks of an offloaded connection (`ch_nic_ctrl`): the application's close and
/// shutdown, and its socket options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostCtrl {
    /// `close()`: no more sends or reads; the engine finishes the connection and ends with
    /// `Ctrl(Deallocated)` or `Restore` (TIME_WAIT returns to the host).
    Close,
    /// `shutdown(SHUT_WR)`: a FIN follows the data sent so far.
    ShutdownWrite,
    /// Abort: the engine sends RST and de-allocates the connection.
    Abort,
    /// `TCP_NODELAY`.
    Nodelay(bool),
    /// `TCP_CORK`.
    Cork(bool),
    /// `SO_SNDBUF`, in bytes.
    SendBufferBytes(u32),
    /// `SO_RCVBUF`, in bytes.
    RecvBufferBytes(u32),
    /// `SO_KEEPALIVE` with its parameters; `None` turns keepalive off.
    Keepalive(Option<KeepaliveConfig>),
}

/// What the engine tells the host about a connection (`ch_os_ctrl`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EngineCtrl {
    /// The peer's FIN arrived in order, after every `Recv` sent before this.
    PeerFin,
    /// The peer reset the connection.
    Reset,
    /// The connection timed out (retransmissions, user timeout or keepalive).
    TimedOut,
    /// The engine freed the connection: the last command for this `cid`.
    Deallocated,
}

/// A resource the engine has a finite amount of (`ch_os_resource`), with its unit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ResourceKind {
    /// Connection table slots, in connections.
    Connections,
    /// Buffer memory, in bytes.
    BufferBytes,
    /// Processing budget, in packets per budget period.
    BudgetPackets,
}

/// Why the engine refuses a handoff.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefuseReason {
    /// No connection slot left.
    NoConnections,
    /// Not enough buffer memory for the snapshot's buffers.
    NoBufferMemory,
    /// The processing budget is spent.
    Busy,
    /// The snapshot does not import (`tcp::Connection::import` refused it).
    BadSnapshot,
    /// The engine is shutting down.
    ShuttingDown,
}

/// Why the engine returns a connection (`ch_os_restore`, seed §3.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RestoreCause {
    /// The connection entered TIME_WAIT: it only waits on timers (DESIGN invariant 8).
    TimeWait,
    /// Another closing state the host owns (invariant 8).
    Closing,
    /// The engine ran short of a resource.
    ResourceExhaustion,
    /// The host asked with `Restore(cid)`.
    Requested,
    /// The engine is shutting down (a route change or link failure on its side).
    EngineShutdown,
}

/// A host → engine command (seed 002 Figure 4).
#[derive(Debug, Clone, PartialEq)]
pub enum HostCmd {
    /// `ch_nic_handoff`: take this connection. Answered by `HandoffAccepted { req, cid }` or
    /// `HandoffRefused { req, .. }`. The snapshot's ports are the tuple's.
    Handoff {
        req: ReqId,
        tuple: FourTuple,
        snapshot: Box<ConnectionSnapshot>,
    },
    /// `ch_nic_restore`: give the connection back; answered by `EngineCmd::Restore` with
    /// cause `Requested` (or another cause, when the engine was already returning it).
    Restore { cid: Cid },
    /// `ch_nic_send`: the application wrote `data` (at most [`PAYLOAD_BYTES_MAX`] bytes).
    Send {
        cid: Cid,
        data: Vec<u8>,
        flags: SendFlags,
    },
    /// `ch_nic_recvd`: the application read `len_bytes` of what the engine delivered.
    Recvd { cid: Cid, len_bytes: u32 },
    /// `ch_nic_ctrl`: close, shutdown or a socket option.
    Ctrl { cid: Cid, cmd: HostCtrl },
    /// `ch_nic_forward`: an IP packet of this connection that reached the host after the
    /// handoff, in arrival order (at most [`PAYLOAD_BYTES_MAX`] bytes).
    Forward { cid: Cid, packet: Vec<u8> },
    /// `ch_nic_post`: a receive buffer of `len_bytes` is available for the connection.
    Post { cid: Cid, len_bytes: u32 },
}

/// An engine → host command (seed 002 Figure 5, with `ch_nic_handoff`'s answer).
#[derive(Debug, Clone, PartialEq)]
pub enum EngineCmd {
    /// The handoff `req` succeeded; the connection is `cid` from now on.
    HandoffAccepted { req: ReqId, cid: Cid },
    /// The handoff `req` failed; the host keeps the connection.
    HandoffRefused { req: ReqId, reason: RefuseReason },
    /// `ch_os_recv`: in-order data for the host's receive buffer (at most
    /// [`PAYLOAD_BYTES_MAX`] bytes).
    Recv {
        cid: Cid,
        data: Vec<u8>,
        flags: RecvFlags,
    },
    /// `ch_os_ack`: the peer acknowledged `len_bytes` more; drop them from the host's send
    /// buffer.
    Ack { cid: Cid, len_bytes: u32 },
    /// `ch_os_ctrl`: peer FIN, reset, time-out, de-allocation.
    Ctrl { cid: Cid, cmd: EngineCtrl },
    /// `ch_os_resource`: `count` units of `kind` are available now (flow control: the host
    /// never exceeds it).
    Resource { kind: ResourceKind, count: u64 },
    /// `ch_os_restore`, followed by the state: the connection returns to the host and the
    /// engine has freed it.
    Restore {
        cid: Cid,
        snapshot: Box<ConnectionSnapshot>,
        cause: RestoreCause,
    },
}

/// The kinds of [`HostCmd`], as a plain tag (the first byte of the encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum HostKind {
    Handoff = 0x01,
    Restore = 0x02,
    Send = 0x03,
    Recvd = 0x04,
    Ctrl = 0x05,
    Forward = 0x06,
    Post = 0x07,
}

/// The kinds of [`EngineCmd`], as a plain tag (the first byte of the encoding; the high bit
/// marks the engine's direction).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(u8)]
pub enum EngineKind {
    HandoffAccepted = 0x81,
    HandoffRefused = 0x82,
    Recv = 0x83,
    Ack = 0x84,
    Ctrl = 0x85,
    Resource = 0x86,
    Restore = 0x87,
}

impl HostCmd {
    /// The command's kind.
    pub fn kind(&self) -> HostKind {
        match self {
            HostCmd::Handoff { .. } => HostKind::Handoff,
            HostCmd::Restore { .. } => HostKind::Restore,
            HostCmd::Send { .. } => HostKind::Send,
            HostCmd::Recvd { .. } => HostKind::Recvd,
            HostCmd::Ctrl { .. } => HostKind::Ctrl,
            HostCmd::Forward { .. } => HostKind::Forward,
            HostCmd::Post { .. } => HostKind::Post,
        }
    }

    /// The connection the command is about (`None` for `Handoff`, which has none yet).
    pub fn cid(&self) -> Option<Cid> {
        match self {
            HostCmd::Handoff { .. } => None,
            HostCmd::Restore { cid }
            | HostCmd::Send { cid, .. }
            | HostCmd::Recvd { cid, .. }
            | HostCmd::Ctrl { cid, .. }
            | HostCmd::Forward { cid, .. }
            | HostCmd::Post { cid, .. } => Some(*cid),
        }
    }
}

impl EngineCmd {
    /// The command's kind.
    pub fn kind(&self) -> EngineKind {
        match self {
            EngineCmd::HandoffAccepted { .. } => EngineKind::HandoffAccepted,
            EngineCmd::HandoffRefused { .. } => EngineKind::HandoffRefused,
            EngineCmd::Recv { .. } => EngineKind::Recv,
            EngineCmd::Ack { .. } => EngineKind::Ack,
            EngineCmd::Ctrl { .. } => EngineKind::Ctrl,
            EngineCmd::Resource { .. } => EngineKind::Resource,
            EngineCmd::Restore { .. } => EngineKind::Restore,
        }
    }

    /// The connection the command is about (`None` for the answers to a handoff request and
    /// for `Resource`).
    pub fn cid(&self) -> Option<Cid> {
        match self {
            EngineCmd::HandoffAccepted { .. }
            | EngineCmd::HandoffRefused { .. }
            | EngineCmd::Resource { .. } => None,
            EngineCmd::Recv { cid, .. }
            | EngineCmd::Ack { cid, .. }
            | EngineCmd::Ctrl { cid, .. }
            | EngineCmd::Restore { cid, .. } => Some(*cid),
        }
    }
}

/// Whether the snapshot's ports are the tuple's.
pub(crate) fn snapshot_matches(tuple: &FourTuple, s: &ConnectionSnapshot) -> bool {
    let port = |a: &SocketAddr| a.port();
    s.local_port == port(&tuple.local) && s.remote_port == port(&tuple.remote)
}
