//! One RFC 2544 trial: a paced generator and a counting receiver on two ports, tagged frames
//! for loss and latency.
//!
//! Frames are UDP/IPv4 (UDP checksum 0, allowed for IPv4) of the tested size, FCS included
//! as RFC 2544 counts it (a "64-byte frame" is 60 bytes on the wire here plus the FCS the
//! NIC would add). The payload starts with a tag: magic `0x2544` (u16), trial id (u16),
//! sequence (u32), send time (u64 ns on the tester's clock) — 16 bytes, so it fits the
//! 18 bytes of payload a 64-byte frame has.
//!
//! Ports: AF_PACKET sockets on two interfaces (the generator's with a TPACKET_V2 transmit
//! ring, the `qdisc` bypassed: up to [`TX_BURST_FRAMES`] frames per `send(2)`), or `mem`:
//! an in-process DUT (`forward::Forwarder` on its own thread) between bounded rings, whose
//! full rings are the loss. The receiver answers ARP requests for the receive-side address
//! (so a DUT can resolve its next hop), and its port's `send` also carries the generator's
//! ARP request for the DUT's MAC.

use core::net::Ipv4Addr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use platform::af_packet::{AfPacketConfig, AfPacketSocket, RingVersion, TxRefused};
use wire::{
    ArpOperation, ArpPacket, ArpRepr, EtherType, EthernetAddress, EthernetFrame, IpProtocol,
    Ipv4Packet,
};

/// The tag's magic.
pub const TAG_MAGIC: u16 = 0x2544;
/// Bytes of Ethernet FCS RFC 2544 sizes include and a raw socket does not send.
pub const FCS_BYTES: usize = 4;
/// Latency histogram: 1 µs buckets up to this many µs; slower frames land in the last.
const LAT_BUCKETS_US: usize = 20_000;
/// Frames the generator queues before it hands them to the port's kernel in one go.
pub const TX_BURST_FRAMES: u64 = 32;
/// The generator's transmit ring: blocks of 4 MiB holding 2 KiB slots (8,192 slots).
const GENERATOR_TX_BLOCKS: u32 = 4;

/// Where a trial's frames go and come from.
pub struct Addrs {
    pub src_mac: EthernetAddress,
    /// The DUT's MAC on the generator's side.
    pub dut_mac: EthernetAddress,
    pub src_ip: Ipv4Addr,
    pub dst_ip: Ipv4Addr,
}

/// A frame of `size_bytes` (FCS included) from `a`, tagged later by [`tag`].
pub fn build_frame(a: &Addrs, size_bytes: usize) -> Vec<u8> {
    let len = size_bytes.saturating_sub(FCS_BYTES).max(60);
    let mut f = vec![0u8; len];
    {
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_dst_addr(a.dut_mac);
        eth.set_src_addr(a.src_mac);
        eth.set_ethertype(EtherType::IPV4);
    }
    let ip_len = (len - 14) as u16;
    // Version 4, IHL 5; DF set; protocol UDP.
    f[14] = 0x45;
    f[20] = 0x40;
    f[23] = IpProtocol::UDP.0;
    {
        let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
        ip.set_total_len(ip_len);
        ip.set_hop_limit(64);
        ip.set_src_addr(a.src_ip);
        ip.set_dst_addr(a.dst_ip);
        ip.fill_checksum();
    }
    let udp = &mut f[34..42];
    udp[0..2].copy_from_slice(&1025u16.to_be_bytes());
    udp[2..4].copy_from_slice(&9u16.to_be_bytes());
    udp[4..6].copy_from_slice(&(ip_len - 20).to_be_bytes());
    f
}

/// Writes the tag into a frame from [`build_frame`].
#[inline]
pub fn tag(frame: &mut [u8], trial: u16, seq: u32, ts_ns: u64) {
    if let Some(t) = frame.get_mut(42..58) {
        t[0..2].copy_from_slice(&TAG_MAGIC.to_be_bytes());
        t[2..4].copy_from_slice(&trial.to_be_bytes());
        t[4..8].copy_from_slice(&seq.to_be_bytes());
        t[8..16].copy_from_slice(&ts_ns.to_be_bytes());
    }
}

/// The tag of a received frame: (trial, sequence, send time).
#[inline]
pub fn read_tag(frame: &[u8]) -> Option<(u16, u32, u64)> {
    let t = frame.get(42..58)?;
    if frame.get(12..14)? != [0x08, 0x00] || t[0..2] != TAG_MAGIC.to_be_bytes() {
        return None;
    }
    Some((
        u16::from_be_bytes([t[2], t[3]]),
        u32::from_be_bytes([t[4], t[5], t[6], t[7]]),
        u64::from_be_bytes([t[8], t[9], t[10], t[11], t[12], t[13], t[14], t[15]]),
    ))
}

/// An ARP request from (`mac`, `ip`) for `target`, or a reply when `reply_to` is given.
pub fn arp_frame(
    mac: EthernetAddress,
    ip: Ipv4Addr,
    target: Ipv4Addr,
    reply_to: Option<EthernetAddress>,
) -> Vec<u8> {
    let repr = ArpRepr {
        operation: if reply_to.is_some() {
            ArpOperation::REPLY
        } else {
            ArpOperation::REQUEST
        },
        source_hardware_addr: mac,
        source_protocol_addr: ip,
        target_hardware_addr: reply_to.unwrap_or(EthernetAddress([0; 6])),
        target_protocol_addr: target,
    };
    let mut f = vec![0u8; 60];
    {
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_dst_addr(reply_to.unwrap_or(EthernetAddress::BROADCAST));
        eth.set_src_addr(mac);
        eth.set_ethertype(EtherType::ARP);
    }
    let _ = repr.emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
    f
}

/// An ARP packet in `frame`: (operation, sender MAC, sender IP, target IP).
pub fn parse_arp(frame: &[u8]) -> Option<(ArpOperation, EthernetAddress, Ipv4Addr, Ipv4Addr)> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EtherType::ARP {
        return None;
    }
    let r = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()?;
    Some((
        r.operation,
        r.source_hardware_addr,
        r.source_protocol_addr,
        r.target_protocol_addr,
    ))
}

/// A tester port.
pub trait Port: Send {
    /// Offers one frame; false when the port refuses it for now. A port may hold frames
    /// until [`Port::flush`].
    fn send(&mut self, frame: &[u8]) -> bool;
    /// Hands the frames `send` queued to the wire.
    fn flush(&mut self) {}
    /// Visits up to `max` received frames; returns how many.
    fn recv(&mut self, max: usize, visit: &mut dyn FnMut(&[u8])) -> usize;
    /// Waits up to `ns` for frames.
    fn wait(&mut self, ns: u64);
}

/// An AF_PACKET port.
pub struct PacketPort(pub AfPacketSocket);

impl PacketPort {
    pub fn open(iface: &str, generator: bool) -> std::io::Result<PacketPort> {
        platform::tap::set_interface_up(iface)?;
        let cfg = AfPacketConfig {
            ring: RingVersion::V2,
            block_size_bytes: 1 << 22,
            block_count: 16,
            frame_size_bytes: 2048,
            retire_timeout_ms: 1,
            fanout: None,
            qdisc_bypass: generator,
            ignore_outgoing: true,
            vnet_hdr: false,
            tx_block_count: if generator { GENERATOR_TX_BLOCKS } else { 0 },
        };
        Ok(PacketPort(AfPacketSocket::open(iface, &cfg)?))
    }
}

impl Port for PacketPort {
    fn send(&mut self, frame: &[u8]) -> bool {
        match self.0.tx_enqueue(frame) {
            Ok(()) => true,
            Err(TxRefused::Full) => {
                // Make sure what is queued goes, so slots come back.
                let _ = self.0.tx_kick();
                false
            }
            Err(TxRefused::NoRing | TxRefused::BadLength) => self.0.send(frame).is_ok(),
        }
    }
    fn flush(&mut self) {
        let _ = self.0.tx_kick();
    }
    fn recv(&mut self, max: usize, visit: &mut dyn FnMut(&[u8])) -> usize {
        self.0.recv_batch(max, |b, _| visit(b))
    }
    fn wait(&mut self, ns: u64) {
        use std::os::fd::AsFd;
        let _ = platform::wait::wait_readable_ns(self.0.as_fd(), ns);
    }
}

/// What one trial measured.
#[derive(Debug, Clone, Copy, Default)]
pub struct TrialResult {
    /// Frames the generator put on its port, and in how long.
    pub sent: u64,
    pub send_ns: u64,
    /// Frames the port refused (retried; a sign the generator is at its limit).
    pub send_refused: u64,
    pub received: u64,
    /// Latency of the received frames, µs.
    pub latency_us_avg: f64,
    pub latency_us_p50: u64,
    pub latency_us_p99: u64,
    pub latency_us_max: u64,
}

impl TrialResult {
    /// The rate the generator achieved, frames/s.
    pub fn offered_fps(&self) -> f64 {
        self.sent as f64 * 1e9 / self.send_ns.max(1) as f64
    }
    pub fn lost(&self) -> u64 {
        self.sent.saturating_sub(self.received)
    }
}

/// The receiver: counts tagged frames of the current trial, keeps a latency histogram,
/// answers ARP for `answer_ip` on its port and on the generator side's `side` port.
pub struct Receiver {
    pub trial: Arc<AtomicU64>,
    pub received: Arc<AtomicU64>,
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
    /// (port, its MAC, the IP it answers ARP for)
    pub ports: Vec<(Box<dyn Port>, EthernetAddress, Ipv4Addr)>,
    pub hist: Arc<std::sync::Mutex<Vec<u64>>>,
    /// MACs learnt from ARP replies (sender IP → MAC), for the generator's resolution.
    pub learnt: Arc<std::sync::Mutex<Vec<(Ipv4Addr, EthernetAddress)>>>,
}

impl Receiver {
    /// Runs until `stop`: counts, times, answers ARP.
    pub fn run(mut self) {
        let mut local = vec![0u64; LAT_BUCKETS_US + 1];
        let mut pending_merge = 0u64;
        while !self.stop.load(Ordering::Acquire) {
            let trial = self.trial.load(Ordering::Acquire) as u16;
            let now_ns = u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            let mut got = 0;
            let mut replies: Vec<(usize, Vec<u8>)> = Vec::new();
            for (i, (port, mac, ip)) in self.ports.iter_mut().enumerate() {
                let (mac, ip) = (*mac, *ip);
                got += port.recv(256, &mut |f: &[u8]| {
                    if let Some((t, _, ts)) = read_tag(f) {
                        if t == trial {
                            self.received.fetch_add(1, Ordering::Relaxed);
                            let us = (now_ns.saturating_sub(ts) / 1000) as usize;
                            local[us.min(LAT_BUCKETS_US)] += 1;
                            pending_merge += 1;
                        }
                    } else if let Some((op, from_mac, from_ip, target)) = parse_arp(f) {
                        if op == ArpOperation::REQUEST && target == ip {
                            replies.push((i, arp_frame(mac, ip, from_ip, Some(from_mac))));
                        } else if op == ArpOperation::REPLY
                            && let Ok(mut l) = self.learnt.lock()
                        {
                            l.push((from_ip, from_mac));
                        }
                    }
                });
            }
            for (i, r) in replies {
                let _ = self.ports[i].0.send(&r);
                self.ports[i].0.flush();
            }
            if pending_merge > 0 && (got == 0 || pending_merge > 100_000) {
                if let Ok(mut h) = self.hist.lock() {
                    for (d, s) in h.iter_mut().zip(local.iter_mut()) {
                        *d += std::mem::take(s);
                    }
                }
                pending_merge = 0;
            }
            if got == 0 {
                if let Some((p, ..)) = self.ports.last_mut() {
                    p.wait(200_000);
                }
            }
        }
    }
}

/// Summarises a histogram into (avg, p50, p99, max) µs.
pub fn latency(hist: &[u64]) -> (f64, u64, u64, u64) {
    let n: u64 = hist.iter().sum();
    if n == 0 {
        return (0.0, 0, 0, 0);
    }
    let sum: u64 = hist.iter().enumerate().map(|(us, c)| us as u64 * c).sum();
    let pct = |p: f64| {
        let want = ((n as f64) * p).ceil() as u64;
        let mut acc = 0;
        for (us, c) in hist.iter().enumerate() {
            acc += c;
            if acc >= want.max(1) {
                return us as u64;
            }
        }
        hist.len() as u64 - 1
    };
    let max = hist.iter().rposition(|&c| c > 0).unwrap_or(0) as u64;
    (sum as f64 / n as f64, pct(0.5), pct(0.99), max)
}

/// Runs one trial: `frame` (from [`build_frame`]) sent `rate_fps` times a second (`None`: as
/// fast as the port takes them) for `duration`, then `drain` for stragglers. The frames due
/// are sent in bursts of at most [`TX_BURST_FRAMES`], each flushed at once, so at a paced
/// rate a frame leaves at most one burst's time late.
#[allow(clippy::too_many_arguments)]
pub fn run_trial(
    tx: &mut dyn Port,
    frame: &mut [u8],
    rate_fps: Option<f64>,
    duration: Duration,
    drain: Duration,
    trial_id: u16,
    rx: &ReceiverHandle,
    epoch: Instant,
) -> TrialResult {
    rx.trial.store(u64::from(trial_id), Ordering::Release);
    rx.received.store(0, Ordering::Release);
    if let Ok(mut h) = rx.hist.lock() {
        h.iter_mut().for_each(|c| *c = 0);
    }
    let start = Instant::now();
    let dur_ns = duration.as_nanos() as u64;
    let interval_ns = rate_fps.map(|r| 1e9 / r.max(1.0));
    let (mut sent, mut refused) = (0u64, 0u64);
    loop {
        let el = start.elapsed().as_nanos() as u64;
        if el >= dur_ns {
            break;
        }
        // Frames due by now (the one at `sent` is due at `sent × interval`), at most a burst.
        let burst = match interval_ns {
            Some(iv) => {
                let next_due = (sent as f64 * iv) as u64;
                if el < next_due {
                    if next_due - el > 50_000 {
                        std::thread::sleep(Duration::from_nanos((next_due - el) / 2));
                    } else {
                        std::hint::spin_loop();
                    }
                    continue;
                }
                ((el as f64 / iv) as u64 + 1 - sent).clamp(1, TX_BURST_FRAMES)
            }
            None => TX_BURST_FRAMES,
        };
        for _ in 0..burst {
            let ts = u64::try_from(epoch.elapsed().as_nanos()).unwrap_or(u64::MAX);
            tag(frame, trial_id, sent as u32, ts);
            if tx.send(frame) {
                sent += 1;
            } else {
                refused += 1;
                break;
            }
        }
        tx.flush();
    }
    let send_ns = start.elapsed().as_nanos() as u64;
    std::thread::sleep(drain);
    let received = rx.received.load(Ordering::Acquire);
    // Let the receiver merge its last histogram batch.
    std::thread::sleep(Duration::from_millis(5));
    let hist = rx.hist.lock().map(|h| h.clone()).unwrap_or_default();
    let (avg, p50, p99, max) = latency(&hist);
    TrialResult {
        sent,
        send_ns,
        send_refused: refused,
        received,
        latency_us_avg: avg,
        latency_us_p50: p50,
        latency_us_p99: p99,
        latency_us_max: max,
    }
}

/// What the trial loop shares with the receiver thread.
pub struct ReceiverHandle {
    pub trial: Arc<AtomicU64>,
    pub received: Arc<AtomicU64>,
    pub hist: Arc<std::sync::Mutex<Vec<u64>>>,
    pub learnt: Arc<std::sync::Mutex<Vec<(Ipv4Addr, EthernetAddress)>>>,
    pub stop: Arc<AtomicBool>,
}

impl ReceiverHandle {
    pub fn new() -> ReceiverHandle {
        ReceiverHandle {
            trial: Arc::new(AtomicU64::new(u64::from(u16::MAX))),
            received: Arc::new(AtomicU64::new(0)),
            hist: Arc::new(std::sync::Mutex::new(vec![0; LAT_BUCKETS_US + 1])),
            learnt: Arc::new(std::sync::Mutex::new(Vec::new())),
            stop: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The receiver for `ports`, sharing this handle's counters.
    pub fn receiver(
        &self,
        ports: Vec<(Box<dyn Port>, EthernetAddress, Ipv4Addr)>,
        epoch: Instant,
    ) -> Receiver {
        Receiver {
            trial: self.trial.clone(),
            received: self.received.clone(),
            stop: self.stop.clone(),
            epoch,
            ports,
            hist: self.hist.clone(),
            learnt: self.learnt.clone(),
        }
    }
}
