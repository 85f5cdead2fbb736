//! The RSS side of the TCP table: the connection table keyed by the carried RSS hash only
//! under a secret key and only for a hash of the 4-tuple, and active opens choosing ports
//! whose replies hash back to the opening shard.
mod common;

use common::*;
use stack::{RssHashType, RxMeta};

/// Sends "one" with the hash a NIC would carry, then "two" with a wrong carried hash of type
/// `second_type`, to the server of a pair whose server has an RSS key (`key_is_secret` as
/// given); returns what the server read and how many stray segments met its listener.
fn carried_hash_exchange(key_is_secret: bool, second_type: RssHashType) -> (Vec<u8>, u64) {
    let hasher = rss::RssHasher::default();
    let mut cb = config_b();
    cb.rss = Some(stack::RssConfig {
        hasher: hasher.clone(),
        home: None,
        key_is_secret,
    });
    let mut p = Pair::with(config_a(), cb);
    let (c, s) = establish(&mut p, v4(IP_B, 80));
    let port_a = p.a.local_addr(c).unwrap().port();
    let nic_hash = hasher.hash(&rss::HashInput::V4 {
        src: IP_A,
        dst: IP_B,
        ports: Some(rss::PortPair {
            src: port_a,
            dst: 80,
        }),
    });
    // Data with the hash a NIC would carry reaches the connection ...
    p.a.tcp_send(c, b"one").unwrap();
    let f = p.a.poll_transmit(p.now).expect("segment");
    p.b.receive(
        p.now,
        &f,
        &RxMeta {
            hash: Some(nic_hash),
            hash_type: Some(RssHashType::TcpIpv4),
            ..RxMeta::NONE
        },
    );
    let mut read = read_all(&mut p.b, s);
    assert_eq!(read, b"one");
    // ... and then a segment carrying a wrong hash.
    p.advance(MS);
    p.a.tcp_send(c, b"two").unwrap();
    let f = p.a.poll_transmit(p.now).expect("segment");
    let before = p.b.counters();
    p.b.receive(
        p.now,
        &f,
        &RxMeta {
            hash: Some(nic_hash ^ 1),
            hash_type: Some(second_type),
            ..RxMeta::NONE
        },
    );
    read.extend(read_all(&mut p.b, s));
    let strays = p.b.counters().tcp_listen_bad_segment - before.tcp_listen_bad_segment;
    (read, strays)
}

#[test]
fn connection_table_uses_the_carried_rss_hash_when_the_key_is_secret() {
    // The table trusts the carried hash (hash once): a wrong one misses the connection and
    // meets the listener as a stray ACK (RST, RFC 9293 §3.10.7.2).
    let (read, strays) = carried_hash_exchange(true, RssHashType::TcpIpv4);
    assert_eq!(read, b"one");
    assert_eq!(strays, 1);
}

#[test]
fn an_address_only_carried_hash_is_not_the_tcp_tables_key() {
    // A fragment (or a NIC hashing addresses only) carries the hash of the two addresses:
    // even under a secret key the stack hashes the 4-tuple itself and finds the connection.
    let (read, strays) = carried_hash_exchange(true, RssHashType::Ipv4);
    assert_eq!(read, b"onetwo");
    assert_eq!(strays, 0);
}

#[test]
fn connection_table_hashes_tuples_itself_under_a_public_rss_key() {
    // Under the well-known default key a peer could aim tuples at one bucket, so the table
    // indexes by the stack's keyed hash of the tuple: the carried hash does not matter.
    let (read, strays) = carried_hash_exchange(false, RssHashType::TcpIpv4);
    assert_eq!(read, b"onetwo");
    assert_eq!(strays, 0);
}

#[test]
fn active_open_picks_a_port_whose_replies_come_home() {
    let hasher = rss::RssHasher::default();
    let reta = rss::Reta::with_equal(128, 4).unwrap();
    let mut ca = config_a();
    ca.rss = Some(stack::RssConfig {
        hasher: hasher.clone(),
        home: Some((reta.clone(), 2)),
        key_is_secret: false,
    });
    let mut p = Pair::with(ca, config_b());
    resolve(&mut p);
    let _l = p.b.tcp_listen(v4(IP_B, 80), 8).unwrap();
    for _ in 0..5 {
        let c = p.a.tcp_connect(p.now, v4(IP_B, 80), 0).expect("connect");
        let port = p.a.local_addr(c).unwrap().port();
        let reply = rss::HashInput::V4 {
            src: IP_B,
            dst: IP_A,
            ports: Some(rss::PortPair { src: 80, dst: port }),
        };
        assert_eq!(reta.queue_for_hash(hasher.hash(&reply)), 2);
    }
    p.exchange();
    assert_eq!(p.a.counters().tcp_connections_established, 5);
}
