//! The offload engine on live ports (TAP, AF_PACKET): the same engine thread and shard 0
//! layer as on the `mem` wire ([`crate::offload`]), with the NIC's part played by shard 0's
//! port.
//!
//! On a live port there is no hardware filter and no wire thread: the kernel hands every
//! frame to the shards' sockets. So the software exact-match filter runs where the port's
//! frames are first classified — in shard 0's port, as it reads them, before they enter the
//! shard's NIC queue ([`PortSteer`]):
//!
//! - at the start of each read the port applies the filter changes shard 0's layer queued on
//!   the steering ring (`Steer::Install` / `Remove`, in order) and acknowledges each `Install`
//!   on the `installed` ring: every frame of the flow read before is then in shard 0's NIC
//!   queue or beyond, which is what the engine's hold waits for (`ToEngine::Drained`, as on
//!   the wire);
//! - a frame whose 4-tuple has a filter goes to the engine's receive ring in its pool buffer
//!   (the engine hands the buffer back on a return ring, which the port puts back in the pool
//!   before its next read); a full ring drops it, counted (`rx_drop_engine_ring_full`), and
//!   TCP retransmits;
//! - ARP replies are copied to the engine (its own stack resolves the peers it sends to),
//!   into a buffer of the same pool; a full ring drops the copy, counted.
//!
//! The engine transmits on the same port through its own handle ([`LiveTx`]): the TAP
//! device's queue 0 (a TAP write is one whole frame, so the shard and the engine may share the
//! fd), or a send-only AF_PACKET socket on the interface (the shards' receive sockets ignore
//! outgoing frames, so they do not see these either).
//!
//! Limits: the filter runs in shard 0's port only. With several AF_PACKET shards a frame of
//! an offloaded flow that the kernel's fanout gives another shard reaches shard 0 through
//! the software RETA and is then forwarded to the engine by the bypass socket (`Forward`),
//! after shard 0 may already have sent `Drained`: the engine then sees it out of order, which
//! TCP absorbs. ARP replies another shard reads are copied to shard 0's stack, not to the
//! engine, whose resolution then retries. AF_XDP and pcap replay have no engine.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Instant;

use platform::af_packet_tx::AfPacketSender;
use platform::doorbell::Doorbell;
use platform::tap::TapQueue;
use platform::vnet::VnetHdr;
use shard::{RxQueue, is_arp_reply};
use stack::FourTuple;

use crate::io::PortCounters;
use crate::offload::{
    EngineOut, EnginePort, EngineThread, OffloadSettings, ShardOffload, ShardOffloadRings, Steer,
    ToEngine, duration_ns, engine_stack_config, frame_tuple,
};
use crate::port::{Capture, LivePort, PortKind, is_would_block};
use crate::ring::{Consumer, Producer, ring};
use crate::{EngineStarter, HostConfig, RuntimeError};

/// Shard 0's port side of the engine (module documentation). Invariant: `filters` holds the
/// flows installed and not removed, at most `filters_max`; a frame is steered iff its tuple is
/// in it at the moment the port reads the frame.
pub(crate) struct PortSteer {
    filters: BTreeSet<FourTuple>,
    filters_max: usize,
    changes: Consumer<Steer>,
    installed: Producer<FourTuple>,
    to_engine: Producer<Vec<u8>>,
    returned: Consumer<Vec<u8>>,
    threads: Arc<Vec<OnceLock<Thread>>>,
    engine_index: usize,
    pushed: bool,
    /// Rung by the engine thread when it sent shard 0 commands: shard 0 sleeps in `ppoll`
    /// on its port, which `Thread::unpark` does not reach, so it polls this beside it.
    doorbell: Arc<Doorbell>,
}

impl PortSteer {
    /// Before a read: the engine's spent buffers back into the pool, then the filter changes
    /// in order (each `Install` acknowledged).
    pub(crate) fn begin(&mut self, nic: &mut RxQueue<'_>, c: &mut PortCounters) {
        while let Some(b) = self.returned.pop() {
            nic.recycle(b);
        }
        while let Some(change) = self.changes.pop() {
            match change {
                Steer::Install(t) => {
                    if self.filters.len() < self.filters_max || self.filters.contains(&t) {
                        self.filters.insert(t);
                        c.filters_installed += 1;
                    } else {
                        c.filters_refused += 1;
                    }
                    // Every frame of the flow read so far is in the NIC queue or beyond.
                    if self.installed.push(t).is_err() {
                        c.filters_ack_dropped += 1;
                    }
                }
                Steer::Remove(t) => {
                    if self.filters.remove(&t) {
                        c.filters_removed += 1;
                    } else {
                        c.filters_refused += 1;
                    }
                }
            }
        }
    }

    /// Classifies one received frame: `None` when the engine took it (or it was dropped for
    /// a full ring, its buffer back in the pool), `Some` when it is the shard's.
    pub(crate) fn classify(
        &mut self,
        nic: &mut RxQueue<'_>,
        frame: Vec<u8>,
        c: &mut PortCounters,
    ) -> Option<Vec<u8>> {
        if is_arp_reply(&frame) {
            let mut copy = nic.take_buffer(frame.len());
            copy.extend_from_slice(&frame);
            match self.to_engine.push(copy) {
                Ok(()) => {
                    c.arp_copies_to_engine += 1;
                    self.pushed = true;
                }
                Err(copy) => {
                    c.drop_arp_copy_engine_ring_full += 1;
                    nic.recycle(copy);
                }
            }
            return Some(frame);
        }
        if self.filters.is_empty()
            || !frame_tuple(&frame).is_some_and(|t| self.filters.contains(&t))
        {
            return Some(frame);
        }
        match self.to_engine.push(frame) {
            Ok(()) => {
                c.rx_to_engine += 1;
                self.pushed = true;
            }
            Err(frame) => {
                c.rx_drop_engine_ring_full += 1;
                nic.recycle(frame);
            }
        }
        None
    }

    /// [`PortSteer::classify`] for a frame read behind a virtio-net header: a frame bound
    /// for the engine whose TCP checksum the kernel left partial (its data never left this
    /// host) has it completed first, since the engine verifies every checksum itself.
    pub(crate) fn classify_vnet(
        &mut self,
        nic: &mut RxQueue<'_>,
        mut frame: Vec<u8>,
        hdr: VnetHdr,
        trusted: bool,
        c: &mut PortCounters,
    ) -> Option<Vec<u8>> {
        if hdr.needs_csum()
            && trusted
            && !self.filters.is_empty()
            && frame_tuple(&frame).is_some_and(|t| self.filters.contains(&t))
            && wire::partial::complete_l4_checksum(&mut frame)
        {
            c.rx_checksum_completed += 1;
        }
        self.classify(nic, frame, c)
    }

    /// The doorbell the engine rings (shard 0's idle wait polls it).
    pub(crate) fn doorbell(&self) -> &Doorbell {
        &self.doorbell
    }

    /// After the turn's sends: wakes the engine when frames went to it.
    pub(crate) fn flush(&mut self) {
        if std::mem::take(&mut self.pushed) {
            if let Some(t) = self.threads.get(self.engine_index).and_then(OnceLock::get) {
                t.unpark();
            }
        }
    }
}

/// The engine's handle on the live port (module documentation).
pub(crate) enum LiveTxKind {
    Tap(Arc<TapQueue>),
    AfPacket(AfPacketSender),
}

/// The engine's transmit side on a live port, with the capture and its counters.
pub(crate) struct LiveTx {
    pub kind: LiveTxKind,
    pub capture: Option<Arc<Capture>>,
    pub counters: PortCounters,
}

impl LiveTx {
    /// Sends one frame; `Err(frame)` when the OS is full for now (the caller retries it).
    /// A frame refused with another error is dropped and counted (`tx_drop_error`).
    pub(crate) fn send(&mut self, frame: Vec<u8>) -> Result<(), Vec<u8>> {
        let r = match &self.kind {
            // A TAP opened with the virtio-net header takes one in front of every frame.
            LiveTxKind::Tap(q) if q.has_vnet_hdr() => q.send_vnet(&VnetHdr::NONE, &frame),
            LiveTxKind::Tap(q) => q.send(&frame),
            LiveTxKind::AfPacket(s) => s.send(&frame),
        };
        match r {
            Ok(_) => {
                if let Some(c) = &self.capture {
                    c.record(&frame);
                }
                self.counters.tx_frames += 1;
                self.counters.tx_bytes += frame.len() as u64;
                Ok(())
            }
            Err(e) if is_would_block(&e) => {
                self.counters.tx_would_block += 1;
                Err(frame)
            }
            Err(_) => {
                self.counters.tx_drop_error += 1;
                Ok(())
            }
        }
    }
}

/// The engine's pieces for a live host: shard 0's port gets the filter ([`PortSteer`]),
/// shard 0 the host's layer, the engine thread the rest. `port0` is shard 0's port;
/// `threads` has the engine's slot at index `shards`.
pub(crate) fn parts(
    cfg: &HostConfig,
    o: &OffloadSettings,
    port0: &mut LivePort,
    iface: Option<&str>,
    threads: &Arc<Vec<OnceLock<Thread>>>,
    stop: &Arc<AtomicBool>,
    epoch: Instant,
) -> Result<(ShardOffload, EngineStarter), RuntimeError> {
    let s = usize::from(cfg.shards);
    let kind = match (&port0.kind, iface) {
        (PortKind::Tap { tx, .. }, _) => LiveTxKind::Tap(tx.clone()),
        (PortKind::AfPacket(_), Some(iface)) => LiveTxKind::AfPacket(
            AfPacketSender::open(iface)
                .map_err(|e| RuntimeError::Io(format!("offload engine: af_packet {iface}: {e}")))?,
        ),
        _ => {
            return Err(RuntimeError::Config(
                "an offload engine runs on the mem wire, TAP or AF_PACKET".into(),
            ));
        }
    };
    let tx = LiveTx {
        kind,
        capture: port0.capture.clone(),
        counters: PortCounters::default(),
    };
    let slots = o.ring_slots;
    let (steer_p, steer_c) = ring(slots);
    let (installed_p, installed_c) = ring(slots);
    let (rx_p, rx_c) = ring(cfg.wire_ring_slots);
    let (back_p, back_c) = ring(cfg.wire_ring_slots);
    let doorbell = Arc::new(
        Doorbell::new().map_err(|e| RuntimeError::Io(format!("offload engine: eventfd: {e}")))?,
    );
    port0.steer = Some(Box::new(PortSteer {
        filters: BTreeSet::new(),
        filters_max: usize::try_from(o.engine.limits.connections_max).unwrap_or(usize::MAX),
        changes: steer_c,
        installed: installed_p,
        to_engine: rx_p,
        returned: back_c,
        threads: threads.clone(),
        engine_index: s,
        pushed: false,
        doorbell: doorbell.clone(),
    }));
    let (to_engine, from_host) = ring::<ToEngine>(slots);
    let (to_host, from_engine) = ring(slots);
    let fence = Arc::new(AtomicBool::new(false));
    // No wire thread: shard 0 applies its own steering changes at its next read.
    let no_wire: Arc<OnceLock<Thread>> = Arc::new(OnceLock::new());
    let shard_offload = ShardOffload::new(
        o,
        ShardOffloadRings {
            to_engine,
            installed: installed_c,
            from_engine,
            steer: steer_p,
            wire_thread: no_wire.clone(),
        },
        s,
        fence.clone(),
    );
    let stack_cfg = engine_stack_config(cfg);
    let engine_cfg = o.engine;
    let (threads, stop) = (threads.clone(), stop.clone());
    let fail_after_ns = o.fail_after.map(duration_ns);
    let core = o.core;
    // Transmit completions never come on a live port: the ring's producer is dropped here.
    let (_, completions) = ring::<Vec<u8>>(1);
    let starter: EngineStarter = Box::new(move || {
        std::thread::Builder::new()
            .name("host-engine".into())
            .spawn(move || {
                EngineThread {
                    engine: ::offload::Engine::new(engine_cfg, stack_cfg),
                    port: EnginePort {
                        rx: rx_c,
                        out: EngineOut::Live(Box::new(tx)),
                        post: back_p,
                        completions,
                        post_target: 0,
                        rx_buf_bytes: 0,
                    },
                    from_host,
                    to_host,
                    threads,
                    index: s,
                    wire_thread: no_wire,
                    host_doorbell: Some(doorbell),
                    fence,
                    fail_after_ns,
                    core,
                    stop,
                    epoch,
                }
                .run()
            })
            .map_err(|e| RuntimeError::Thread(e.to_string()))
    });
    Ok((shard_offload, starter))
}
