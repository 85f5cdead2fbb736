//! Snapshot table of simulated outcomes (STYLE.md): transfer time and retransmissions for a
//! 2 MiB transfer over a 100 Mbit/s, 20 ms RTT link (256 KiB buffers: the window, not the link,
//! limits the lossless case to ~100 Mbit/s), by loss rate, congestion control and SACK. The table
//! is deterministic; a behaviour change shows up as a diff against `tests/outcomes.txt`.
//! Regenerate with `UPDATE_OUTCOMES=1 cargo test -p tcp --test outcomes`.

mod harness;

use harness::{MS, Pair, Verdict, pattern};
use tcp::{Config, CongestionControl};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn run(loss_per_mille: u64, cc: CongestionControl, sack: bool) -> String {
    let c = Config {
        congestion_control: cc,
        sack,
        ..Config::default()
    };
    let mut p = Pair::established(c, c, 10 * MS);
    p.link_rate_bps = Some(100_000_000);
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    p.filter = Box::new(move |_, _| {
        if rng.next() % 1000 < loss_per_mille {
            Verdict::Drop
        } else {
            Verdict::Pass
        }
    });
    let data = pattern(2 << 20);
    let start = p.now;
    p.a_to_send = data.clone();
    p.run_until(|p| p.b_read.len() == data.len(), 600_000 * MS);
    assert!(p.b_read == data);
    let ms = (p.now - start) / MS;
    let k = p.a.counters();
    format!(
        "loss {:>4.1}%  {:<7}  sack {:<3}  {:>6} ms  {:>6.2} Mbit/s  rtx {:>4}  rto {:>3}  fast {:>3}\n",
        loss_per_mille as f64 / 10.0,
        format!("{cc:?}"),
        if sack { "on" } else { "off" },
        ms,
        (data.len() as f64 * 8.0) / (ms as f64 / 1000.0) / 1e6,
        k.retransmitted_segments,
        k.rto_expirations,
        k.fast_retransmits,
    )
}

#[test]
fn outcome_table_matches_snapshot() {
    let mut table = String::new();
    for loss in [0u64, 5, 20] {
        for cc in [CongestionControl::NewReno, CongestionControl::Cubic] {
            for sack in [true, false] {
                table.push_str(&run(loss, cc, sack));
            }
        }
    }
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/outcomes.txt");
    if std::env::var_os("UPDATE_OUTCOMES").is_some() {
        std::fs::write(path, &table).expect("write snapshot");
    }
    let expected = std::fs::read_to_string(path).unwrap_or_default();
    assert!(
        table == expected,
        "outcomes changed:\n--- expected\n{expected}--- got\n{table}"
    );
}
