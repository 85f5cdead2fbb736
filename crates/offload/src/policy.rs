//! The host's offload policy (seed 002 §3.3: the host decides what to offload and when to
//! take it back; the engine only advertises what it has left).
//!
//! The policy is pure: [`Policy::plan`] reads a [`View`] (candidates, what is offloaded, the
//! engine's advertisements) and returns how many connections to hand off and how many to ask
//! back; [`crate::HostOffload`] picks which (candidates in tuple order; restores least active
//! first) and carries the plan out. Every decision is counted in [`PolicyCounters`].

use shard::handoff::Limits;

/// What to offload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Policy {
    /// Nothing (handoffs only when the driver calls `offload`).
    Off,
    /// Every established connection, while the engine advertises room.
    All,
    /// The first `N` connections handed off successfully, then no more.
    First(u64),
    /// Keep the engine busy without overloading it: offload while the advertised connection
    /// slots and buffer memory stay above a reserve (1/16 of the maximum slots, 1/8 of the
    /// buffer memory); when either falls below half its reserve, ask back the least active
    /// connections (1/16 of those offloaded, at least one). "Below half" is "at or below".
    Adaptive,
}

impl Policy {
    /// Parses `off | all | first:N | adaptive`.
    pub fn from_name(s: &str) -> Option<Policy> {
        match s {
            "off" => Some(Policy::Off),
            "all" => Some(Policy::All),
            "adaptive" => Some(Policy::Adaptive),
            _ => s
                .strip_prefix("first:")
                .and_then(|n| n.parse().ok())
                .map(Policy::First),
        }
    }
}

/// What the policy reads.
#[derive(Debug, Clone, Copy)]
pub struct View {
    /// Established connections the host could hand off now.
    pub candidates: usize,
    /// Handoffs sent and not refused, ever (for `first:N`).
    pub offloaded_total: u64,
    /// Connections offloaded or being handed off now.
    pub offloaded_now: usize,
    /// The engine's advertisements (`None` before the first).
    pub connections_left: Option<u64>,
    pub buffer_bytes_left: Option<u64>,
    pub limits: Limits,
}

/// What the policy decided.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Plan {
    pub offload: usize,
    pub restore: usize,
}

/// Every decision, counted. Values only increase.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PolicyCounters {
    /// Passes of the policy.
    pub passes: u64,
    /// Candidates the plan said to offload / to keep on the host, by reason.
    pub decided_offload: u64,
    pub kept_no_resource: u64,
    pub kept_quota_reached: u64,
    pub kept_reserve: u64,
    /// Restores the plan asked for (adaptive, engine near its limits).
    pub decided_restore: u64,
    /// Handoffs carried out, handoffs that failed to start, restores asked.
    pub offloaded: u64,
    pub offload_failed: u64,
    pub restored: u64,
}

impl Policy {
    /// The plan for one pass (module documentation); counts its decisions.
    pub fn plan(self, c: &mut PolicyCounters, v: View) -> Plan {
        c.passes += 1;
        let max_conns = u64::from(v.limits.connections_max);
        let conns_left = v.connections_left.unwrap_or(max_conns);
        let buffer_left = v.buffer_bytes_left.unwrap_or(v.limits.buffer_bytes_max);
        let cands = v.candidates as u64;
        let (offload, restore) = match self {
            Policy::Off => (0, 0),
            Policy::All => {
                let n = cands.min(conns_left);
                c.kept_no_resource += cands - n;
                (n, 0)
            }
            Policy::First(quota) => {
                let left = quota.saturating_sub(v.offloaded_total);
                let n = cands.min(left);
                let room = n.min(conns_left);
                c.kept_quota_reached += cands - n;
                c.kept_no_resource += n - room;
                (room, 0)
            }
            Policy::Adaptive => {
                let conn_reserve = (max_conns / 16).max(1);
                let buffer_reserve = v.limits.buffer_bytes_max / 8;
                let low = conns_left <= conn_reserve / 2 || buffer_left <= buffer_reserve / 2;
                if low {
                    c.kept_reserve += cands;
                    let r = ((v.offloaded_now as u64) / 16)
                        .max(1)
                        .min(v.offloaded_now as u64);
                    c.decided_restore += r;
                    (0, r)
                } else if buffer_left <= buffer_reserve {
                    c.kept_reserve += cands;
                    (0, 0)
                } else {
                    let n = cands.min(conns_left.saturating_sub(conn_reserve));
                    c.kept_reserve += cands - n;
                    (n, 0)
                }
            }
        };
        c.decided_offload += offload;
        Plan {
            offload: usize::try_from(offload).unwrap_or(usize::MAX),
            restore: usize::try_from(restore).unwrap_or(usize::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(candidates: usize, conns_left: Option<u64>, buffer_left: Option<u64>) -> View {
        View {
            candidates,
            offloaded_total: 0,
            offloaded_now: 32,
            connections_left: conns_left,
            buffer_bytes_left: buffer_left,
            limits: Limits {
                connections_max: 64,
                buffer_bytes_max: 1 << 20,
                ..Limits::default()
            },
        }
    }

    #[test]
    fn policy_names_parse() {
        assert_eq!(Policy::from_name("off"), Some(Policy::Off));
        assert_eq!(Policy::from_name("all"), Some(Policy::All));
        assert_eq!(Policy::from_name("first:12"), Some(Policy::First(12)));
        assert_eq!(Policy::from_name("adaptive"), Some(Policy::Adaptive));
        assert_eq!(Policy::from_name("first:x"), None);
        assert_eq!(Policy::from_name("some"), None);
    }

    #[test]
    fn all_never_exceeds_the_advertisement() {
        let mut c = PolicyCounters::default();
        let p = Policy::All.plan(&mut c, view(10, Some(3), None));
        assert_eq!(
            p,
            Plan {
                offload: 3,
                restore: 0
            }
        );
        assert_eq!((c.decided_offload, c.kept_no_resource), (3, 7));
    }

    #[test]
    fn first_n_stops_at_its_quota() {
        let mut c = PolicyCounters::default();
        let mut v = view(10, None, None);
        v.offloaded_total = 4;
        let p = Policy::First(6).plan(&mut c, v);
        assert_eq!(p.offload, 2);
        assert_eq!(c.kept_quota_reached, 8);
        v.offloaded_total = 6;
        assert_eq!(Policy::First(6).plan(&mut c, v).offload, 0);
    }

    #[test]
    fn adaptive_keeps_a_reserve_and_restores_near_the_limits() {
        let mut c = PolicyCounters::default();
        // 64 slots: reserve 4. 10 left → offload 6.
        assert_eq!(
            Policy::Adaptive
                .plan(&mut c, view(20, Some(10), None))
                .offload,
            6
        );
        // 1 slot left (< reserve / 2): restore 32 / 16 = 2, offload none.
        let p = Policy::Adaptive.plan(&mut c, view(20, Some(1), None));
        assert_eq!(
            p,
            Plan {
                offload: 0,
                restore: 2
            }
        );
        // Buffer memory low: restore too.
        let p = Policy::Adaptive.plan(&mut c, view(20, Some(30), Some(1000)));
        assert_eq!(p.restore, 2);
        assert_eq!(c.decided_restore, 4);
        assert_eq!(c.passes, 3);
    }

    #[test]
    fn off_decides_nothing() {
        let mut c = PolicyCounters::default();
        assert_eq!(
            Policy::Off.plan(&mut c, view(5, None, None)),
            Plan::default()
        );
    }
}
