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
