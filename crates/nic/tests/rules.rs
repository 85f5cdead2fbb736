//! Wildcard steering rules (`ethtool -N`) in the NIC model: queue and drop actions, per-rule
//! hit counts, their place after the exact filters (ATR) and before RSS.

mod common;

use std::net::{IpAddr, Ipv4Addr};

use common::{Seg, drain_all, udp4};
use nic::TxOffload;
use nic::{AtrConfig, ConfigError, GroConfig, ModerationConfig, Nic, NicConfig, RxDrop, RxVerdict};
use rss::{FlowRule, RuleSet, SteerHow};

fn nic(queues: u16, atr: bool) -> Nic {
    Nic::new(NicConfig {
        queues,
        rx_ring_slots: 256,
        moderation: ModerationConfig::OFF,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        atr: atr.then_some(AtrConfig {
            sample_every_packets: 20,
        }),
        ..NicConfig::default()
    })
    .expect("config")
}

fn rules(list: &[&str]) -> RuleSet {
    RuleSet::new(
        list.iter()
            .map(|s| s.parse::<FlowRule>().expect("rule"))
            .collect(),
    )
    .expect("bounded")
}

/// A TCP segment from 10.1.0.`i`:`sport` to 10.0.0.2:`dport`.
fn tcp(i: u8, sport: u16, dport: u16) -> Vec<u8> {
    let mut s = Seg::v4(sport, dport).with_payload(1, vec![7; 10]);
    s.src = IpAddr::V4(Ipv4Addr::new(10, 1, 0, i));
    s.build()
}

#[test]
fn a_queue_rule_overrides_rss_for_every_flow_it_matches() {
    let mut n = nic(4, false);
    n.set_rules(rules(&["proto tcp dst-port 80 queue 3"]))
        .expect("queue 3 exists");
    // Many flows to port 80: RSS alone spreads them over the queues, the rule takes all.
    let mut rss_queues = std::collections::BTreeSet::new();
    for i in 0..64u8 {
        let f = tcp(i, 10_000 + u16::from(i), 80);
        rss_queues.insert(nic(4, false).steer(&f).expect("valid").queue);
        assert_eq!(
            n.receive(0, f),
            RxVerdict::Queued {
                queue: 3,
                how: SteerHow::Rule
            }
        );
    }
    assert!(rss_queues.len() > 1, "RSS alone would have spread them");
    // Another port is RSS's.
    let other = tcp(1, 10_001, 81);
    assert_eq!(n.steer(&other).expect("valid").how, SteerHow::Rss);
    assert_eq!(n.rule_hits(), &[64]);
    let c = n.counters(3).expect("queue 3");
    assert_eq!(c.rx_steered_rule, 64);
    assert_eq!(drain_all(&mut n, 0).len(), 64);
}

#[test]
fn a_drop_rule_drops_and_counts_and_the_first_match_decides() {
    let mut n = nic(2, false);
    n.set_rules(rules(&[
        "proto udp dst-port 53 drop",
        "proto udp queue 1",
        "proto udp dst-port 53 queue 0",
    ]))
    .expect("valid queues");
    let a = Ipv4Addr::new(10, 1, 0, 1);
    let b = Ipv4Addr::new(10, 0, 0, 2);
    for _ in 0..5 {
        assert_eq!(
            n.receive(0, udp4(a, b, 4000, 53, b"q")),
            RxVerdict::Dropped(RxDrop::Rule)
        );
    }
    assert_eq!(
        n.receive(0, udp4(a, b, 4000, 54, b"q")),
        RxVerdict::Queued {
            queue: 1,
            how: SteerHow::Rule
        }
    );
    assert_eq!(n.rule_hits(), &[5, 1, 0]);
    let t = n.counters_total();
    assert_eq!((t.rx_drop_rule, t.rx_drops(), t.rx_packets), (5, 5, 1));
}

#[test]
fn a_rule_naming_a_missing_queue_is_refused() {
    let mut n = nic(2, false);
    assert_eq!(
        n.set_rules(rules(&["proto tcp queue 2"])),
        Err(ConfigError::NoSuchQueue)
    );
    assert!(n.rule_hits().is_empty());
}

#[test]
fn atr_wins_over_a_rule_for_the_replies_of_a_connection_the_host_opened() {
    let mut n = nic(4, true);
    // Replies from port 80 would all go to queue 3 by the rule...
    n.set_rules(rules(&["proto tcp src-port 80 queue 3"]))
        .expect("valid");
    // ...but queue 1 opened this connection: 10.0.0.2:40000 → 10.1.0.9:80.
    let mut syn = Seg::v4(40_000, 80)
        .with_payload(1, Vec::new())
        .flags(wire::TcpFlags::SYN);
    syn.src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    syn.dst = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 9));
    n.transmit(1, syn.build(), TxOffload::NONE)
        .expect("queue 1");
    let reply = tcp(9, 80, 40_000);
    assert_eq!(
        n.receive(0, reply),
        RxVerdict::Queued {
            queue: 1,
            how: SteerHow::Filter
        }
    );
    // Another server's port-80 reply, not opened here, follows the rule.
    assert_eq!(n.steer(&tcp(8, 80, 40_001)).expect("valid").queue, 3);
}

#[test]
fn atr_observed_by_a_steering_nic_sends_replies_to_the_opening_queue() {
    let mut n = nic(4, true);
    let reply = tcp(9, 80, 40_000);
    let rss_q = n.steer(&reply).expect("valid").queue;
    let opener = (rss_q + 1) % 4;
    let mut syn = Seg::v4(40_000, 80)
        .with_payload(1, Vec::new())
        .flags(wire::TcpFlags::SYN);
    syn.src = IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2));
    syn.dst = IpAddr::V4(Ipv4Addr::new(10, 1, 0, 9));
    n.atr_observe_tx(opener, &syn.build());
    assert_eq!(n.steer(&reply).expect("valid").queue, opener);
    assert_eq!(n.counters(opener).expect("q").tx_atr_filters_set, 1);
    // Without ATR configured, observing does nothing.
    let mut plain = nic(4, false);
    plain.atr_observe_tx(opener, &syn.build());
    assert_eq!(plain.steer(&reply).expect("valid").queue, rss_q);
}
