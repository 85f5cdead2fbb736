//! Property tests of the planner and the rebalancer, and the (ignored) timing note.

use super::*;
use proptest::prelude::*;
use std::collections::HashSet;

/// One period's random input: shards, then per bucket a load (mostly mice, some elephants),
/// an owner and a cost, plus a frozen mask.
fn arb_case() -> impl Strategy<Value = (usize, Vec<u64>, Vec<u16>, Vec<u64>, Vec<bool>)> {
    (1usize..=16, 2u32..=8).prop_flat_map(|(shards, buckets_log2)| {
        let buckets = 1usize << buckets_log2;
        let load = prop_oneof![6 => 0u64..100, 2 => 0u64..2_000, 1 => 0u64..100_000];
        (
            Just(shards),
            proptest::collection::vec(load, buckets),
            proptest::collection::vec(0..shards as u16, buckets),
            proptest::collection::vec(0u64..500, buckets),
            proptest::collection::vec(proptest::bool::weighted(0.1), buckets),
        )
    })
}

fn arb_config() -> impl Strategy<Value = RebalanceConfig> {
    (1.0f64..2.0, 0.0f64..=1.0, 0usize..=16, 0.0f64..1e-3).prop_map(
        |(threshold, target_fraction, moves_max, cost)| RebalanceConfig {
            imbalance_threshold: threshold,
            imbalance_target: 1.0 + (threshold - 1.0) * target_fraction,
            moves_max,
            move_cost_factor: cost,
            ..RebalanceConfig::default()
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn plan_never_increases_imbalance_nor_squared_deviation(
        (shards, loads, assignment, costs, frozen) in arb_case(),
        config in arb_config(),
        with_costs: bool,
    ) {
        let mut input = RebalanceInput::new(&loads, &assignment, shards);
        input.bucket_frozen = Some(&frozen);
        if with_costs {
            input.bucket_costs = Some(&costs);
        }
        let mut moves = Vec::new();
        let report = plan_moves_into(&config, &input, &mut moves).expect("valid input");
        let before = loads_of(&loads, &assignment, shards);
        let mut after_assignment = assignment.clone();
        apply(&mut after_assignment, &moves);
        let after = loads_of(&loads, &after_assignment, shards);
        prop_assert!(imbalance(&after) <= imbalance(&before));
        prop_assert_eq!(report.imbalance_before, imbalance(&before));
        prop_assert_eq!(report.imbalance_planned, imbalance(&after));
        if moves.is_empty() {
            prop_assert_eq!(&after, &before);
        } else {
            prop_assert!(report.triggered);
            prop_assert!(
                squared_deviation_n2(&after) < squared_deviation_n2(&before),
                "squared deviation rose: {:?} -> {:?}", before, after
            );
            prop_assert!(after.iter().max() <= before.iter().max());
        }
    }

    #[test]
    fn plan_respects_moves_max_owners_frozen_buckets_and_moves_each_bucket_once(
        (shards, loads, assignment, costs, frozen) in arb_case(),
        config in arb_config(),
    ) {
        let mut input = RebalanceInput::new(&loads, &assignment, shards);
        input.bucket_frozen = Some(&frozen);
        input.bucket_costs = Some(&costs);
        let moves = plan_moves(&config, &input).expect("valid input");
        prop_assert!(moves.len() <= config.moves_max);
        let mut seen = HashSet::new();
        for m in &moves {
            prop_assert!(m.from != m.to, "{:?}", m);
            prop_assert_eq!(m.from, assignment[m.bucket], "{:?}", m);
            prop_assert!(usize::from(m.to) < shards, "{:?}", m);
            prop_assert!(!frozen[m.bucket], "frozen bucket moved: {:?}", m);
            prop_assert!(seen.insert(m.bucket), "bucket moved twice: {:?}", m);
        }
    }

    #[test]
    fn balanced_load_never_moves(
        (shards, loads, assignment, _costs, _frozen) in arb_case(),
        config in arb_config(),
    ) {
        let input = RebalanceInput::new(&loads, &assignment, shards);
        let start = imbalance(&loads_of(&loads, &assignment, shards));
        let moves = plan_moves(&config, &input).expect("valid input");
        if start <= config.imbalance_threshold {
            prop_assert!(moves.is_empty(), "imbalance {} moved {:?}", start, moves);
        }
    }

    #[test]
    fn static_load_reaches_a_fixed_point_at_bucket_granularity(
        (shards, loads, mut assignment, _costs, _frozen) in arb_case(),
        moves_max in 1usize..=16,
    ) {
        // Memoryless planner, no cost, target 1.0: every period with a move lowers the squared
        // deviation, so the loop must stop, and where it stops no single move helps.
        let config = RebalanceConfig { moves_max, imbalance_target: 1.0, ..no_cost() };
        let periods_max = 2 * loads.len() / moves_max + 8;
        let mut periods = 0;
        loop {
            let moves = plan_moves(&config, &RebalanceInput::new(&loads, &assignment, shards))
                .expect("valid input");
            if moves.is_empty() {
                break;
            }
            apply(&mut assignment, &moves);
            periods += 1;
            prop_assert!(periods <= periods_max, "no fixed point after {} periods", periods);
        }
        let end = imbalance(&loads_of(&loads, &assignment, shards));
        prop_assert!(
            end <= config.imbalance_threshold || !some_single_move_helps(&loads, &assignment, shards),
            "stuck at {} with an improving move left", end
        );
    }

    #[test]
    fn rebalancer_on_static_load_stops_moving_within_bounded_periods(
        (shards, loads, mut assignment, costs, _frozen) in arb_case(),
    ) {
        let config = RebalanceConfig::default();
        let mut rebalancer = Rebalancer::new(config).expect("valid");
        let mut moves = Vec::new();
        let periods_max = (config.cooldown_periods as usize + 1) * (2 * loads.len() / config.moves_max + 8);
        let mut quiet = 0;
        let mut period = 0;
        // A fixed point: cooldown_periods + 1 quiet periods in a row (every cooldown expired).
        while quiet <= config.cooldown_periods {
            let mut input = RebalanceInput::new(&loads, &assignment, shards);
            input.bucket_costs = Some(&costs);
            rebalancer.plan_into(&input, &mut moves).expect("valid input");
            quiet = if moves.is_empty() { quiet + 1 } else { 0 };
            apply(&mut assignment, &moves);
            period += 1;
            prop_assert!(period <= periods_max, "still moving after {} periods", period);
        }
        // Nothing is frozen any more, so the next plan is the memoryless one: empty.
        let mut input = RebalanceInput::new(&loads, &assignment, shards);
        input.bucket_costs = Some(&costs);
        prop_assert_eq!(plan_moves(&config, &input), Ok(vec![]));
    }

    #[test]
    fn arbitrary_input_gives_moves_or_a_typed_error_never_a_panic(
        loads in proptest::collection::vec(any::<u64>(), 0..40),
        assignment in proptest::collection::vec(0u16..20, 0..40),
        shards in 0usize..20,
        external in proptest::option::of(proptest::collection::vec(any::<u64>(), 0..20)),
        config in arb_config(),
    ) {
        let mut input = RebalanceInput::new(&loads, &assignment, shards);
        input.shard_external_loads = external.as_deref();
        let _ = plan_moves(&config, &input);
        let _ = shard_loads(&input);
        let mut rebalancer = Rebalancer::new(config).expect("valid");
        let mut moves = Vec::new();
        let _ = rebalancer.plan_into(&input, &mut moves);
    }
}

/// Time per `plan_moves_into` call, 128 and 512 buckets over 16 shards, skewed so every call
/// triggers and plans `moves_max` moves. Not a test of the suite; run with
/// `cargo test -p rss --release -- --ignored --nocapture plan_time_per_call`.
#[test]
#[ignore = "micro-benchmark: prints ns per call, asserts nothing about time"]
fn plan_time_per_call_128_and_512_buckets_16_shards() {
    for buckets in [128usize, 512] {
        let shards = 16usize;
        // A fixed LCG: deterministic "random" loads; every fourth bucket on shard 0 too.
        let mut x: u64 = 0x2545_f491_4f6c_dd1d;
        let loads: Vec<u64> = (0..buckets)
            .map(|_| {
                x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                (x >> 33) % 10_000
            })
            .collect();
        let assignment: Vec<u16> = (0..buckets)
            .map(|b| if b % 4 == 0 { 0 } else { (b % shards) as u16 })
            .collect();
        let costs: Vec<u64> = loads.iter().map(|l| l % 50).collect();
        let mut input = RebalanceInput::new(&loads, &assignment, shards);
        input.bucket_costs = Some(&costs);
        let config = RebalanceConfig::default();
        let mut moves = Vec::with_capacity(config.moves_max);
        let mut rebalancer = Rebalancer::new(config).expect("valid");
        let iterations = 20_000u32;
        for (name, stateful) in [("plan_moves_into", false), ("Rebalancer::plan_into", true)] {
            let start = std::time::Instant::now();
            for _ in 0..iterations {
                let report = if stateful {
                    rebalancer.reset();
                    rebalancer.plan_into(std::hint::black_box(&input), &mut moves)
                } else {
                    plan_moves_into(&config, std::hint::black_box(&input), &mut moves)
                };
                std::hint::black_box(report.expect("valid"));
            }
            let ns = start.elapsed().as_nanos() / u128::from(iterations);
            println!(
                "{name}: {buckets} buckets x {shards} shards: {ns} ns per call ({} moves)",
                moves.len()
            );
        }
    }
}
