//! The fixed-offset IPv4 input (`fixed_v4.rs`) against the general path: for random and
//! mutated frames, what reaches the upper layer and every counter of IP input are the same
//! whether `IpIn::receive` (fast path first) or the general path alone takes the frame.

use std::sync::Arc;

use proptest::prelude::*;
use wire::{ChecksumCaps, CsumVerdict, EthernetAddress, RxChecksum, RxMeta};

use super::{Deliver, Delivery, IpIn, IpMeta};
use crate::config::{InterfaceConfig, Ipv4Cidr, StackConfig};

const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const OUR_IP: [u8; 4] = [10, 0, 0, 1];
const PEER_IP: [u8; 4] = [10, 0, 0, 2];

/// A slice handed to the upper layer: where it lies in the received frame (`None`: not in
/// it, e.g. a reassembled datagram) and its bytes.
#[derive(Debug, PartialEq)]
struct Piece {
    offset_in_frame: Option<usize>,
    bytes: Vec<u8>,
}

impl Piece {
    fn of(s: &[u8], frame: (usize, usize)) -> Piece {
        let ((base, len), at) = (frame, s.as_ptr() as usize);
        let inside = at >= base && at + s.len() <= base + len;
        Piece {
            offset_in_frame: inside.then(|| at - base),
            bytes: s.to_vec(),
        }
    }
}

/// One delivery, owned.
#[derive(Debug, PartialEq)]
enum Seen {
    Arp(Piece),
    Upper {
        meta: IpMeta,
        payload: Piece,
        whole: Piece,
        frame: Piece,
        rx_meta: RxMeta,
    },
    ProtocolUnreachable {
        meta: IpMeta,
        whole: Piece,
    },
}

/// Records what IP input delivers for the frame being received.
struct Recorder {
    /// The address and length of the frame being received.
    frame: (usize, usize),
    seen: Vec<Seen>,
}

impl Recorder {
    fn for_frame(frame: &[u8]) -> Recorder {
        Recorder {
            frame: (frame.as_ptr() as usize, frame.len()),
            seen: Vec::new(),
        }
    }
}

impl Deliver for Recorder {
    fn deliver(&mut self, _now: u64, d: Delivery<'_>) {
        let f = self.frame;
        let seen = match d {
            Delivery::Arp(p) => Seen::Arp(Piece::of(p, f)),
            Delivery::Upper {
                meta,
                payload,
                whole,
                rx,
            } => Seen::Upper {
                meta,
                payload: Piece::of(payload, f),
                whole: Piece::of(whole, f),
                frame: Piece::of(rx.frame, f),
                rx_meta: *rx.meta,
            },
            Delivery::ProtocolUnreachable { meta, whole } => Seen::ProtocolUnreachable {
                meta,
                whole: Piece::of(whole, f),
            },
        };
        self.seen.push(seen);
    }
}

fn config(verify_rx: bool, second_prefix: bool) -> Arc<StackConfig> {
    let mut ifc = InterfaceConfig::new(EthernetAddress(OUR_MAC), Ipv4Cidr::new(OUR_IP.into(), 24));
    if second_prefix {
        ifc.ipv4.push(Ipv4Cidr::new([192, 168, 7, 1].into(), 24));
    }
    let mut cfg = StackConfig::new(ifc);
    cfg.checksums = ChecksumCaps {
        verify_rx,
        fill_tx: true,
    };
    Arc::new(cfg)
}

/// The fields of a test frame; [`Spec::build`] lays them out.
#[derive(Debug, Clone)]
struct Spec {
    dst_mac: [u8; 6],
    src_mac: [u8; 6],
    ethertype: u16,
    ver_ihl: u8,
    tos: u8,
    /// Added to the correct total length (wrapping).
    total_len_delta: i16,
    ident: u16,
    flags_frag: u16,
    ttl: u8,
    protocol: u8,
    /// XORed into the correct header checksum (0: correct).
    checksum_xor: u16,
    src_ip: [u8; 4],
    dst_ip: [u8; 4],
    /// Options (IHL > 5) and the segment, as bytes after the 20-byte header.
    body: Vec<u8>,
    padding: Vec<u8>,
    /// Byte flips after the checksum was computed: (position, XOR).
    flips: Vec<(usize, u8)>,
    /// Cut the frame to this many bytes, if set.
    truncate_to: Option<usize>,
}

impl Spec {
    fn build(&self) -> Vec<u8> {
        let mut f = Vec::new();
        f.extend_from_slice(&self.dst_mac);
        f.extend_from_slice(&self.src_mac);
        f.extend_from_slice(&self.ethertype.to_be_bytes());
        let total = (20 + self.body.len()) as u16;
        let total = total.wrapping_add_signed(self.total_len_delta);
        let ip_start = f.len();
        f.push(self.ver_ihl);
        f.push(self.tos);
        f.extend_from_slice(&total.to_be_bytes());
        f.extend_from_slice(&self.ident.to_be_bytes());
        f.extend_from_slice(&self.flags_frag.to_be_bytes());
        f.push(self.ttl);
        f.push(self.protocol);
        f.extend_from_slice(&[0, 0]);
        f.extend_from_slice(&self.src_ip);
        f.extend_from_slice(&self.dst_ip);
        f.extend_from_slice(&self.body);
        let header_len = usize::from(self.ver_ihl & 0x0f) * 4;
        let header = f.get(ip_start..ip_start + header_len).unwrap_or(&[]);
        let csum = wire::checksum::finish(wire::checksum::sum(header)) ^ self.checksum_xor;
        f[ip_start + 10..ip_start + 12].copy_from_slice(&csum.to_be_bytes());
        f.extend_from_slice(&self.padding);
        for &(at, x) in &self.flips {
            let n = f.len();
            f[at % n] ^= x;
        }
        if let Some(n) = self.truncate_to {
            f.truncate(n);
        }
        f
    }
}

/// `usual` nine times in ten, else a value of `other`: frames differ from the bulk shape
/// in a field or two, so each check of the fixed-offset path meets frames that fail only it.
fn mostly<T: Clone + core::fmt::Debug + 'static>(
    usual: T,
    other: impl Strategy<Value = T> + 'static,
) -> BoxedStrategy<T> {
    prop_oneof![9 => Just(usual), 1 => other].boxed()
}

fn mac() -> impl Strategy<Value = [u8; 6]> {
    prop_oneof![
        Just(OUR_MAC),
        Just(PEER_MAC),
        Just([0xff; 6]),
        Just([0x01, 0x00, 0x5e, 0, 0, 1]),
        any::<[u8; 6]>(),
    ]
}

fn ipv4() -> impl Strategy<Value = [u8; 4]> {
    prop_oneof![
        Just(OUR_IP),
        Just(PEER_IP),
        Just([10, 0, 0, 255]),
        Just([255; 4]),
        Just([224, 0, 0, 1]),
        Just([239, 255, 255, 255]),
        Just([192, 168, 7, 1]),
        Just([192, 168, 7, 255]),
        any::<[u8; 4]>(),
    ]
}

fn spec() -> impl Strategy<Value = Spec> {
    let link = (
        mostly(OUR_MAC, mac()),
        mostly(PEER_MAC, mac()),
        mostly(
            0x0800u16,
            prop_oneof![
                Just(0x86dd),
                Just(0x0806),
                Just(0x8100),
                Just(0x88a8),
                any::<u16>()
            ],
        ),
    );
    let ip = (
        mostly(
            0x45u8,
            prop_oneof![Just(0x46), Just(0x44), Just(0x55), any::<u8>()],
        ),
        any::<u8>(),
        mostly(0i16, prop_oneof![-30i16..30, any::<i16>()]),
        any::<u16>(),
        prop_oneof![
            4 => Just(0u16),
            4 => Just(0x4000),
            1 => Just(0x2000),
            1 => Just(0x8000),
            1 => Just(0x0001),
            1 => Just(0x6001),
            1 => any::<u16>()
        ],
        any::<u8>(),
        mostly(6u8, prop_oneof![Just(17), Just(1), Just(58), any::<u8>()]),
        mostly(0u16, any::<u16>()),
    );
    let addrs = (mostly(PEER_IP, ipv4()), mostly(OUR_IP, ipv4()));
    let rest = (
        proptest::collection::vec(any::<u8>(), 0..80),
        mostly(Vec::new(), proptest::collection::vec(any::<u8>(), 1..10)),
        mostly(
            Vec::new(),
            proptest::collection::vec((0usize..200, 1u8..=255), 1..4),
        ),
        mostly(None, (0usize..120).prop_map(Some)),
    );
    (link, ip, addrs, rest).prop_map(
        |(
            (dst_mac, src_mac, ethertype),
            (ver_ihl, tos, total_len_delta, ident, flags_frag, ttl, protocol, checksum_xor),
            (src_ip, dst_ip),
            (body, padding, flips, truncate_to),
        )| Spec {
            dst_mac,
            src_mac,
            ethertype,
            ver_ihl,
            tos,
            total_len_delta,
            ident,
            flags_frag,
            ttl,
            protocol,
            checksum_xor,
            src_ip,
            dst_ip,
            body,
            padding,
            flips,
            truncate_to,
        },
    )
}

fn verdict() -> impl Strategy<Value = CsumVerdict> {
    prop_oneof![
        3 => Just(CsumVerdict::Unknown),
        3 => Just(CsumVerdict::Good),
        1 => Just(CsumVerdict::Bad)
    ]
}

fn rx_meta() -> impl Strategy<Value = RxMeta> {
    (verdict(), verdict(), proptest::option::of(any::<u32>())).prop_map(|(ip, l4, hash)| RxMeta {
        hash,
        csum: RxChecksum { ip, l4 },
        ..RxMeta::NONE
    })
}

/// A frame the fixed-offset path must take: TCP from the peer to us, everything well formed.
fn bulk_frame() -> Spec {
    Spec {
        dst_mac: OUR_MAC,
        src_mac: PEER_MAC,
        ethertype: 0x0800,
        ver_ihl: 0x45,
        tos: 0x02,
        total_len_delta: 0,
        ident: 7,
        flags_frag: 0x4000,
        ttl: 64,
        protocol: 6,
        checksum_xor: 0,
        src_ip: PEER_IP,
        dst_ip: OUR_IP,
        body: (0..60).collect(),
        padding: Vec::new(),
        flips: Vec::new(),
        truncate_to: None,
    }
}

/// Whether the fixed-offset path takes `frame` (on a scratch `IpIn`, so nothing is counted
/// on the twins).
fn fast_takes(cfg: &Arc<StackConfig>, frame: &[u8], meta: &RxMeta) -> bool {
    IpIn::new(Arc::clone(cfg))
        .fixed_v4_tcp(frame, meta)
        .is_some()
}

#[test]
fn fixed_offsets_take_a_well_formed_tcp_frame_for_us() {
    let cfg = config(true, false);
    let base = bulk_frame();
    for ip in [CsumVerdict::Unknown, CsumVerdict::Good] {
        let meta = RxMeta {
            csum: RxChecksum {
                ip,
                l4: CsumVerdict::Unknown,
            },
            ..RxMeta::NONE
        };
        assert!(fast_takes(&cfg, &base.build(), &meta), "{ip:?}");
        let broadcast_dst_mac = Spec {
            dst_mac: [0xff; 6],
            ..base.clone()
        };
        assert!(fast_takes(&cfg, &broadcast_dst_mac.build(), &meta));
        let padded = Spec {
            padding: vec![0; 6],
            ..base.clone()
        };
        assert!(fast_takes(&cfg, &padded.build(), &meta));
    }
}

#[test]
fn fixed_offsets_leave_every_other_shape_to_the_general_path() {
    let cfg = config(true, false);
    let meta = RxMeta::NONE;
    let base = bulk_frame();
    let others = [
        Spec {
            ver_ihl: 0x46,
            body: [vec![1, 1, 1, 0], (0..60).collect()].concat(),
            ..base.clone()
        },
        Spec {
            flags_frag: 0x2000,
            ..base.clone()
        },
        Spec {
            flags_frag: 0x0001,
            ..base.clone()
        },
        Spec {
            protocol: 17,
            ..base.clone()
        },
        Spec {
            ethertype: 0x86dd,
            ..base.clone()
        },
        Spec {
            dst_ip: [10, 0, 0, 255],
            ..base.clone()
        },
        Spec {
            src_ip: [224, 0, 0, 1],
            ..base.clone()
        },
        Spec {
            checksum_xor: 1,
            ..base.clone()
        },
        Spec {
            total_len_delta: 1,
            ..base.clone()
        },
        Spec {
            dst_mac: PEER_MAC,
            ..base.clone()
        },
        Spec {
            src_mac: OUR_MAC,
            ..base.clone()
        },
    ];
    for s in &others {
        assert!(!fast_takes(&cfg, &s.build(), &meta), "{s:?}");
    }
    let nic_bad = RxMeta {
        csum: RxChecksum {
            ip: CsumVerdict::Bad,
            l4: CsumVerdict::Unknown,
        },
        ..RxMeta::NONE
    };
    assert!(!fast_takes(&cfg, &base.build(), &nic_bad));
    assert!(!fast_takes(&config(true, true), &base.build(), &meta));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Each case receives a run of frames on twin `IpIn`s, one through `receive` (fixed
    /// offsets first), one through the general path alone: after every frame the
    /// deliveries and all counters are equal. (Frames are the bulk shape with a field or
    /// two changed, so many are taken by the fixed-offset path and the rest fail one of its
    /// checks.)
    #[test]
    fn fixed_offsets_deliver_and_count_as_the_general_path(
        verify_rx in any::<bool>(),
        second_prefix in prop_oneof![5 => Just(false), 1 => Just(true)],
        frames in proptest::collection::vec(
            (spec(), rx_meta()), 1..8),
    ) {
        let cfg = config(verify_rx, second_prefix);
        let mut fast = IpIn::new(Arc::clone(&cfg));
        let mut general = IpIn::new(Arc::clone(&cfg));
        for (now, (spec, meta)) in frames.into_iter().enumerate() {
            let frame = spec.build();
            let now = now as u64 * 1_000;
            let mut a = Recorder::for_frame(&frame);
            fast.receive(now, &frame, &meta, &mut a);
            let mut b = Recorder::for_frame(&frame);
            general.counters.rx_frames += 1;
            general.receive_general(now, &frame, &meta, &mut b);
            prop_assert_eq!(&a.seen, &b.seen);
            prop_assert_eq!(fast.counters(), general.counters());
        }
    }
}
