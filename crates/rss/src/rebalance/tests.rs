//! Hand-written cases; the property tests and the timing note are in `props`.

use super::*;
use crate::Reta;

mod props;

fn apply(assignment: &mut [u16], moves: &[BucketMove]) {
    for m in moves {
        assignment[m.bucket] = m.to;
    }
}

fn loads_of(bucket_loads: &[u64], assignment: &[u16], shards: usize) -> Vec<u64> {
    shard_loads(&RebalanceInput::new(bucket_loads, assignment, shards)).expect("valid input")
}

/// Sum of squared deviations from the mean, times n² so it stays an exact integer:
/// `Σ (n·L_s − T)²`.
fn squared_deviation_n2(shard_loads: &[u64]) -> u128 {
    let n = shard_loads.len() as i128;
    let total: i128 = shard_loads.iter().map(|&l| i128::from(l)).sum();
    shard_loads
        .iter()
        .map(|&l| (n * i128::from(l) - total).unsigned_abs().pow(2))
        .sum()
}

/// Whether some single move of a non-empty bucket strictly lowers the squared deviation.
fn some_single_move_helps(bucket_loads: &[u64], assignment: &[u16], shards: usize) -> bool {
    let loads = loads_of(bucket_loads, assignment, shards);
    let lightest = loads.iter().copied().min().unwrap_or(0);
    bucket_loads
        .iter()
        .zip(assignment)
        .any(|(&w, &s)| w > 0 && loads[usize::from(s)] > lightest + w)
}

fn no_cost() -> RebalanceConfig {
    RebalanceConfig {
        move_cost_factor: 0.0,
        ..RebalanceConfig::default()
    }
}

/// Mice of load 10 everywhere plus `elephants` buckets of load 300, all on shard 0 of a
/// round-robin RETA of 128 entries over `shards`.
fn elephants_on_shard_0(shards: u16, elephants: usize) -> (Vec<u64>, Vec<u16>) {
    let assignment = Reta::with_equal(128, shards)
        .expect("valid")
        .entries()
        .to_vec();
    let mut loads = vec![10u64; 128];
    for e in 0..elephants {
        loads[e * usize::from(shards)] = 300;
    }
    (loads, assignment)
}

#[test]
fn imbalance_is_max_over_mean_and_one_when_equal_or_empty() {
    assert_eq!(imbalance(&[]), 1.0);
    assert_eq!(imbalance(&[0, 0, 0]), 1.0);
    assert_eq!(imbalance(&[7, 7, 7, 7]), 1.0);
    assert_eq!(imbalance(&[30, 10]), 1.5);
    assert_eq!(imbalance(&[40, 0, 0, 0]), 4.0);
    assert_eq!(imbalance(&[u64::MAX, u64::MAX]), 1.0);
}

#[test]
fn shard_loads_add_bucket_loads_to_external_load() {
    let mut input = RebalanceInput::new(&[1, 2, 3, 4], &[0, 1, 0, 2], 4);
    assert_eq!(shard_loads(&input), Ok(vec![4, 2, 4, 0]));
    input.shard_external_loads = Some(&[10, 0, 0, 5]);
    assert_eq!(shard_loads(&input), Ok(vec![14, 2, 4, 5]));
}

#[test]
fn bad_input_is_a_typed_error_not_a_panic() {
    let config = RebalanceConfig::default();
    let loads = [5u64, 1, 1, 1];
    let plan = |input: RebalanceInput<'_>| plan_moves(&config, &input);
    assert_eq!(
        plan(RebalanceInput::new(&loads, &[0, 0, 0, 0], 0)),
        Err(RebalanceError::NoShards)
    );
    assert_eq!(
        plan(RebalanceInput::new(
            &loads,
            &[0, 0, 0, 0],
            REBALANCE_SHARDS_MAX + 1
        )),
        Err(RebalanceError::TooManyShards)
    );
    assert_eq!(
        plan(RebalanceInput::new(&loads, &[0, 1, 0], 2)),
        Err(RebalanceError::LengthMismatch {
            slice: RebalanceInputSlice::Assignment,
            expected: 4,
            found: 3
        })
    );
    assert_eq!(
        plan(RebalanceInput::new(&loads, &[0, 1, 2, 1], 2)),
        Err(RebalanceError::ShardOutOfRange {
            bucket: 2,
            shard: 2
        })
    );
    let mut input = RebalanceInput::new(&loads, &[0, 1, 0, 1], 2);
    input.bucket_costs = Some(&[1]);
    assert!(matches!(
        plan(input),
        Err(RebalanceError::LengthMismatch {
            slice: RebalanceInputSlice::BucketCosts,
            ..
        })
    ));
    input.bucket_costs = None;
    input.bucket_frozen = Some(&[false; 5]);
    assert!(matches!(
        plan(input),
        Err(RebalanceError::LengthMismatch {
            slice: RebalanceInputSlice::BucketFrozen,
            ..
        })
    ));
    input.bucket_frozen = None;
    input.shard_external_loads = Some(&[0, 0, 0]);
    assert!(matches!(
        plan(input),
        Err(RebalanceError::LengthMismatch {
            slice: RebalanceInputSlice::ShardExternalLoads,
            ..
        })
    ));
    // The stateful wrapper refuses the same, leaves `moves` empty and counts no period.
    let mut rebalancer = Rebalancer::new(config).expect("valid");
    let mut moves = vec![BucketMove {
        bucket: 0,
        from: 0,
        to: 1,
    }];
    let bad = RebalanceInput::new(&loads, &[0, 9, 0, 0], 2);
    assert!(rebalancer.plan_into(&bad, &mut moves).is_err());
    assert!(moves.is_empty());
    assert_eq!(rebalancer.periods(), 0);
    assert!(rebalancer.smoothed_bucket_loads().is_empty());
}

#[test]
fn bad_config_is_a_typed_error_not_a_panic() {
    let ok = RebalanceConfig::default();
    assert_eq!(ok.validate(), Ok(()));
    let cases = [
        (
            RebalanceConfig {
                imbalance_threshold: f64::NAN,
                ..ok
            },
            RebalanceConfigError::ImbalanceThreshold,
        ),
        (
            RebalanceConfig {
                imbalance_threshold: 0.9,
                ..ok
            },
            RebalanceConfigError::ImbalanceThreshold,
        ),
        (
            RebalanceConfig {
                imbalance_target: 1.2,
                ..ok
            },
            RebalanceConfigError::ImbalanceTarget,
        ),
        (
            RebalanceConfig {
                imbalance_target: 0.99,
                ..ok
            },
            RebalanceConfigError::ImbalanceTarget,
        ),
        (
            RebalanceConfig {
                move_cost_factor: -1.0,
                ..ok
            },
            RebalanceConfigError::MoveCostFactor,
        ),
        (
            RebalanceConfig {
                move_cost_factor: f64::INFINITY,
                ..ok
            },
            RebalanceConfigError::MoveCostFactor,
        ),
        (
            RebalanceConfig {
                ewma_weight_new: 0.0,
                ..ok
            },
            RebalanceConfigError::EwmaWeightNew,
        ),
        (
            RebalanceConfig {
                ewma_weight_new: 1.5,
                ..ok
            },
            RebalanceConfigError::EwmaWeightNew,
        ),
        (
            RebalanceConfig {
                ewma_weight_new: f64::NAN,
                ..ok
            },
            RebalanceConfigError::EwmaWeightNew,
        ),
    ];
    for (config, error) in cases {
        assert_eq!(config.validate(), Err(error), "{config:?}");
        assert_eq!(Rebalancer::new(config).err(), Some(error));
        let input = RebalanceInput::new(&[9, 1], &[0, 0], 2);
        assert_eq!(
            plan_moves(&config, &input),
            Err(RebalanceError::Config(error))
        );
    }
}

#[test]
fn balanced_load_below_threshold_gives_no_moves() {
    let config = no_cost();
    // 1.09 < 1.10: left alone even though moving bucket 0 would help a little.
    let loads = [109u64, 100, 91, 100];
    let assignment = [0u16, 1, 2, 3];
    let input = RebalanceInput::new(&loads, &assignment, 4);
    let mut moves = Vec::new();
    let report = plan_moves_into(&config, &input, &mut moves).expect("valid");
    assert!(moves.is_empty());
    assert!(!report.triggered);
    assert_eq!(report.imbalance_before, report.imbalance_planned);
    // Idle and single-shard systems too.
    assert_eq!(
        plan_moves(
            &config,
            &RebalanceInput::new(&[0; 8], &[0, 1, 0, 1, 0, 1, 0, 1], 2)
        ),
        Ok(vec![])
    );
    assert_eq!(
        plan_moves(&config, &RebalanceInput::new(&[5, 9], &[0, 0], 1)),
        Ok(vec![])
    );
}

#[test]
fn picks_the_bucket_that_best_fills_the_gap() {
    // Shard 0 = {70, 40, 10}, shard 1 empty: mean 60. The heaviest bucket that fits the
    // deficit (RSS++'s choice) is 40, leaving 80 / 40 (imbalance 1.33); 70 is nearer half the
    // gap and leaves 50 / 70 (1.17).
    let config = RebalanceConfig {
        imbalance_target: 1.0,
        moves_max: 1,
        ..no_cost()
    };
    let input = RebalanceInput::new(&[70, 40, 10], &[0, 0, 0], 2);
    assert_eq!(
        plan_moves(&config, &input),
        Ok(vec![BucketMove {
            bucket: 0,
            from: 0,
            to: 1
        }])
    );
    // A bucket bigger than the gap is never moved (that would overshoot).
    let input = RebalanceInput::new(&[100, 30, 40], &[0, 0, 1], 2);
    let moves = plan_moves(&config, &input).expect("valid");
    assert_eq!(
        moves,
        vec![BucketMove {
            bucket: 1,
            from: 0,
            to: 1
        }]
    );
}

#[test]
fn swap_balances_when_every_single_move_overshoots() {
    // {5, 5} vs {3, 3}: gap 4, every bucket on the heavy shard is ≥ the gap; swapping a 5 for
    // a 3 gives 8 / 8.
    let (loads, assignment) = ([5u64, 5, 3, 3], [0u16, 0, 1, 1]);
    let input = RebalanceInput::new(&loads, &assignment, 2);
    assert!(!some_single_move_helps(&loads, &assignment, 2));
    let moves = plan_moves(&no_cost(), &input).expect("valid");
    assert_eq!(
        moves,
        vec![
            BucketMove {
                bucket: 0,
                from: 0,
                to: 1
            },
            BucketMove {
                bucket: 2,
                from: 1,
                to: 0
            },
        ]
    );
    let mut after = assignment;
    apply(&mut after, &moves);
    assert_eq!(loads_of(&loads, &after, 2), vec![8, 8]);
    // A swap needs two move slots.
    let one = RebalanceConfig {
        moves_max: 1,
        ..no_cost()
    };
    assert_eq!(plan_moves(&one, &input), Ok(vec![]));
}

#[test]
fn move_cost_blocks_moves_not_worth_their_connections() {
    // 2 shards at 120 / 80 (imbalance 1.2): moving bucket 0 (load 20) balances them, a fall of
    // Σ (L/mean − 1)² from 0.08 to 0.
    let loads = [20u64, 100, 80];
    let assignment = [0u16, 0, 1];
    let config = RebalanceConfig::default(); // move_cost_factor 1e-4
    let mut input = RebalanceInput::new(&loads, &assignment, 2);
    input.bucket_costs = Some(&[100, 0, 0]); // 100 connections: charge 0.01 < 0.08
    assert_eq!(plan_moves(&config, &input).map(|m| m.len()), Ok(1));
    // 1,000 connections: charge 0.1 > 0.08. With the other buckets free, swapping them (100
    // for 80) sheds the same 20 for nothing.
    input.bucket_costs = Some(&[1_000, 0, 0]);
    let moves = plan_moves(&config, &input).expect("valid");
    assert_eq!(
        moves.iter().map(|m| m.bucket).collect::<Vec<_>>(),
        vec![1, 2]
    );
    input.bucket_costs = Some(&[1_000, 1_000, 1_000]);
    assert_eq!(plan_moves(&config, &input), Ok(vec![]));
    // Between two candidates of equal benefit the cheaper one moves.
    let loads = [20u64, 20, 80, 80];
    let assignment = [0u16, 0, 0, 1];
    let mut input = RebalanceInput::new(&loads, &assignment, 2);
    input.bucket_costs = Some(&[50, 5, 0, 0]);
    let moves = plan_moves(&config, &input).expect("valid");
    assert_eq!(moves.first().map(|m| m.bucket), Some(1));
}

#[test]
fn external_load_counts_but_never_moves() {
    // Shard 1's external load makes it the heavy one; its only bucket goes to shard 0.
    let loads = [40u64, 10];
    let assignment = [0u16, 1];
    let mut input = RebalanceInput::new(&loads, &assignment, 2);
    input.shard_external_loads = Some(&[0, 60]);
    let moves = plan_moves(&no_cost(), &input).expect("valid");
    assert_eq!(
        moves,
        vec![BucketMove {
            bucket: 1,
            from: 1,
            to: 0
        }]
    );
}

#[test]
fn elephants_on_one_shard_spread_below_1_2_over_2_and_4_shards() {
    for (shards, elephants) in [(2u16, 4usize), (4, 4), (4, 6)] {
        let (loads, mut assignment) = elephants_on_shard_0(shards, elephants);
        let n = usize::from(shards);
        let start = imbalance(&loads_of(&loads, &assignment, n));
        assert!(start > 1.4, "{shards} shards start at {start}");
        // Each elephant bucket holds 2 connections, each mouse bucket 20.
        let costs: Vec<u64> = loads.iter().map(|&l| if l > 10 { 2 } else { 20 }).collect();
        let mut rebalancer = Rebalancer::new(RebalanceConfig::default()).expect("valid");
        let mut moves = Vec::new();
        let mut total_moves = 0;
        for _ in 0..10 {
            let mut input = RebalanceInput::new(&loads, &assignment, n);
            input.bucket_costs = Some(&costs);
            rebalancer.plan_into(&input, &mut moves).expect("valid");
            total_moves += moves.len();
            apply(&mut assignment, &moves);
        }
        let end = imbalance(&loads_of(&loads, &assignment, n));
        assert!(
            end < 1.2,
            "{shards} shards, {elephants} elephants: {start:.2} -> {end:.2}"
        );
        assert!(total_moves <= 16, "{total_moves} moves");
    }
}

/// Two load patterns, alternating period by period, that make the memoryless planner move
/// bucket 0 to shard 1 and back again.
fn alternating_loads() -> ([u64; 6], [u64; 6]) {
    ([100, 0, 50, 0, 10, 0], [100, 10, 0, 0, 0, 50])
}

#[test]
fn memoryless_plan_ping_pongs_on_alternating_load() {
    // The baseline the hysteresis test guards against.
    let (even, odd) = alternating_loads();
    let mut assignment = [0u16, 1, 0, 1, 0, 1];
    let mut moved_0 = 0;
    for period in 0..6 {
        let loads = if period % 2 == 0 { &even } else { &odd };
        let moves =
            plan_moves(&no_cost(), &RebalanceInput::new(loads, &assignment, 2)).expect("valid");
        moved_0 += moves.iter().filter(|m| m.bucket == 0).count();
        apply(&mut assignment, &moves);
    }
    assert_eq!(moved_0, 6, "bucket 0 moves every period");
}

#[test]
fn rebalancer_does_not_ping_pong_on_alternating_load() {
    let (even, odd) = alternating_loads();
    let config = no_cost();
    let mut rebalancer = Rebalancer::new(config).expect("valid");
    let mut assignment = [0u16, 1, 0, 1, 0, 1];
    let mut last_move: [Option<u32>; 6] = [None; 6];
    let mut moves = Vec::new();
    let mut moves_per_period = Vec::new();
    for period in 0..40u32 {
        let loads = if period % 2 == 0 { &even } else { &odd };
        rebalancer
            .plan_into(&RebalanceInput::new(loads, &assignment, 2), &mut moves)
            .expect("valid");
        for m in &moves {
            if let Some(last) = last_move[m.bucket] {
                assert!(
                    period - last > config.cooldown_periods,
                    "bucket {} moved in periods {last} and {period}",
                    m.bucket
                );
            }
            last_move[m.bucket] = Some(period);
        }
        moves_per_period.push(moves.len());
        apply(&mut assignment, &moves);
    }
    let total: usize = moves_per_period.iter().sum();
    assert!(total <= 6, "{total} moves: {moves_per_period:?}");
    assert!(
        moves_per_period[10..].iter().all(|&m| m == 0),
        "still moving: {moves_per_period:?}"
    );
}

#[test]
fn rebalancer_cooldown_pins_a_moved_bucket_for_k_periods() {
    let config = RebalanceConfig {
        cooldown_periods: 2,
        ewma_weight_new: 1.0,
        ..no_cost()
    };
    let mut rebalancer = Rebalancer::new(config).expect("valid");
    let mut moves = Vec::new();
    // Period 0: 30 + 30 on shard 0, nothing on shard 1: bucket 0 goes to shard 1 (tie with
    // bucket 1, lowest index first).
    rebalancer
        .plan_into(
            &RebalanceInput::new(&[30, 30, 0], &[0, 0, 1], 2),
            &mut moves,
        )
        .expect("valid");
    assert_eq!(
        moves,
        vec![BucketMove {
            bucket: 0,
            from: 0,
            to: 1
        }]
    );
    assert_eq!(rebalancer.cooldown_periods_left(0), 2);
    // Periods 1 and 2: the load moves to shard 1 (buckets 0 and 2), so bucket 0 would go back,
    // but it is cooling down.
    let assignment = [1u16, 0, 1];
    let flipped = [30u64, 0, 30];
    for period in 1..=2 {
        rebalancer
            .plan_into(&RebalanceInput::new(&flipped, &assignment, 2), &mut moves)
            .expect("valid");
        assert!(
            moves.iter().all(|m| m.bucket != 0),
            "period {period}: {moves:?}"
        );
    }
    // Period 3: free again.
    rebalancer
        .plan_into(&RebalanceInput::new(&flipped, &assignment, 2), &mut moves)
        .expect("valid");
    assert!(moves.iter().any(|m| m.bucket == 0), "{moves:?}");
    assert_eq!(rebalancer.periods(), 4);
}

#[test]
fn rebalancer_smooths_bucket_loads_with_the_configured_weight() {
    let config = RebalanceConfig {
        ewma_weight_new: 0.25,
        ..RebalanceConfig::default()
    };
    let mut rebalancer = Rebalancer::new(config).expect("valid");
    let mut moves = Vec::new();
    let assignment = [0u16, 1];
    for loads in [[100u64, 100], [200, 100], [200, 100]] {
        rebalancer
            .plan_into(&RebalanceInput::new(&loads, &assignment, 2), &mut moves)
            .expect("valid");
    }
    // 100 → 0.25·200 + 0.75·100 = 125 → 0.25·200 + 0.75·125 = 143.75 ≈ 144.
    assert_eq!(rebalancer.smoothed_bucket_loads(), &[144, 100]);
    // A new RETA size starts afresh.
    rebalancer
        .plan_into(
            &RebalanceInput::new(&[7, 7, 7, 7], &[0, 1, 0, 1], 2),
            &mut moves,
        )
        .expect("valid");
    assert_eq!(rebalancer.smoothed_bucket_loads(), &[7, 7, 7, 7]);
    assert_eq!(rebalancer.periods(), 1);
}
