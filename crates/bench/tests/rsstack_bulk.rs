//! The rsstack bulk harness moves every byte intact and counts segments sensibly.

use bench::bulk::{self, BulkOptions};
use bench::idle::IdleWorld;

const MIB: u64 = 1 << 20;

fn sensible_segment_count(bytes: u64, segments: u64) {
    // MSS 1460; timestamps (12 bytes) leave 1448 of payload per full segment. A handful of
    // short segments (Nagle tail, window edges) may add a few more.
    let min = bytes.div_ceil(1460);
    let max = bytes.div_ceil(1448) + bytes / 1448 / 50 + 4;
    assert!(
        (min..=max).contains(&segments),
        "{segments} data segments for {bytes} bytes, expected {min}..={max}"
    );
}

#[test]
fn one_mib_arrives_intact_in_about_bytes_over_mss_segments() {
    let r = bulk::run(BulkOptions {
        verify: true,
        checksum_offload: false,
        ..BulkOptions::new(MIB)
    })
    .expect("bulk run");
    assert_eq!(r.bytes, MIB);
    let (sent, received) = r.hashes.expect("verify was asked for");
    assert_eq!(sent, received, "received stream differs from the sent one");
    sensible_segment_count(r.bytes, r.data_segments);
    assert!(r.frames_to_server >= r.data_segments);
    assert!(r.frames_to_client > 0, "the server must acknowledge");
}

#[test]
fn checksum_offload_moves_the_same_stream() {
    let r = bulk::run(BulkOptions {
        verify: true,
        checksum_offload: true,
        ..BulkOptions::new(300_001)
    })
    .expect("bulk run");
    assert_eq!(r.bytes, 300_001);
    let (sent, received) = r.hashes.expect("verify was asked for");
    assert_eq!(sent, received);
    sensible_segment_count(r.bytes, r.data_segments);
}

#[test]
fn summary_line_names_the_segment_count() {
    let r = bulk::run(BulkOptions {
        verify: true,
        checksum_offload: false,
        ..BulkOptions::new(20_000)
    })
    .expect("bulk run");
    let line = bulk::summary_line("rsstack", &r);
    assert!(line.contains(&format!("data_segments={}", r.data_segments)));
    assert!(line.contains("verify=ok"));
}

#[test]
fn idle_world_establishes_every_connection_across_server_ports() {
    // More than one server port's worth is too slow for a debug test; 300 connections still
    // cover batching (128 per exchange) and accepting across batches.
    let n = 300;
    let mut w = IdleWorld::new(n).expect("world");
    let up = w.connect_all(n, 1_000_000_000).expect("connect");
    assert_eq!(up, n);
    assert_eq!(w.client.tcp_connection_count(), n);
    assert_eq!(w.server.tcp_connection_count(), n);
}

#[test]
fn ecn_option_negotiates_ecn_on_both_ends_and_moves_the_same_stream() {
    let opts = BulkOptions {
        verify: true,
        ecn: true,
        ..BulkOptions::new(300_001)
    };
    let link = bulk::BulkLink::connect(&opts).expect("connect");
    for (stack, h, end) in [
        (&link.client, link.client_sock, "client"),
        (&link.server, link.server_sock, "server"),
    ] {
        let info = stack.tcp_info(link.now, h).expect("tcp_info");
        assert_ne!(
            info.options & tcp::tcpi_opt::ECN,
            0,
            "{end}: ECN not negotiated"
        );
    }
    let plain = bulk::BulkLink::connect(&BulkOptions::new(1)).expect("connect");
    let info = plain
        .client
        .tcp_info(plain.now, plain.client_sock)
        .expect("tcp_info");
    assert_eq!(
        info.options & tcp::tcpi_opt::ECN,
        0,
        "ECN is off by default"
    );
    let r = bulk::run(opts).expect("bulk run");
    assert_eq!(r.bytes, 300_001);
    let (sent, received) = r.hashes.expect("verify was asked for");
    assert_eq!(sent, received);
    sensible_segment_count(r.bytes, r.data_segments);
}
