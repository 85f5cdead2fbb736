//! The migration soak: RETA buckets move between a four-shard server's shards at random
//! moments while dozens of connections carry data both ways under each seed's faults; the
//! bucket's live connections migrate (DESIGN "Rebalancing"). Every byte must arrive once and
//! in order, no connection may be reset or live on two shards at once (see
//! `sim::workload::migrate`). Replay one seed with `SIM_SEED=<seed> cargo test -p sim --test
//! migrate_soak`, or run more with `rsstack sim soak --workload migrate`.

use std::sync::Mutex;

use sim::workload::migrate::{MigrateStats, run};
use sim::{run_seeds_parallel, seeds_from_env_or};

/// Seeds of the soak; together they migrate well over 10,000 live connections.
const SEEDS: u64 = 180;

#[test]
fn ten_thousand_live_migrations_lose_duplicate_and_reset_nothing() {
    let seeds = seeds_from_env_or(0..SEEDS);
    let replay = seeds.len() as u64 != SEEDS;
    let total = Mutex::new(MigrateStats::default());
    let outcome = run_seeds_parallel(seeds, 0, |seed| {
        let (_, stats) = run(seed)?;
        let mut t = total.lock().map_err(|e| e.to_string())?;
        t.bucket_moves += stats.bucket_moves;
        t.migrations += stats.migrations;
        t.app_migrations += stats.app_migrations;
        t.kept += stats.kept;
        t.frames_held += stats.frames_held;
        Ok(())
    });
    if let Err(failures) = outcome {
        panic!("migrate: {failures}");
    }
    let t = *total
        .lock()
        .expect("no seed panicked while holding the lock");
    eprintln!("migrate soak: {t:?}");
    if replay {
        return;
    }
    // The property above would pass vacuously if nothing moved while it carried data.
    assert!(
        t.app_migrations >= 10_000,
        "only {} live connections migrated: {t:?}",
        t.app_migrations
    );
    assert!(t.frames_held > 0, "no frame was ever held mid-move: {t:?}");
}

#[test]
fn rebalancing_spreads_elephants_that_rss_put_on_one_shard() {
    use sim::workload::migrate::{SKEW_ELEPHANT_BYTES, SKEW_ELEPHANTS, run_skew};
    let fixed = run_skew(1, false).unwrap_or_else(|e| panic!("{e}"));
    let moved = run_skew(1, true).unwrap_or_else(|e| panic!("{e}"));
    // Every elephant byte arrived (checked byte by byte by the flows) in both runs.
    let elephants = SKEW_ELEPHANTS as u64 * SKEW_ELEPHANT_BYTES;
    assert!(fixed.bytes_verified >= elephants && moved.bytes_verified >= elephants);
    // Without moves the busiest shard keeps far more than its share; with them the load
    // spreads (elephants in buckets of their own can be split over the four shards).
    let before = fixed.mean_imbalance_middle();
    let after = moved.mean_imbalance_middle();
    eprintln!(
        "imbalance without rebalancing {before:.3}, with {after:.3}; {} moves, {} migrations",
        moved.moves_planned, moved.migrations
    );
    assert_eq!(fixed.moves_planned, 0);
    assert!(before > 2.0, "the skew did not skew: {before}");
    assert!(
        after < 1.3,
        "rebalancing left imbalance {after}: {:?}",
        moved.imbalance
    );
    assert!(moved.migrations > 0);
    // Reproducible: same seed, same trace.
    assert_eq!(
        run_skew(1, true).map(|o| o.trace_digest),
        Ok(moved.trace_digest)
    );
}
