//! Transmit offloads: TCP segmentation (TSO) and checksum completion.
//!
//! TSO follows what the 82599 (datasheet §7.2.4, "TCP Segmentation") and Linux GSO do with
//! a large TCP send whose headers are a template:
//!
//! - the payload is cut into `mss`-byte pieces (the last may be shorter);
//! - every segment gets a copy of the Ethernet, IP and TCP headers (IPv4 options and TCP
//!   options included);
//! - TCP sequence numbers advance by the bytes before each piece (RFC 9293 §3.4);
//! - IPv4: total length per segment, identification incremented per segment (the 82599
//!   increments it; RFC 6864 §4.1 allows any value for atomic datagrams), header checksum;
//!   IPv6: payload length;
//! - FIN and PSH only on the last segment; CWR only on the first (RFC 3168 §6.1.2: CWR is
//!   set on the first new segment after the window reduction); other flags on all;
//! - TCP checksum of every segment;
//! - the urgent pointer is copied unchanged (rsstack never sends urgent data; RFC 6093 §4
//!   advises against it).
//!
//! Without TSO, checksum offload fills the IPv4 header checksum and/or the TCP/UDP checksum.

use wire::{IpProtocol, Ipv4Packet, Ipv6Packet, SeqNumber, TcpFlags, TcpPacket};

use crate::layout::{L3, Layout, fill_l4_checksum};
use crate::pool::BufferPool;

/// Checksums the NIC fills in on transmit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TxChecksum {
    /// Fill the IPv4 header checksum.
    pub ip: bool,
    /// Fill the TCP or UDP checksum.
    pub l4: bool,
}

/// Offloads requested for one transmitted frame (the context a driver writes beside the
/// descriptor).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct TxOffload {
    /// Segment the TCP payload into pieces of at most this many bytes (TSO). Implies full
    /// checksum offload. `Some(0)` is refused.
    pub tso_mss: Option<u16>,
    /// Checksum completion when not segmenting.
    pub csum: TxChecksum,
}

impl TxOffload {
    /// No offload: the frame leaves as given.
    pub const NONE: TxOffload = TxOffload {
        tso_mss: None,
        csum: TxChecksum {
            ip: false,
            l4: false,
        },
    };

    /// TSO with `mss_bytes` per segment.
    pub const fn tso(mss_bytes: u16) -> Self {
        TxOffload {
            tso_mss: Some(mss_bytes),
            csum: TxChecksum { ip: true, l4: true },
        }
    }

    /// Fill IPv4 and TCP/UDP checksums, no segmentation.
    pub const fn csum() -> Self {
        TxOffload {
            tso_mss: None,
            csum: TxChecksum { ip: true, l4: true },
        }
    }
}

/// Why an offload could not be applied (the frame is dropped and counted
/// `tx_drop_malformed`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TxOffloadError {
    /// Checksum or TSO requested on a frame that is not valid IP.
    NotIp,
    /// TSO on a frame that is not an unfragmented TCP segment over IPv4 or IPv6 without
    /// extension headers; or L4 checksum on something other than TCP/UDP.
    NotTcp,
    /// `tso_mss` of 0.
    ZeroMss,
    /// Segmentation would produce more than 65535 segments.
    TooManySegments,
}

impl core::fmt::Display for TxOffloadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(match self {
            TxOffloadError::NotIp => "offload requested on a non-IP or malformed frame",
            TxOffloadError::NotTcp => "offload does not apply to this transport",
            TxOffloadError::ZeroMss => "TSO with an MSS of 0",
            TxOffloadError::TooManySegments => "TSO would produce too many segments",
        })
    }
}

impl core::error::Error for TxOffloadError {}

/// What applying offloads produced.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxDone {
    /// Frames appended to the output.
    pub frames: usize,
    /// Bytes appended.
    pub bytes: usize,
    /// The frame was split by TSO (more than one segment).
    pub segmented: bool,
    /// Checksums were filled.
    pub csum: bool,
}

/// Applies `offload` to `frame` and appends the wire frame(s) to `out`.
pub(crate) fn apply(
    mut frame: Vec<u8>,
    offload: TxOffload,
    out: &mut Vec<Vec<u8>>,
    pool: &mut BufferPool,
) -> Result<TxDone, TxOffloadError> {
    if let Some(mss) = offload.tso_mss {
        let r = segment(&frame, mss, out, pool);
        match r {
            // Sent as is: the frame itself goes out.
            Ok(TxDone { frames: 0, .. }) => {}
            _ => {
                pool.give(frame);
                return r;
            }
        }
        let l = Layout::parse(&frame).map_err(|_| TxOffloadError::NotIp)?;
        finish_checksums(&mut frame, &l, true, true);
        let bytes = frame.len();
        out.push(frame);
        return Ok(TxDone {
            frames: 1,
            bytes,
            segmented: false,
            csum: true,
        });
    }
    let mut done = TxDone {
        frames: 1,
        bytes: frame.len(),
        ..TxDone::default()
    };
    if offload.csum.ip || offload.csum.l4 {
        let Ok(l) = Layout::parse(&frame) else {
            pool.give(frame);
            return Err(TxOffloadError::NotIp);
        };
        if offload.csum.l4
            && (l.l4_opaque || (l.protocol != IpProtocol::TCP && l.protocol != IpProtocol::UDP))
        {
            pool.give(frame);
            return Err(TxOffloadError::NotTcp);
        }
        finish_checksums(&mut frame, &l, offload.csum.ip, offload.csum.l4);
        done.csum = true;
    }
    out.push(frame);
    Ok(done)
}

fn finish_checksums(frame: &mut [u8], l: &Layout, ip: bool, l4: bool) {
    if ip && l.l3 == L3::V4 {
        fill_ipv4_checksum(frame, l);
    }
    if l4 {
        fill_l4_checksum(frame, l, l.ip_end);
    }
}

fn fill_ipv4_checksum(frame: &mut [u8], l: &Layout) {
    if let Some(ip) = frame.get_mut(l.l3_off..l.ip_end) {
        Ipv4Packet::new_unchecked(ip).fill_checksum();
    }
}

/// Splits a large send into segments appended to `out`. `Ok` with `frames == 0`: the payload
/// fits one segment and the caller sends `frame` itself (checksums filled).
fn segment(
    frame: &[u8],
    mss: u16,
    out: &mut Vec<Vec<u8>>,
    pool: &mut BufferPool,
) -> Result<TxDone, TxOffloadError> {
    if mss == 0 {
        return Err(TxOffloadError::ZeroMss);
    }
    let l = Layout::parse(frame).map_err(|_| TxOffloadError::NotIp)?;
    let tcp = l.tcp(frame).ok_or(TxOffloadError::NotTcp)?;
    let hdr_end = l.l4_off + tcp.header_len();
    let seq0 = tcp.seq_number();
    let flags0 = tcp.flags();
    let payload = frame.get(hdr_end..l.ip_end).unwrap_or(&[]);
    let headers = frame.get(..hdr_end).ok_or(TxOffloadError::NotTcp)?;
    let ident0 = match l.l3 {
        L3::V4 => frame
            .get(l.l3_off..)
            .map_or(0, |b| Ipv4Packet::new_unchecked(b).ident()),
        L3::V6 => 0,
    };
    let mss = usize::from(mss);
    if payload.len() <= mss {
        return Ok(TxDone::default());
    }
    let count = payload.len().div_ceil(mss);
    if count > usize::from(u16::MAX) {
        return Err(TxOffloadError::TooManySegments);
    }
    let mut done = TxDone {
        segmented: true,
        csum: true,
        ..TxDone::default()
    };
    let last = count - 1;
    for (i, chunk) in payload.chunks(mss).enumerate() {
        let mut seg = pool.take(hdr_end + chunk.len());
        seg.extend_from_slice(headers);
        seg.extend_from_slice(chunk);
        let ip_len = u16::try_from(seg.len() - l.l3_off).unwrap_or(u16::MAX);
        if let Some(ip) = seg.get_mut(l.l3_off..) {
            match l.l3 {
                L3::V4 => {
                    let mut p = Ipv4Packet::new_unchecked(ip);
                    p.set_total_len(ip_len);
                    p.set_ident(ident0.wrapping_add(i as u16));
                    p.fill_checksum();
                }
                L3::V6 => {
                    Ipv6Packet::new_unchecked(ip).set_payload_len(ip_len.saturating_sub(40));
                }
            }
        }
        let mut flags = flags0;
        if i != last {
            flags = TcpFlags(flags.0 & !(TcpFlags::FIN.0 | TcpFlags::PSH.0));
        }
        if i != 0 {
            flags = TcpFlags(flags.0 & !TcpFlags::CWR.0);
        }
        if let Some(l4) = seg.get_mut(l.l4_off..) {
            let mut p = TcpPacket::new_unchecked(l4);
            p.set_seq_number(SeqNumber(seq0.0.wrapping_add((i * mss) as u32)));
            p.set_flags(flags);
            p.fill_checksum(&l.addrs);
        }
        done.frames += 1;
        done.bytes += seg.len();
        out.push(seg);
    }
    Ok(done)
}
