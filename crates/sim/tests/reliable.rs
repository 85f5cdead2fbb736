//! A toy go-back-N transfer over a hostile link delivers every byte exactly once and in order,
//! for 200 seeds — the shape of the checker the TCP soak will use.

use sim::toy::{GbnReceiver, GbnSender};
use sim::{
    ChannelConfig, Corrupt, Dir, Duplicate, JitterOrder, Loss, PortId, Reorder, World, run_seeds,
    seeds_from_env_or,
};

const P0: PortId = PortId(0);

/// What the faults did to one transfer, summed over seeds to show the link was hostile.
#[derive(Default, Debug)]
struct Harm {
    lost: u64,
    link_down: u64,
    duplicated: u64,
    delayed: u64,
    corrupted: u64,
    timeouts: u64,
    end_ns_max: u64,
}

/// Runs one transfer; `Err` names the violated property.
fn transfer(seed: u64, harm: &mut Harm) -> Result<(), String> {
    let mut w = World::new(seed);
    // Payload varies by seed (from the world's host stream) so corruption hits different bytes.
    let mut rng = w.host_rng(0);
    let len = 2_000 + rng.gen_range(0..2_000) as usize;
    let data: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
    let tx = w.add_host(Box::new(GbnSender::new(P0, data.clone(), 128, 6, 300_000)));
    let rx = w.add_host(Box::new(GbnReceiver::new(P0)));
    let cfg = ChannelConfig::default()
        .rate_bps(50_000_000)
        .delay_ns(25_000)
        .jitter_ns(10_000, JitterOrder::Fifo)
        .mtu_bytes(1500);
    let link = w
        .connect((tx, P0), (rx, P0), cfg)
        .map_err(|e| e.to_string())?;
    // The flap goes first: a frame departing while the link is down meets no other rule.
    w.schedule_flap(link, 2_000_000, 3_000_000);
    w.add_fault_both(link, Loss { p: 0.15 });
    w.add_fault_both(link, Duplicate { p: 0.05 });
    w.add_fault_both(
        link,
        Reorder {
            p: 0.1,
            extra_delay_ns: 40_000,
        },
    );
    // Corrupt is last, so every corrupted frame (and copy) reaches a host.
    w.add_fault_both(link, Corrupt { p: 0.05 });

    // Beside the simulation: what has been delivered is always a prefix of what was sent.
    let check = |w: &World| -> Result<(), String> {
        let got = &w
            .host::<GbnReceiver>(rx)
            .ok_or("receiver missing")?
            .delivered;
        if data.starts_with(got) {
            Ok(())
        } else {
            Err(format!(
                "delivered {} bytes that are not a prefix",
                got.len()
            ))
        }
    };
    w.set_trace_recording(true);
    w.run_until_idle_checked(1_000_000, check)
        .map_err(|e| format!("{e}; last events:\n{}", w.trace_tail(12)))?;

    let rcv = w.host::<GbnReceiver>(rx).ok_or("receiver missing")?;
    let snd = w.host::<GbnSender>(tx).ok_or("sender missing")?;
    if rcv.delivered != data {
        return Err(format!(
            "delivered {} of {} bytes; last events:\n{}",
            rcv.delivered.len(),
            data.len(),
            w.trace_tail(12)
        ));
    }
    if !snd.done() {
        return Err("sender never saw the last ACK".into());
    }
    let ab = w.link_counters(link, Dir::AToB).ok_or("link missing")?;
    let ba = w.link_counters(link, Dir::BToA).ok_or("link missing")?;
    if ab.offered_packets != snd.frames_sent {
        return Err("link did not see every frame the sender sent".into());
    }
    // Conservation: every offered frame is delivered (plus copies) or counted as a drop.
    for c in [ab, ba] {
        if c.offered_packets + c.duplicated_packets != c.delivered_packets + c.dropped_packets() {
            return Err(format!("frames unaccounted for: {c:?}"));
        }
    }
    // Every corrupted frame must have been caught by a checksum, not delivered as data.
    if rcv.frames_bad + snd.frames_bad < ab.corrupted_packets + ba.corrupted_packets {
        return Err("corruption went unnoticed".into());
    }
    for c in [ab, ba] {
        harm.lost += c.drop_loss;
        harm.link_down += c.drop_link_down;
        harm.duplicated += c.duplicated_packets;
        harm.delayed += c.delayed_packets;
        harm.corrupted += c.corrupted_packets;
    }
    harm.timeouts += snd.timeouts;
    harm.end_ns_max = harm.end_ns_max.max(w.now_ns());
    Ok(())
}

#[test]
fn go_back_n_delivers_every_byte_once_in_order_over_200_seeds() {
    let mut harm = Harm::default();
    run_seeds(seeds_from_env_or(0..200), |seed| transfer(seed, &mut harm))
        .expect("every seed delivers");
    println!("{harm:?}");
    // Every fault kind actually happened, so the property was tested under fire.
    assert!(
        harm.lost > 0 && harm.link_down > 0 && harm.duplicated > 0,
        "{harm:?}"
    );
    assert!(
        harm.delayed > 0 && harm.corrupted > 0 && harm.timeouts > 0,
        "{harm:?}"
    );
}

#[test]
fn a_broken_receiver_is_caught_and_its_seed_named() {
    // The checker must be able to fail: a link that drops everything while the sender has an
    // event budget too small to finish gives an error naming the seed.
    let report = run_seeds([42], |seed| {
        let mut w = World::new(seed);
        let tx = w.add_host(Box::new(GbnSender::new(P0, vec![1; 500], 100, 4, 100_000)));
        let rx = w.add_host(Box::new(GbnReceiver::new(P0)));
        let link = w
            .connect((tx, P0), (rx, P0), ChannelConfig::default())
            .map_err(|e| e.to_string())?;
        w.add_fault(link, Dir::AToB, Loss { p: 1.0 });
        w.run_until_idle(500).map_err(|e| e.to_string())?;
        Ok(())
    });
    let Err(report) = report else {
        panic!("a transfer over a dead link cannot succeed");
    };
    assert_eq!(report.seeds(), vec![42]);
    assert!(report.to_string().contains("event limit"), "{report}");
}
