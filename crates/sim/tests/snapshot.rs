//! Snapshot of simulated outcomes: the toy go-back-N transfer's completion time and
//! retransmission overhead by loss rate. A model change that shifts behaviour shows up here
//! as a readable table diff in review.

use sim::toy::{GbnReceiver, GbnSender};
use sim::{ChannelConfig, Loss, PortId, World};
use std::fmt::Write;

const P0: PortId = PortId(0);
const SEEDS: u64 = 20;
const DATA_BYTES: usize = 20_000;
const CHUNK_BYTES: usize = 1_000;

struct Outcome {
    end_ns: u64,
    frames_sent: u64,
    timeouts: u64,
}

fn run(seed: u64, loss: f64) -> Result<Outcome, String> {
    let mut w = World::new(seed);
    let data = vec![0xa5u8; DATA_BYTES];
    let tx = w.add_host(Box::new(GbnSender::new(
        P0,
        data.clone(),
        CHUNK_BYTES,
        8,
        2_000_000,
    )));
    let rx = w.add_host(Box::new(GbnReceiver::new(P0)));
    // 100 Mb/s, 100 us one way: one 1000 B chunk serializes in 80 us.
    let cfg = ChannelConfig::default()
        .rate_bps(100_000_000)
        .delay_ns(100_000);
    let link = w
        .connect((tx, P0), (rx, P0), cfg)
        .map_err(|e| e.to_string())?;
    w.add_fault_both(link, Loss { p: loss });
    w.run_until_idle(1_000_000).map_err(|e| e.to_string())?;
    if w.host::<GbnReceiver>(rx).map(|r| &r.delivered) != Some(&data) {
        return Err(format!("seed {seed} loss {loss}: transfer incomplete"));
    }
    let s = w.host::<GbnSender>(tx).ok_or("sender missing")?;
    Ok(Outcome {
        end_ns: w.now_ns(),
        frames_sent: s.frames_sent,
        timeouts: s.timeouts,
    })
}

fn table() -> Result<String, String> {
    let mut t = String::from("loss  mean_ms  max_ms  frames/chunk  timeouts/run\n");
    for loss in [0.0, 0.01, 0.05, 0.1, 0.2] {
        let (mut sum_ns, mut max_ns, mut frames, mut timeouts) = (0u64, 0u64, 0u64, 0u64);
        for seed in 0..SEEDS {
            let o = run(seed, loss)?;
            sum_ns += o.end_ns;
            max_ns = max_ns.max(o.end_ns);
            frames += o.frames_sent;
            timeouts += o.timeouts;
        }
        let chunks = (SEEDS * (DATA_BYTES / CHUNK_BYTES) as u64) as f64;
        let _ = writeln!(
            t,
            "{loss:<4}  {:>7.2}  {:>6.2}  {:>12.2}  {:>12.2}",
            sum_ns as f64 / SEEDS as f64 / 1e6,
            max_ns as f64 / 1e6,
            frames as f64 / chunks,
            timeouts as f64 / SEEDS as f64
        );
    }
    Ok(t)
}

#[test]
fn go_back_n_outcomes_by_loss_rate_match_the_snapshot() {
    let got = table().expect("every transfer completes");
    assert_eq!(got, EXPECTED, "\n--- got ---\n{got}");
}

/// Zero loss: 20 frames of 1013 B at 100 Mb/s (81.04 us each) + 100 us + ACK (1.04 us)
/// + 100 us = 1.82 ms, exactly one frame per chunk.
const EXPECTED: &str = "\
loss  mean_ms  max_ms  frames/chunk  timeouts/run
0        1.82    1.82          1.00          0.00
0.01     2.26    4.02          1.06          0.20
0.05     4.77   10.59          1.48          1.35
0.1      8.18   15.27          1.90          2.90
0.2     12.02   21.03          2.53          4.70
";
