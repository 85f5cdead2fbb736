//! The receive/transmit side of a shard: `ShardIo`, its `mem` implementation (`MemIo`,
//! the wire's rings) and the frame predicates the live ports share.
//!
//! The shard loop ([`crate::shard`]) is generic over `ShardIo` (monomorphised, no `dyn` on the
//! data path): the same loop drives the in-memory wire and the OS ports of
//! the live ports (`port::LivePort`).

use std::sync::{Arc, OnceLock};
use std::thread::Thread;
use std::time::Duration;

use shard::RxQueue;

use crate::ring::{Consumer, Producer};

/// What a port counted (all zero on the `mem` wire, whose counters are in
/// [`crate::WireReport`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PortCounters {
    /// Frames read from the OS and handed to the NIC queue.
    pub rx_frames: u64,
    pub rx_bytes: u64,
    /// Frames and bytes the OS accepted for transmission.
    pub tx_frames: u64,
    pub tx_bytes: u64,
    /// Transmit attempts the OS refused for now (`EAGAIN`, ring full); the frame stayed in the
    /// shard's bounded backlog and was retried.
    pub tx_would_block: u64,
    /// Frames dropped because the OS refused them with an error other than "try again".
    pub tx_drop_error: u64,
    /// Receive calls that failed with an error other than "nothing waiting".
    pub rx_errors: u64,
    /// Dropped: the frame was cut short (it did not fit the receive slot, e.g. a GSO
    /// super-frame larger than the ring's frames or the read buffer).
    pub rx_drop_truncated: u64,
    /// Frames whose TCP/UDP checksum the sender left to offload (`TP_STATUS_CSUMNOTREADY`)
    /// and the port completed in software.
    pub rx_checksum_completed: u64,
    /// Frames flagged checksum-not-ready that the port could not complete (not TCP/UDP over
    /// IPv4/IPv6 without extension headers, or inconsistent lengths); passed on unchanged, the
    /// stack's checksum check decides.
    pub rx_checksum_incomplete: u64,
    /// Frames the pcap replay fed in.
    pub replay_frames: u64,
    /// Transmitted frames a replay port discarded (there is no wire behind it).
    pub tx_discarded: u64,
    /// `--capture` records that failed to be written.
    pub capture_errors: u64,
    /// Times the idle wait returned because the port had frames.
    pub wakeups_readable: u64,
    /// Frames the kernel dropped on their way to this port because we did not read fast
    /// enough: an AF_PACKET ring with every block handed to user space (`PACKET_STATISTICS`
    /// `tp_drops`), an AF_XDP RX ring full or a frame it could not place
    /// (`XDP_STATISTICS` `rx_ring_full` + `rx_dropped`). Read when the shard stops. A TAP's
    /// drops are counted by the kernel per device (`tx_dropped` of `ip -s link`), not here.
    pub rx_drop_kernel: u64,
    /// Frames dropped because their ring entry failed the port's checks (an AF_PACKET frame
    /// header pointing outside its slot or block, or a V3 block whose first frame lies outside
    /// it, counted once per block; an AF_XDP descriptor outside the UMEM or for a frame not
    /// lent to the kernel). Read when the shard stops; zero unless the kernel misbehaves or
    /// the shared ring was corrupted.
    pub rx_drop_ring_invalid: u64,
}

impl PortCounters {
    /// Adds `o` field by field.
    pub fn add(&mut self, o: &PortCounters) {
        self.rx_frames += o.rx_frames;
        self.rx_bytes += o.rx_bytes;
        self.tx_frames += o.tx_frames;
        self.tx_bytes += o.tx_bytes;
        self.tx_would_block += o.tx_would_block;
        self.tx_drop_error += o.tx_drop_error;
        self.rx_errors += o.rx_errors;
        self.rx_drop_truncated += o.rx_drop_truncated;
        self.rx_checksum_completed += o.rx_checksum_completed;
        self.rx_checksum_incomplete += o.rx_checksum_incomplete;
        self.replay_frames += o.replay_frames;
        self.tx_discarded += o.tx_discarded;
        self.capture_errors += o.capture_errors;
        self.wakeups_readable += o.wakeups_readable;
        self.rx_drop_kernel += o.rx_drop_kernel;
        self.rx_drop_ring_invalid += o.rx_drop_ring_invalid;
    }

    /// Frames lost at the port: by it, or by the kernel in front of it.
    pub fn drops(&self) -> u64 {
        self.tx_drop_error
            + self.rx_drop_truncated
            + self.rx_drop_kernel
            + self.rx_drop_ring_invalid
    }
}

/// A shard's port: where received frames come from and transmitted frames go.
pub(crate) trait ShardIo: Send {
    /// Moves up to `max_frames` received frames into the shard's NIC queue; returns how many.
    fn receive(&mut self, queue: &mut RxQueue<'_>, max_frames: usize) -> usize;
    /// Offers one frame for transmission. `Ok(Some(buf))`: sent, and `buf` may be reused
    /// (the caller recycles it); `Ok(None)`: sent, the buffer comes back later through
    /// [`ShardIo::reap_completion`]; `Err(frame)`: the port is full for now, the caller keeps
    /// the frame and retries.
    fn send(&mut self, frame: Vec<u8>) -> Result<Option<Vec<u8>>, Vec<u8>>;
    /// A transmit completion: the buffer of a frame [`ShardIo::send`] took earlier
    /// (`Ok(None)`), now free for reuse. The driver reaps until `None` before the core's
    /// iteration, so the stack builds its next frames in them. Ports that hand buffers back
    /// from `send` have none.
    fn reap_completion(&mut self) -> Option<Vec<u8>> {
        None
    }
    /// Called once per loop iteration after the sends: wake the consumer, kick the kernel,
    /// reap completions.
    fn flush(&mut self);
    /// Nothing to do: wait at most `sleep_ns` for received frames or an unpark.
    fn idle(&mut self, sleep_ns: u64);
    /// The port's counters, with the kernel's drop counters read now (called when the shard
    /// stops).
    fn counters(&mut self) -> PortCounters;
}

/// The `mem` wire's side of one shard: its receive and transmit rings, the ring on which it
/// posts empty receive buffers and the ring on which the wire completes its transmitted ones
/// (see [`crate::wire`] for how the buffers circulate).
///
/// Invariants: `outstanding` counts the buffers posted and not yet received back with a frame
/// (on `post`, in the wire's spare slot, or on `rx`) and never exceeds `post_target`, which is
/// at most the slots of `post`, so posting never meets a full ring. A transmitted buffer comes
/// back on `completions`, which the driver drains every loop turn
/// ([`ShardIo::reap_completion`]) before the stack builds frames; should it not drain them
/// (it has room for two transmit rings' worth), the wire stops reading the transmit ring
/// until it does (counted `stalls_completion_full`): back-pressure, never loss.
pub(crate) struct MemIo {
    pub rx: Consumer<Vec<u8>>,
    pub tx: Producer<Vec<u8>>,
    /// Empty receive buffers for the wire, from the shard's NIC pool.
    pub post: Producer<Vec<u8>>,
    /// This shard's transmitted buffers, back from the wire.
    pub completions: Consumer<Vec<u8>>,
    /// Capacity of each posted buffer: the largest frame the wire carries (MTU + Ethernet
    /// header and a VLAN tag), so a copy into it never reallocates.
    pub rx_buf_bytes: usize,
    /// Buffers kept posted (the receive ring's slots).
    pub post_target: usize,
    /// Buffers posted and not yet received back.
    pub outstanding: usize,
    /// The NIC pool got its spare buffers (at the first `receive`).
    pub primed: bool,
    /// The wire thread, set once it is spawned (before any shard starts).
    pub wire_thread: Arc<OnceLock<Thread>>,
    /// A frame went onto the transmit ring since the last flush.
    pub pushed: bool,
}

impl ShardIo for MemIo {
    fn receive(&mut self, queue: &mut RxQueue<'_>, max_frames: usize) -> usize {
        let mut n = 0;
        while n < max_frames {
            let Some(f) = self.rx.pop() else { break };
            self.outstanding = self.outstanding.saturating_sub(1);
            queue.receive(f);
            n += 1;
        }
        // Top the posted buffers up again: the ones just received come back to the pool once
        // the stack has processed them, and are posted at the next turn.
        while self.outstanding < self.post_target {
            let buf = queue.take_buffer(self.rx_buf_bytes);
            match self.post.push(buf) {
                Ok(()) => self.outstanding += 1,
                Err(buf) => {
                    // The wire is gone (the ring is never full, see the invariants).
                    queue.recycle(buf);
                    break;
                }
            }
        }
        if !self.primed {
            self.primed = true;
            // Besides the posted buffers, the pool needs one per NIC receive slot: frames
            // move from the receive ring into the NIC's ring (never more than it has room
            // for) before they come back. Allocated once, now, so a deeper backlog later is
            // not met with an allocation.
            let spare: Vec<Vec<u8>> = (0..queue.room())
                .map(|_| queue.take_buffer(self.rx_buf_bytes))
                .collect();
            for buf in spare {
                queue.recycle(buf);
            }
        }
        n
    }

    fn send(&mut self, frame: Vec<u8>) -> Result<Option<Vec<u8>>, Vec<u8>> {
        self.tx.push(frame)?;
        self.pushed = true;
        // The buffer comes back later, as a transmit completion (`reap_completion`).
        Ok(None)
    }

    fn reap_completion(&mut self) -> Option<Vec<u8>> {
        self.completions.pop()
    }

    fn flush(&mut self) {
        if std::mem::take(&mut self.pushed) {
            if let Some(t) = self.wire_thread.get() {
                t.unpark();
            }
        }
    }

    fn idle(&mut self, sleep_ns: u64) {
        std::thread::park_timeout(Duration::from_nanos(sleep_ns));
    }

    fn counters(&mut self) -> PortCounters {
        PortCounters::default()
    }
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_ARP: u16 = 0x0806;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETH_HDR_BYTES: usize = 14;
const IPV6_HDR_BYTES: usize = 40;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;
const PROTO_ICMPV6: u8 = 58;

fn ethertype(frame: &[u8]) -> Option<u16> {
    frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]]))
}

/// Frames every shard's neighbour state needs: ARP (requests and replies), IPv6 Neighbor
/// Discovery (Router Solicitation/Advertisement, Neighbor Solicitation/Advertisement,
/// Redirect: ICMPv6 types 133..=137 directly after a fixed IPv6 header), and any other frame
/// that is neither IPv4 nor IPv6 (it carries no RSS hash, so no shard owns it).
pub fn is_neighbour_frame(frame: &[u8]) -> bool {
    match ethertype(frame) {
        Some(ETHERTYPE_ARP) => true,
        Some(ETHERTYPE_IPV4) => false,
        Some(ETHERTYPE_IPV6) => {
            frame.get(ETH_HDR_BYTES + 6) == Some(&PROTO_ICMPV6)
                && frame
                    .get(ETH_HDR_BYTES + IPV6_HDR_BYTES)
                    .is_some_and(|t| (133..=137).contains(t))
        }
        Some(_) => true,
        None => false,
    }
}

/// Where a frame's TCP or UDP checksum lives: segment offset and length in the frame, the
/// checksum field's offset in the segment, the pseudo-header sum and the protocol.
struct L4Span {
    off: usize,
    len: usize,
    field: usize,
    pseudo: u16,
    proto: u8,
}

/// Finds the TCP/UDP segment of an Ethernet + IPv4 (any header length, not a fragment) or
/// IPv6 (no extension headers) frame; `None` for anything else or when the lengths do not
/// fit the frame.
fn l4_span(frame: &[u8]) -> Option<L4Span> {
    let ip = frame.get(ETH_HDR_BYTES..)?;
    let (hdr, len, proto, pseudo) = match ethertype(frame)? {
        ETHERTYPE_IPV4 => {
            if ip.len() < 20 || ip[0] >> 4 != 4 {
                return None;
            }
            let ihl = usize::from(ip[0] & 0x0f) * 4;
            let total = usize::from(u16::from_be_bytes([ip[2], ip[3]]));
            let frag = u16::from_be_bytes([ip[6], ip[7]]) & 0x3fff;
            if ihl < 20 || total < ihl || total > ip.len() || frag != 0 {
                return None;
            }
            let src = core::net::Ipv4Addr::new(ip[12], ip[13], ip[14], ip[15]);
            let dst = core::net::Ipv4Addr::new(ip[16], ip[17], ip[18], ip[19]);
            let len = total - ihl;
            let pseudo = wire::checksum::pseudo_header_v4(src, dst, ip[9], len as u32);
            (ihl, len, ip[9], pseudo)
        }
        ETHERTYPE_IPV6 => {
            if ip.len() < IPV6_HDR_BYTES || ip[0] >> 4 != 6 {
                return None;
            }
            let len = usize::from(u16::from_be_bytes([ip[4], ip[5]]));
            if IPV6_HDR_BYTES + len > ip.len() {
                return None;
            }
            let mut a = [0u8; 16];
            a.copy_from_slice(&ip[8..24]);
            let src = core::net::Ipv6Addr::from(a);
            a.copy_from_slice(&ip[24..40]);
            let dst = core::net::Ipv6Addr::from(a);
            let pseudo = wire::checksum::pseudo_header_v6(src, dst, ip[6], len as u32);
            (IPV6_HDR_BYTES, len, ip[6], pseudo)
        }
        _ => return None,
    };
    let field = match proto {
        PROTO_TCP if len >= 20 => 16,
        PROTO_UDP if len >= 8 => 6,
        _ => return None,
    };
    Some(L4Span {
        off: ETH_HDR_BYTES + hdr,
        len,
        field,
        pseudo,
        proto,
    })
}

fn complete_span(frame: &mut [u8], sp: &L4Span) -> bool {
    let Some(seg) = frame.get_mut(sp.off..sp.off + sp.len) else {
        return false;
    };
    seg[sp.field] = 0;
    seg[sp.field + 1] = 0;
    let total = wire::checksum::combine(&[sp.pseudo, wire::checksum::sum(seg)]);
    let mut c = wire::checksum::finish(total);
    if sp.proto == PROTO_UDP && c == 0 {
        // RFC 768: a computed zero is sent as all ones (zero means "no checksum").
        c = 0xffff;
    }
    seg[sp.field..sp.field + 2].copy_from_slice(&c.to_be_bytes());
    true
}

/// Completes the TCP or UDP checksum of a frame whose sender left it to offload: the field
/// holds the pseudo-header sum only. Recomputes it over the pseudo-header and the whole
/// segment (the field zeroed first). Handles Ethernet + IPv4 (any header length, not a
/// fragment) or IPv6 without extension headers; returns `false`, leaving the frame unchanged,
/// for anything else or when the lengths do not fit the frame.
pub fn complete_l4_checksum(frame: &mut [u8]) -> bool {
    match l4_span(frame) {
        Some(sp) => complete_span(frame, &sp),
        None => false,
    }
}

/// For ports that cannot tell whether the sender left the checksum to offload (AF_XDP on a
/// veth gives the XDP program the frame with no such flag): when the TCP/UDP checksum field
/// holds exactly the pseudo-header sum — what Linux writes before offload — complete it and
/// return `true`. Completing is idempotent, so a frame whose correct checksum happens to equal
/// that sum is unchanged; the only frames accepted that would otherwise fail are corrupted
/// ones whose field happens to hold that one value (a 2⁻¹⁶ chance per corrupted frame).
pub fn complete_if_partial(frame: &mut [u8]) -> bool {
    let Some(sp) = l4_span(frame) else {
        return false;
    };
    let at = sp.off + sp.field;
    let field = frame
        .get(at..at + 2)
        .map(|b| u16::from_be_bytes([b[0], b[1]]));
    field == Some(sp.pseudo) && complete_span(frame, &sp)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame (20-byte headers) with `payload`, checksums correct.
    fn tcp_v4_frame(payload: &[u8]) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let total = (40 + payload.len()) as u16;
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&total.to_be_bytes());
        ip[8] = 64;
        ip[9] = PROTO_TCP;
        ip[12..16].copy_from_slice(&[10, 0, 0, 2]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 1]);
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&40000u16.to_be_bytes());
        tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = 0x18;
        f.extend_from_slice(payload);
        assert!(complete_l4_checksum(&mut f));
        f
    }

    #[test]
    fn a_pseudo_header_only_checksum_is_completed_to_the_full_one() {
        let good = tcp_v4_frame(b"hello, offload");
        // What a sender with checksum offload puts in the field: the pseudo-header sum.
        let mut partial = good.clone();
        let pseudo = wire::checksum::pseudo_header_v4(
            core::net::Ipv4Addr::new(10, 0, 0, 2),
            core::net::Ipv4Addr::new(10, 0, 0, 1),
            PROTO_TCP,
            (20 + 14) as u32,
        );
        partial[34 + 16..34 + 18].copy_from_slice(&pseudo.to_be_bytes());
        assert_ne!(partial, good);
        assert!(complete_l4_checksum(&mut partial));
        assert_eq!(partial, good);
        // The completed segment verifies: its sum with the pseudo-header is all ones.
        let seg = &good[34..];
        assert_eq!(
            wire::checksum::combine(&[pseudo, wire::checksum::sum(seg)]),
            0xffff
        );
    }

    #[test]
    fn only_a_field_holding_the_pseudo_header_sum_is_taken_for_partial() {
        let good = tcp_v4_frame(b"xdp on a veth");
        let mut same = good.clone();
        assert!(
            !complete_if_partial(&mut same),
            "a correct checksum is not partial"
        );
        assert_eq!(same, good);
        let pseudo = wire::checksum::pseudo_header_v4(
            core::net::Ipv4Addr::new(10, 0, 0, 2),
            core::net::Ipv4Addr::new(10, 0, 0, 1),
            PROTO_TCP,
            (20 + 13) as u32,
        );
        let mut partial = good.clone();
        partial[34 + 16..34 + 18].copy_from_slice(&pseudo.to_be_bytes());
        assert!(complete_if_partial(&mut partial));
        assert_eq!(partial, good);
        let mut corrupt = good.clone();
        corrupt[34 + 16] ^= 0x40;
        let before = corrupt.clone();
        assert!(
            !complete_if_partial(&mut corrupt),
            "other bad checksums stay bad"
        );
        assert_eq!(corrupt, before);
    }

    #[test]
    fn frames_that_cannot_be_completed_are_left_alone() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
        let before = arp.clone();
        assert!(!complete_l4_checksum(&mut arp));
        assert_eq!(arp, before);
        // An IPv4 total length beyond the frame.
        let mut f = tcp_v4_frame(b"x");
        f.truncate(50);
        let before = f.clone();
        assert!(!complete_l4_checksum(&mut f));
        assert_eq!(f, before);
        assert!(!complete_l4_checksum(&mut []));
    }

    #[test]
    fn arp_and_neighbor_discovery_are_neighbour_frames_tcp_is_not() {
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&ETHERTYPE_ARP.to_be_bytes());
        assert!(is_neighbour_frame(&arp));
        assert!(!is_neighbour_frame(&tcp_v4_frame(b"")));
        let mut ns = vec![0u8; 14 + 40 + 24];
        ns[12..14].copy_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        ns[14] = 0x60;
        ns[14 + 6] = PROTO_ICMPV6;
        for (ty, nd) in [
            (135u8, true),
            (136, true),
            (133, true),
            (128, false),
            (1, false),
        ] {
            ns[54] = ty;
            assert_eq!(is_neighbour_frame(&ns), nd, "icmpv6 type {ty}");
        }
        let mut lldp = vec![0u8; 60];
        lldp[12..14].copy_from_slice(&0x88ccu16.to_be_bytes());
        assert!(is_neighbour_frame(&lldp));
        assert!(!is_neighbour_frame(&[0u8; 5]));
    }
}
