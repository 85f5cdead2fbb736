//! Prints a table of interrupt moderation outcomes by offered packet rate (virtual time, one
//! queue, a driver that polls at once when woken): wake-ups per second, packets per wake-up
//! and the interval in force, for no moderation, a fixed 50 µs interval and adaptive
//! moderation (10–125 µs). The seeds' question (000, "interrupt moderation"): how far does
//! moderation cut the interrupt rate as load rises?
//!
//! Run: `cargo run -p nic --release --example moderation_table`.

use nic::{AdaptiveModeration, GroConfig, ModerationConfig, Nic, NicConfig};

fn frame() -> Vec<u8> {
    // Ethernet + IPv4 + UDP, 64 bytes of payload; checksums left zero (not verified here).
    let mut f = vec![0u8; 14 + 20 + 8 + 64];
    f[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
    f[14] = 0x45;
    f[16..18].copy_from_slice(&(20u16 + 8 + 64).to_be_bytes());
    f[22] = 64;
    f[23] = 17;
    f[26..30].copy_from_slice(&[10, 0, 0, 1]);
    f[30..34].copy_from_slice(&[10, 0, 0, 2]);
    f[34..36].copy_from_slice(&5000u16.to_be_bytes());
    f[36..38].copy_from_slice(&6000u16.to_be_bytes());
    f[38..40].copy_from_slice(&(8u16 + 64).to_be_bytes());
    f
}

fn service(nic: &mut Nic, now_ns: u64, out: &mut Vec<nic::RxDescriptor>) {
    while let Some(w) = nic.poll_wakeup(now_ns) {
        loop {
            out.clear();
            match nic.poll_rx(w.queue, nic::BUDGET_DEFAULT_PACKETS, now_ns, out) {
                Ok(p) if !p.drained => continue,
                _ => break,
            }
        }
        for d in out.drain(..) {
            nic.recycle(d.frame);
        }
    }
}

fn run(m: ModerationConfig, rate_pps: u64, duration_ns: u64) -> (f64, f64, u64) {
    let mut nic = match Nic::new(NicConfig {
        queues: 1,
        rx_ring_slots: 4096,
        moderation: m,
        gro: GroConfig {
            enabled: false,
            ..GroConfig::default()
        },
        ..NicConfig::default()
    }) {
        Ok(n) => n,
        Err(e) => {
            eprintln!("config: {e}");
            std::process::exit(2);
        }
    };
    let template = frame();
    let gap_ns = 1_000_000_000 / rate_pps;
    let mut out = Vec::new();
    let mut t = 0;
    while t < duration_ns {
        while let Some(d) = nic.next_deadline().filter(|&d| d <= t) {
            service(&mut nic, d, &mut out);
        }
        let mut f = nic.take_buffer(template.len());
        f.extend_from_slice(&template);
        nic.receive(t, f);
        service(&mut nic, t, &mut out);
        t += gap_ns;
    }
    let c = nic.counters(0).unwrap_or_default();
    let secs = duration_ns as f64 / 1e9;
    (
        c.wakeups as f64 / secs,
        c.packets_per_wakeup(),
        nic.moderation_interval_ns(0).unwrap_or(0),
    )
}

fn main() {
    let modes = [
        ("off", ModerationConfig::OFF),
        ("fixed 50us", ModerationConfig::fixed(50_000)),
        (
            "adaptive",
            ModerationConfig {
                adaptive: Some(AdaptiveModeration::default()),
                ..ModerationConfig::fixed(10_000)
            },
        ),
    ];
    println!(
        "{:>10} | {:>12} {:>8} | {:>12} {:>8} | {:>12} {:>8} {:>10}",
        "rate pps",
        "off wake/s",
        "pkt/wk",
        "fixed wake/s",
        "pkt/wk",
        "adapt wake/s",
        "pkt/wk",
        "itr ns"
    );
    for rate in [
        1_000u64, 10_000, 50_000, 100_000, 300_000, 1_000_000, 3_000_000,
    ] {
        let r: Vec<(f64, f64, u64)> = modes
            .iter()
            .map(|(_, m)| run(*m, rate, 50_000_000))
            .collect();
        println!(
            "{:>10} | {:>12.0} {:>8.1} | {:>12.0} {:>8.1} | {:>12.0} {:>8.1} {:>10}",
            rate, r[0].0, r[0].1, r[1].0, r[1].1, r[2].0, r[2].1, r[2].2
        );
    }
}
