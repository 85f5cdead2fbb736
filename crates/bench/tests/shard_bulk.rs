//! The shard-path bulk harness moves every byte intact through two shard cores, with and
//! without the NIC model's receive coalescing.

use bench::bulk::BulkOptions;
use bench::shard_bulk;

const MIB: u64 = 1 << 20;

#[test]
fn one_mib_arrives_intact_through_two_shard_cores() {
    for gro in [false, true] {
        let r = shard_bulk::run(
            BulkOptions {
                verify: true,
                ..BulkOptions::new(MIB)
            },
            gro,
        )
        .expect("shard bulk run");
        assert_eq!(r.bytes, MIB, "gro {gro}");
        let (sent, received) = r.hashes.expect("verify was asked for");
        assert_eq!(sent, received, "gro {gro}: received stream differs");
        // MSS 1460 with timestamps: 1448 bytes of payload per full segment, a few short ones.
        // The sender starts on its CONNECTED event, while the harness is still setting up:
        // the first window (at most 256 KiB of buffer) may leave before the measured loop.
        let min = (MIB - 256 * 1024).div_ceil(1460);
        let max = MIB.div_ceil(1448) + MIB / 1448 / 50 + 4;
        assert!(
            (min..=max).contains(&r.data_segments),
            "gro {gro}: {} data segments",
            r.data_segments
        );
        assert!(
            r.frames_to_client > 0,
            "gro {gro}: the server must acknowledge"
        );
    }
}

#[test]
fn one_mib_arrives_intact_whether_the_stacks_know_a_public_or_a_secret_rss_key() {
    // Public: the table is indexed by the stacks' own hash; secret: by the NIC's carried hash.
    for rss in [shard_bulk::ShardRss::Public, shard_bulk::ShardRss::Secret] {
        let opts = BulkOptions {
            verify: true,
            ..BulkOptions::new(MIB)
        };
        let r = shard_bulk::run_with(opts, false, rss).expect("shard bulk run");
        assert_eq!(r.bytes, MIB, "{rss:?}");
        let (sent, received) = r.hashes.expect("verify was asked for");
        assert_eq!(sent, received, "{rss:?}: received stream differs");
    }
}

/// Through the shard path the NIC model verifies every checksum and the stack trusts its
/// verdict: every frame either stack receives during the transfer skips software
/// verification of both its IPv4 header and its TCP checksum ("no second checksum").
#[test]
fn every_frame_through_a_shard_skips_the_stacks_checksum_verification() {
    for gro in [false, true] {
        let opts = BulkOptions::new(MIB);
        let mut link = shard_bulk::ShardLink::connect(&opts, MIB, gro).expect("connect");
        let before = [
            link.client.stack().counters(),
            link.server.stack().counters(),
        ];
        let c = shard_bulk::shard_transfer_loop(&mut link, MIB).expect("transfer");
        let after = [
            link.client.stack().counters(),
            link.server.stack().counters(),
        ];
        for (side, (b, a)) in ["client", "server"].iter().zip(before.iter().zip(&after)) {
            let frames = a.rx_frames - b.rx_frames;
            assert!(frames > 0, "gro {gro}: {side} received nothing");
            assert_eq!(
                a.rx_csum_trusted - b.rx_csum_trusted,
                frames,
                "gro {gro}: {side} verified a TCP checksum the NIC had verified"
            );
            assert_eq!(
                a.rx_ipv4_csum_trusted - b.rx_ipv4_csum_trusted,
                frames,
                "gro {gro}: {side} verified an IPv4 header the NIC had verified"
            );
        }
        if !gro {
            assert_eq!(after[1].rx_frames - before[1].rx_frames, c.frames_to_server);
        }
    }
}
