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

use platform::af_packet::{AfPacketSocket, TxRefused};
use platform::af_xdp::XdpSocket;
use platform::pcap::PcapWriter;
use platform::tap::TapQueue;
use shard::RxQueue;

use wire::partial::{complete_if_partial, complete_l4_checksum};

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
    pub counters: PortCounters,
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
        nic.receive(frame);
    }
}

fn is_would_block(e: &io::Error) -> bool {
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
        match &mut self.kind {
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
                    if meta.checksum_not_ready() {
                        if complete_l4_checksum(&mut buf) {
                            counters.rx_checksum_completed += 1;
                        } else {
                            counters.rx_checksum_incomplete += 1;
                        }
                    }
                    counters.rx_frames += 1;
                    counters.rx_bytes += buf.len() as u64;
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

    fn send(&mut self, frame: Vec<u8>) -> Result<Option<Vec<u8>>, Vec<u8>> {
        let result = match &mut self.kind {
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
