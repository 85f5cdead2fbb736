//! Live ports: a shard's [`ShardIo`] over an OS packet interface (TAP, AF_PACKET, AF_XDP) or
//! a pcap replay, with an optional capture of everything received and sent.
//!
//! One enum ([`PortKind`]) rather than a trait object, so the shard loop calls the backend
//! without dynamic dispatch. Which shard reads what, and why software forwarding is on for
//! every live host with more than one shard, is in [`crate::host`]'s docs.
//!
//! Waiting: a shard with a receive descriptor sleeps in `ppoll(2)` on it
//! ([`platform::wait::wait_readable_ns`]); a shard without one parks. A thread asleep in
//! `ppoll` does not see `Thread::unpark`, which other shards use after forwarding a frame,
//! so when forwarding is on the sleep is capped at [`FORWARD_POLL_NS_MAX`]: a forwarded frame
//! waits at most that long. (An eventfd per shard, written by forwarders and polled beside the
//! port, would remove the cap at the price of a system call per forwarding burst; the cap is
//! simpler and its cost, a few thousand wake-ups per second per idle shard, is small.)

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufWriter};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use nic::TxOffload;
use platform::af_packet::{AfPacketSocket, TxRefused};
use platform::af_xdp::XdpSocket;
use platform::pcap::PcapWriter;
use platform::tap::TapQueue;
use platform::vnet::{VNET_F_NEEDS_CSUM, VNET_GSO_ECN, VNET_GSO_TCPV4, VNET_GSO_TCPV6, VnetHdr};
use shard::RxQueue;

use wire::partial::{complete_if_partial, complete_l4_checksum};

use crate::NicOffload;
use crate::io::{PortCounters, ShardIo};

/// Longest idle wait in `ppoll` when other shards may forward frames to this one, ns.
pub const FORWARD_POLL_NS_MAX: u64 = 200_000;

/// The one capture file every port of a host appends to (`--capture`).
///
/// A mutex around a buffered writer: a debugging aid, not a data-path structure. Records get
/// wall-clock timestamps; the file is flushed when the host stops.
#[derive(Debug)]
pub struct Capture {
    writer: Mutex<PcapWriter<BufWriter<File>>>,
    errors: AtomicU64,
}

impl Capture {
    /// Creates (truncates) `path` and writes the pcap header (link type Ethernet).
    pub fn create(path: &std::path::Path) -> io::Result<Self> {
        let file = File::create(path)?;
        Ok(Capture {
            writer: Mutex::new(PcapWriter::new(BufWriter::new(file))?),
            errors: AtomicU64::new(0),
        })
    }

    /// Appends one frame stamped with the wall clock; failures are counted, not fatal.
    pub fn record(&self, frame: &[u8]) {
        let ts_ns = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        let ok = match self.writer.lock() {
            Ok(mut w) => w.write_frame(ts_ns, frame).is_ok(),
            Err(_) => false,
        };
        if !ok {
            self.errors.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Flushes the file; returns the records written.
    pub fn finish(&self) -> io::Result<u64> {
        let mut w = self
            .writer
            .lock()
            .map_err(|_| io::Error::other("capture writer poisoned"))?;
        w.flush()?;
        Ok(w.records())
    }

    /// Records that failed to be written.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }
}

/// The OS side of one shard.
pub(crate) enum PortKind {
    /// A TAP: `rx` is the queue this shard reads (only shards `0..queues`), `tx` the queue it
    /// writes (a TAP write is one whole frame, so shards may share a queue fd).
    Tap {
        rx: Option<Arc<TapQueue>>,
        tx: Arc<TapQueue>,
    },
    /// One TPACKET_V2 or TPACKET_V3 socket of the host's fanout group, read and written by
    /// this shard only.
    AfPacket(Box<AfPacketSocket>),
    /// An AF_XDP socket. `rx` is set on the shard that reads it; shards beyond the queue
    /// count transmit through a socket another shard reads, hence the mutex (uncontended
    /// when `shards == queues`).
    AfXdp {
        sock: Arc<Mutex<XdpSocket>>,
        rx: bool,
    },
    /// Frames of a pcap file fed in as received traffic (shard 0; the others get none);
    /// transmitted frames are counted and discarded.
    Replay { frames: VecDeque<Vec<u8>> },
}

/// A live port: the backend, its wait descriptor, the capture and the counters.
pub(crate) struct LivePort {
    pub kind: PortKind,
    /// Polled while idle; `None` parks instead.
    pub wait_fd: Option<OwnedFd>,
    pub capture: Option<Arc<Capture>>,
    /// Receive buffer size for backends that read into our buffer (TAP), bytes; one more
    /// than the largest frame accepted, so a read that fills it was truncated.
    pub rx_buf_bytes: usize,
    /// Other shards may forward frames here: cap the `ppoll` sleep.
    pub forwarding: bool,
    /// The offloads asked of the port (what received checksums to trust).
    pub nic_offload: NicOffload,
    pub counters: PortCounters,
    /// Shard 0's software exact-match filter and the offload engine's receive ring, when the
    /// host has an engine ([`crate::offload_live`]).
    pub steer: Option<Box<crate::offload_live::PortSteer>>,
}

impl LivePort {
    fn take_rx(&mut self, nic: &mut RxQueue<'_>, mut frame: Vec<u8>) {
        if let Some(c) = &self.capture {
            c.record(&frame);
        }
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += frame.len() as u64;
        if frame.is_empty() {
            nic.recycle(std::mem::take(&mut frame));
            return;
        }
        if let Some(s) = &mut self.steer {
            match s.classify(nic, frame, &mut self.counters) {
                Some(f) => frame = f,
                None => return,
            }
        }
        nic.receive(frame);
    }

    /// A frame read behind a virtio-net header (TAP), into the NIC queue.
    fn take_rx_vnet(&mut self, nic: &mut RxQueue<'_>, mut frame: Vec<u8>, hdr: VnetHdr) {
        if let Some(c) = &self.capture {
            c.record(&frame);
        }
        self.counters.rx_frames += 1;
        self.counters.rx_bytes += frame.len() as u64;
        if frame.is_empty() {
            nic.recycle(frame);
            return;
        }
        let valid = vnet_rx(&mut self.counters, self.nic_offload.csum, hdr, &mut frame);
        if let Some(s) = &mut self.steer {
            match s.classify_vnet(nic, frame, hdr, valid, &mut self.counters) {
                Some(f) => frame = f,
                None => return,
            }
        }
        if valid {
            nic.receive_l4_valid(frame);
        } else {
            nic.receive(frame);
        }
    }
}

/// What the kernel said in a received frame's virtio-net header: counts a coalesced frame,
/// completes a partial checksum when checksum offload is off (else trusts it: the data never
/// left this host), trusts `DATA_VALID` when it is on. True when the frame's transport
/// checksum is to be taken as valid without verification.
fn vnet_rx(c: &mut PortCounters, csum_on: bool, hdr: VnetHdr, frame: &mut [u8]) -> bool {
    if hdr.is_gso_tcp() {
        c.rx_gro_frames += 1;
    }
    let valid = if hdr.needs_csum() {
        if csum_on {
            true
        } else {
            if complete_l4_checksum(frame) {
                c.rx_checksum_completed += 1;
            } else {
                c.rx_checksum_incomplete += 1;
            }
            false
        }
    } else {
        hdr.data_valid() && csum_on
    };
    if valid {
        c.rx_csum_valid += 1;
    }
    valid
}

/// The virtio-net header asking the kernel for `offload` on `frame` (Ethernet, an optional
/// 802.1Q tag, IPv4 or IPv6 without extension headers): TSO → `gso_type` TCPV4/TCPV6 (with
/// ECN when the frame carries CWR), `gso_size` = the MSS, `hdr_len` = the headers' bytes, and
/// a partial checksum; a checksum request alone → `NEEDS_CSUM` at the TCP (16) or UDP (6)
/// checksum; nothing asked → [`VnetHdr::NONE`]. `None` when offloads are asked of a frame
/// that is not TCP (TSO) or TCP/UDP (checksum) over IP.
pub(crate) fn vnet_header(frame: &[u8], offload: TxOffload) -> Option<VnetHdr> {
    if offload.tso_mss.is_none() && !offload.csum.l4 {
        return Some(VnetHdr::NONE);
    }
    let mut l3 = 14;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 = 18;
    }
    let (v6, l4, proto) = match ethertype {
        0x0800 => {
            let ihl = usize::from(frame.get(l3)? & 0x0f) * 4;
            if ihl < 20 {
                return None;
            }
            (false, l3 + ihl, *frame.get(l3 + 9)?)
        }
        0x86dd => (true, l3 + 40, *frame.get(l3 + 6)?),
        _ => return None,
    };
    const TCP: u8 = 6;
    const UDP: u8 = 17;
    let csum_offset = match proto {
        TCP => 16,
        UDP => 6,
        _ => return None,
    };
    let csum_start = u16::try_from(l4).ok()?;
    let Some(mss) = offload.tso_mss else {
        frame.get(l4 + usize::from(csum_offset) + 1)?;
        return Some(VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            csum_start,
            csum_offset,
            ..VnetHdr::NONE
        });
    };
    if proto != TCP || mss == 0 {
        return None;
    }
    let thl = usize::from(frame.get(l4 + 12)? >> 4) * 4;
    let flags = *frame.get(l4 + 13)?;
    if thl < 20 || frame.len() < l4 + thl {
        return None;
    }
    let mut gso_type = if v6 { VNET_GSO_TCPV6 } else { VNET_GSO_TCPV4 };
    if flags & 0x80 != 0 {
        gso_type |= VNET_GSO_ECN;
    }
    Some(VnetHdr {
        flags: VNET_F_NEEDS_CSUM,
        gso_type,
        hdr_len: u16::try_from(l4 + thl).ok()?,
        gso_size: mss,
        csum_start,
        csum_offset: 16,
    })
}

pub(crate) fn is_would_block(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
    ) || e.raw_os_error() == Some(ENOBUFS)
}

/// Linux's `ENOBUFS`: a full device queue on AF_PACKET sends; retried like `EAGAIN`.
const ENOBUFS: i32 = 105;

impl ShardIo for LivePort {
    fn receive(&mut self, nic: &mut RxQueue<'_>, max_frames: usize) -> usize {
        let mut n = 0;
        if let Some(s) = &mut self.steer {
            s.begin(nic, &mut self.counters);
        }
        match &mut self.kind {
            PortKind::Tap { rx: Some(q), .. } if q.has_vnet_hdr() => {
                let q = q.clone();
                while n < max_frames {
                    let mut buf = nic.take_buffer(self.rx_buf_bytes);
                    match q.recv_vnet_vec(&mut buf, self.rx_buf_bytes) {
                        Ok((len, _)) if len >= self.rx_buf_bytes => {
                            self.counters.rx_drop_truncated += 1;
                            nic.recycle(buf);
                        }
                        Ok((_, hdr)) => {
                            self.take_rx_vnet(nic, buf, hdr);
                            n += 1;
                        }
                        Err(e) => {
                            if !is_would_block(&e) {
                                self.counters.rx_errors += 1;
                            }
                            nic.recycle(buf);
                            break;
                        }
                    }
                }
            }
            PortKind::Tap { rx: Some(q), .. } => {
                let q = q.clone();
                while n < max_frames {
                    let mut buf = nic.take_buffer(self.rx_buf_bytes);
                    buf.resize(self.rx_buf_bytes, 0);
                    match q.recv(&mut buf) {
                        Ok(len) if len >= self.rx_buf_bytes => {
                            self.counters.rx_drop_truncated += 1;
                            nic.recycle(buf);
                        }
                        Ok(len) => {
                            buf.truncate(len);
                            self.take_rx(nic, buf);
                            n += 1;
                        }
                        Err(e) => {
                            if !is_would_block(&e) {
                                self.counters.rx_errors += 1;
                            }
                            nic.recycle(buf);
                            break;
                        }
                    }
                }
            }
            PortKind::Tap { rx: None, .. } => {}
            PortKind::AfPacket(sock) => {
                let counters = &mut self.counters;
                let capture = &self.capture;
                let csum_on = self.nic_offload.csum;
                let steer = &mut self.steer;
                n = sock.recv_batch(max_frames, |bytes, meta| {
                    if let Some(c) = capture {
                        c.record(bytes);
                    }
                    if meta.truncated(bytes.len()) {
                        counters.rx_drop_truncated += 1;
                        return;
                    }
                    let mut buf = nic.take_buffer(bytes.len());
                    buf.extend_from_slice(bytes);
                    if let Some(hdr) = meta.vnet {
                        counters.rx_frames += 1;
                        counters.rx_bytes += buf.len() as u64;
                        let valid = vnet_rx(counters, csum_on, hdr, &mut buf);
                        if let Some(s) = steer {
                            match s.classify_vnet(nic, buf, hdr, valid, counters) {
                                Some(b) => buf = b,
                                None => return,
                            }
                        }
                        if valid {
                            nic.receive_l4_valid(buf);
                        } else {
                            nic.receive(buf);
                        }
                        return;
                    }
                    if meta.checksum_not_ready() {
                        if complete_l4_checksum(&mut buf) {
                            counters.rx_checksum_completed += 1;
                        } else {
                            counters.rx_checksum_incomplete += 1;
                        }
                    }
                    counters.rx_frames += 1;
                    counters.rx_bytes += buf.len() as u64;
                    let buf = match steer {
                        Some(s) => match s.classify(nic, buf, counters) {
                            Some(b) => b,
                            None => return,
                        },
                        None => buf,
                    };
                    nic.receive(buf);
                });
            }
            PortKind::AfXdp { sock, rx: true } => {
                let counters = &mut self.counters;
                let capture = &self.capture;
                if let Ok(mut s) = sock.lock() {
                    n = s.recv_batch(max_frames, |bytes| {
                        if let Some(c) = capture {
                            c.record(bytes);
                        }
                        let mut buf = nic.take_buffer(bytes.len());
                        buf.extend_from_slice(bytes);
                        if complete_if_partial(&mut buf) {
                            counters.rx_checksum_completed += 1;
                        }
                        counters.rx_frames += 1;
                        counters.rx_bytes += buf.len() as u64;
                        nic.receive(buf);
                    });
                }
            }
            PortKind::AfXdp { rx: false, .. } => {}
            PortKind::Replay { frames } => {
                let mut taken = Vec::new();
                while n < max_frames {
                    let Some(f) = frames.pop_front() else { break };
                    taken.push(f);
                    n += 1;
                }
                for f in taken {
                    self.counters.replay_frames += 1;
                    self.take_rx(nic, f);
                }
            }
        }
        n
    }

    fn tx_offload_in_device(&self) -> bool {
        match &self.kind {
            PortKind::Tap { tx, .. } => tx.has_vnet_hdr(),
            PortKind::AfPacket(sock) => sock.has_vnet_hdr(),
            _ => false,
        }
    }

    fn send_offload(
        &mut self,
        frame: Vec<u8>,
        offload: TxOffload,
    ) -> Result<Option<Vec<u8>>, Vec<u8>> {
        if !self.tx_offload_in_device() {
            return self.send(frame);
        }
        let Some(hdr) = vnet_header(&frame, offload) else {
            // Offloads asked of a frame that is not TCP/UDP over IP: the stack never builds
            // one; dropped and counted rather than sent with a wrong checksum.
            self.counters.tx_drop_offload_malformed += 1;
            return Ok(Some(frame));
        };
        let sent = match &self.kind {
            PortKind::Tap { tx, .. } => tx.send_vnet(&hdr, &frame),
            PortKind::AfPacket(sock) => sock.send_vnet(&hdr, &frame),
            _ => Err(io::Error::other("no virtio-net header on this port")),
        };
        match sent {
            Ok(_) => {
                if let Some(c) = &self.capture {
                    c.record(&frame);
                }
                let c = &mut self.counters;
                c.tx_frames += 1;
                c.tx_bytes += frame.len() as u64;
                if hdr.is_gso_tcp() {
                    c.tx_tso_frames += 1;
                    let payload = frame.len().saturating_sub(usize::from(hdr.hdr_len));
                    c.tx_tso_segments += payload.div_ceil(usize::from(hdr.gso_size.max(1))) as u64;
                }
                if hdr.needs_csum() {
                    c.tx_csum_offloaded += 1;
                }
                Ok(Some(frame))
            }
            Err(e) if is_would_block(&e) => {
                self.counters.tx_would_block += 1;
                Err(frame)
            }
            Err(_) => {
                self.counters.tx_drop_error += 1;
                Ok(Some(frame))
            }
        }
    }

    fn send(&mut self, frame: Vec<u8>) -> Result<Option<Vec<u8>>, Vec<u8>> {
        let result = match &mut self.kind {
            PortKind::Tap { tx, .. } if tx.has_vnet_hdr() => {
                tx.send_vnet(&VnetHdr::NONE, &frame).map(|_| ())
            }
            PortKind::Tap { tx, .. } => tx.send(&frame).map(|_| ()),
            PortKind::AfPacket(sock) => match sock.tx_enqueue(&frame) {
                Ok(()) => Ok(()),
                Err(TxRefused::Full) => Err(io::Error::from(io::ErrorKind::WouldBlock)),
                // No ring, or a frame no slot holds: its own send(2), behind the queued
                // slots so the order on the wire stays the order of `send`.
                Err(TxRefused::NoRing | TxRefused::BadLength) => match sock.tx_kick() {
                    Err(e) if sock.tx_kick_pending() => Err(e),
                    _ => sock.send(&frame).map(|_| ()),
                },
            },
            PortKind::AfXdp { sock, .. } => match sock.lock() {
                Ok(mut s) => s.send(&frame),
                Err(_) => Err(io::Error::other("xdp socket poisoned")),
            },
            PortKind::Replay { .. } => {
                self.counters.tx_discarded += 1;
                Ok(())
            }
        };
        match result {
            Ok(()) => {
                if let Some(c) = &self.capture {
                    c.record(&frame);
                }
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += frame.len() as u64;
                Ok(Some(frame))
            }
            Err(e) if is_would_block(&e) => {
                self.counters.tx_would_block += 1;
                Err(frame)
            }
            Err(_) => {
                self.counters.tx_drop_error += 1;
                Ok(Some(frame))
            }
        }
    }

    fn flush(&mut self) {
        if let Some(s) = &mut self.steer {
            s.flush();
        }
        if let PortKind::AfPacket(sock) = &mut self.kind {
            // One send(2) for the whole burst; frames a full device queue left behind stay
            // queued in the ring and go with the next kick.
            let _ = sock.tx_kick();
        }
        if let PortKind::AfXdp { sock, .. } = &self.kind {
            if let Ok(mut s) = sock.lock() {
                // Kick the kernel (copy mode sends only inside a system call) and reap
                // completions; a failed kick is retried on the next iteration.
                if s.tx_in_flight() > 0 {
                    let _ = s.poll_tx();
                }
            }
        }
    }

    fn idle(&mut self, sleep_ns: u64) {
        let sleep_ns = if self.forwarding {
            sleep_ns.min(FORWARD_POLL_NS_MAX)
        } else {
            sleep_ns
        };
        if let (Some(fd), Some(s)) = (&self.wait_fd, &self.steer) {
            // The offload engine's doorbell beside the port (`offload_live`).
            let bell = s.doorbell();
            match platform::wait::wait_any_readable_ns(&[fd.as_fd(), bell.as_fd()], sleep_ns) {
                Ok(true) => {
                    if !bell.clear() {
                        self.counters.wakeups_readable += 1;
                    }
                }
                Ok(false) => {}
                Err(_) => {
                    self.counters.rx_errors += 1;
                    std::thread::park_timeout(Duration::from_nanos(sleep_ns));
                }
            }
            return;
        }
        match &self.wait_fd {
            Some(fd) => match platform::wait::wait_readable_ns(fd.as_fd(), sleep_ns) {
                Ok(true) => self.counters.wakeups_readable += 1,
                Ok(false) => {}
                Err(_) => {
                    self.counters.rx_errors += 1;
                    std::thread::park_timeout(Duration::from_nanos(sleep_ns));
                }
            },
            None => std::thread::park_timeout(Duration::from_nanos(sleep_ns)),
        }
    }

    fn counters(&mut self) -> PortCounters {
        match &self.kind {
            // Reading PACKET_STATISTICS resets it, so the drops accumulate.
            PortKind::AfPacket(sock) => {
                match sock.take_stats() {
                    Ok(stats) => self.counters.rx_drop_kernel += u64::from(stats.drops),
                    Err(_) => self.counters.rx_errors += 1,
                }
                let t = sock.tx_counters();
                self.counters.tx_ring_full = t.ring_full;
                self.counters.tx_kicks = t.kicks;
                self.counters.tx_kick_errors = t.kick_errors + t.kicks_incomplete;
                // Cumulative since the socket opened.
                let e = sock.ring_errors();
                self.counters.rx_drop_ring_invalid = e.bad_block_header + e.bad_frame_header;
            }
            // XDP_STATISTICS is cumulative since bind; only the reading shard owns its RX.
            PortKind::AfXdp { sock, rx: true } => match sock.lock() {
                Ok(s) => {
                    match s.kernel_stats() {
                        Ok(k) => self.counters.rx_drop_kernel = k.rx_ring_full + k.rx_dropped,
                        Err(_) => self.counters.rx_errors += 1,
                    }
                    self.counters.rx_drop_ring_invalid = s.counters().rx_invalid_desc;
                }
                Err(_) => self.counters.rx_errors += 1,
            },
            _ => {}
        }
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nic::TxChecksum;

    /// Ethernet + IPv4 (or IPv6) + a TCP header of `tcp_hdr` bytes with `flags` + `payload`
    /// bytes of payload (contents irrelevant to the header builder).
    fn frame(v6: bool, tcp_hdr: usize, flags: u8, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14];
        f[12..14].copy_from_slice(if v6 { &[0x86, 0xdd] } else { &[0x08, 0x00] });
        if v6 {
            let mut ip = vec![0u8; 40];
            ip[0] = 0x60;
            ip[6] = 6;
            f.extend_from_slice(&ip);
        } else {
            let mut ip = vec![0u8; 20];
            ip[0] = 0x45;
            ip[9] = 6;
            f.extend_from_slice(&ip);
        }
        let mut tcp = vec![0u8; tcp_hdr];
        tcp[12] = ((tcp_hdr / 4) as u8) << 4;
        tcp[13] = flags;
        f.extend_from_slice(&tcp);
        f.resize(f.len() + payload, 0xab);
        f
    }

    #[test]
    fn tso_frame_asks_the_kernel_to_segment_at_the_mss_and_checksum() {
        let f = frame(false, 32, 0x10, 10 * 1448);
        let h = vnet_header(&f, TxOffload::tso(1448)).expect("tcp/ipv4");
        assert_eq!(h.gso_type, VNET_GSO_TCPV4);
        assert_eq!(h.gso_size, 1448);
        assert_eq!(h.hdr_len, 14 + 20 + 32);
        assert_eq!(h.flags, VNET_F_NEEDS_CSUM);
        assert_eq!((h.csum_start, h.csum_offset), (34, 16));
        let h6 = vnet_header(&frame(true, 20, 0x80 | 0x10, 3000), TxOffload::tso(1440))
            .expect("tcp/ipv6");
        assert_eq!(h6.gso_type, VNET_GSO_TCPV6 | VNET_GSO_ECN, "CWR set: ECN");
        assert_eq!((h6.hdr_len, h6.csum_start), (14 + 40 + 20, 54));
    }

    #[test]
    fn checksum_request_alone_points_at_the_transport_checksum() {
        let csum = TxOffload {
            tso_mss: None,
            csum: TxChecksum {
                ip: false,
                l4: true,
            },
        };
        let h = vnet_header(&frame(false, 20, 0x10, 100), csum).expect("tcp");
        assert_eq!(h.gso_type, platform::vnet::VNET_GSO_NONE);
        assert_eq!(
            (h.flags, h.csum_start, h.csum_offset),
            (VNET_F_NEEDS_CSUM, 34, 16)
        );
        let mut udp = frame(false, 20, 0, 10);
        udp[14 + 9] = 17;
        assert_eq!(vnet_header(&udp, csum).expect("udp").csum_offset, 6);
        assert_eq!(
            vnet_header(&udp, TxOffload::tso(1000)),
            None,
            "TSO is TCP only"
        );
        assert_eq!(
            vnet_header(&frame(false, 20, 0x10, 100), TxOffload::NONE),
            Some(VnetHdr::NONE)
        );
    }

    #[test]
    fn offloads_on_frames_that_are_not_ip_or_are_cut_short_are_refused() {
        let mut arp = frame(false, 20, 0, 0);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(vnet_header(&arp, TxOffload::tso(1448)), None);
        let f = frame(false, 20, 0x10, 0);
        for cut in [0, 13, 20, 40, 45] {
            assert_eq!(vnet_header(&f[..cut], TxOffload::tso(1448)), None, "{cut}");
        }
        let mut bad_ihl = frame(false, 20, 0x10, 10);
        bad_ihl[14] = 0x44;
        assert_eq!(vnet_header(&bad_ihl, TxOffload::tso(1448)), None);
        assert_eq!(vnet_header(&f, TxOffload::tso(0)), None);
    }
}
