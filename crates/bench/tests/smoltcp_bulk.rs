//! The smoltcp peer harness moves every byte intact and counts segments sensibly.

use bench::bulk::BulkOptions;

#[path = "../examples/smoltcp_bulk/harness.rs"]
#[allow(dead_code)]
mod harness;

const MIB: u64 = 1 << 20;

#[test]
fn smoltcp_one_mib_arrives_intact_in_about_bytes_over_mss_segments() {
    let r = harness::run(BulkOptions {
        verify: true,
        timestamps: false,
        ..BulkOptions::new(MIB)
    })
    .expect("smoltcp bulk run");
    assert_eq!(r.bytes, MIB);
    let (sent, received) = r.hashes.expect("verify was asked for");
    assert_eq!(sent, received, "received stream differs from the sent one");
    // No timestamps: 1460 payload bytes per full segment; allow a few short ones.
    let min = MIB.div_ceil(1460);
    let max = min + min / 50 + 4;
    assert!(
        (min..=max).contains(&r.data_segments),
        "{} data segments for {MIB} bytes, expected {min}..={max}",
        r.data_segments
    );
    assert!(r.frames_to_client > 0, "the server must acknowledge");
}

#[test]
fn smoltcp_with_checksum_offload_moves_the_same_stream() {
    let r = harness::run(BulkOptions {
        verify: true,
        timestamps: false,
        checksum_offload: true,
        ..BulkOptions::new(300_001)
    })
    .expect("smoltcp bulk run");
    assert_eq!(r.bytes, 300_001);
    let (sent, received) = r.hashes.expect("verify was asked for");
    assert_eq!(sent, received);
}
