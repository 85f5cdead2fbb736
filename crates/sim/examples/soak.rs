//! Soak-throughput probe: runs the toy go-back-N transfer over a hostile link for many seeds
//! and prints how fast the simulator goes. Usage: `cargo run -p sim --example soak [seeds]`.

use sim::toy::{GbnReceiver, GbnSender};
use sim::{
    ChannelConfig, Corrupt, Duplicate, JitterOrder, Loss, PortId, Reorder, World, run_seeds,
};
use std::time::Instant;

const P0: PortId = PortId(0);

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1_000);
    let data: Vec<u8> = (0..64 * 1024u32).map(|i| (i % 251) as u8).collect();
    let mut events = 0u64;
    let mut deliveries = 0u64;
    let mut virtual_ns = 0u64;
    let started = Instant::now();
    let outcome = run_seeds(0..seeds, |seed| {
        let mut w = World::new(seed);
        let tx = w.add_host(Box::new(GbnSender::new(
            P0,
            data.clone(),
            1_400,
            16,
            2_000_000,
        )));
        let rx = w.add_host(Box::new(GbnReceiver::new(P0)));
        let cfg = ChannelConfig::default()
            .rate_bps(1_000_000_000)
            .delay_ns(50_000)
            .jitter_ns(5_000, JitterOrder::Fifo)
            .mtu_bytes(1_514);
        let link = w
            .connect((tx, P0), (rx, P0), cfg)
            .map_err(|e| e.to_string())?;
        w.add_fault_both(link, Loss { p: 0.02 });
        w.add_fault_both(link, Duplicate { p: 0.01 });
        w.add_fault_both(
            link,
            Reorder {
                p: 0.01,
                extra_delay_ns: 30_000,
            },
        );
        w.add_fault_both(link, Corrupt { p: 0.01 });
        w.run_until_idle(10_000_000).map_err(|e| e.to_string())?;
        if w.host::<GbnReceiver>(rx).map(|r| &r.delivered) != Some(&data) {
            return Err("transfer incomplete or wrong".into());
        }
        events += w.counters().events;
        deliveries += w.counters().deliveries;
        virtual_ns += w.now_ns();
        Ok(())
    });
    let wall = started.elapsed();
    println!(
        "{seeds} seeds x {} KiB: {:.2} s wall, {events} events ({:.0}/s), {deliveries} frames, \
         {:.1} s virtual; {}",
        data.len() / 1024,
        wall.as_secs_f64(),
        events as f64 / wall.as_secs_f64(),
        virtual_ns as f64 / 1e9,
        match outcome {
            Ok(()) => "all passed".to_string(),
            Err(e) => e.to_string(),
        }
    );
}
