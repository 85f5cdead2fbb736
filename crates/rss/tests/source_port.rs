//! Source-port picking: the reply to the chosen port hashes to the wanted queue.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rss::{
    HashInput, PortPair, Reta, RssHasher, RssKey, SourcePortQuery, SymmetricMode, pick_source_port,
};

const LOCAL: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 10));
const REMOTE: IpAddr = IpAddr::V4(Ipv4Addr::new(198, 51, 100, 7));

fn query(wanted_queue: u16) -> SourcePortQuery {
    SourcePortQuery {
        local: LOCAL,
        remote: REMOTE,
        remote_port: 443,
        wanted_queue,
        range: 49152..=65535,
        start_hint: 50000,
    }
}

fn reply_queue(q: &SourcePortQuery, port: u16, reta: &Reta, hasher: &RssHasher) -> u16 {
    let ports = Some(PortPair {
        src: q.remote_port,
        dst: port,
    });
    let input = match (q.remote, q.local) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => HashInput::V4 { src, dst, ports },
        (IpAddr::V6(src), IpAddr::V6(dst)) => HashInput::V6 { src, dst, ports },
        _ => panic!("test uses one family"),
    };
    reta.queue_for_hash(hasher.hash(&input))
}

#[test]
fn picked_port_makes_reply_land_on_wanted_queue_for_every_queue() {
    let reta = Reta::with_equal(128, 8).expect("valid");
    for mode in [
        SymmetricMode::None,
        SymmetricMode::RepeatedKey,
        SymmetricMode::XorFold,
    ] {
        let hasher = RssHasher::new(&RssKey::default(), mode);
        for wanted in 0..8 {
            let q = query(wanted);
            let port = pick_source_port(&q, &reta, &hasher, |_| false).expect("some port fits");
            assert!(q.range.contains(&port));
            assert_eq!(reply_queue(&q, port, &reta, &hasher), wanted, "{mode:?}");
        }
    }
}

#[test]
fn picked_port_for_ipv6_lands_on_wanted_queue() {
    let reta = Reta::with_equal(128, 8).expect("valid");
    let hasher = RssHasher::default();
    for wanted in 0..8 {
        let q = SourcePortQuery {
            local: IpAddr::V6("2001:db8::10".parse::<Ipv6Addr>().expect("valid")),
            remote: IpAddr::V6("2001:db8:1::7".parse::<Ipv6Addr>().expect("valid")),
            ..query(wanted)
        };
        let port = pick_source_port(&q, &reta, &hasher, |_| false).expect("some port fits");
        assert_eq!(reply_queue(&q, port, &reta, &hasher), wanted);
    }
}

#[test]
fn picking_skips_ports_in_use() {
    let reta = Reta::with_equal(128, 8).expect("valid");
    let hasher = RssHasher::default();
    let q = query(5);
    let first = pick_source_port(&q, &reta, &hasher, |_| false).expect("fits");
    let second = pick_source_port(&q, &reta, &hasher, |p| p == first).expect("fits");
    assert_ne!(first, second);
    assert_eq!(reply_queue(&q, second, &reta, &hasher), 5);
}

#[test]
fn picking_starts_at_hint_and_wraps() {
    let reta = Reta::with_equal(128, 8).expect("valid");
    let hasher = RssHasher::default();
    // The scan from the hint returns the first fitting port at or after the hint…
    let q = query(2);
    let port = pick_source_port(&q, &reta, &hasher, |_| false).expect("fits");
    assert!(port >= q.start_hint);
    assert!((q.start_hint..port).all(|p| reply_queue(&q, p, &reta, &hasher) != 2));
    // …and wraps to the start of the range when nothing fits after the hint.
    let late = SourcePortQuery {
        start_hint: 65535,
        ..query(2)
    };
    let wrapped = pick_source_port(&late, &reta, &hasher, |p| p == 65535).expect("fits");
    assert!(wrapped < 65535);
    assert_eq!(reply_queue(&late, wrapped, &reta, &hasher), 2);
}

#[test]
fn picking_returns_none_when_impossible() {
    let reta = Reta::with_equal(128, 8).expect("valid");
    let hasher = RssHasher::default();
    // No RETA entry names queue 9.
    assert_eq!(pick_source_port(&query(9), &reta, &hasher, |_| false), None);
    // Every port in use.
    assert_eq!(pick_source_port(&query(0), &reta, &hasher, |_| true), None);
    // A one-port range whose reply lands elsewhere.
    let port = 50000;
    let q = query(0);
    let lands_on = reply_queue(&q, port, &reta, &hasher);
    let other = SourcePortQuery {
        range: port..=port,
        wanted_queue: (lands_on + 1) % 8,
        ..q
    };
    assert_eq!(pick_source_port(&other, &reta, &hasher, |_| false), None);
    // Empty range and mixed families.
    #[allow(clippy::reversed_empty_ranges)]
    let empty = SourcePortQuery {
        range: 2..=1,
        ..query(0)
    };
    assert_eq!(pick_source_port(&empty, &reta, &hasher, |_| false), None);
    let mixed = SourcePortQuery {
        local: IpAddr::V6(Ipv6Addr::LOCALHOST),
        ..query(0)
    };
    assert_eq!(pick_source_port(&mixed, &reta, &hasher, |_| false), None);
}

mod property {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn pick_is_sound_and_none_only_when_no_port_fits(
            local in any::<u32>(),
            remote in any::<u32>(),
            remote_port in any::<u16>(),
            wanted_queue in 0u16..5,
            first in any::<u16>(),
            span in 0u16..64,
            start_hint in any::<u16>(),
            in_use_mask in any::<u64>(),
        ) {
            let reta = Reta::with_equal(128, 4).expect("valid"); // queue 4 never present
            let hasher = RssHasher::default();
            let last = first.saturating_add(span);
            let q = SourcePortQuery {
                local: IpAddr::V4(Ipv4Addr::from_bits(local)),
                remote: IpAddr::V4(Ipv4Addr::from_bits(remote)),
                remote_port,
                wanted_queue,
                range: first..=last,
                start_hint,
            };
            let in_use = |p: u16| in_use_mask >> ((p - first) % 64) & 1 == 1;
            let fits = |p: u16| !in_use(p) && reply_queue(&q, p, &reta, &hasher) == wanted_queue;
            match pick_source_port(&q, &reta, &hasher, in_use) {
                Some(p) => {
                    prop_assert!(q.range.contains(&p));
                    prop_assert!(fits(p));
                }
                None => prop_assert!(!(first..=last).any(fits)),
            }
        }
    }
}
