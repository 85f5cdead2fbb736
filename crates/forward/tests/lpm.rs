//! Longest-prefix match against a naive reference: random route sets (overlapping prefixes
//! around a few anchors, /0, host routes, replacements) with inserts and deletes in random
//! order, and lookups of random addresses near and far from the routes.
use std::collections::BTreeMap;

use forward::{Fib, FibLimits, Lpm4, Lpm6, NextHop, Prefix, Route};
use proptest::prelude::*;

/// Linear scan: the longest route covering `addr`.
fn naive4(routes: &BTreeMap<(u8, u32), u16>, addr: u32) -> Option<u16> {
    routes
        .iter()
        .filter(|((len, p), _)| mask4(*len) & addr == *p)
        .max_by_key(|((len, _), _)| *len)
        .map(|(_, &nh)| nh)
}

fn naive6(routes: &BTreeMap<(u8, u128), u16>, addr: u128) -> Option<u16> {
    routes
        .iter()
        .filter(|((len, p), _)| mask6(*len) & addr == *p)
        .max_by_key(|((len, _), _)| *len)
        .map(|(_, &nh)| nh)
}

fn mask4(len: u8) -> u32 {
    if len == 0 {
        0
    } else {
        u32::MAX << (32 - u32::from(len))
    }
}

fn mask6(len: u8) -> u128 {
    if len == 0 {
        0
    } else {
        u128::MAX << (128 - u32::from(len))
    }
}

#[derive(Debug, Clone)]
enum Op<A> {
    Insert(A, u8, u16),
    /// Remove the k-th route present (modulo their number), or a random absent one.
    Remove(usize),
    RemoveAbsent(A, u8),
}

/// Addresses clustered around three anchors (so prefixes overlap and nest), plus anywhere.
fn addr4(anchors: [u32; 3]) -> impl Strategy<Value = u32> {
    prop_oneof![
        3 => (0usize..3, any::<u32>(), 0u32..=32).prop_map(move |(i, r, bits)| {
            anchors[i] ^ (r & if bits == 0 { 0 } else { u32::MAX >> (32 - bits) })
        }),
        1 => any::<u32>(),
    ]
}

fn len4() -> impl Strategy<Value = u8> {
    prop_oneof![1 => Just(0u8), 2 => Just(32u8), 2 => 20u8..=28, 4 => 0u8..=32]
}

fn ops4(anchors: [u32; 3]) -> impl Strategy<Value = Vec<Op<u32>>> {
    let op = prop_oneof![
        6 => (addr4(anchors), len4(), 0u16..20).prop_map(|(a, l, nh)| Op::Insert(a, l, nh)),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => (addr4(anchors), len4()).prop_map(|(a, l)| Op::RemoveAbsent(a, l)),
    ];
    prop::collection::vec(op, 1..40)
}

fn addr6(anchors: [u128; 3]) -> impl Strategy<Value = u128> {
    prop_oneof![
        3 => (0usize..3, any::<u128>(), 0u32..=128).prop_map(move |(i, r, bits)| {
            anchors[i] ^ (r & if bits == 0 { 0 } else { u128::MAX >> (128 - bits) })
        }),
        1 => any::<u128>(),
    ]
}

fn len6() -> impl Strategy<Value = u8> {
    prop_oneof![1 => Just(0u8), 2 => Just(128u8), 2 => prop::sample::select(vec![32u8, 48, 56, 64]), 4 => 0u8..=128]
}

fn ops6(anchors: [u128; 3]) -> impl Strategy<Value = Vec<Op<u128>>> {
    let op = prop_oneof![
        6 => (addr6(anchors), len6(), 0u16..20).prop_map(|(a, l, nh)| Op::Insert(a, l, nh)),
        2 => any::<usize>().prop_map(Op::Remove),
        1 => (addr6(anchors), len6()).prop_map(|(a, l)| Op::RemoveAbsent(a, l)),
    ];
    prop::collection::vec(op, 1..40)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn dir24_8_matches_linear_scan_through_inserts_and_deletes(
        (_anchors, ops, queries) in any::<[u32; 3]>().prop_flat_map(|anchors| {
            (Just(anchors), ops4(anchors), prop::collection::vec(addr4(anchors), 64))
        })
    ) {
        let mut lpm = Lpm4::new(4096);
        let mut reference: BTreeMap<(u8, u32), u16> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Insert(a, len, nh) => {
                    let p = a & mask4(len);
                    let old = lpm.insert(a, len, nh).unwrap();
                    prop_assert_eq!(old, reference.insert((len, p), nh));
                }
                Op::Remove(k) => {
                    if reference.is_empty() { continue; }
                    let (&(len, p), &nh) = reference.iter().nth(k % reference.len()).unwrap();
                    prop_assert_eq!(lpm.remove(p, len), Some(nh));
                    reference.remove(&(len, p));
                }
                Op::RemoveAbsent(a, len) => {
                    let p = a & mask4(len);
                    prop_assert_eq!(lpm.remove(p, len), reference.remove(&(len, p)));
                }
            }
            for &q in &queries {
                prop_assert_eq!(lpm.lookup(q), naive4(&reference, q), "addr {:#010x}", q);
            }
            // Every route's own first and last address.
            for &(len, p) in reference.keys() {
                for q in [p, p | !mask4(len)] {
                    prop_assert_eq!(lpm.lookup(q), naive4(&reference, q));
                }
            }
        }
        prop_assert_eq!(lpm.len(), reference.len());
        prop_assert!(lpm.memory_bytes() <= lpm.memory_bytes_max());
        // Deleting everything returns the table to empty, groups released.
        let all: Vec<_> = reference.keys().copied().collect();
        for (len, p) in all {
            prop_assert!(lpm.remove(p, len).is_some());
        }
        prop_assert_eq!(lpm.tbl8_groups_used(), 0);
        for &q in &queries {
            prop_assert_eq!(lpm.lookup(q), None);
        }
    }

    #[test]
    fn poptrie_v6_matches_linear_scan_through_inserts_and_deletes(
        (_anchors, ops, queries) in any::<[u128; 3]>().prop_flat_map(|anchors| {
            (Just(anchors), ops6(anchors), prop::collection::vec(addr6(anchors), 64))
        })
    ) {
        let mut lpm = Lpm6::new(1 << 16);
        let mut reference: BTreeMap<(u8, u128), u16> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Insert(a, len, nh) => {
                    let p = a & mask6(len);
                    let old = lpm.insert(a, len, nh).unwrap();
                    prop_assert_eq!(old, reference.insert((len, p), nh));
                }
                Op::Remove(k) => {
                    if reference.is_empty() { continue; }
                    let (&(len, p), &nh) = reference.iter().nth(k % reference.len()).unwrap();
                    prop_assert_eq!(lpm.remove(p, len), Some(nh));
                    reference.remove(&(len, p));
                }
                Op::RemoveAbsent(a, len) => {
                    let p = a & mask6(len);
                    prop_assert_eq!(lpm.remove(p, len), reference.remove(&(len, p)));
                }
            }
            for &q in &queries {
                prop_assert_eq!(lpm.lookup(q), naive6(&reference, q), "addr {:#034x}", q);
            }
            for &(len, p) in reference.keys() {
                for q in [p, p | !mask6(len)] {
                    prop_assert_eq!(lpm.lookup(q), naive6(&reference, q));
                }
            }
        }
        prop_assert_eq!(lpm.len(), reference.len());
        prop_assert!(lpm.memory_bytes() <= lpm.memory_bytes_max());
    }
}

#[test]
fn fib_interns_next_hops_and_frees_them_with_their_last_route() {
    let mut fib = Fib::new(FibLimits::default());
    let via = NextHop::Gateway {
        port: 1,
        gateway: "10.0.0.1".parse().unwrap(),
    };
    for p in ["192.168.0.0/16", "172.16.0.0/12", "0.0.0.0/0"] {
        fib.insert(Route {
            prefix: p.parse().unwrap(),
            next_hop: via,
        })
        .unwrap();
    }
    let local: Prefix = "192.168.1.1/32".parse().unwrap();
    fib.insert(Route {
        prefix: local,
        next_hop: NextHop::Local,
    })
    .unwrap();
    assert_eq!(
        fib.lookup("192.168.1.1".parse().unwrap()),
        Some(NextHop::Local)
    );
    assert_eq!(fib.lookup("192.168.1.2".parse().unwrap()), Some(via));
    assert_eq!(fib.lookup("8.8.8.8".parse().unwrap()), Some(via));
    assert_eq!(fib.lookup("2001:db8::1".parse().unwrap()), None);
    assert_eq!(fib.routes().len(), 4);
    assert_eq!(fib.remove("0.0.0.0/0".parse().unwrap()), Some(via));
    assert_eq!(fib.lookup("8.8.8.8".parse().unwrap()), None);
    // A gateway of the other family is refused.
    let bad = Route {
        prefix: "2001:db8::/32".parse().unwrap(),
        next_hop: via,
    };
    assert_eq!(fib.insert(bad), Err(forward::RouteError::FamilyMismatch));
    assert_eq!(
        "10.1.2.3/8".parse::<Prefix>().unwrap().to_string(),
        "10.0.0.0/8"
    );
    assert!("10.0.0.0/33".parse::<Prefix>().is_err());
    assert!("2001:db8::/129".parse::<Prefix>().is_err());
}
