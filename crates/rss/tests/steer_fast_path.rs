//! The whole-frame steering fast path (fixed offsets for untagged IPv4 TCP/UDP) decides exactly
//! as the general walk does, for well-formed frames and for frames with any header byte
//! changed, under every hash-type set, symmetric mode and filter table; and the burst path
//! (`steer_burst`, eight tuples per kernel call) decides exactly as `steer_frame` does, frame
//! by frame, with the AVX-512 kernel (where the CPU has it) and on tables.

use core::net::{IpAddr, Ipv4Addr};

use proptest::prelude::*;
use rss::{FiveTuple, FlowFields, HashTypes, Reta, RssHasher, RssKey, Steering, SymmetricMode};

/// An untagged TCP or UDP over IPv4 frame: 14 + 20 + `l4_len` bytes plus `pad` bytes of
/// Ethernet padding after the IP packet.
fn frame(
    protocol: u8,
    src: u32,
    dst: u32,
    sport: u16,
    dport: u16,
    l4_len: usize,
    pad: usize,
) -> Vec<u8> {
    let total = 20 + l4_len;
    let mut f = vec![0u8; 12];
    f.extend_from_slice(&[0x08, 0x00, 0x45, 0]);
    f.extend_from_slice(&(total as u16).to_be_bytes());
    f.extend_from_slice(&[0, 0, 0x40, 0, 64, protocol, 0, 0]);
    f.extend_from_slice(&src.to_be_bytes());
    f.extend_from_slice(&dst.to_be_bytes());
    let mut l4 = vec![0u8; l4_len];
    for (i, b) in sport
        .to_be_bytes()
        .iter()
        .chain(&dport.to_be_bytes())
        .enumerate()
    {
        if let Some(slot) = l4.get_mut(i) {
            *slot = *b;
        }
    }
    f.extend_from_slice(&l4);
    f.extend(std::iter::repeat_n(0u8, pad));
    f
}

fn steering(types: u8, mode: u8, filter: Option<(u32, u32, u16, u16, u16)>) -> Steering {
    let mode = match mode % 3 {
        0 => SymmetricMode::None,
        1 => SymmetricMode::RepeatedKey,
        _ => SymmetricMode::XorFold,
    };
    let mut types_set = HashTypes::NONE;
    for (bit, t) in rss::HashType::ALL.iter().enumerate() {
        if types & (1 << bit) != 0 {
            types_set = types_set.with(*t);
        }
    }
    let mut s = Steering {
        reta: Reta::with_equal(128, 8).unwrap_or_default(),
        hasher: RssHasher::new(&RssKey::default(), mode),
        hash_types: types_set,
        ..Steering::default()
    };
    if let Some((src, dst, sport, dport, queue)) = filter {
        let t = FiveTuple {
            protocol: 6,
            src: IpAddr::V4(Ipv4Addr::from_bits(src)),
            dst: IpAddr::V4(Ipv4Addr::from_bits(dst)),
            src_port: sport,
            dst_port: dport,
        };
        assert!(s.filters.insert(t, queue % 8).is_ok());
    }
    s
}

proptest! {
    #[test]
    fn steer_frame_equals_the_general_walk(
        protocol in prop_oneof![Just(6u8), Just(17u8), Just(1u8)],
        src in any::<u32>(), dst in any::<u32>(), sport in any::<u16>(), dport in any::<u16>(),
        l4_len in 0usize..40, pad in 0usize..8,
        edits in prop::collection::vec((0usize..64, any::<u8>()), 0..3),
        truncate in prop::option::of(0usize..64),
        types in any::<u8>(), mode in any::<u8>(), filtered in any::<bool>(), queue in any::<u16>(),
    ) {
        let mut f = frame(protocol, src, dst, sport, dport, l4_len, pad);
        for (at, v) in edits {
            if let Some(b) = f.get_mut(at) {
                *b = v;
            }
        }
        if let Some(n) = truncate {
            f.truncate(n);
        }
        let s = steering(types, mode, filtered.then_some((src, dst, sport, dport, queue)));
        prop_assert_eq!(s.steer_frame(&f), s.steer_frame_general(&f));
        if let Some(fast) = FlowFields::from_plain_ipv4_frame(&f) {
            prop_assert_eq!(Ok(Some(fast)), FlowFields::from_frame(&f));
        }
    }
}

/// One frame of a burst: protocol, addresses, ports, L4 length, padding, edits, truncation.
type FrameSpec = (
    u8,
    (u32, u32, u16, u16),
    (usize, usize),
    Vec<(usize, u8)>,
    Option<usize>,
);

fn frame_spec() -> impl Strategy<Value = FrameSpec> {
    (
        prop_oneof![4 => Just(6u8), 2 => Just(17u8), 1 => Just(1u8)],
        (any::<u32>(), any::<u32>(), any::<u16>(), any::<u16>()),
        (0usize..40, 0usize..8),
        prop::collection::vec((0usize..64, any::<u8>()), 0..2),
        prop::option::weighted(0.2, 0usize..64),
    )
}

fn build(spec: &FrameSpec) -> Vec<u8> {
    let (protocol, (src, dst, sport, dport), (l4_len, pad), edits, truncate) = spec;
    let mut f = frame(*protocol, *src, *dst, *sport, *dport, *l4_len, *pad);
    for &(at, v) in edits {
        if let Some(b) = f.get_mut(at) {
            *b = v;
        }
    }
    if let Some(n) = truncate {
        f.truncate(*n);
    }
    f
}

proptest! {
    #[test]
    fn steer_burst_equals_steer_frame(
        specs in prop::collection::vec(frame_spec(), 0..30),
        extra_out in 0usize..3,
        types in any::<u8>(), mode in any::<u8>(), filtered in any::<bool>(), queue in any::<u16>(),
    ) {
        let frames: Vec<Vec<u8>> = specs.iter().map(build).collect();
        let filter = specs
            .first()
            .filter(|_| filtered)
            .map(|(_, (s, d, sp, dp), ..)| (*s, *d, *sp, *dp, queue));
        let kernel = steering(types, mode, filter);
        let tables = Steering { hasher: kernel.hasher.tables_only(), ..kernel.clone() };
        prop_assert!(!tables.hasher.toeplitz().uses_burst_kernel());
        for s in [&kernel, &tables] {
            let sentinel = Err(rss::FrameError::TruncatedL4);
            let mut out = vec![sentinel; frames.len() + extra_out];
            s.steer_burst(&frames, &mut out);
            for (i, f) in frames.iter().enumerate() {
                prop_assert_eq!(out[i], s.steer_frame(f), "frame {}", i);
            }
            // Past the frames, `out` is untouched.
            prop_assert!(out[frames.len()..].iter().all(|o| *o == sentinel));
            // A shorter `out` takes the first frames only.
            let mut short = vec![sentinel; frames.len() / 2];
            s.steer_burst(&frames, &mut short);
            for (i, o) in short.iter().enumerate() {
                prop_assert_eq!(*o, s.steer_frame(&frames[i]));
            }
        }
    }
}

#[test]
fn the_burst_kernel_is_found_where_the_cpu_has_avx512_gfni_and_vpclmulqdq() {
    let toeplitz = rss::Toeplitz::default();
    assert_eq!(
        toeplitz.uses_burst_kernel(),
        platform::toeplitz_burst::burst_available()
    );
    assert!(!toeplitz.tables_only().uses_burst_kernel());
}

#[test]
fn the_fast_path_takes_plain_tcp_and_udp_and_leaves_the_rest() {
    let tcp = frame(6, 1, 2, 3, 4, 20, 0);
    assert!(FlowFields::from_plain_ipv4_frame(&tcp).is_some());
    assert!(FlowFields::from_plain_ipv4_frame(&frame(17, 1, 2, 3, 4, 8, 6)).is_some());
    // ICMP, options (IHL 6), a fragment, ports past the total length: the general walk.
    assert!(FlowFields::from_plain_ipv4_frame(&frame(1, 1, 2, 3, 4, 8, 0)).is_none());
    let mut options = tcp.clone();
    options[14] = 0x46;
    assert!(FlowFields::from_plain_ipv4_frame(&options).is_none());
    let mut fragment = tcp.clone();
    fragment[20] |= 0x20;
    assert!(FlowFields::from_plain_ipv4_frame(&fragment).is_none());
    assert!(FlowFields::from_plain_ipv4_frame(&frame(6, 1, 2, 3, 4, 2, 10)).is_none());
}
