//! Property tests: the fast hash equals the bit-serial reference, the hash is linear, and both
//! symmetric modes hash a flow and its reverse alike.

use core::net::{Ipv4Addr, Ipv6Addr};

use proptest::prelude::*;
use rss::{HashInput, PortPair, RssHasher, RssKey, SymmetricMode, Toeplitz, toeplitz_reference};

fn any_key() -> impl Strategy<Value = RssKey> {
    prop::array::uniform32(any::<u8>()).prop_flat_map(|head| {
        prop::array::uniform8(any::<u8>()).prop_map(move |tail| {
            let mut bytes = [0u8; 40];
            bytes[..32].copy_from_slice(&head);
            bytes[32..].copy_from_slice(&tail);
            RssKey::new(bytes)
        })
    })
}

fn any_ports() -> impl Strategy<Value = Option<PortPair>> {
    prop::option::of((any::<u16>(), any::<u16>()).prop_map(|(src, dst)| PortPair { src, dst }))
}

fn any_input() -> impl Strategy<Value = HashInput> {
    prop_oneof![
        (any::<u32>(), any::<u32>(), any_ports()).prop_map(|(s, d, ports)| HashInput::V4 {
            src: Ipv4Addr::from_bits(s),
            dst: Ipv4Addr::from_bits(d),
            ports,
        }),
        (any::<u128>(), any::<u128>(), any_ports()).prop_map(|(s, d, ports)| HashInput::V6 {
            src: Ipv6Addr::from_bits(s),
            dst: Ipv6Addr::from_bits(d),
            ports,
        }),
    ]
}

proptest! {
    #[test]
    fn fast_table_hash_equals_bit_serial_reference(
        key in any_key(),
        input in prop::collection::vec(any::<u8>(), 0..=48),
    ) {
        let fast = Toeplitz::new(&key);
        prop_assert_eq!(fast.hash(&input), toeplitz_reference(&key, &input));
    }

    #[test]
    fn typed_fast_paths_equal_reference(key in any_key(), input in any_input()) {
        let (bytes, len) = input.to_bytes();
        let expected = toeplitz_reference(&key, &bytes[..len]);
        prop_assert_eq!(RssHasher::new(&key, SymmetricMode::None).hash(&input), expected);
    }

    #[test]
    fn toeplitz_is_linear_over_xor(
        key in any_key(),
        a in prop::array::uniform32(any::<u8>()),
        b in prop::array::uniform32(any::<u8>()),
    ) {
        let t = Toeplitz::new(&key);
        let x: Vec<u8> = a.iter().zip(&b).map(|(p, q)| p ^ q).collect();
        prop_assert_eq!(t.hash(&x), t.hash(&a) ^ t.hash(&b));
    }

    #[test]
    fn repeated_key_mode_is_symmetric(input in any_input()) {
        let h = RssHasher::new(&RssKey::default(), SymmetricMode::RepeatedKey);
        prop_assert_eq!(h.hash(&input), h.hash(&input.reversed()));
    }

    #[test]
    fn xor_fold_mode_is_symmetric_for_any_key(key in any_key(), input in any_input()) {
        let h = RssHasher::new(&key, SymmetricMode::XorFold);
        prop_assert_eq!(h.hash(&input), h.hash(&input.reversed()));
    }

    #[test]
    fn repeated_key_hash_depends_only_on_xor_of_16bit_words(
        words in prop::array::uniform18(any::<u16>()),
    ) {
        // Any two inputs of equal length whose 16-bit words XOR to the same value hash alike:
        // here the input vs. one word holding the XOR-sum followed by zero words.
        let t = Toeplitz::new(&RssKey::symmetric());
        let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_be_bytes()).collect();
        let folded = words.iter().fold(0u16, |acc, w| acc ^ w);
        let mut canonical = vec![0u8; bytes.len()];
        canonical[..2].copy_from_slice(&folded.to_be_bytes());
        prop_assert_eq!(t.hash(&bytes), t.hash(&canonical));
    }
}

#[test]
fn plain_mode_is_not_symmetric() {
    // Guards the symmetry tests against a hasher that ignores its input order altogether.
    let h = RssHasher::default();
    let flow = HashInput::V4 {
        src: Ipv4Addr::new(66, 9, 149, 187),
        dst: Ipv4Addr::new(161, 142, 100, 80),
        ports: Some(PortPair {
            src: 2794,
            dst: 1766,
        }),
    };
    assert_ne!(h.hash(&flow), h.hash(&flow.reversed()));
}

#[test]
fn repeated_key_mode_uses_6d5a_repeated_for_the_default_key() {
    let h = RssHasher::new(&RssKey::default(), SymmetricMode::RepeatedKey);
    assert_eq!(*h.key(), RssKey::symmetric());
    let x = RssHasher::new(&RssKey::default(), SymmetricMode::XorFold);
    assert_eq!(*x.key(), RssKey::default());
}

#[test]
fn xor_fold_collides_flows_with_equal_address_and_port_xor() {
    // The documented trade-off: 10.0.0.1→10.0.0.2 and 10.0.0.5→10.0.0.6 share src⊕dst.
    let h = RssHasher::new(&RssKey::default(), SymmetricMode::XorFold);
    let a = HashInput::V4 {
        src: Ipv4Addr::new(10, 0, 0, 1),
        dst: Ipv4Addr::new(10, 0, 0, 2),
        ports: Some(PortPair { src: 1000, dst: 80 }),
    };
    let b = HashInput::V4 {
        src: Ipv4Addr::new(10, 0, 0, 5),
        dst: Ipv4Addr::new(10, 0, 0, 6),
        ports: Some(PortPair { src: 1000, dst: 80 }),
    };
    assert_eq!(h.hash(&a), h.hash(&b));
    assert_ne!(RssHasher::default().hash(&a), RssHasher::default().hash(&b));
}

#[test]
fn hash_type_names_round_trip_through_from_str() {
    for t in rss::HashType::ALL {
        assert_eq!(t.to_string().parse::<rss::HashType>(), Ok(t));
    }
    assert_eq!(
        "TCP-IPv6".parse::<rss::HashType>(),
        Ok(rss::HashType::TcpIpv6)
    );
    assert_eq!(
        "sctp-ipv4".parse::<rss::HashType>(),
        Err(rss::UnknownHashType)
    );
}

proptest! {
    /// On a CPU with GFNI and PCLMULQDQ `Toeplitz::with_clmul` runs the IPv4 4-tuple hashes on
    /// the carry-less-multiply kernel (`uses_clmul`); elsewhere both sides are the tables.
    /// Either way every entry point agrees with the tables and the bit-serial reference.
    #[test]
    fn ipv4_tuple_hash_kernel_equals_tables_and_reference(
        key in any_key(), s in any::<u32>(), d in any::<u32>(), sp in any::<u16>(), dp in any::<u16>(),
    ) {
        let t = Toeplitz::with_clmul(&key);
        prop_assert_eq!(t.uses_clmul(), platform::toeplitz::gfni_available() && platform::toeplitz::clmul_available());
        let tables = t.tables_only();
        let (src, dst) = (Ipv4Addr::from_bits(s), Ipv4Addr::from_bits(d));
        let mut tuple = [0u8; 12];
        tuple[..4].copy_from_slice(&src.octets());
        tuple[4..8].copy_from_slice(&dst.octets());
        tuple[8..10].copy_from_slice(&sp.to_be_bytes());
        tuple[10..].copy_from_slice(&dp.to_be_bytes());
        let want = toeplitz_reference(&key, &tuple);
        prop_assert_eq!(t.hash_v4(src, dst, sp, dp), want);
        prop_assert_eq!(t.hash_v4_tuple(&tuple), want);
        prop_assert_eq!(tables.hash_v4(src, dst, sp, dp), want);
        prop_assert_eq!(tables.hash_v4_tuple(&tuple), want);
    }

    /// The burst hashes (eight tuples per AVX-512 kernel call where the CPU has it, else one
    /// at a time) equal the bit-serial reference for every tuple of every burst length,
    /// including the remainders past a multiple of eight, through both entry points; the
    /// tables-only hasher gives the same.
    #[test]
    fn ipv4_burst_hashes_equal_the_reference_for_every_length(
        key in any_key(),
        tuples in prop::collection::vec(prop::array::uniform12(any::<u8>()), 0..41),
        tails in prop::array::uniform4(any::<u8>()),
    ) {
        let t = Toeplitz::new(&key);
        prop_assert_eq!(t.uses_burst_kernel(), platform::toeplitz_burst::burst_available());
        let want: Vec<u32> = tuples.iter().map(|x| toeplitz_reference(&key, x)).collect();
        for h in [&t, &t.tables_only()] {
            let mut out = vec![0u32; tuples.len()];
            h.hash_v4_tuples(&tuples, &mut out);
            prop_assert_eq!(&out, &want);
            // Windows: the 4 bytes after each tuple are arbitrary and ignored.
            let windows: Vec<[u8; 16]> = tuples
                .iter()
                .map(|x| {
                    let mut w = [0u8; 16];
                    w[..12].copy_from_slice(x);
                    w[12..].copy_from_slice(&tails);
                    w
                })
                .collect();
            for (chunk, want) in windows.chunks(rss::HASH_BURST_TUPLES).zip(want.chunks(rss::HASH_BURST_TUPLES)) {
                let zero = [0u8; 16];
                let refs: [&[u8; 16]; rss::HASH_BURST_TUPLES] =
                    core::array::from_fn(|i| chunk.get(i).unwrap_or(&zero));
                let out = h.hash_v4_windows8(&refs);
                prop_assert_eq!(&out[..chunk.len()], want);
            }
        }
    }
}
