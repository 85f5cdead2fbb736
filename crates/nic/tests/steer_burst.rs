//! Steering a burst (`Nic::steer_burst`, `Nic::steer_counted_burst`: plain IPv4 frames hashed
//! eight per AVX-512 kernel call where the CPU has it) decides and counts exactly as steering
//! frame by frame (`Nic::steer`, `Nic::steer_counted`), for TCP and UDP over IPv4 and IPv6,
//! non-IP, edited and truncated frames, with and without rules.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{Seg, udp4};
use nic::{GroConfig, ModerationConfig, Nic, NicConfig};
use proptest::prelude::*;
use rss::{FlowRule, RuleSet};

fn nic(queues: u16, rule: Option<&str>) -> Nic {
    let mut nic = Nic::new(NicConfig {
        queues,
        moderation: ModerationConfig::OFF,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    })
    .expect("config");
    if let Some(r) = rule {
        let set = RuleSet::new(vec![r.parse::<FlowRule>().expect("rule")]).expect("room");
        nic.set_rules(set).expect("rules");
    }
    nic
}

/// A frame of kind `kind % 5` (TCP/IPv4, UDP/IPv4, TCP/IPv6, ARP-like non-IP, TCP/IPv4 with
/// payload) for flow `(a, sport, dport)`.
fn frame(kind: u8, a: u32, sport: u16, dport: u16) -> Vec<u8> {
    let src = Ipv4Addr::from_bits(a);
    match kind % 5 {
        0 => {
            let mut s = Seg::v4(sport, dport);
            s.src = IpAddr::V4(src);
            s.build()
        }
        1 => udp4(src, Ipv4Addr::new(10, 0, 0, 2), sport, dport, &[1, 2, 3]),
        2 => Seg::v6(sport, dport).build(),
        3 => {
            let mut f = vec![0xffu8; 12];
            f.extend_from_slice(&[0x08, 0x06]);
            f.extend_from_slice(&[0u8; 28]);
            f
        }
        _ => {
            let mut s = Seg::v4(sport, dport).with_payload(7, vec![9; 200]);
            s.src = IpAddr::V4(src);
            s.build()
        }
    }
}

proptest! {
    #[test]
    fn steer_counted_burst_equals_steer_counted_frame_by_frame(
        specs in prop::collection::vec(
            (any::<u8>(), any::<u32>(), any::<u16>(), any::<u16>(),
             prop::option::weighted(0.2, (0usize..64, any::<u8>())),
             prop::option::weighted(0.1, 0usize..60)),
            0..50),
        queues in 1u16..9,
        with_rule in any::<bool>(),
        extra_out in 0usize..3,
    ) {
        let frames: Vec<Vec<u8>> = specs
            .iter()
            .map(|&(kind, a, sport, dport, edit, truncate)| {
                let mut f = frame(kind, a, sport, dport);
                if let Some((at, v)) = edit {
                    if let Some(b) = f.get_mut(at) {
                        *b = v;
                    }
                }
                if let Some(n) = truncate {
                    f.truncate(n);
                }
                f
            })
            .collect();
        let rule = with_rule.then_some("proto udp queue 0");
        let mut one_by_one = nic(queues, rule);
        let mut burst = one_by_one.clone();
        let want: Vec<_> = frames.iter().map(|f| one_by_one.steer_counted(f)).collect();
        let sentinel = Err(nic::RxDrop::Oversize);
        let mut got = vec![sentinel; frames.len() + extra_out];
        burst.steer_counted_burst(&frames, &mut got);
        prop_assert_eq!(&got[..frames.len()], &want[..]);
        prop_assert!(got[frames.len()..].iter().all(|g| *g == sentinel));
        prop_assert_eq!(burst.reta_bucket_packets(), one_by_one.reta_bucket_packets());
        prop_assert_eq!(burst.rule_hits(), one_by_one.rule_hits());
        // The uncounted form gives the same decisions.
        let mut uncounted = vec![sentinel; frames.len()];
        burst.steer_burst(&frames, &mut uncounted);
        prop_assert_eq!(&uncounted[..], &want[..]);
    }
}
