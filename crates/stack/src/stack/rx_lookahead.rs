//! Receive look-ahead: while one frame of a burst is processed, the state the next frames
//! will need is asked for, so their cache misses overlap with work instead of stalling it.
//!
//! With many connections a segment's state is cold: the connection-table entry, the socket
//! slot, the TCB (its lines are spread over ~1 KiB) and the timer-wheel node each miss, and
//! the misses are dependent (the entry names the slot, the slot points at the TCB), so a frame
//! pays them one after another (issue 17: ~27 last-level misses per frame at 100,000
//! connections in `bench::scale`). A driver that holds a burst of received frames (a NAPI poll
//! of up to the budget) knows which flows come next. [`RxLookahead`] walks three stages ahead
//! of the frame being processed, one dependent step per frame so each prefetch has a frame's
//! work to complete:
//!
//! 1. frame + 3: parse the 4-tuple at fixed offsets, hash it as the connection table does,
//!    ask for the table entry's line;
//! 2. frame + 2: read the entry (now cached): the slot; ask for the slot's hot line;
//! 3. frame + 1: read the slot (now cached): ask for the TCB's lines and the wheel node.
//!
//! Everything here is a hint: a frame the look-ahead cannot parse, a hash collision, a
//! connection that goes away in between — the hint is wasted, never wrong, because the frame
//! is then processed by [`Stack::receive`] exactly as without it. Cost: the tuple parse at
//! fixed offsets (none when the table is indexed by a carried, secret-keyed RSS hash), a few
//! reads of lines that are about to be read anyway, and the prefetch instructions. The table
//! hash stage 1 computes is not computed twice: [`RxLookahead::advance`] returns the current
//! frame's hint and [`Stack::receive_hinted`] hands its table hash to TCP input, which looks
//! the segment up under it (the 4-tuple is compared in the slot, so a wrong hash can only
//! miss) and, when that finds nothing, computes the key itself and looks again.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use platform::prefetch::{CACHE_LINE_BYTES, prefetch_line};
use wire::RxMeta;

use super::Stack;
use crate::socket::SocketHandle;
use crate::sockets::Socket;
use crate::tcp_sockets::{FourTuple, TcpState, carried_tcp_hash};

/// Cache lines of a TCB (`tcp::Connection`), all asked for by stage 3.
const TCB_LINES: usize = core::mem::size_of::<tcp::Connection>().div_ceil(CACHE_LINE_BYTES);

/// What the look-ahead knows about one frame so far.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlowHint {
    /// The connection-table hash of the frame's flow (`NO_FLOW`'s field when none).
    table_hash: u32,
    /// The slot the table names for it, once stage 2 ran (`u32::MAX`: none).
    slot: u32,
    /// False for a frame that is not a TCP segment the look-ahead could parse.
    tcp: bool,
}

impl FlowHint {
    /// Nothing known (not TCP, unparsable, or not looked at yet).
    pub const NONE: FlowHint = FlowHint {
        table_hash: 0,
        slot: u32::MAX,
        tcp: false,
    };

    /// True when stage 2 found the slot of socket `h` for this frame (diagnostics and tests:
    /// the look-ahead prefetched the right connection).
    pub fn names(&self, h: SocketHandle) -> bool {
        self.slot != u32::MAX && self.slot == h.index
    }
}

/// The 4-tuple of a plain TCP segment in an Ethernet frame (one optional 802.1Q tag; IPv4
/// unfragmented, IPv6 without extension headers), as the receiving host sees it: local =
/// destination. `None` for anything else. Reads at fixed offsets with bounds checks only:
/// nothing is validated, the stack's own input does that.
fn tcp_tuple(frame: &[u8]) -> Option<FourTuple> {
    let mut l3 = 14usize;
    let mut ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    if ethertype == 0x8100 {
        ethertype = u16::from_be_bytes([*frame.get(16)?, *frame.get(17)?]);
        l3 = 18;
    }
    let ip = frame.get(l3..)?;
    let (src, dst, l4): (IpAddr, IpAddr, usize) = match ethertype {
        0x0800 => {
            let ihl_bytes = usize::from(ip.first()? & 0x0f) * 4;
            let frag = u16::from_be_bytes([*ip.get(6)?, *ip.get(7)?]);
            if *ip.get(9)? != 6 || frag & 0x3fff != 0 || ihl_bytes < 20 {
                return None;
            }
            let a: [u8; 4] = ip.get(12..16)?.try_into().ok()?;
            let b: [u8; 4] = ip.get(16..20)?.try_into().ok()?;
            (
                Ipv4Addr::from(a).into(),
                Ipv4Addr::from(b).into(),
                ihl_bytes,
            )
        }
        0x86dd => {
            if *ip.get(6)? != 6 {
                return None;
            }
            let a: [u8; 16] = ip.get(8..24)?.try_into().ok()?;
            let b: [u8; 16] = ip.get(24..40)?.try_into().ok()?;
            (Ipv6Addr::from(a).into(), Ipv6Addr::from(b).into(), 40)
        }
        _ => return None,
    };
    let tcp = ip.get(l4..l4 + 4)?;
    let sport = u16::from_be_bytes([tcp[0], tcp[1]]);
    let dport = u16::from_be_bytes([tcp[2], tcp[3]]);
    Some(FourTuple {
        local: SocketAddr::new(dst, dport),
        remote: SocketAddr::new(src, sport),
    })
}

impl Stack {
    /// Look-ahead stage 1 for `frame`: its flow's table hash, and the table entry's line
    /// asked for.
    pub fn lookahead_flow(&self, frame: &[u8], meta: &RxMeta) -> FlowHint {
        let tcp = &self.up.tcp;
        let table_hash = match meta.hash {
            // Hash once: the table is indexed by the carried hash itself (a secret key), so
            // the frame need not be parsed here (a non-TCP frame's hint is wasted, harmless).
            Some(h) if tcp.rss_on && tcp.table_by_flow_hash => h,
            _ => {
                let Some(tuple) = tcp_tuple(frame) else {
                    return FlowHint::NONE;
                };
                // As TCP input computes it for this segment (the carried hash taken under the
                // same condition).
                tcp.flow_key(tuple, carried_tcp_hash(meta)).table_hash
            }
        };
        tcp.conns.prefetch_home(table_hash);
        FlowHint {
            table_hash,
            slot: u32::MAX,
            tcp: true,
        }
    }

    /// Look-ahead stage 2: the slot the table names for the hint's hash (the entry's line
    /// asked for by stage 1), and the slot's hot line asked for.
    pub fn lookahead_slot(&self, hint: &mut FlowHint) {
        if !hint.tcp {
            return;
        }
        if let Some(i) = self.up.tcp.conns.first_with_hash(hint.table_hash) {
            self.up.sockets.prefetch_slot(i);
            hint.slot = u32::try_from(i).unwrap_or(u32::MAX);
        }
    }

    /// Look-ahead stage 3: the connection's TCB lines and its timer-wheel node asked for
    /// (the slot's lines asked for by stage 2).
    pub fn lookahead_conn(&self, hint: &FlowHint) {
        if hint.slot == u32::MAX {
            return;
        }
        let i = hint.slot as usize;
        if let Some(Socket::Tcp(TcpState::Conn(c))) = self.up.sockets.get(i) {
            let tcb: *const u8 = (&*c.conn as *const tcp::Connection).cast();
            // Every line of the TCB (64-byte aligned: `repr(align(64))`); a constant count,
            // so the loop is unrolled into the prefetch instructions alone.
            for k in 0..TCB_LINES {
                prefetch_line(tcb.wrapping_add(k * CACHE_LINE_BYTES));
            }
            self.up.tcp.timers.prefetch_node(i);
        }
    }
}

/// The three look-ahead stages over a burst of received frames (module docs).
///
/// Use: [`RxLookahead::start`] with the whole burst, then, before processing each frame,
/// [`RxLookahead::advance`] with the frames after it. Invariant between calls: `hints[k]` is
/// for the `k`-th frame after the current one and has had stages 1 ..= 3 − k.
#[derive(Debug, Clone, Copy)]
pub struct RxLookahead {
    hints: [FlowHint; 3],
}

impl Default for RxLookahead {
    fn default() -> Self {
        RxLookahead {
            hints: [FlowHint::NONE; 3],
        }
    }
}

impl RxLookahead {
    /// Primes the stages for a burst about to be processed (`frames` is the whole burst;
    /// `view` gives a frame's bytes and metadata).
    pub fn start<T>(&mut self, stack: &Stack, frames: &[T], view: impl Fn(&T) -> (&[u8], &RxMeta)) {
        // As if a frame before the burst were current: hints for frames 0, 1, 2.
        let hint = |k: usize| {
            frames.get(k).map_or(FlowHint::NONE, |f| {
                let (b, m) = view(f);
                stack.lookahead_flow(b, m)
            })
        };
        self.hints = [hint(0), hint(1), hint(2)];
        stack.lookahead_slot(&mut self.hints[0]);
        stack.lookahead_slot(&mut self.hints[1]);
        stack.lookahead_conn(&self.hints[0]);
    }

    /// Moves the stages one frame on: call before processing a frame, with `rest` = the
    /// frames after it (so `rest[0]` gets stage 3, `rest[1]` stage 2, `rest[2]` stage 1).
    /// Returns the hint of the frame about to be processed, for [`Stack::receive_hinted`].
    pub fn advance<T>(
        &mut self,
        stack: &Stack,
        rest: &[T],
        view: impl Fn(&T) -> (&[u8], &RxMeta),
    ) -> FlowHint {
        let [current, h0, mut h1] = self.hints;
        // `h0` (stages 1–2 done) gets stage 3, `h1` (stage 1 done) stage 2.
        stack.lookahead_conn(&h0);
        stack.lookahead_slot(&mut h1);
        let h2 = rest.get(2).map_or(FlowHint::NONE, |f| {
            let (b, m) = view(f);
            stack.lookahead_flow(b, m)
        });
        self.hints = [h0, h1, h2];
        current
    }
}

impl Stack {
    /// [`Stack::receive`] with the look-ahead's hint for this frame
    /// ([`RxLookahead::advance`]'s result): a TCP segment is looked up under the hint's table
    /// hash, so a segment of a known connection is not hashed again. The lookup compares the
    /// segment's own 4-tuple in the slot, so a hint for another frame, another stack or no
    /// flow finds nothing, and the segment is then looked up under its own key as by
    /// [`Stack::receive`]: the frame is processed exactly as without the hint.
    pub fn receive_hinted(&mut self, now: u64, frame: &[u8], meta: &RxMeta, hint: &FlowHint) {
        self.up.tcp.rx_table_hash_hint = hint.tcp.then_some(hint.table_hash);
        self.receive(now, frame, meta);
        self.up.tcp.rx_table_hash_hint = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_segment(vlan: bool, frag: u16, proto: u8) -> Vec<u8> {
        let mut f = vec![0u8; 12];
        if vlan {
            f.extend_from_slice(&[0x81, 0x00, 0x00, 0x05]);
        }
        f.extend_from_slice(&[0x08, 0x00]);
        let mut ip = [0u8; 20];
        ip[0] = 0x45;
        ip[6..8].copy_from_slice(&frag.to_be_bytes());
        ip[9] = proto;
        ip[12..16].copy_from_slice(&[10, 0, 0, 1]);
        ip[16..20].copy_from_slice(&[10, 0, 0, 2]);
        f.extend_from_slice(&ip);
        f.extend_from_slice(&[0x30, 0x39, 0x00, 0x50]);
        f.extend_from_slice(&[0u8; 16]);
        f
    }

    #[test]
    fn tuple_is_read_as_the_receiver_sees_it_with_or_without_a_vlan_tag() {
        for vlan in [false, true] {
            let t = tcp_tuple(&v4_segment(vlan, 0x4000, 6)).expect("a plain TCP segment");
            assert_eq!(t.local, "10.0.0.2:80".parse::<SocketAddr>().unwrap());
            assert_eq!(t.remote, "10.0.0.1:12345".parse::<SocketAddr>().unwrap());
        }
    }

    #[test]
    fn fragments_other_protocols_and_truncated_frames_give_no_tuple() {
        assert_eq!(
            tcp_tuple(&v4_segment(false, 0x2000, 6)),
            None,
            "more fragments"
        );
        assert_eq!(tcp_tuple(&v4_segment(false, 0x0010, 6)), None, "an offset");
        assert_eq!(tcp_tuple(&v4_segment(false, 0, 17)), None, "UDP");
        let f = v4_segment(false, 0, 6);
        for n in 0..f.len() - 16 {
            assert_eq!(tcp_tuple(&f[..n]), None, "cut at {n}");
        }
    }
}
