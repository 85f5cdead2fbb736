//! The configurations TCP connections share (issue 17 item 2): instead of a copy of
//! `tcp::Config` in every TCB, connections opened (or imported) with equal validated
//! configurations hold one `Arc` between them, so the fields a segment reads sit in one cache
//! line that every connection keeps warm. A socket option that changes one connection's
//! configuration copies it for that connection alone (`tcp::Connection`'s copy-on-write).
//!
//! Bounded: at most [`SHARED_CONFIGS_MAX`] configurations are remembered (in practice one per
//! listener and family, times the ECN and memory-pressure variants `config_for` derives); a
//! new one replaces the oldest, whose connections keep their `Arc` (sharing is an
//! optimisation, never a condition for correctness).

use std::sync::Arc;

/// Most configurations [`ConfigShare`] remembers.
pub(crate) const SHARED_CONFIGS_MAX: usize = 8;

/// The remembered configurations, each validated (`tcp::Config::validated`).
#[derive(Debug, Default)]
pub(crate) struct ConfigShare {
    /// Invariant: at most [`SHARED_CONFIGS_MAX`] entries, pairwise different, each equal to
    /// its own `validated()`.
    entries: Vec<tcp::SharedConfig>,
    /// The entry the next new configuration replaces once `entries` is full (round robin).
    next: usize,
}

impl ConfigShare {
    /// The shared configuration equal to `config.validated()`: a remembered one, or a new
    /// one remembered from now on.
    pub(crate) fn get(&mut self, config: tcp::Config) -> tcp::SharedConfig {
        let config = config.validated();
        if let Some(e) = self.entries.iter().find(|e| ***e == config) {
            return Arc::clone(e);
        }
        let e = Arc::new(config);
        if self.entries.len() < SHARED_CONFIGS_MAX {
            self.entries.push(Arc::clone(&e));
        } else {
            let slot = self.next % SHARED_CONFIGS_MAX;
            self.entries[slot] = Arc::clone(&e);
            self.next = (slot + 1) % SHARED_CONFIGS_MAX;
        }
        e
    }

    /// Configurations remembered.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_configurations_share_one_allocation() {
        let mut s = ConfigShare::default();
        let a = s.get(tcp::Config::default());
        let b = s.get(tcp::Config::default());
        assert!(Arc::ptr_eq(&a, &b));
        let c = s.get(tcp::Config {
            nodelay: true,
            ..tcp::Config::default()
        });
        assert!(!Arc::ptr_eq(&a, &c));
        assert_eq!(s.len(), 2);
    }

    #[test]
    fn shared_configurations_are_validated() {
        let mut s = ConfigShare::default();
        let raw = tcp::Config {
            rto_min_ns: 10,
            rto_max_ns: 5,
            ..tcp::Config::default()
        };
        let a = s.get(raw);
        assert_eq!(*a, raw.validated());
        assert!(Arc::ptr_eq(&a, &s.get(raw.validated())));
    }

    #[test]
    fn remembered_configurations_stay_bounded() {
        let mut s = ConfigShare::default();
        let mut held = Vec::new();
        for i in 0..3 * SHARED_CONFIGS_MAX {
            held.push(s.get(tcp::Config {
                syn_retries_max: i as u8,
                ..tcp::Config::default()
            }));
            assert!(s.len() <= SHARED_CONFIGS_MAX);
        }
        // Forgotten ones stay valid for the connections that hold them.
        assert_eq!(held[0].syn_retries_max, 0);
        // The most recent ones are still shared.
        let last = s.get(tcp::Config {
            syn_retries_max: (3 * SHARED_CONFIGS_MAX - 1) as u8,
            ..tcp::Config::default()
        });
        assert!(Arc::ptr_eq(&last, held.last().unwrap()));
    }
}
