//! Steering without receiving: where a frame (or a burst of frames) would go, for a driver
//! that dispatches frames to per-shard NICs itself, and the per-bucket load it counts.

use rss::{Reta, SteerDecision, SteerHow};

use super::{Nic, RxDrop};

impl Nic {
    /// Where `frame` would be steered (filter → RSS → default queue), without receiving it:
    /// for a driver that dispatches frames to per-shard NICs itself (one `Nic` with
    /// `queues: 1` per shard thread, fed with [`Nic::receive_on_queue`]), or for tests.
    #[inline]
    pub fn steer(&self, frame: &[u8]) -> Result<rss::SteerDecision, RxDrop> {
        self.steering
            .steer_frame(frame)
            .map_err(|_| RxDrop::Malformed)
    }

    /// [`Nic::steer`], counting the packet in its RETA bucket's load
    /// ([`Nic::reta_bucket_packets`]) when RSS decided: for a driver that steers frames to
    /// queues itself (the `mem` wire) and rebalances.
    /// Rule hits are counted too ([`Nic::rule_hits`]); a [`SteerHow::RuleDrop`] decision is
    /// the caller's to drop.
    #[inline]
    pub fn steer_counted(&mut self, frame: &[u8]) -> Result<rss::SteerDecision, RxDrop> {
        let d = self.steer(frame)?;
        count_steered(
            &self.steering.reta,
            &mut self.bucket_packets,
            &mut self.rule_hits,
            &d,
        );
        Ok(d)
    }

    /// [`Nic::steer`] for a burst of frames: `out[i]` is `steer(frames[i])` for `i` below the
    /// shorter length (the rest of `out` is left as it was). The plain IPv4 TCP/UDP frames
    /// are hashed eight per call on the AVX-512 kernel where the CPU has it
    /// ([`rss::Steering::steer_burst_with`]); the decisions are the same as frame by frame.
    pub fn steer_burst<F: AsRef<[u8]>>(
        &self,
        frames: &[F],
        out: &mut [Result<rss::SteerDecision, RxDrop>],
    ) {
        let frames = frames.get(..out.len()).unwrap_or(frames);
        self.steering.steer_burst_with(frames, |i, d| {
            if let Some(o) = out.get_mut(i) {
                *o = d.map_err(|_| RxDrop::Malformed);
            }
        });
    }

    /// [`Nic::steer_counted`] for a burst of frames: [`Nic::steer_burst`], each decision
    /// counted as `steer_counted` counts it (rule hits, the RETA bucket's load).
    pub fn steer_counted_burst<F: AsRef<[u8]>>(
        &mut self,
        frames: &[F],
        out: &mut [Result<rss::SteerDecision, RxDrop>],
    ) {
        let frames = frames.get(..out.len()).unwrap_or(frames);
        let Nic {
            steering,
            bucket_packets,
            rule_hits,
            ..
        } = self;
        steering.steer_burst_with(frames, |i, d| {
            if let Ok(d) = &d {
                count_steered(&steering.reta, bucket_packets, rule_hits, d);
            }
            if let Some(o) = out.get_mut(i) {
                *o = d.map_err(|_| RxDrop::Malformed);
            }
        });
    }

    /// Counts a decision [`Nic::steer`] or [`Nic::steer_burst`] made, as
    /// [`Nic::steer_counted`] would have: its rule's hit, or its RETA bucket's packet. For a
    /// driver that steers a burst ahead and counts each frame once, when it is delivered.
    #[inline]
    pub fn count_steered(&mut self, d: &rss::SteerDecision) {
        count_steered(
            &self.steering.reta,
            &mut self.bucket_packets,
            &mut self.rule_hits,
            d,
        );
    }

    /// Packets RSS steered through each RETA entry since creation or the last
    /// [`Nic::reset_reta_bucket_packets`]: the load per bucket a rebalancer needs to decide
    /// which entries to move (filter-steered and unhashed packets are not counted).
    pub fn reta_bucket_packets(&self) -> &[u64] {
        &self.bucket_packets
    }

    /// Starts a new measurement window for [`Nic::reta_bucket_packets`].
    pub fn reset_reta_bucket_packets(&mut self) {
        self.bucket_packets.iter_mut().for_each(|n| *n = 0);
    }
}

/// Counts a steering decision: its rule's hit, or its RETA bucket's packet.
#[inline]
fn count_steered(
    reta: &Reta,
    bucket_packets: &mut [u64],
    rule_hits: &mut [u64],
    d: &SteerDecision,
) {
    if let SteerHow::Rule | SteerHow::RuleDrop = d.how {
        if let Some(n) = rule_hits.get_mut(usize::from(d.rule)) {
            *n += 1;
        }
    }
    if let (SteerHow::Rss, Some(h)) = (d.how, d.hash) {
        if let Some(n) = bucket_packets.get_mut(reta.index_for_hash(h)) {
            *n += 1;
        }
    }
}
