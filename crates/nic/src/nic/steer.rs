//! Steering without receiving: where a frame (or a burst of frames) would go, for a driver
//! that dispatches frames to per-shard NICs itself, and the per-bucket load it counts.

use rss::{FrameError, SteerHow};

use super::{Nic, RxDrop};

/// Frames [`Nic::steer_burst`] steers per call of the `rss` burst (a stack array of decisions
/// this long holds them): four kernel calls.
const STEER_BURST_FRAMES: usize = 4 * rss::HASH_BURST_TUPLES;

impl Nic {
    /// Where `frame` would be steered (filter → RSS → default queue), without receiving it:
    /// for a driver that dispatches frames to per-shard NICs itself (one `Nic` with
    /// `queues: 1` per shard thread, fed with [`Nic::receive_on_queue`]), or for tests.
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
    pub fn steer_counted(&mut self, frame: &[u8]) -> Result<rss::SteerDecision, RxDrop> {
        let d = self.steer(frame)?;
        self.count_steered(&d);
        Ok(d)
    }

    /// Counts a steering decision: its rule's hit, or its RETA bucket's packet.
    fn count_steered(&mut self, d: &rss::SteerDecision) {
        if let SteerHow::Rule | SteerHow::RuleDrop = d.how {
            if let Some(n) = self.rule_hits.get_mut(usize::from(d.rule)) {
                *n += 1;
            }
        }
        if let (SteerHow::Rss, Some(h)) = (d.how, d.hash) {
            let i = self.steering.reta.index_for_hash(h);
            if let Some(n) = self.bucket_packets.get_mut(i) {
                *n += 1;
            }
        }
    }

    /// [`Nic::steer`] for a burst of frames: `out[i]` is `steer(frames[i])` for `i` below the
    /// shorter length (the rest of `out` is left as it was). The plain IPv4 TCP/UDP frames
    /// are hashed eight per call on the AVX-512 kernel where the CPU has it
    /// ([`rss::Steering::steer_burst`]); the decisions are the same as frame by frame.
    pub fn steer_burst<F: AsRef<[u8]>>(
        &self,
        frames: &[F],
        out: &mut [Result<rss::SteerDecision, RxDrop>],
    ) {
        let mut decisions = [Err(FrameError::TruncatedEthernet); STEER_BURST_FRAMES];
        for (frames, out) in frames
            .chunks(STEER_BURST_FRAMES)
            .zip(out.chunks_mut(STEER_BURST_FRAMES))
        {
            self.steering.steer_burst(frames, &mut decisions);
            for (o, d) in out.iter_mut().zip(decisions).take(frames.len()) {
                *o = d.map_err(|_| RxDrop::Malformed);
            }
        }
    }

    /// [`Nic::steer_counted`] for a burst of frames: [`Nic::steer_burst`], then each decision
    /// counted as `steer_counted` counts it (rule hits, the RETA bucket's load), in order.
    pub fn steer_counted_burst<F: AsRef<[u8]>>(
        &mut self,
        frames: &[F],
        out: &mut [Result<rss::SteerDecision, RxDrop>],
    ) {
        self.steer_burst(frames, out);
        for d in out.iter().take(frames.len()).flatten() {
            self.count_steered(d);
        }
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
