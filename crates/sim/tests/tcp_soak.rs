//! The TCP soak: every workload over many seeds, real `stack` instances on faulty links
//! (loss up to 20 %, reordering, duplication, corruption, flaps). Each seed must deliver every
//! byte exactly once and in order or end its connection with a clear error, never panic, and
//! keep tables under their caps (see `sim::workload`). 1,000 seeds in all; replay one with
//! `SIM_SEED=<seed> cargo test -p sim --test tcp_soak`, or run more with `rsstack sim soak`.

use sim::workload::{FaultProfile, Workload, run, run_with_faults};
use sim::{run_seeds_parallel, seeds_from_env_or};

/// Seeds per workload: 5 workloads × 200 = 1,000 seeds.
const SEEDS_PER_WORKLOAD: u64 = 200;

fn soak(workload: Workload) {
    let seeds = seeds_from_env_or(0..SEEDS_PER_WORKLOAD);
    let outcome = run_seeds_parallel(seeds, 0, |seed| run(workload, seed).map(|_| ()));
    if let Err(failures) = outcome {
        panic!("{workload}: {failures}");
    }
}

#[test]
fn bulk_one_way_delivers_every_byte_once_in_order_over_200_seeds() {
    soak(Workload::BulkOneWay);
}

#[test]
fn bulk_both_ways_delivers_every_byte_once_in_order_over_200_seeds() {
    soak(Workload::BulkBothWays);
}

#[test]
fn request_response_exchanges_stay_in_lock_step_over_200_seeds() {
    soak(Workload::RequestResponse);
}

#[test]
fn thousands_of_short_connections_open_and_close_cleanly_over_200_seeds() {
    soak(Workload::ManyConnections);
}

#[test]
fn mid_transfer_export_and_import_loses_and_duplicates_nothing_over_200_seeds() {
    soak(Workload::Handoff);
}

#[test]
fn handoff_really_moves_with_frames_in_flight() {
    // The property above would pass vacuously if no move happened or nothing was in flight.
    let mut moves = 0;
    let mut dropped_in_flight = 0;
    for seed in 0..50 {
        let summary = run(Workload::Handoff, seed).unwrap_or_else(|e| panic!("{e}"));
        moves += summary.moves;
        dropped_in_flight += summary.frames_dropped_in_flight;
    }
    assert!(
        moves >= 45,
        "only {moves} of 50 seeds moved their connection"
    );
    assert!(
        dropped_in_flight > 0,
        "no frame ever arrived while a connection travelled"
    );
}

#[test]
fn many_connections_spread_over_both_server_shards() {
    // The `many` workload's server is two shard cores behind the NIC model: RSS must give
    // each of them a share of the connections (a vacuous pass would have one shard idle).
    for seed in [0, 5, 10, 15, 20] {
        let summary = run(Workload::ManyConnections, seed).unwrap_or_else(|e| panic!("{e}"));
        let per_shard = &summary.server_accepted_per_shard;
        let total: u64 = per_shard.iter().sum();
        assert_eq!(per_shard.len(), 2, "seed {seed}");
        assert!(
            per_shard.iter().all(|&n| n * 4 >= total),
            "seed {seed}: connections per server shard {per_shard:?}"
        );
    }
}

#[test]
fn same_seed_gives_the_same_trace_digest() {
    for w in Workload::ALL {
        let (a, b) = (run(w, 7), run(w, 7));
        assert_eq!(a, b, "{w}");
        let (a, c) = (a.expect("seed 7"), run(w, 8).expect("seed 8"));
        assert_ne!(
            a.trace_digest, c.trace_digest,
            "{w}: seeds 7 and 8 ran identical traces"
        );
    }
}

#[test]
fn heavy_loss_seeds_are_part_of_the_soak() {
    // A fifth of the seeds run at 5–20 % loss; make sure that is what the profile says.
    let heavy = (0..SEEDS_PER_WORKLOAD)
        .map(sim::workload::FaultProfile::for_seed)
        .filter(|f| f.loss > 0.05)
        .count();
    assert!(heavy >= 30, "{heavy}");
    let max = (0..SEEDS_PER_WORKLOAD)
        .map(|s| sim::workload::FaultProfile::for_seed(s).loss)
        .fold(0.0, f64::max);
    assert!(max > 0.18 && max <= 0.20, "{max}");
}

#[test]
fn a_corrupted_arp_reply_no_longer_times_out_connections_seeds_of_issue_20() {
    // Each of these seeds once corrupted the server's first ARP reply in the sender MAC (no
    // FCS on the simulated link; ARP has no checksum): the client sent every SYN to a MAC
    // nobody had until the entry expired 30 s later, and connections whose retransmissions
    // met the re-resolution's 4-packet queue twice ran out of SYN retries. TCP's negative
    // advice (RFC 1122 §4.2.3.5) now re-validates the entry after the second SYN timeout.
    for seed in [1_005_159, 1_007_149, 1_007_254, 1_008_864, 1_013_914] {
        let summary = run(Workload::ManyConnections, seed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.connections_failed, 0, "seed {seed}");
    }
}

#[test]
fn heavy_loss_seed_1017612_finishes_every_connection() {
    // Issue 20 filed it as a server stuck in FIN-WAIT-2 with 1,448 of 2,759 bytes at 18 %
    // loss; it has not reproduced since the `many` server became two shard cores (nor with
    // one), so it stays here as a replay.
    let summary = run(Workload::ManyConnections, 1_017_612).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.connections_failed, 0);
}

#[test]
fn a_half_closed_client_whose_server_gave_up_is_not_left_in_fin_wait_2_seed_1011357() {
    // 17.8 % loss. The server answered, closed, then took the client's FIN (CLOSING) with its
    // first segment unacknowledged; that segment, its seven retransmissions by timeout, the
    // ARP exchange of an eighth and the RST of the user timeout (300 s) were all lost. The
    // client, half-closed in FIN-WAIT-2 and still reading, had nothing outstanding and sent
    // nothing: the world went idle with it there. Keepalive now probes in FIN-WAIT-2 (tcp) and
    // the soak's stacks enable it (60 s idle), as an application that must not hang would; the
    // probe at 100 s changes the later loss draws and the connection completes.
    let summary = run(Workload::ManyConnections, 1_011_357).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.connections_failed, 0);
}

#[test]
fn a_duplicate_syn_before_the_handshake_ack_no_longer_stalls_the_reply_seed_1005021() {
    // Found by `scripts/soak.sh` (2.4 % loss): the server read the client's retransmitted SYN
    // and then its request with FIN in one poll; SND.NXT stayed behind SND.UNA, the reply and
    // FIN never left, and the world went idle with the client in FIN-WAIT-2. The checker now
    // also walks the TCB invariants, which names the moment it happens.
    let summary = run(Workload::ManyConnections, 1_005_021).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.connections_failed, 0);
}

#[test]
fn a_handoff_at_heavy_loss_completes_and_moves_seed_1004527() {
    // 19.8 % loss: the client's SYN and the server's SYN-ACKs were lost seven times in a row
    // ((1 − 0.8²)⁷ ≈ 0.08 %), so with the default six SYN retries the client timed out before
    // the server ever held the connection. The soak's stacks now retry SYNs 20 times
    // (`SYN_RETRIES_MAX`), and every connection must complete at any loss: this one does, and
    // is moved.
    let summary = run(Workload::Handoff, 1_004_527).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(summary.connections_failed, 0);
    assert_eq!(summary.moves, 1);
}

#[test]
fn migrate_and_offload_at_heavy_loss_complete_seeds_3005382_and_3005597() {
    // Found by `scripts/soak.sh 100000 3000000` at build 38a6295: at 15.9 % (migrate) and
    // 18.3 % (offload) loss a server connection was reset after about 300 s of a stalled
    // exchange (the default 5-minute user timeout), with the server's bytes all sent and the
    // client's partly received. The soak's stacks now retry SYNs 20 times and allow 30
    // minutes without progress, as every connection must complete at any loss: both seeds
    // finish. Kept as replays.
    for (workload, seed) in [
        (Workload::Migrate, 3_005_382),
        (Workload::Offload, 3_005_597),
    ] {
        let summary = run(workload, seed).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(summary.connections_failed, 0, "{workload} seed {seed}");
    }
}

#[test]
fn a_connection_that_fails_at_heavy_loss_fails_its_seed() {
    // Completion is required at every loss rate, not only up to 5 %: at 95 % loss the
    // handshakes run out of retries, and the run reports it as a failure.
    let faults = FaultProfile {
        loss: 0.95,
        duplicate: 0.0,
        reorder: 0.0,
        corrupt: 0.0,
        flap_ns: None,
    };
    let err = run_with_faults(Workload::BulkOneWay, 3, faults).expect_err("a failed connection");
    assert!(err.contains("connections failed"), "{err}");
}
