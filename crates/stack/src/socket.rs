//! Socket handles, readiness events and the errors of application calls.

use core::fmt;
use core::net::SocketAddr;
use std::collections::VecDeque;

/// Names one socket of one stack. Handles are never reused while the generation counter of
/// their slot has not wrapped, so a stale handle yields [`SocketError::InvalidHandle`] instead
/// of reaching a newer socket.
///
/// A connection keeps its handle across a move and back: `Stack::tcp_export` leaves a moved
/// marker in the slot (the handle is invalid meanwhile), and `Stack::tcp_import` of the same
/// 4-tuple into the same stack takes the slot back with its generation, so it returns the
/// handle the connection had. Once the marker is gone (released or expired) an import gets a
/// new handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SocketHandle {
    pub(crate) index: u32,
    pub(crate) generation: u32,
}

impl fmt::Display for SocketHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "#{}.{}", self.index, self.generation)
    }
}

/// A set of readiness conditions (bit flags).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Readiness(pub u8);

impl Readiness {
    pub const NONE: Readiness = Readiness(0);
    /// Data (or a datagram) can be read; for a listener, a connection can be accepted.
    pub const READABLE: Readiness = Readiness(0x01);
    /// Send buffer space is available.
    pub const WRITABLE: Readiness = Readiness(0x02);
    /// The TCP handshake completed.
    pub const CONNECTED: Readiness = Readiness(0x04);
    /// The peer closed its sending direction (FIN): reads end after the buffered data.
    pub const PEER_CLOSED: Readiness = Readiness(0x08);
    /// The connection failed (reset or timed out).
    pub const ERROR: Readiness = Readiness(0x10);
    /// The connection reached CLOSED; the handle stays valid until `close`/`release`.
    pub const CLOSED: Readiness = Readiness(0x20);
    /// Notifications wait on the socket's error queue (zero-copy completions, transmit
    /// timestamps: `Stack::tcp_recv_notification`); not a failure of the connection.
    pub const ERROR_QUEUE: Readiness = Readiness(0x40);

    pub fn contains(self, other: Readiness) -> bool {
        self.0 & other.0 == other.0 && other.0 != 0
    }

    pub fn is_empty(self) -> bool {
        self.0 == 0
    }
}

impl core::ops::BitOr for Readiness {
    type Output = Readiness;
    fn bitor(self, rhs: Readiness) -> Readiness {
        Readiness(self.0 | rhs.0)
    }
}

impl core::ops::BitOrAssign for Readiness {
    fn bitor_assign(&mut self, rhs: Readiness) {
        self.0 |= rhs.0;
    }
}

/// One readiness notification: every condition that became true for `handle` since it was
/// last reported. Edge-triggered: a condition is reported once per change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SocketEvent {
    pub handle: SocketHandle,
    pub readiness: Readiness,
}

/// Why an application call failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SocketError {
    /// The handle does not name a live socket of this stack.
    InvalidHandle,
    /// The call does not apply to this kind of socket (e.g. `udp_send_to` on TCP).
    WrongSocketType,
    /// Another socket is bound to the address and port.
    AddrInUse,
    /// The local address is not one of this interface's addresses, or the families differ.
    AddrNotAvailable,
    /// No ephemeral port is free.
    NoFreePort,
    /// The socket table is full.
    TooManySockets,
    /// Nothing to read (or no room to write) right now.
    WouldBlock,
    /// The datagram does not fit a UDP/IP packet.
    MessageTooBig,
    /// No source address for the destination's family.
    NoRoute,
    /// The call makes no sense in the socket's state.
    InvalidState,
    /// The peer closed its direction and every byte before its FIN has been read.
    Finished,
    /// The connection was reset.
    Reset,
    /// The connection timed out.
    TimedOut,
    /// The connection is closed.
    Closed,
    /// The peer's host or port was unreachable (a hard ICMP error).
    Unreachable,
    /// The stack's TCP buffer memory is at its high mark (`Limits::tcp_mem_high_bytes`).
    NoBufferSpace,
    /// The stack's settings do not allow the call (e.g. a Fast Open open while the client
    /// side of Fast Open is off).
    NotSupported,
}

impl fmt::Display for SocketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SocketError::InvalidHandle => "invalid socket handle",
            SocketError::WrongSocketType => "wrong socket type for this call",
            SocketError::AddrInUse => "address in use",
            SocketError::AddrNotAvailable => "address not available",
            SocketError::NoFreePort => "no free ephemeral port",
            SocketError::TooManySockets => "socket table full",
            SocketError::WouldBlock => "operation would block",
            SocketError::MessageTooBig => "message too big",
            SocketError::NoRoute => "no route to destination",
            SocketError::InvalidState => "invalid socket state",
            SocketError::Finished => "peer closed the connection",
            SocketError::Reset => "connection reset",
            SocketError::TimedOut => "connection timed out",
            SocketError::Closed => "connection closed",
            SocketError::Unreachable => "destination unreachable",
            SocketError::NoBufferSpace => "no buffer space (TCP memory budget reached)",
            SocketError::NotSupported => "not supported by the stack's settings",
        })
    }
}

impl std::error::Error for SocketError {}

/// A received UDP datagram.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UdpDatagram {
    /// The sender.
    pub src: SocketAddr,
    /// The address it was sent to (one of ours, or a broadcast/multicast address).
    pub dst: SocketAddr,
    pub payload: Vec<u8>,
}

/// A bound UDP socket.
#[derive(Debug)]
pub(crate) struct UdpSocket {
    /// Local address; an unspecified IP means "any address of this family".
    pub(crate) local: SocketAddr,
    /// Invariant: `rx.len()` ≤ the stack's `udp_rx_queue_datagrams_max`.
    pub(crate) rx: VecDeque<UdpDatagram>,
    /// Receive queue capacity in datagrams.
    pub(crate) rx_max: usize,
    /// The last hard ICMP error for a datagram this socket sent, until taken.
    pub(crate) error: Option<SocketError>,
}

/// A received ICMP echo reply, kept for the application that pinged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EchoReply {
    pub from: core::net::IpAddr,
    pub ident: u16,
    pub seq_no: u16,
    pub data_len_bytes: usize,
}

/// Socket-level options (applied with `set_option`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SocketOption {
    /// TCP: disable Nagle's algorithm (RFC 896).
    NoDelay(bool),
    /// TCP: `TCP_CORK` (Linux tcp(7)): hold partial segments until uncorked.
    Cork(bool),
    /// TCP: keepalive idle time in ns (`None` disables; RFC 1122 §4.2.3.6).
    KeepaliveIdleNs(Option<u64>),
    /// TCP: user timeout in ns (RFC 5482).
    UserTimeoutNs(Option<u64>),
    /// UDP: receive queue capacity in datagrams (clamped to the stack's limit).
    UdpRxQueueDatagrams(usize),
    /// TCP: cap on the MSS we announce and use (Linux `TCP_MAXSEG`). On a listener it applies
    /// to the connections it accepts; on a connection only before its SYN left (the stack
    /// sends it at the next poll, so right after `tcp_connect`).
    MaxSegment(u16),
    /// TCP: send buffer capacity in bytes (unacknowledged plus unsent), on a listener for its
    /// children or on a live connection (Linux `SO_SNDBUF`, which the caller doubles as Linux
    /// does).
    SendBufferBytes(u32),
    /// TCP, listeners: `TCP_FASTOPEN` (RFC 7413), how many Fast Open children may wait in
    /// SYN-RECEIVED; 0 turns Fast Open off for the listener (unless the stack's switches
    /// make every listener a Fast Open one). Needs the stack's server switch
    /// ([`crate::Stack::tcp_set_fastopen`]).
    FastOpenQueue(u32),
    /// TCP, listeners: `TCP_FASTOPEN_KEY`, the listener's own 16-byte cookie key.
    FastOpenKey([u8; 16]),
    /// TCP, connections: how many times the SYN is sent again before the open times out
    /// (Linux `TCP_SYNCNT`, 1 to 127).
    SynRetries(u8),
    /// TCP: `SO_ZEROCOPY`, sends with [`crate::SendFlags::zerocopy`] report completion on the
    /// error queue (`tcp_notify`). On a listener, for the connections it accepts.
    ZeroCopy(bool),
    /// TCP: `SO_MARK`, stored and reported; it does not change routing.
    Mark(u32),
    /// TCP: `TCP_NOTSENT_LOWAT` in bytes (0: the stack's default,
    /// [`crate::StackConfig::tcp_notsent_lowat_bytes`]); see `tcp_notify`.
    NotSentLowat(u32),
    /// TCP, connections (and listeners without `opt_id`): `SO_TIMESTAMPING`'s transmit
    /// timestamps (`tcp_notify`).
    TxTimestamping(crate::tcp_notify::TxTimestamping),
    /// TCP over IPv4: `IP_TOS`, the type-of-service byte of outbound segments. Its DSCP bits
    /// are used as given; its two ECN bits are TCP's to choose (RFC 3168 §6.1.1; Linux
    /// keeps them out of `IP_TOS` for TCP sockets).
    IpTos(u8),
    /// TCP: `IP_MTU_DISCOVER`, whether segments carry DF and whether an ICMP
    /// "fragmentation needed" lowers the connection's MSS.
    PathMtuDiscovery(crate::tcp_notify::PathMtuDiscovery),
}
