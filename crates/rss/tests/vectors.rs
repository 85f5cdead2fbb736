//! Microsoft's "Verifying the RSS Hash Calculation" vectors (also the Intel 82599 datasheet
//! §7.1.2.8.3), default key. Each flow is checked IP-only and with ports, through the
//! bit-serial reference, the table-driven byte-slice path and the typed fast paths.

use core::net::{Ipv4Addr, Ipv6Addr};

use rss::{HashInput, PortPair, RssHasher, RssKey, Toeplitz, toeplitz_reference};

struct V4Vector {
    dst: (Ipv4Addr, u16),
    src: (Ipv4Addr, u16),
    ip_only: u32,
    with_ports: u32,
}

struct V6Vector {
    dst: (&'static str, u16),
    src: (&'static str, u16),
    ip_only: u32,
    with_ports: u32,
}

const V4_VECTORS: [V4Vector; 5] = [
    V4Vector {
        dst: (Ipv4Addr::new(161, 142, 100, 80), 1766),
        src: (Ipv4Addr::new(66, 9, 149, 187), 2794),
        ip_only: 0x323e_8fc2,
        with_ports: 0x51cc_c178,
    },
    V4Vector {
        dst: (Ipv4Addr::new(65, 69, 140, 83), 4739),
        src: (Ipv4Addr::new(199, 92, 111, 2), 14230),
        ip_only: 0xd718_262a,
        with_ports: 0xc626_b0ea,
    },
    V4Vector {
        dst: (Ipv4Addr::new(12, 22, 207, 184), 38024),
        src: (Ipv4Addr::new(24, 19, 198, 95), 12898),
        ip_only: 0xd2d0_a5de,
        with_ports: 0x5c2b_394a,
    },
    V4Vector {
        dst: (Ipv4Addr::new(209, 142, 163, 6), 2217),
        src: (Ipv4Addr::new(38, 27, 205, 30), 48228),
        ip_only: 0x8298_9176,
        with_ports: 0xafc7_327f,
    },
    V4Vector {
        dst: (Ipv4Addr::new(202, 188, 127, 2), 1303),
        src: (Ipv4Addr::new(153, 39, 163, 191), 44251),
        ip_only: 0x5d18_09c5,
        with_ports: 0x10e8_28a2,
    },
];

const V6_VECTORS: [V6Vector; 3] = [
    V6Vector {
        dst: ("3ffe:2501:200:3::1", 1766),
        src: ("3ffe:2501:200:1fff::7", 2794),
        ip_only: 0x2cc1_8cd5,
        with_ports: 0x4020_7d3d,
    },
    V6Vector {
        dst: ("ff02::1", 4739),
        src: ("3ffe:501:8::260:97ff:fe40:efab", 14230),
        ip_only: 0x0f0c_461c,
        with_ports: 0xdde5_1bbf,
    },
    V6Vector {
        dst: ("fe80::200:f8ff:fe21:67cf", 38024),
        src: ("3ffe:1900:4545:3:200:f8ff:fe21:67cf", 44251),
        ip_only: 0x4b61_e985,
        with_ports: 0x02d1_feef,
    },
];

fn v6(text: &str) -> Ipv6Addr {
    text.parse().expect("test vector address parses")
}

/// Checks one input against one expected value on every path; returns how many paths agreed.
fn check_all_paths(input: &HashInput, expected: u32) {
    let key = RssKey::default();
    let fast = Toeplitz::new(&key);
    let (bytes, len) = input.to_bytes();
    let bytes = &bytes[..len];
    assert_eq!(
        toeplitz_reference(&key, bytes),
        expected,
        "reference {input:?}"
    );
    assert_eq!(fast.hash(bytes), expected, "table slice {input:?}");
    assert_eq!(
        RssHasher::default().hash(input),
        expected,
        "typed {input:?}"
    );
}

#[test]
fn microsoft_ipv4_vectors_ip_only_and_with_ports() {
    for v in &V4_VECTORS {
        let ip_only = HashInput::V4 {
            src: v.src.0,
            dst: v.dst.0,
            ports: None,
        };
        check_all_paths(&ip_only, v.ip_only);
        let with_ports = HashInput::V4 {
            src: v.src.0,
            dst: v.dst.0,
            ports: Some(PortPair {
                src: v.src.1,
                dst: v.dst.1,
            }),
        };
        check_all_paths(&with_ports, v.with_ports);
        let t = Toeplitz::default();
        assert_eq!(t.hash_v4_addrs(v.src.0, v.dst.0), v.ip_only);
        assert_eq!(t.hash_v4(v.src.0, v.dst.0, v.src.1, v.dst.1), v.with_ports);
    }
}

#[test]
fn microsoft_ipv6_vectors_ip_only_and_with_ports() {
    for v in &V6_VECTORS {
        let (src, dst) = (v6(v.src.0), v6(v.dst.0));
        check_all_paths(
            &HashInput::V6 {
                src,
                dst,
                ports: None,
            },
            v.ip_only,
        );
        let ports = Some(PortPair {
            src: v.src.1,
            dst: v.dst.1,
        });
        check_all_paths(&HashInput::V6 { src, dst, ports }, v.with_ports);
        let t = Toeplitz::default();
        assert_eq!(t.hash_v6_addrs(src, dst), v.ip_only);
        assert_eq!(t.hash_v6(src, dst, v.src.1, v.dst.1), v.with_ports);
    }
}

#[test]
fn all_sixteen_vectors_are_distinct_and_nonzero() {
    // Guards against a table of copy-paste expectations: 16 different values.
    let mut all: Vec<u32> = V4_VECTORS
        .iter()
        .flat_map(|v| [v.ip_only, v.with_ports])
        .chain(V6_VECTORS.iter().flat_map(|v| [v.ip_only, v.with_ports]))
        .collect();
    assert_eq!(all.len(), 16);
    all.sort_unstable();
    all.dedup();
    assert_eq!(all.len(), 16);
    assert!(all.iter().all(|&h| h != 0));
}
