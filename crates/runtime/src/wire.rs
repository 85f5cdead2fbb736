//! The `mem` backend: an in-process virtual wire joining two hosts' NICs.
//!
//! The wire thread plays the hardware: it takes frames from each shard's transmit ring, paces
//! them at the configured rate, and steers each into the peer host's receive rings with that
//! host's NIC steering (filters → RSS → RETA → queue; queue `q` is served by shard `q`).
//! Steering here is the NIC's work, not a cross-shard message.
//!
//! ARP with several shards sharing one address: a request (broadcast, no RSS hash) goes to the
//! default queue, whose shard answers; a reply is delivered to every shard of the host, so each
//! shard's neighbour cache learns the peer (RFC 826: the target of a reply adds the sender).
//!
//! Lossless by back-pressure: when a receive ring is full the frame waits at the head of its
//! source ring (counted `stalls_ring_full`), as on a link with pause frames; nothing is dropped
//! but malformed frames (`drop_malformed`) and ARP-reply copies that found a ring full
//! (`drop_arp_copy_ring_full`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::{Duration, Instant};

use nic::Nic;

use crate::ring::{Consumer, Producer};

/// Wire settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WireConfig {
    /// Line rate in bits per second; `None` = as fast as the wire thread goes.
    pub rate_bps: Option<u64>,
    /// Frames taken from one transmit ring before moving to the next (fairness).
    pub batch_frames: usize,
}

impl Default for WireConfig {
    fn default() -> Self {
        WireConfig {
            rate_bps: None,
            batch_frames: 64,
        }
    }
}

/// What the wire carried, per direction (0: client → server, 1: server → client).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WireReport {
    pub frames: [u64; 2],
    pub bytes: [u64; 2],
    pub stalls_ring_full: u64,
    pub drop_malformed: u64,
    pub arp_reply_copies: u64,
    pub drop_arp_copy_ring_full: u64,
}

impl WireReport {
    /// Frames the wire lost.
    pub fn drops(&self) -> u64 {
        self.drop_malformed + self.drop_arp_copy_ring_full
    }
}

/// One host as the wire sees it.
pub(crate) struct WirePort {
    /// Transmit rings of the host's shards.
    pub from_shards: Vec<Consumer<Vec<u8>>>,
    /// A frame that found its destination ring full, per source ring.
    pub held: Vec<Option<Vec<u8>>>,
    /// Receive rings of the host's shards and the NIC steering them.
    pub to_shards: Vec<Producer<Vec<u8>>>,
    pub steering: Nic,
    pub threads: Arc<Vec<OnceLock<Thread>>>,
}

const ETHERTYPE_ARP: u16 = 0x0806;
const ARP_OP_REPLY: u16 = 2;

fn is_arp_reply(frame: &[u8]) -> bool {
    let et = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]));
    let op = frame.get(20..22).map(|b| u16::from_be_bytes([b[0], b[1]]));
    et == Some(ETHERTYPE_ARP) && op == Some(ARP_OP_REPLY)
}

pub(crate) struct Wire {
    pub cfg: WireConfig,
    pub ports: [WirePort; 2],
    pub stop: Arc<AtomicBool>,
    pub epoch: Instant,
    pub report: WireReport,
    next_free_ns: u64,
}

/// Where a frame goes on the destination host.
enum Deliver {
    Shard(usize),
    AllShards,
    Drop,
}

impl Wire {
    pub fn new(
        cfg: WireConfig,
        ports: [WirePort; 2],
        stop: Arc<AtomicBool>,
        epoch: Instant,
    ) -> Self {
        Wire {
            cfg,
            ports,
            stop,
            epoch,
            report: WireReport::default(),
            next_free_ns: 0,
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    pub fn run(mut self) -> WireReport {
        let mut wake: [Vec<bool>; 2] = [
            vec![false; self.ports[0].to_shards.len()],
            vec![false; self.ports[1].to_shards.len()],
        ];
        loop {
            if self.stop.load(Ordering::Acquire) {
                break;
            }
            let mut work = 0usize;
            let mut paced_ns: Option<u64> = None;
            for dir in 0..2usize {
                let dst = 1 - dir;
                for src in 0..self.ports[dir].from_shards.len() {
                    for _ in 0..self.cfg.batch_frames {
                        // The clock is read only when pacing needs it.
                        let now = if self.cfg.rate_bps.is_some() {
                            self.now_ns()
                        } else {
                            0
                        };
                        if self.cfg.rate_bps.is_some() && now < self.next_free_ns {
                            paced_ns = Some(self.next_free_ns - now);
                            break;
                        }
                        let frame = match self.ports[dir].held.get_mut(src).and_then(Option::take) {
                            Some(f) => f,
                            None => {
                                match self.ports[dir].from_shards.get(src).and_then(Consumer::pop) {
                                    Some(f) => f,
                                    None => break,
                                }
                            }
                        };
                        let to = if is_arp_reply(&frame) {
                            Deliver::AllShards
                        } else {
                            match self.ports[dst].steering.steer(&frame) {
                                Ok(d) => Deliver::Shard(usize::from(d.queue)),
                                Err(_) => Deliver::Drop,
                            }
                        };
                        let len = frame.len() as u64;
                        match to {
                            Deliver::Drop => {
                                self.report.drop_malformed += 1;
                                continue;
                            }
                            Deliver::AllShards => {
                                let port = &self.ports[dst];
                                for (i, p) in port.to_shards.iter().enumerate() {
                                    if p.push(frame.clone()).is_err() {
                                        self.report.drop_arp_copy_ring_full += 1;
                                    } else {
                                        self.report.arp_reply_copies += 1;
                                        if let Some(w) = wake[dst].get_mut(i) {
                                            *w = true;
                                        }
                                    }
                                }
                            }
                            Deliver::Shard(i) => {
                                let Some(p) = self.ports[dst].to_shards.get(i) else {
                                    self.report.drop_malformed += 1;
                                    continue;
                                };
                                if let Err(f) = p.push(frame) {
                                    self.report.stalls_ring_full += 1;
                                    if let Some(h) = self.ports[dir].held.get_mut(src) {
                                        *h = Some(f);
                                    }
                                    if let Some(w) = wake[dst].get_mut(i) {
                                        *w = true;
                                    }
                                    break;
                                }
                                if let Some(w) = wake[dst].get_mut(i) {
                                    *w = true;
                                }
                            }
                        }
                        work += 1;
                        self.report.frames[dir] += 1;
                        self.report.bytes[dir] += len;
                        if let Some(rate) = self.cfg.rate_bps.filter(|r| *r > 0) {
                            // Preamble, SFD and inter-frame gap: 20 bytes on the line.
                            let bits = (len + 20) * 8;
                            let ns = bits.saturating_mul(1_000_000_000) / rate;
                            self.next_free_ns = self.next_free_ns.max(now).saturating_add(ns);
                        }
                    }
                }
            }
            for (d, flags) in wake.iter_mut().enumerate() {
                for (i, w) in flags.iter_mut().enumerate() {
                    if std::mem::take(w) {
                        if let Some(t) = self.ports[d].threads.get(i).and_then(|t| t.get()) {
                            t.unpark();
                        }
                    }
                }
            }
            if work == 0 {
                let held = self
                    .ports
                    .iter()
                    .any(|p| p.held.iter().any(Option::is_some));
                let ns = match (paced_ns, held) {
                    (Some(ns), _) => ns.min(200_000),
                    (None, true) => 20_000,
                    (None, false) => 1_000_000,
                };
                std::thread::park_timeout(Duration::from_nanos(ns));
            }
        }
        self.report
    }
}
