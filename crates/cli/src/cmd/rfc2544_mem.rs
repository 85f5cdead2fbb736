//! `rfc2544 --io mem`: the device under test in process — `forward::Forwarder` on a thread of
//! its own between two bounded rings (generator → DUT → receiver). A full ring drops the
//! frame: that is the loss a trial sees. Buffers circulate through a third ring back to the
//! generator, so the steady state allocates nothing.

use core::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;

use forward::{Forwarder, ForwarderConfig, NeighbourTable, PortConfig, Verdict};
use runtime::ring::{Consumer, Producer, ring};
use wire::EthernetAddress;

use super::rfc2544_trial::Port;

/// Slots of each ring: deep enough to ride out the DUT thread being descheduled for a few
/// milliseconds on a shared machine.
pub const MEM_RING_SLOTS: usize = 1 << 16;

pub const GEN_MAC: EthernetAddress = EthernetAddress([0x02, 0x25, 0x44, 0, 0, 1]);
pub const DUT_MAC0: EthernetAddress = EthernetAddress([0x02, 0x25, 0x44, 0, 1, 0]);
pub const DUT_MAC1: EthernetAddress = EthernetAddress([0x02, 0x25, 0x44, 0, 1, 1]);
pub const RX_MAC: EthernetAddress = EthernetAddress([0x02, 0x25, 0x44, 0, 0, 2]);

/// The generator's side: frames into the DUT's input ring, in buffers from the free ring.
pub struct MemTx {
    to_dut: Producer<Vec<u8>>,
    free: Consumer<Vec<u8>>,
}

impl Port for MemTx {
    fn send(&mut self, frame: &[u8]) -> bool {
        let mut buf = self.free.pop().unwrap_or_else(|| Vec::with_capacity(2048));
        buf.clear();
        buf.extend_from_slice(frame);
        // A full DUT input ring is a loss the DUT caused (it did not keep up): counted by
        // the trial as sent and not received.
        let _ = self.to_dut.push(buf);
        true
    }
    fn recv(&mut self, _max: usize, _visit: &mut dyn FnMut(&[u8])) -> usize {
        0
    }
    fn wait(&mut self, ns: u64) {
        std::thread::park_timeout(std::time::Duration::from_nanos(ns));
    }
}

/// The receiver's side: frames out of the DUT, buffers back to the generator.
pub struct MemRx {
    from_dut: Consumer<Vec<u8>>,
    free: Producer<Vec<u8>>,
}

impl Port for MemRx {
    fn send(&mut self, _frame: &[u8]) -> bool {
        true
    }
    fn recv(&mut self, max: usize, visit: &mut dyn FnMut(&[u8])) -> usize {
        let mut n = 0;
        while n < max {
            let Some(f) = self.from_dut.pop() else { break };
            visit(&f);
            let _ = self.free.push(f);
            n += 1;
        }
        n
    }
    fn wait(&mut self, ns: u64) {
        std::thread::sleep(std::time::Duration::from_nanos(ns.min(50_000)));
    }
}

/// Starts the DUT thread: port 0 `src_ip`'s /24, port 1 `dst_ip`'s /24, the receiver's MAC
/// known statically. Returns the two tester ports and the DUT thread (stops with `stop`).
pub fn start(
    src_ip: Ipv4Addr,
    dst_ip: Ipv4Addr,
    stop: Arc<AtomicBool>,
) -> Result<(MemTx, MemRx, JoinHandle<forward::Counters>), String> {
    let gw = |ip: Ipv4Addr| Ipv4Addr::from(u32::from(ip) & 0xffff_ff00 | 1);
    let cfg = ForwarderConfig {
        ports: vec![
            PortConfig {
                mac: DUT_MAC0,
                mtu_bytes: 9000,
                ipv4: vec![(gw(src_ip), 24)],
                ipv6: Vec::new(),
            },
            PortConfig {
                mac: DUT_MAC1,
                mtu_bytes: 9000,
                ipv4: vec![(gw(dst_ip), 24)],
                ipv6: Vec::new(),
            },
        ],
        ..ForwarderConfig::default()
    };
    let mut fwd = Forwarder::new(&cfg).map_err(|e| format!("mem DUT: {e}"))?;
    let mut neigh = NeighbourTable::new(16);
    neigh.insert(1, IpAddr::V4(dst_ip), RX_MAC);
    let (in_p, in_c) = ring::<Vec<u8>>(MEM_RING_SLOTS);
    let (out_p, out_c) = ring::<Vec<u8>>(MEM_RING_SLOTS);
    let (free_p, free_c) = ring::<Vec<u8>>(MEM_RING_SLOTS * 4);
    let dut = std::thread::Builder::new()
        .name("rfc2544-dut".into())
        .spawn(move || {
            let mut frames: Vec<Vec<u8>> = Vec::with_capacity(forward::BURST_MAX);
            let mut verdicts = [Verdict::Local; forward::BURST_MAX];
            let epoch = std::time::Instant::now();
            while !stop.load(Ordering::Acquire) {
                while frames.len() < 32 {
                    match in_c.pop() {
                        Some(f) => frames.push(f),
                        None => break,
                    }
                }
                if frames.is_empty() {
                    std::hint::spin_loop();
                    continue;
                }
                let now = epoch.elapsed().as_nanos() as u64;
                let n = frames.len();
                fwd.process_burst(now, 0, &mut frames, &mut verdicts[..n], &mut neigh);
                for (f, v) in frames.drain(..).zip(verdicts) {
                    if let Verdict::Forward { port: 1 } = v {
                        // A full output ring drops (the loss the trial sees).
                        let _ = out_p.push(f);
                    }
                }
            }
            fwd.counters()
        })
        .map_err(|e| e.to_string())?;
    Ok((
        MemTx {
            to_dut: in_p,
            free: free_c,
        },
        MemRx {
            from_dut: out_c,
            free: free_p,
        },
        dut,
    ))
}
