//! Unit tests of the AF_PACKET ring parser and socket set-up (`af_packet/mod.rs`).

use super::*;

#[test]
fn bad_ring_geometry_is_rejected_before_any_system_call() {
    let v2 = AfPacketConfig {
        ring: RingVersion::V2,
        ..AfPacketConfig::default()
    };
    for cfg in [
        AfPacketConfig {
            block_count: 0,
            ..AfPacketConfig::default()
        },
        AfPacketConfig {
            block_size_bytes: 1000,
            ..AfPacketConfig::default()
        },
        AfPacketConfig {
            frame_size_bytes: 100,
            ..AfPacketConfig::default()
        },
        AfPacketConfig {
            frame_size_bytes: 2050,
            ..AfPacketConfig::default()
        },
        // V3 blocks hold whole frame units.
        AfPacketConfig {
            frame_size_bytes: 69_632,
            block_size_bytes: 1 << 20,
            ..AfPacketConfig::default()
        },
        // A V2 slot larger than its block.
        AfPacketConfig {
            frame_size_bytes: 69_632,
            block_size_bytes: 1 << 16,
            ..v2
        },
        // More slots than a u32 counts.
        AfPacketConfig {
            frame_size_bytes: 128,
            block_size_bytes: 1 << 20,
            block_count: u32::MAX,
            ..v2
        },
    ] {
        let err = AfPacketSocket::open("lo", &cfg).expect_err("invalid geometry");
        assert_eq!(err.kind(), io::ErrorKind::InvalidInput, "{cfg:?}");
    }
}

#[test]
fn uapi_structs_have_the_kernel_layout() {
    assert_eq!(core::mem::size_of::<TpacketReq>(), 16);
    assert_eq!(core::mem::size_of::<TpacketReq3>(), 28);
    assert_eq!(core::mem::size_of::<[u32; 2]>(), STATS_V2_BYTES);
    assert_eq!(core::mem::size_of::<[u32; 3]>(), STATS_V3_BYTES);
    // tpacket2_hdr: TPACKET_ALIGN(32) + sizeof(sockaddr_ll), aligned up with a 14-byte
    // link header, minus that header.
    let hdrlen = V2_HDR_BYTES + core::mem::size_of::<libc::sockaddr_ll>();
    assert_eq!(hdrlen, 52);
    assert_eq!(
        (hdrlen + 16).next_multiple_of(16) - 14,
        V2_FRAME_OFFSET_BYTES as usize
    );
}

#[test]
fn v2_slots_never_straddle_blocks() {
    let cfg = AfPacketConfig {
        ring: RingVersion::V2,
        block_size_bytes: 1 << 20,
        block_count: 4,
        frame_size_bytes: 69_632,
        ..AfPacketConfig::default()
    };
    let g = cfg.validate(4096).expect("valid");
    assert_eq!((g.frames_per_block, g.slot_count()), (15, 60));
    assert_eq!(g.slot_offset(0), 0);
    assert_eq!(g.slot_offset(14), 14 * 69_632);
    assert_eq!(g.slot_offset(15), 1 << 20);
    assert_eq!(g.slot_offset(59), 3 * (1 << 20) + 14 * 69_632);
    assert!(g.slot_offset(59) + 69_632 <= g.ring_bytes());
}

/// A socket whose "ring" is a private anonymous mapping the test writes as the kernel
/// would (the fd is /dev/null: nothing is sent or received through it).
pub(super) fn fake_socket(cfg: &AfPacketConfig) -> AfPacketSocket {
    let geometry = cfg.validate(4096).expect("valid geometry");
    let ring = MappedRing::anonymous(geometry.ring_bytes()).expect("mmap");
    let fd: OwnedFd = std::fs::File::open("/dev/null")
        .expect("open /dev/null")
        .into();
    let tx = tx::TxRing::fake(&geometry);
    AfPacketSocket::assemble(ring, fd, geometry, tx)
}

fn small_v2() -> AfPacketConfig {
    AfPacketConfig {
        ring: RingVersion::V2,
        block_size_bytes: 4096,
        block_count: 2,
        frame_size_bytes: 1024,
        ..AfPacketConfig::default()
    }
}

/// One V2 slot as the kernel fills it.
struct Slot<'a> {
    status: u32,
    len: u32,
    snaplen: u32,
    mac: u16,
    sec: u32,
    nsec: u32,
    data: &'a [u8],
}

impl Slot<'_> {
    fn valid(data: &[u8]) -> Slot<'_> {
        Slot {
            status: TP_STATUS_USER,
            len: data.len() as u32,
            snaplen: data.len() as u32,
            mac: V2_FRAME_OFFSET_BYTES as u16,
            sec: 1_700_000_000,
            nsec: 42,
            data,
        }
    }
}

fn kernel_fill_slot(sock: &AfPacketSocket, slot: usize, s: &Slot<'_>) {
    let off = sock.geometry.slot_offset(slot);
    let r = &sock.ring;
    assert!(r.write_u32(off + V2_LEN_OFF, s.len));
    assert!(r.write_u32(off + V2_SNAPLEN_OFF, s.snaplen));
    assert!(r.write_u16(off + V2_MAC_OFF, s.mac));
    assert!(r.write_u32(off + V2_SEC_OFF, s.sec));
    assert!(r.write_u32(off + V2_NSEC_OFF, s.nsec));
    let room = sock.geometry.frame_size.saturating_sub(usize::from(s.mac));
    let n = s.data.len().min(room);
    assert!(r.write_bytes(off + usize::from(s.mac), &s.data[..n]));
    // The status word last, as the kernel publishes a slot.
    assert!(r.write_u32(off + V2_STATUS_OFF, s.status));
}

fn slot_status(sock: &AfPacketSocket, slot: usize) -> u32 {
    sock.ring
        .read_u32(sock.geometry.slot_offset(slot) + V2_STATUS_OFF)
        .expect("in bounds")
}

#[test]
fn hostile_v2_slots_are_counted_never_trusted() {
    let mut sock = fake_socket(&small_v2());
    assert_eq!(sock.geometry.slot_count(), 8);
    let mut csum = Slot::valid(b"hello");
    csum.status |= TP_STATUS_CSUMNOTREADY;
    kernel_fill_slot(&sock, 0, &csum);
    // The frame would start inside the slot's own header.
    kernel_fill_slot(
        &sock,
        1,
        &Slot {
            mac: 16,
            ..Slot::valid(b"header")
        },
    );
    // Runs past the slot into the next one.
    kernel_fill_slot(
        &sock,
        2,
        &Slot {
            snaplen: 1024,
            ..Slot::valid(b"long")
        },
    );
    // A length near u32::MAX.
    kernel_fill_slot(
        &sock,
        3,
        &Slot {
            snaplen: u32::MAX,
            ..Slot::valid(b"huge")
        },
    );
    // Cut short by the slot: handed on, and the metadata says so.
    kernel_fill_slot(
        &sock,
        4,
        &Slot {
            len: 65_000,
            ..Slot::valid(b"gso head")
        },
    );
    // Slot 5 still belongs to the kernel: reading stops there.
    let mut seen = Vec::new();
    let handed = sock.recv_batch(16, |f, m| seen.push((f.to_vec(), m)));
    assert_eq!(handed, 2);
    assert_eq!(seen[0].0, b"hello");
    let m = seen[0].1;
    assert!(m.checksum_not_ready() && !m.truncated(5));
    assert_eq!(m.timestamp_ns, 1_700_000_000_000_000_042);
    assert_eq!(m.kernel_rxhash, 0);
    assert_eq!(seen[1].0, b"gso head");
    assert!(seen[1].1.truncated(8));
    assert_eq!(
        sock.ring_errors(),
        RingErrors {
            bad_block_header: 0,
            bad_frame_header: 3
        }
    );
    // Every slot read went back to the kernel, bogus ones too; the cursor waits at 5.
    assert!((0..5).all(|i| slot_status(&sock, i) == TP_STATUS_KERNEL));
    assert_eq!(sock.slot, 5);
    assert_eq!(sock.recv_batch(16, |_, _| panic!("nothing to hand")), 0);
}

#[test]
fn v2_cursor_follows_the_kernel_around_the_ring() {
    let mut sock = fake_socket(&small_v2());
    let mut next = 0usize;
    let mut total = 0;
    for round in 0..5u8 {
        // The kernel fills 3 slots per round; over 5 rounds the 8-slot ring wraps.
        for k in 0..3u8 {
            kernel_fill_slot(&sock, next, &Slot::valid(&[round, k]));
            next = (next + 1) % 8;
        }
        let mut got = Vec::new();
        total += sock.recv_batch(2, |f, _| got.push(f.to_vec()));
        total += sock.recv_batch(16, |f, _| got.push(f.to_vec()));
        assert_eq!(got, vec![vec![round, 0], vec![round, 1], vec![round, 2]]);
    }
    assert_eq!((total, sock.slot), (15, 15 % 8));
    assert_eq!(sock.ring_errors(), RingErrors::default());
}

fn small_v3() -> AfPacketConfig {
    AfPacketConfig {
        block_size_bytes: 4096,
        block_count: 4,
        frame_size_bytes: 2048,
        ..AfPacketConfig::default()
    }
}

/// Writes a V3 frame header at block `block`, offset `off`, with `data` at `off + mac`.
fn kernel_v3_frame(
    sock: &AfPacketSocket,
    block: usize,
    off: usize,
    next: u32,
    mac: u16,
    snaplen: u32,
    data: &[u8],
) {
    let h = block * sock.geometry.block_size + off;
    let r = &sock.ring;
    assert!(r.write_u32(h + PKT_NEXT_OFF, next));
    assert!(r.write_u32(h + PKT_SEC_OFF, 7));
    assert!(r.write_u32(h + PKT_NSEC_OFF, 8));
    assert!(r.write_u32(h + PKT_SNAPLEN_OFF, snaplen));
    assert!(r.write_u32(h + PKT_LEN_OFF, data.len() as u32));
    assert!(r.write_u32(h + PKT_STATUS_OFF, TP_STATUS_CSUM_VALID));
    assert!(r.write_u16(h + PKT_MAC_OFF, mac));
    assert!(r.write_u32(h + PKT_RXHASH_OFF, 0xabcd));
    let start = h + usize::from(mac);
    let room = ((block + 1) * sock.geometry.block_size).saturating_sub(start);
    assert!(r.write_bytes(start, &data[..data.len().min(room)]));
}

fn kernel_v3_block(sock: &AfPacketSocket, block: usize, pkts: u32, first: u32) {
    let base = block * sock.geometry.block_size;
    assert!(sock.ring.write_u32(base + BLOCK_NUM_PKTS_OFF, pkts));
    assert!(sock.ring.write_u32(base + BLOCK_FIRST_PKT_OFF, first));
    assert!(sock.ring.write_u32(base + BLOCK_STATUS_OFF, TP_STATUS_USER));
}

#[test]
fn hostile_v3_blocks_are_counted_never_trusted() {
    let mut sock = fake_socket(&small_v3());
    // Block 0: frames, but the first one lies beyond the block.
    kernel_v3_block(&sock, 0, 3, 4096);
    // Block 1: one good frame, then a frame running past the block.
    kernel_v3_frame(&sock, 1, 48, 256, 80, 3, b"one");
    kernel_v3_frame(&sock, 1, 304, 0, 80, 4096, b"two");
    kernel_v3_block(&sock, 1, 2, 48);
    // Block 2: a frame over its own header.
    kernel_v3_frame(&sock, 2, 48, 0, 8, 3, b"hdr");
    kernel_v3_block(&sock, 2, 1, 48);
    // Block 3: two good frames chained.
    kernel_v3_frame(&sock, 3, 48, 128, 80, 5, b"three");
    kernel_v3_frame(&sock, 3, 176, 0, 80, 4, b"four");
    kernel_v3_block(&sock, 3, 2, 48);
    let mut seen = Vec::new();
    let handed = sock.recv_batch(16, |f, m| seen.push((f.to_vec(), m)));
    let frames: Vec<&[u8]> = seen.iter().map(|(f, _)| f.as_slice()).collect();
    assert_eq!(frames, vec![&b"one"[..], b"three", b"four"]);
    assert_eq!(handed, 3);
    let m = seen[0].1;
    assert_eq!((m.timestamp_ns, m.kernel_rxhash), (7_000_000_008, 0xabcd));
    assert_eq!(m.status, TP_STATUS_CSUM_VALID);
    assert_eq!(
        sock.ring_errors(),
        RingErrors {
            bad_block_header: 1,
            bad_frame_header: 2
        }
    );
    // Every block went back, and the cursor wrapped to block 0.
    for b in 0..4 {
        let st = sock.ring.read_u32(b * 4096 + BLOCK_STATUS_OFF);
        assert_eq!(st, Some(TP_STATUS_KERNEL), "block {b}");
    }
    assert_eq!(sock.block, 0);
}

#[test]
fn sockets_can_move_to_shard_threads() {
    fn is_send<T: Send>() {}
    is_send::<AfPacketSocket>();
}

#[test]
fn v2_slots_of_a_vnet_socket_carry_the_header_in_front_of_the_frame() {
    let mut sock = fake_socket(&small_v2());
    sock.vnet = true;
    let hdr = crate::vnet::VnetHdr {
        flags: crate::vnet::VNET_F_DATA_VALID,
        gso_type: crate::vnet::VNET_GSO_TCPV4,
        hdr_len: 66,
        gso_size: 1448,
        csum_start: 34,
        csum_offset: 16,
    };
    // The kernel puts the frame 10 bytes later and the header right before it.
    let mac = V2_FRAME_OFFSET_BYTES as u16 + VNET_HDR_BYTES as u16;
    let s = Slot {
        mac,
        ..Slot::valid(b"coalesced")
    };
    kernel_fill_slot(&sock, 0, &s);
    let off = sock.geometry.slot_offset(0);
    assert!(
        sock.ring
            .write_bytes(off + usize::from(mac) - VNET_HDR_BYTES, &hdr.encode())
    );
    // A header that would overlap the slot's own header is refused, not read.
    kernel_fill_slot(
        &sock,
        1,
        &Slot {
            mac: V2_HDR_BYTES as u16 + 4,
            ..Slot::valid(b"bad")
        },
    );
    let mut seen = Vec::new();
    let handed = sock.recv_batch(16, |f, m| seen.push((f.to_vec(), m)));
    assert_eq!(handed, 1);
    assert_eq!(seen[0].0, b"coalesced");
    assert_eq!(seen[0].1.vnet, Some(hdr));
    assert_eq!(sock.ring_errors().bad_frame_header, 1);
}
