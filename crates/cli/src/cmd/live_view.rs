//! The live view (`--live-view`): one line a second on stderr with each shard's last second.

use std::time::Duration;

/// The live view's memory: the shards' figures at the previous line.
#[derive(Default)]
pub(crate) struct LiveViewState {
    last: Vec<runtime::ShardSnapshot>,
    last_at: Duration,
}

impl LiveViewState {
    /// One line when a second has passed since the previous one: per shard, the last
    /// second's packets per second and packets per wake-up, and its connections now.
    pub(crate) fn tick(
        &mut self,
        elapsed: Duration,
        shards: &[runtime::ShardSnapshot],
    ) -> Option<String> {
        if elapsed.saturating_sub(self.last_at) < Duration::from_secs(1) {
            return None;
        }
        let secs = elapsed.saturating_sub(self.last_at).as_secs_f64();
        let mut line = format!("[{:>7.1} s]", elapsed.as_secs_f64());
        for (i, s) in shards.iter().enumerate() {
            let prev = self.last.get(i).copied().unwrap_or_default();
            let packets = s.rx_packets.saturating_sub(prev.rx_packets);
            let wakeups = s.nic_wakeups.saturating_sub(prev.nic_wakeups);
            let per_wakeup = if wakeups == 0 {
                0.0
            } else {
                packets as f64 / wakeups as f64
            };
            line.push_str(&format!(
                "  shard {i}: {:.0} pkts/s {per_wakeup:.1} pkts/wake-up {} conns",
                packets as f64 / secs,
                s.connections
            ));
            // The overload policy at work, in the last second (only when it acted).
            let refused = s.overload_refused.saturating_sub(prev.overload_refused);
            let reclaimed = s.overload_reclaimed.saturating_sub(prev.overload_reclaimed);
            if refused + reclaimed > 0 {
                line.push_str(&format!(" ({refused} refused, {reclaimed} reclaimed)"));
            }
        }
        self.last = shards.to_vec();
        self.last_at = elapsed;
        Some(line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_view_shows_each_shards_last_second_with_packets_per_wakeup() {
        let mut v = LiveViewState::default();
        let snap = |rx_packets, nic_wakeups, connections| runtime::ShardSnapshot {
            rx_packets,
            nic_wakeups,
            connections,
            ..Default::default()
        };
        assert_eq!(v.tick(Duration::from_millis(500), &[snap(10, 1, 1)]), None);
        let line = v
            .tick(Duration::from_secs(1), &[snap(100, 10, 2), snap(0, 0, 0)])
            .expect("a second passed");
        assert_eq!(
            line,
            "[    1.0 s]  shard 0: 100 pkts/s 10.0 pkts/wake-up 2 conns  \
             shard 1: 0 pkts/s 0.0 pkts/wake-up 0 conns"
        );
        assert_eq!(
            v.tick(Duration::from_millis(1500), &[snap(900, 20, 2)]),
            None
        );
        let line = v
            .tick(Duration::from_secs(2), &[snap(1100, 30, 3)])
            .expect("another second");
        // The last second only: 1,000 packets in 20 wake-ups.
        assert!(
            line.contains("shard 0: 1000 pkts/s 50.0 pkts/wake-up 3 conns"),
            "{line}"
        );
        assert!(!line.contains("refused"), "{line}");
        // The overload policy's refusals and reclaims of the last second, when there were any.
        let busy = runtime::ShardSnapshot {
            overload_refused: 40,
            overload_reclaimed: 7,
            ..snap(1100, 30, 3)
        };
        let line = v.tick(Duration::from_secs(3), &[busy]).expect("a third");
        assert!(
            line.ends_with("shard 0: 0 pkts/s 0.0 pkts/wake-up 3 conns (40 refused, 7 reclaimed)"),
            "{line}"
        );
    }
}
