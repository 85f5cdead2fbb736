//! IPv4 input at fixed offsets: the frame a bulk transfer receives — untagged Ethernet,
//! an IPv4 header without options (IHL = 5), not a fragment, TCP, for the interface's own
//! address — read once at fixed offsets, with no `EthernetRepr` or `Ipv4Repr` built.
//!
//! Invariant: [`IpIn::fixed_v4_tcp`] returns `Some` only for a frame the general path
//! (`IpIn::receive_general`) would deliver to TCP, with the same [`IpMeta`], payload and
//! whole datagram, and the same counters moved (`rx_ipv4_csum_trusted` when the NIC
//! verified the header); for every other frame it returns `None` having changed nothing,
//! and the general path handles the frame as before. `tests.rs` checks this on random and
//! mutated frames.

use core::net::{IpAddr, Ipv4Addr};

use wire::{CsumVerdict, IpProtocol, RxMeta};

use super::{IpIn, IpMeta};

/// Ethernet II header bytes (no VLAN tag).
const ETH_HEADER_LEN: usize = 14;
/// An option-less IPv4 header.
const IPV4_HEADER_LEN: usize = 20;
/// What the fixed-offset read covers: the Ethernet header and the IPv4 header.
const FIXED_HEADERS_LEN: usize = ETH_HEADER_LEN + IPV4_HEADER_LEN;
/// The flags/fragment-offset field without DF and the reserved bit: MF and the offset,
/// zero for a datagram that is not a fragment.
const MF_AND_OFFSET: u16 = 0x3fff;

/// A frame the fixed-offset read accepted: what IP input delivers to TCP for it.
pub(super) struct FixedV4<'a> {
    pub(super) meta: IpMeta,
    /// The TCP segment: the bytes the IPv4 total length covers after the header.
    pub(super) payload: &'a [u8],
    /// The IPv4 datagram (header and segment, Ethernet padding excluded).
    pub(super) whole: &'a [u8],
}

/// The 6 bytes at `at` of the fixed headers, as an address to compare whole.
#[inline(always)]
fn mac_at(h: &[u8; FIXED_HEADERS_LEN], at: usize) -> [u8; 6] {
    [h[at], h[at + 1], h[at + 2], h[at + 3], h[at + 4], h[at + 5]]
}

impl IpIn {
    /// The frame read at fixed offsets, when it has the one shape this path takes and
    /// passes every check the general path makes of it (see the module documentation):
    /// source MAC neither ours nor a group address, destination MAC ours or a group
    /// address, EtherType IPv4 untagged, version 4 and IHL 5, 20 ≤ total length ≤ the
    /// bytes after the Ethernet header, neither MF nor a fragment offset, protocol TCP,
    /// the header checksum (verified here unless the NIC judged it; a NIC's "bad" goes to
    /// the general path, which counts it), a source neither multicast nor broadcast, the
    /// destination our one IPv4 address (an interface with several takes the general
    /// path). Any failure returns `None` before anything is changed.
    #[inline(always)]
    pub(super) fn fixed_v4_tcp<'a>(
        &mut self,
        frame: &'a [u8],
        meta: &RxMeta,
    ) -> Option<FixedV4<'a>> {
        let h = frame.first_chunk::<FIXED_HEADERS_LEN>()?;
        if h[12] != 0x08 || h[13] != 0x00 || h[14] != 0x45 || h[23] != IpProtocol::TCP.0 {
            return None;
        }
        let (dst_mac, src_mac) = (mac_at(h, 0), mac_at(h, 6));
        if src_mac == self.mac.0 || src_mac[0] & 1 != 0 {
            return None;
        }
        if dst_mac != self.mac.0 && dst_mac[0] & 1 == 0 {
            return None;
        }
        if u16::from_be_bytes([h[20], h[21]]) & MF_AND_OFFSET != 0 {
            return None;
        }
        let (ours, bcast) = self.one_v4?;
        let dst = Ipv4Addr::new(h[30], h[31], h[32], h[33]);
        let src = Ipv4Addr::new(h[26], h[27], h[28], h[29]);
        if dst != ours || src.is_multicast() || src == Ipv4Addr::BROADCAST || Some(src) == bcast {
            return None;
        }
        let trusted = match meta.csum.ip {
            CsumVerdict::Unknown => {
                if self.checksums.verify_rx {
                    let ip = h.last_chunk::<IPV4_HEADER_LEN>()?;
                    if wire::checksum::sum_20(ip) != 0xffff {
                        return None;
                    }
                }
                false
            }
            CsumVerdict::Good => true,
            CsumVerdict::Bad => return None,
        };
        // The length checks: 20 ≤ total length ≤ the bytes after the Ethernet header.
        let total_bytes = usize::from(u16::from_be_bytes([h[16], h[17]]));
        let whole = frame.get(ETH_HEADER_LEN..ETH_HEADER_LEN + total_bytes)?;
        let payload = whole.get(IPV4_HEADER_LEN..)?;
        self.counters.rx_ipv4_csum_trusted += u64::from(trusted & self.checksums.verify_rx);
        Some(FixedV4 {
            meta: IpMeta {
                src: IpAddr::V4(src),
                dst: IpAddr::V4(dst),
                protocol: IpProtocol::TCP,
                hop_limit: h[22],
                dst_unicast: true,
                ecn: wire::Ecn::from_bits(h[15]),
            },
            payload,
            whole,
        })
    }
}
