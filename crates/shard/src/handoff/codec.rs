//! Byte encoding of the handoff commands, for the rings between host and engine.
//!
//! # Format
//!
//! Little-endian. Every command is a 5-byte header — its kind (one byte:
//! [`HostKind`](super::HostKind) values 0x01–0x07 host → engine,
//! [`EngineKind`](super::EngineKind) values 0x81–0x87 engine → host) and the length of
//! its fields in bytes (`u32`) — followed by the fields:
//!
//! | kind | fields |
//! |---|---|
//! | `Handoff` 0x01 | req `u32`, tuple, snapshot (`tcp::snapshot_codec`, to the end) |
//! | `Restore` 0x02 | cid `u32` |
//! | `Send` 0x03 | cid `u32`, flags `u8`, data (to the end) |
//! | `Recvd` 0x04 | cid `u32`, len_bytes `u32` |
//! | `Ctrl` 0x05 | cid `u32`, host ctrl |
//! | `Forward` 0x06 | cid `u32`, packet (to the end) |
//! | `Post` 0x07 | cid `u32`, len_bytes `u32` |
//! | `HandoffAccepted` 0x81 | req `u32`, cid `u32` |
//! | `HandoffRefused` 0x82 | req `u32`, reason `u8` |
//! | `Recv` 0x83 | cid `u32`, flags `u8`, data (to the end) |
//! | `Ack` 0x84 | cid `u32`, len_bytes `u32` |
//! | `Ctrl` 0x85 | cid `u32`, engine ctrl `u8` |
//! | `Resource` 0x86 | kind `u8`, count `u64` |
//! | `Restore` 0x87 | cid `u32`, cause `u8`, snapshot (to the end) |
//!
//! A tuple is two socket addresses of one family, each a family byte (4 or 6) then, for
//! IPv4, the address (4 bytes, network order) and the port (`u16`); for IPv6, the address
//! (16 bytes, network order), the port, the flow info and the scope id (`u32` each). A host
//! ctrl is a code byte — 0 `Close`, 1 `ShutdownWrite`, 2 `Abort`, 3 `Nodelay` and 4 `Cork`
//! (then a `bool` byte), 5 `SendBufferBytes` and 6 `RecvBufferBytes` (then `u32`), 7
//! `Keepalive` (then an option tag byte and, if 1, idle `u64` ns, interval `u64` ns, probes
//! `u8`). Engine ctrl, reasons, causes and resource kinds are bytes numbering their enum's
//! variants in declaration order; flags are the flag types' bits.
//!
//! Like the snapshot's, the encoding is canonical: a decoder refuses unknown codes and bits,
//! a `bool` other than 0 or 1, and fields that do not fill the declared length exactly, so
//! `decode(b) = Ok((x, n))` implies `encode(x) == b[..n]`. Data and packets longer than
//! [`PAYLOAD_BYTES_MAX`] encode but never decode (the [`Conversation`](super::Conversation)
//! refuses them before they are sent).

use core::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use tcp::{CodecError, ConnectionSnapshot, KeepaliveConfig};

use super::{
    Cid, EngineCmd, EngineCtrl, FourTuple, HostCmd, HostCtrl, PAYLOAD_BYTES_MAX, RecvFlags,
    RefuseReason, ReqId, ResourceKind, RestoreCause, SendFlags,
};

/// Bytes before a command's fields: the kind and the fields' length.
pub const CMD_HEADER_BYTES: usize = 5;

/// Why bytes do not decode to a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecodeError {
    /// The input ends inside the command.
    Truncated,
    /// A kind byte no command has.
    UnknownKind(u8),
    /// A command of the other direction (an engine command where a host command belongs, or
    /// the reverse).
    WrongDirection(u8),
    /// The declared length disagrees with the command's fields.
    BadLength,
    /// A field outside its range (a code, flag bit, `bool` or address family).
    InvalidField(&'static str),
    /// Data or a packet longer than [`PAYLOAD_BYTES_MAX`].
    PayloadTooLong,
    /// The carried snapshot does not decode.
    Snapshot(CodecError),
}

impl core::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            DecodeError::Truncated => f.write_str("handoff command truncated"),
            DecodeError::UnknownKind(k) => write!(f, "unknown handoff command kind {k:#04x}"),
            DecodeError::WrongDirection(k) => {
                write!(f, "handoff command kind {k:#04x} travels the other way")
            }
            DecodeError::BadLength => f.write_str("handoff command length disagrees with fields"),
            DecodeError::InvalidField(n) => write!(f, "handoff command field {n} out of range"),
            DecodeError::PayloadTooLong => f.write_str("handoff command payload too long"),
            DecodeError::Snapshot(e) => write!(f, "handoff command snapshot: {e}"),
        }
    }
}

impl std::error::Error for DecodeError {}

/// Writes the header with a placeholder length, returns where the fields start.
fn begin(out: &mut Vec<u8>, kind: u8) -> usize {
    out.push(kind);
    out.extend_from_slice(&0u32.to_le_bytes());
    out.len()
}

/// Fills in the length of the fields written since `start`.
fn finish(out: &mut [u8], start: usize) {
    // Commands that decode are far below 4 GiB; a larger one gets a length that does not.
    let len = u32::try_from(out.len() - start).unwrap_or(u32::MAX);
    out[start - 4..start].copy_from_slice(&len.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_addr(out: &mut Vec<u8>, a: &SocketAddr) {
    match a {
        SocketAddr::V4(a) => {
            out.push(4);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_le_bytes());
        }
        SocketAddr::V6(a) => {
            out.push(6);
            out.extend_from_slice(&a.ip().octets());
            out.extend_from_slice(&a.port().to_le_bytes());
            put_u32(out, a.flowinfo());
            put_u32(out, a.scope_id());
        }
    }
}

fn host_ctrl(out: &mut Vec<u8>, c: &HostCtrl) {
    match *c {
        HostCtrl::Close => out.push(0),
        HostCtrl::ShutdownWrite => out.push(1),
        HostCtrl::Abort => out.push(2),
        HostCtrl::Nodelay(on) => out.extend_from_slice(&[3, u8::from(on)]),
        HostCtrl::Cork(on) => out.extend_from_slice(&[4, u8::from(on)]),
        HostCtrl::SendBufferBytes(n) => {
            out.push(5);
            put_u32(out, n);
        }
        HostCtrl::RecvBufferBytes(n) => {
            out.push(6);
            put_u32(out, n);
        }
        HostCtrl::Keepalive(None) => out.extend_from_slice(&[7, 0]),
        HostCtrl::Keepalive(Some(KeepaliveConfig {
            idle_ns,
            interval_ns,
            probes_max,
        })) => {
            out.extend_from_slice(&[7, 1]);
            out.extend_from_slice(&idle_ns.to_le_bytes());
            out.extend_from_slice(&interval_ns.to_le_bytes());
            out.push(probes_max);
        }
    }
}

const ENGINE_CTRLS: [EngineCtrl; 4] = [
    EngineCtrl::PeerFin,
    EngineCtrl::Reset,
    EngineCtrl::TimedOut,
    EngineCtrl::Deallocated,
];

fn engine_ctrl_code(c: EngineCtrl) -> u8 {
    match c {
        EngineCtrl::PeerFin => 0,
        EngineCtrl::Reset => 1,
        EngineCtrl::TimedOut => 2,
        EngineCtrl::Deallocated => 3,
    }
}

const RESOURCE_KINDS: [ResourceKind; 3] = [
    ResourceKind::Connections,
    ResourceKind::BufferBytes,
    ResourceKind::BudgetPackets,
];

fn resource_code(k: ResourceKind) -> u8 {
    match k {
        ResourceKind::Connections => 0,
        ResourceKind::BufferBytes => 1,
        ResourceKind::BudgetPackets => 2,
    }
}

const REFUSE_REASONS: [RefuseReason; 5] = [
    RefuseReason::NoConnections,
    RefuseReason::NoBufferMemory,
    RefuseReason::Busy,
    RefuseReason::BadSnapshot,
    RefuseReason::ShuttingDown,
];

fn refuse_code(r: RefuseReason) -> u8 {
    match r {
        RefuseReason::NoConnections => 0,
        RefuseReason::NoBufferMemory => 1,
        RefuseReason::Busy => 2,
        RefuseReason::BadSnapshot => 3,
        RefuseReason::ShuttingDown => 4,
    }
}

const RESTORE_CAUSES: [RestoreCause; 5] = [
    RestoreCause::TimeWait,
    RestoreCause::Closing,
    RestoreCause::ResourceExhaustion,
    RestoreCause::Requested,
    RestoreCause::EngineShutdown,
];

fn cause_code(c: RestoreCause) -> u8 {
    match c {
        RestoreCause::TimeWait => 0,
        RestoreCause::Closing => 1,
        RestoreCause::ResourceExhaustion => 2,
        RestoreCause::Requested => 3,
        RestoreCause::EngineShutdown => 4,
    }
}

impl HostCmd {
    /// Appends the command's encoding (module documentation) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = begin(out, self.kind() as u8);
        match self {
            HostCmd::Handoff {
                req,
                tuple,
                snapshot,
            } => {
                put_u32(out, req.0);
                put_addr(out, &tuple.local);
                put_addr(out, &tuple.remote);
                snapshot.encode(out);
            }
            HostCmd::Restore { cid } => put_u32(out, cid.0),
            HostCmd::Send { cid, data, flags } => {
                put_u32(out, cid.0);
                out.push(flags.bits());
                out.extend_from_slice(data);
            }
            HostCmd::Recvd { cid, len_bytes } | HostCmd::Post { cid, len_bytes } => {
                put_u32(out, cid.0);
                put_u32(out, *len_bytes);
            }
            HostCmd::Ctrl { cid, cmd } => {
                put_u32(out, cid.0);
                host_ctrl(out, cmd);
            }
            HostCmd::Forward { cid, packet } => {
                put_u32(out, cid.0);
                out.extend_from_slice(packet);
            }
        }
        finish(out, start);
    }

    /// Decodes one host → engine command from the start of `bytes`, returning it and the
    /// bytes it used. Never panics; refuses with a [`DecodeError`] anything `encode` would
    /// not have written.
    pub fn decode(bytes: &[u8]) -> Result<(HostCmd, usize), DecodeError> {
        let kind = *bytes.first().ok_or(DecodeError::Truncated)?;
        let (max, too_long) = match kind {
            0x01 => (usize::MAX, DecodeError::BadLength),
            0x02 => (4, DecodeError::BadLength),
            0x03 => (5 + PAYLOAD_BYTES_MAX, DecodeError::PayloadTooLong),
            0x04 | 0x07 => (8, DecodeError::BadLength),
            0x05 => (HOST_CTRL_FIELDS_BYTES_MAX, DecodeError::BadLength),
            0x06 => (4 + PAYLOAD_BYTES_MAX, DecodeError::PayloadTooLong),
            0x81..=0x87 => return Err(DecodeError::WrongDirection(kind)),
            _ => return Err(DecodeError::UnknownKind(kind)),
        };
        let mut r = fields(bytes, max, too_long)?;
        let cmd = match kind {
            0x01 => {
                let req = ReqId(r.u32()?);
                let tuple = r.tuple()?;
                let snapshot = Box::new(r.snapshot()?);
                HostCmd::Handoff {
                    req,
                    tuple,
                    snapshot,
                }
            }
            0x02 => HostCmd::Restore { cid: r.cid()? },
            0x03 => HostCmd::Send {
                cid: r.cid()?,
                flags: SendFlags::from_bits(r.u8()?)
                    .ok_or(DecodeError::InvalidField("send flags"))?,
                data: r.payload()?,
            },
            0x04 => HostCmd::Recvd {
                cid: r.cid()?,
                len_bytes: r.u32()?,
            },
            0x05 => HostCmd::Ctrl {
                cid: r.cid()?,
                cmd: r.host_ctrl()?,
            },
            0x06 => HostCmd::Forward {
                cid: r.cid()?,
                packet: r.payload()?,
            },
            _ => HostCmd::Post {
                cid: r.cid()?,
                len_bytes: r.u32()?,
            },
        };
        Ok((cmd, r.end()?))
    }
}

impl EngineCmd {
    /// Appends the command's encoding (module documentation) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = begin(out, self.kind() as u8);
        match self {
            EngineCmd::HandoffAccepted { req, cid } => {
                put_u32(out, req.0);
                put_u32(out, cid.0);
            }
            EngineCmd::HandoffRefused { req, reason } => {
                put_u32(out, req.0);
                out.push(refuse_code(*reason));
            }
            EngineCmd::Recv { cid, data, flags } => {
                put_u32(out, cid.0);
                out.push(flags.bits());
                out.extend_from_slice(data);
            }
            EngineCmd::Ack { cid, len_bytes } => {
                put_u32(out, cid.0);
                put_u32(out, *len_bytes);
            }
            EngineCmd::Ctrl { cid, cmd } => {
                put_u32(out, cid.0);
                out.push(engine_ctrl_code(*cmd));
            }
            EngineCmd::Resource { kind, count } => {
                out.push(resource_code(*kind));
                out.extend_from_slice(&count.to_le_bytes());
            }
            EngineCmd::Restore {
                cid,
                snapshot,
                cause,
            } => {
                put_u32(out, cid.0);
                out.push(cause_code(*cause));
                snapshot.encode(out);
            }
        }
        finish(out, start);
    }

    /// Decodes one engine → host command from the start of `bytes`, returning it and the
    /// bytes it used. Never panics; refuses with a [`DecodeError`] anything `encode` would
    /// not have written.
    pub fn decode(bytes: &[u8]) -> Result<(EngineCmd, usize), DecodeError> {
        let kind = *bytes.first().ok_or(DecodeError::Truncated)?;
        let (max, too_long) = match kind {
            0x81 | 0x84 => (8, DecodeError::BadLength),
            0x82 | 0x85 => (5, DecodeError::BadLength),
            0x83 => (5 + PAYLOAD_BYTES_MAX, DecodeError::PayloadTooLong),
            0x86 => (9, DecodeError::BadLength),
            0x87 => (usize::MAX, DecodeError::BadLength),
            0x01..=0x07 => return Err(DecodeError::WrongDirection(kind)),
            _ => return Err(DecodeError::UnknownKind(kind)),
        };
        let mut r = fields(bytes, max, too_long)?;
        let cmd = match kind {
            0x81 => EngineCmd::HandoffAccepted {
                req: ReqId(r.u32()?),
                cid: r.cid()?,
            },
            0x82 => EngineCmd::HandoffRefused {
                req: ReqId(r.u32()?),
                reason: r.code(&REFUSE_REASONS, "refuse reason")?,
            },
            0x83 => EngineCmd::Recv {
                cid: r.cid()?,
                flags: RecvFlags::from_bits(r.u8()?)
                    .ok_or(DecodeError::InvalidField("recv flags"))?,
                data: r.payload()?,
            },
            0x84 => EngineCmd::Ack {
                cid: r.cid()?,
                len_bytes: r.u32()?,
            },
            0x85 => EngineCmd::Ctrl {
                cid: r.cid()?,
                cmd: r.code(&ENGINE_CTRLS, "engine ctrl")?,
            },
            0x86 => EngineCmd::Resource {
                kind: r.code(&RESOURCE_KINDS, "resource kind")?,
                count: r.u64()?,
            },
            _ => {
                let cid = r.cid()?;
                let cause = r.code(&RESTORE_CAUSES, "restore cause")?;
                let snapshot = Box::new(r.snapshot()?);
                EngineCmd::Restore {
                    cid,
                    snapshot,
                    cause,
                }
            }
        };
        Ok((cmd, r.end()?))
    }
}

/// Most field bytes of a host `Ctrl`: a cid, the code, a keepalive tag and its parameters.
const HOST_CTRL_FIELDS_BYTES_MAX: usize = 4 + 1 + 1 + 8 + 8 + 1;

/// Splits off the header of a command whose kind is known: a reader over exactly the declared
/// fields. A declared length above `max` (what any command of the kind can have) is refused
/// with `too_long` before waiting for its bytes.
fn fields(bytes: &[u8], max: usize, too_long: DecodeError) -> Result<Reader<'_>, DecodeError> {
    let len: [u8; 4] = bytes
        .get(1..CMD_HEADER_BYTES)
        .and_then(|s| s.try_into().ok())
        .ok_or(DecodeError::Truncated)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > max {
        return Err(too_long);
    }
    let body = bytes
        .get(CMD_HEADER_BYTES..)
        .and_then(|b| b.get(..len))
        .ok_or(DecodeError::Truncated)?;
    Ok(Reader {
        buf: body,
        pos: 0,
        used: CMD_HEADER_BYTES + len,
    })
}

/// Checked little-endian reads over one command's fields. Invariant: `pos ≤ buf.len()`.
struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    /// Bytes of the whole command (header and fields).
    used: usize,
}

impl<'a> Reader<'a> {
    /// The next `n` bytes; running past the declared length means the fields disagree with it.
    fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() - self.pos < n {
            return Err(DecodeError::BadLength);
        }
        let s = &self.buf[self.pos..self.pos + n];
        self.pos += n;
        Ok(s)
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], DecodeError> {
        let mut a = [0u8; N];
        a.copy_from_slice(self.take(N)?);
        Ok(a)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.array::<1>()?[0])
    }
    fn u16(&mut self) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    fn bool(&mut self, name: &'static str) -> Result<bool, DecodeError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(DecodeError::InvalidField(name)),
        }
    }
    fn cid(&mut self) -> Result<Cid, DecodeError> {
        Ok(Cid(self.u32()?))
    }
    /// A byte numbering a variant of `table`.
    fn code<T: Copy>(&mut self, table: &[T], name: &'static str) -> Result<T, DecodeError> {
        table
            .get(usize::from(self.u8()?))
            .copied()
            .ok_or(DecodeError::InvalidField(name))
    }
    fn addr(&mut self) -> Result<SocketAddr, DecodeError> {
        match self.u8()? {
            4 => {
                let ip = Ipv4Addr::from(self.array::<4>()?);
                Ok(SocketAddr::V4(SocketAddrV4::new(ip, self.u16()?)))
            }
            6 => {
                let ip = Ipv6Addr::from(self.array::<16>()?);
                let port = self.u16()?;
                let flowinfo = self.u32()?;
                let scope_id = self.u32()?;
                Ok(SocketAddr::V6(SocketAddrV6::new(
                    ip, port, flowinfo, scope_id,
                )))
            }
            _ => Err(DecodeError::InvalidField("address family")),
        }
    }
    fn tuple(&mut self) -> Result<FourTuple, DecodeError> {
        let local = self.addr()?;
        let remote = self.addr()?;
        if local.is_ipv4() != remote.is_ipv4() {
            return Err(DecodeError::InvalidField("tuple families differ"));
        }
        Ok(FourTuple { local, remote })
    }
    fn host_ctrl(&mut self) -> Result<HostCtrl, DecodeError> {
        Ok(match self.u8()? {
            0 => HostCtrl::Close,
            1 => HostCtrl::ShutdownWrite,
            2 => HostCtrl::Abort,
            3 => HostCtrl::Nodelay(self.bool("nodelay")?),
            4 => HostCtrl::Cork(self.bool("cork")?),
            5 => HostCtrl::SendBufferBytes(self.u32()?),
            6 => HostCtrl::RecvBufferBytes(self.u32()?),
            7 => HostCtrl::Keepalive(if self.bool("keepalive tag")? {
                Some(KeepaliveConfig {
                    idle_ns: self.u64()?,
                    interval_ns: self.u64()?,
                    probes_max: self.u8()?,
                })
            } else {
                None
            }),
            _ => return Err(DecodeError::InvalidField("host ctrl")),
        })
    }
    /// The rest of the fields, as data or a packet.
    fn payload(&mut self) -> Result<Vec<u8>, DecodeError> {
        let n = self.buf.len() - self.pos;
        if n > PAYLOAD_BYTES_MAX {
            return Err(DecodeError::PayloadTooLong);
        }
        Ok(self.take(n)?.to_vec())
    }
    /// The rest of the fields, as exactly one snapshot.
    fn snapshot(&mut self) -> Result<ConnectionSnapshot, DecodeError> {
        let rest = &self.buf[self.pos..];
        let (s, used) = ConnectionSnapshot::decode(rest).map_err(|e| match e {
            // The declared length cut the snapshot short.
            CodecError::Truncated => DecodeError::BadLength,
            e => DecodeError::Snapshot(e),
        })?;
        self.pos += used;
        Ok(s)
    }
    /// Every declared byte read: the command's size.
    fn end(self) -> Result<usize, DecodeError> {
        if self.pos == self.buf.len() {
            Ok(self.used)
        } else {
            Err(DecodeError::BadLength)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The decode tables and the encode matches agree: each variant's code is its position.
    #[test]
    fn code_tables_match_the_encoders() {
        for (k, c) in ENGINE_CTRLS.iter().enumerate() {
            assert_eq!(usize::from(engine_ctrl_code(*c)), k);
        }
        for (k, r) in RESOURCE_KINDS.iter().enumerate() {
            assert_eq!(usize::from(resource_code(*r)), k);
        }
        for (k, r) in REFUSE_REASONS.iter().enumerate() {
            assert_eq!(usize::from(refuse_code(*r)), k);
        }
        for (k, c) in RESTORE_CAUSES.iter().enumerate() {
            assert_eq!(usize::from(cause_code(*c)), k);
        }
    }

    #[test]
    fn fixed_size_commands_have_their_documented_sizes() {
        let cid = Cid(1);
        let size = |c: &HostCmd| {
            let mut b = Vec::new();
            c.encode(&mut b);
            b.len() - CMD_HEADER_BYTES
        };
        assert_eq!(size(&HostCmd::Restore { cid }), 4);
        assert_eq!(size(&HostCmd::Recvd { cid, len_bytes: 1 }), 8);
        assert_eq!(
            size(&HostCmd::Ctrl {
                cid,
                cmd: HostCtrl::Keepalive(Some(KeepaliveConfig::default()))
            }),
            HOST_CTRL_FIELDS_BYTES_MAX
        );
    }
}
