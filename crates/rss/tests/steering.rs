//! Exact-match filters take priority over RSS; the filter table is bounded; unhashed packets go
//! to the default queue.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use rss::{
    FilterError, FilterTable, FiveTuple, FlowFields, HashInput, HashType, HashTypes, IpPair,
    PortPair, Reta, RssHasher, SteerHow, Steering,
};

fn tcp_v4(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16) -> FlowFields {
    FlowFields {
        addrs: IpPair::V4(Ipv4Addr::from(src), Ipv4Addr::from(dst)),
        protocol: 6,
        ports: Some(PortPair {
            src: sport,
            dst: dport,
        }),
        is_fragment: false,
    }
}

fn steering_8_queues() -> Steering {
    Steering {
        reta: Reta::with_equal(128, 8).expect("valid"),
        ..Steering::default()
    }
}

#[test]
fn rss_steers_through_reta_when_no_filter_matches() {
    let s = steering_8_queues();
    let flow = tcp_v4([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766);
    let d = s.steer_fields(&flow);
    assert_eq!(d.how, SteerHow::Rss);
    assert_eq!(d.hash, Some(0x51cc_c178));
    assert_eq!(d.hash_type, Some(HashType::TcpIpv4));
    assert_eq!(d.queue, s.reta.queue_for_hash(0x51cc_c178));
    assert_eq!(
        d.queue,
        ((0x51cc_c178u32 & 127) % 8) as u16,
        "equal fill: entry i → i % 8"
    );
}

#[test]
fn exact_match_filter_wins_over_rss_and_keeps_the_hash() {
    let mut s = steering_8_queues();
    let flow = tcp_v4([66, 9, 149, 187], [161, 142, 100, 80], 2794, 1766);
    let rss_queue = s.steer_fields(&flow).queue;
    let filter_queue = (rss_queue + 3) % 8;
    let tuple = flow.five_tuple().expect("tcp non-fragment has a 5-tuple");
    assert_eq!(s.filters.insert(tuple, filter_queue), Ok(None));
    let d = s.steer_fields(&flow);
    assert_eq!(d.how, SteerHow::Filter);
    assert_eq!(d.queue, filter_queue);
    assert_eq!(
        d.hash,
        Some(0x51cc_c178),
        "hash still computed for the stack"
    );
    // The reverse direction and a different port are not matched by the filter.
    let other = tcp_v4([66, 9, 149, 187], [161, 142, 100, 80], 2795, 1766);
    assert_eq!(s.steer_fields(&other).how, SteerHow::Rss);
    // Removing the filter restores RSS steering.
    assert_eq!(s.filters.remove(&tuple), Some(filter_queue));
    assert_eq!(s.steer_fields(&flow).queue, rss_queue);
}

#[test]
fn filter_does_not_match_fragments() {
    let mut s = steering_8_queues();
    let flow = tcp_v4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80);
    s.filters
        .insert(flow.five_tuple().expect("5-tuple"), 7)
        .expect("room");
    let fragment = FlowFields {
        ports: None,
        is_fragment: true,
        ..flow
    };
    let d = s.steer_fields(&fragment);
    assert_eq!(d.how, SteerHow::Rss);
    assert_eq!(d.hash_type, Some(HashType::Ipv4));
}

#[test]
fn filter_table_full_is_a_typed_error_but_replacement_succeeds() {
    let mut table = FilterTable::with_capacity(2);
    let tuple = |port: u16| FiveTuple {
        protocol: 17,
        src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
        dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
        src_port: port,
        dst_port: 53,
    };
    assert_eq!(table.insert(tuple(1), 1), Ok(None));
    assert_eq!(table.insert(tuple(2), 2), Ok(None));
    assert_eq!(table.insert(tuple(3), 3), Err(FilterError::Full));
    assert_eq!(table.insert(tuple(2), 5), Ok(Some(2)));
    assert_eq!(table.len(), 2);
    assert_eq!(table.lookup(&tuple(2)), Some(5));
    assert_eq!(table.lookup(&tuple(3)), None);
    assert_eq!(FilterTable::default().capacity(), 8192);
}

#[test]
fn filter_with_mixed_address_families_is_refused() {
    let mut table = FilterTable::default();
    let mixed = FiveTuple {
        protocol: 6,
        src: IpAddr::V4(Ipv4Addr::LOCALHOST),
        dst: IpAddr::V6(Ipv6Addr::LOCALHOST),
        src_port: 1,
        dst_port: 2,
    };
    assert_eq!(table.insert(mixed, 0), Err(FilterError::MixedFamilies));
    assert!(table.is_empty());
}

#[test]
fn non_ip_frame_goes_to_default_queue_without_hash() {
    let s = Steering {
        default_queue: 3,
        ..steering_8_queues()
    };
    let mut arp = vec![0xffu8; 12];
    arp.extend_from_slice(&[0x08, 0x06]);
    arp.extend_from_slice(&[0u8; 28]);
    let d = s.steer_frame(&arp).expect("well-formed");
    assert_eq!((d.queue, d.hash, d.how), (3, None, SteerHow::NoHash));
}

#[test]
fn disabled_hash_types_give_no_hash() {
    let s = Steering {
        hash_types: HashTypes::NONE,
        ..steering_8_queues()
    };
    let flow = tcp_v4([10, 0, 0, 1], [10, 0, 0, 2], 1000, 80);
    let d = s.steer_fields(&flow);
    assert_eq!((d.queue, d.hash, d.how), (0, None, SteerHow::NoHash));
}

#[test]
fn steer_frame_agrees_with_hash_of_extracted_input() {
    let s = steering_8_queues();
    let mut frame = vec![0u8; 12];
    frame.extend_from_slice(&[0x08, 0x00]);
    frame.extend_from_slice(&[0x45, 0, 0, 40, 0, 0, 0x40, 0, 64, 6, 0, 0]);
    frame.extend_from_slice(&[66, 9, 149, 187, 161, 142, 100, 80]);
    frame.extend_from_slice(&2794u16.to_be_bytes());
    frame.extend_from_slice(&1766u16.to_be_bytes());
    frame.extend_from_slice(&[0u8; 16]);
    let (_, input) = HashInput::from_frame(&frame, s.hash_types)
        .expect("valid")
        .expect("hashed");
    let d = s.steer_frame(&frame).expect("valid");
    assert_eq!(d.hash, Some(RssHasher::default().hash(&input)));
    assert_eq!(d.hash, Some(0x51cc_c178));
}

mod symmetric {
    use super::*;
    use proptest::prelude::*;
    use rss::{RssKey, SymmetricMode};

    fn reversed(f: &FlowFields) -> FlowFields {
        let addrs = match f.addrs {
            IpPair::V4(s, d) => IpPair::V4(d, s),
            IpPair::V6(s, d) => IpPair::V6(d, s),
        };
        let ports = f.ports.map(|p| PortPair {
            src: p.dst,
            dst: p.src,
        });
        FlowFields { addrs, ports, ..*f }
    }

    proptest! {
        #[test]
        fn both_directions_of_a_flow_reach_the_same_queue_in_symmetric_modes(
            is_v6 in any::<bool>(),
            (s, d) in any::<(u128, u128)>(),
            ports in prop::option::of(any::<(u16, u16)>()),
            repeated in any::<bool>(),
            reta_size_log2 in 0u32..=11,
        ) {
            let addrs = if is_v6 {
                IpPair::V6(Ipv6Addr::from_bits(s), Ipv6Addr::from_bits(d))
            } else {
                IpPair::V4(Ipv4Addr::from_bits(s as u32), Ipv4Addr::from_bits(d as u32))
            };
            let flow = FlowFields {
                addrs,
                protocol: 6,
                ports: ports.map(|(src, dst)| PortPair { src, dst }),
                is_fragment: ports.is_none(),
            };
            let mode = if repeated { SymmetricMode::RepeatedKey } else { SymmetricMode::XorFold };
            let s = Steering {
                reta: Reta::with_equal(1 << reta_size_log2, 16).expect("valid"),
                hasher: RssHasher::new(&RssKey::default(), mode),
                ..Steering::default()
            };
            let there = s.steer_fields(&flow);
            let back = s.steer_fields(&reversed(&flow));
            prop_assert_eq!(there.hash, back.hash);
            prop_assert_eq!(there.queue, back.queue);
        }
    }
}
