//! The virtio-net header (`struct virtio_net_hdr`, `include/uapi/linux/virtio_net.h`) that TAP
//! (`IFF_VNET_HDR`) and AF_PACKET (`PACKET_VNET_HDR`) put in front of every frame: how the
//! kernel and a user-space sender exchange segmentation (GSO/TSO) and checksum offload
//! requests.
//!
//! Transmit (we write, the kernel reads): `gso_type` TCPV4/TCPV6 with `gso_size` = payload
//! bytes per segment asks the kernel to cut a large TCP segment into pieces;
//! [`VNET_F_NEEDS_CSUM`] with `csum_start` (first byte the checksum covers, counted from the
//! Ethernet header) and `csum_offset` (where the checksum field is, from `csum_start`) asks it
//! to finish a checksum whose field already holds the pseudo-header sum (Linux
//! `CHECKSUM_PARTIAL`). Receive (the kernel writes): the same fields describe a coalesced
//! frame (GRO, when the device allows it: `TUNSETOFFLOAD`) and a partial checksum;
//! [`VNET_F_DATA_VALID`] says the kernel already verified the checksum.
//!
//! The header is in the host's byte order (the legacy virtio layout Linux uses for TAP and
//! AF_PACKET unless `TUNSETVNETBE`/`TUNSETVNETLE` says otherwise; neither is set here).
//! [`VnetHdr::encode`] / [`VnetHdr::decode`] are pure; no `unsafe` is needed in this module.
#![forbid(unsafe_code)]

/// Bytes of the header (`sizeof(struct virtio_net_hdr)`).
pub const VNET_HDR_BYTES: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: complete the checksum described by `csum_start` and
/// `csum_offset`.
pub const VNET_F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_F_DATA_VALID`: the checksum was verified (receive only).
pub const VNET_F_DATA_VALID: u8 = 2;

/// `VIRTIO_NET_HDR_GSO_NONE`.
pub const VNET_GSO_NONE: u8 = 0;
/// `VIRTIO_NET_HDR_GSO_TCPV4`.
pub const VNET_GSO_TCPV4: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_UDP` (UFO; never produced here).
pub const VNET_GSO_UDP: u8 = 3;
/// `VIRTIO_NET_HDR_GSO_TCPV6`.
pub const VNET_GSO_TCPV6: u8 = 4;
/// `VIRTIO_NET_HDR_GSO_ECN` (bit or'ed into `gso_type`: the segments carry ECN CWR).
pub const VNET_GSO_ECN: u8 = 0x80;

/// `struct virtio_net_hdr`, field for field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct VnetHdr {
    /// [`VNET_F_NEEDS_CSUM`], [`VNET_F_DATA_VALID`].
    pub flags: u8,
    /// [`VNET_GSO_NONE`], [`VNET_GSO_TCPV4`], [`VNET_GSO_TCPV6`] (possibly | [`VNET_GSO_ECN`]).
    pub gso_type: u8,
    /// Bytes of headers (Ethernet + IP + TCP) in front of the payload of a GSO frame.
    pub hdr_len: u16,
    /// Payload bytes of each segment but the last.
    pub gso_size: u16,
    /// First byte the checksum covers, from the start of the frame.
    pub csum_start: u16,
    /// Offset of the checksum field from `csum_start` (16 for TCP, 6 for UDP).
    pub csum_offset: u16,
}

impl VnetHdr {
    /// No offload: a whole, fully checksummed frame.
    pub const NONE: VnetHdr = VnetHdr {
        flags: 0,
        gso_type: VNET_GSO_NONE,
        hdr_len: 0,
        gso_size: 0,
        csum_start: 0,
        csum_offset: 0,
    };

    /// The header's bytes as the kernel reads them.
    pub fn encode(&self) -> [u8; VNET_HDR_BYTES] {
        let mut b = [0u8; VNET_HDR_BYTES];
        b[0] = self.flags;
        b[1] = self.gso_type;
        b[2..4].copy_from_slice(&self.hdr_len.to_ne_bytes());
        b[4..6].copy_from_slice(&self.gso_size.to_ne_bytes());
        b[6..8].copy_from_slice(&self.csum_start.to_ne_bytes());
        b[8..10].copy_from_slice(&self.csum_offset.to_ne_bytes());
        b
    }

    /// The header the kernel wrote in `b`.
    pub fn decode(b: &[u8; VNET_HDR_BYTES]) -> VnetHdr {
        let u16_at = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHdr {
            flags: b[0],
            gso_type: b[1],
            hdr_len: u16_at(2),
            gso_size: u16_at(4),
            csum_start: u16_at(6),
            csum_offset: u16_at(8),
        }
    }

    /// The kernel verified the checksum ([`VNET_F_DATA_VALID`]).
    pub fn data_valid(&self) -> bool {
        self.flags & VNET_F_DATA_VALID != 0
    }

    /// The checksum field holds only the pseudo-header sum ([`VNET_F_NEEDS_CSUM`]): the data
    /// came from this host's memory and was never on a wire.
    pub fn needs_csum(&self) -> bool {
        self.flags & VNET_F_NEEDS_CSUM != 0
    }

    /// A coalesced (GSO) TCP frame: more than one wire segment's payload.
    pub fn is_gso_tcp(&self) -> bool {
        matches!(
            self.gso_type & !VNET_GSO_ECN,
            VNET_GSO_TCPV4 | VNET_GSO_TCPV6
        )
    }
}

/// `TUNSETOFFLOAD` flags: what the kernel may hand a TAP reader (`TUN_F_*`).
pub mod tun_f {
    /// `TUN_F_CSUM`: frames may carry a partial checksum ([`super::VNET_F_NEEDS_CSUM`]).
    pub const CSUM: u32 = 0x01;
    /// `TUN_F_TSO4`: coalesced TCP/IPv4 frames (needs [`CSUM`]).
    pub const TSO4: u32 = 0x02;
    /// `TUN_F_TSO6`: coalesced TCP/IPv6 frames (needs [`CSUM`]).
    pub const TSO6: u32 = 0x04;
    /// `TUN_F_TSO_ECN`: coalesced frames with ECN CWR.
    pub const TSO_ECN: u32 = 0x08;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_fields_land_at_the_kernel_offsets_in_host_order() {
        let h = VnetHdr {
            flags: VNET_F_NEEDS_CSUM,
            gso_type: VNET_GSO_TCPV4,
            hdr_len: 66,
            gso_size: 1448,
            csum_start: 34,
            csum_offset: 16,
        };
        let b = h.encode();
        assert_eq!(b[0], 1);
        assert_eq!(b[1], 1);
        assert_eq!(u16::from_ne_bytes([b[2], b[3]]), 66);
        assert_eq!(u16::from_ne_bytes([b[4], b[5]]), 1448);
        assert_eq!(u16::from_ne_bytes([b[6], b[7]]), 34);
        assert_eq!(u16::from_ne_bytes([b[8], b[9]]), 16);
        assert_eq!(VnetHdr::decode(&b), h);
    }

    #[test]
    fn flags_and_gso_types_are_read_as_the_kernel_writes_them() {
        let mut h = VnetHdr::NONE;
        assert!(!h.data_valid() && !h.needs_csum() && !h.is_gso_tcp());
        h.flags = VNET_F_DATA_VALID;
        assert!(h.data_valid() && !h.needs_csum());
        h.gso_type = VNET_GSO_TCPV6 | VNET_GSO_ECN;
        assert!(h.is_gso_tcp());
        h.gso_type = VNET_GSO_UDP;
        assert!(!h.is_gso_tcp());
        assert_eq!(VnetHdr::decode(&VnetHdr::NONE.encode()), VnetHdr::NONE);
    }
}
