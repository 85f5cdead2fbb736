//! The host's RSS key: drawn at random for each host ([`HostConfig::new`]), or pinned
//! ([`HostConfig::pin_rss_key`]: tests, reproducing a run).
//!
//! Toeplitz is linear over GF(2): whoever knows the key can pick 4-tuples that share a hash.
//! Under a key nobody outside the host knows the stacks may index their connection tables by
//! the hash the NIC carried (hash once, `stack::RssConfig::key_is_secret`); under a known key
//! — Microsoft's default, the symmetric one, any key given on a command line — they hash each
//! segment's tuple again with their own keyed hash.

use std::hash::{BuildHasher, RandomState};
use std::io::Read;

use rss::{KEY_LEN_BYTES, RssKey};

use crate::HostConfig;

/// Fills `bytes` from the OS (`/dev/urandom`). Should that file be unreadable (a sandbox
/// without `/dev`), the bytes come from std's randomly keyed SipHash ([`RandomState`], whose
/// 128-bit key std draws from the OS's random source), over a counter.
fn random_bytes(bytes: &mut [u8]) {
    let from_os = std::fs::File::open("/dev/urandom").and_then(|mut f| f.read_exact(bytes));
    if from_os.is_err() {
        let state = RandomState::new();
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            let word = state.hash_one(i as u64).to_le_bytes();
            for (b, w) in chunk.iter_mut().zip(word) {
                *b = w;
            }
        }
    }
}

/// A fresh random key: 40 bytes from the OS (`/dev/urandom`, or std's OS-seeded hasher where
/// that file cannot be read).
pub fn random_rss_key() -> RssKey {
    let mut bytes = [0u8; KEY_LEN_BYTES];
    random_bytes(&mut bytes);
    RssKey::new(bytes)
}

/// A fresh random 128-bit host secret (`HostConfig::secret`: ISNs, SYN cookies, table hash).
pub fn random_secret() -> [u64; 2] {
    let mut bytes = [0u8; 16];
    random_bytes(&mut bytes);
    let (a, b) = bytes.split_at(8);
    let word = |s: &[u8]| u64::from_le_bytes(s.try_into().unwrap_or([0; 8]));
    [word(a), word(b)]
}

impl HostConfig {
    /// True when the stacks may index their tables by the carried hash: the hasher still
    /// uses the key [`HostConfig::new`] drew for this host ([`HostConfig::random_rss_key`]),
    /// in plain (not symmetric) mode. Any other key — one set on `hasher` directly, or pinned
    /// — counts as known, as does a symmetric mode (its key is public, and XOR-folding makes
    /// colliding tuples easy to find under any key).
    pub fn rss_key_is_secret(&self) -> bool {
        self.hasher.mode() == rss::SymmetricMode::None
            && self.random_rss_key.as_ref() == Some(self.hasher.key())
    }

    /// Uses `key` (plain Toeplitz) instead of the random one: the same steering on every run,
    /// for tests and reproductions. A pinned key counts as known (see
    /// [`HostConfig::rss_key_is_secret`]).
    pub fn pin_rss_key(&mut self, key: &RssKey) {
        self.hasher = rss::RssHasher::new(key, rss::SymmetricMode::None);
        self.random_rss_key = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stack::InterfaceConfig;
    use wire::EthernetAddress;

    fn host() -> HostConfig {
        let iface = InterfaceConfig::new(
            EthernetAddress([2, 0, 0, 0, 0, 1]),
            stack::Ipv4Cidr::new([10, 0, 0, 1].into(), 24),
        );
        HostConfig::new(iface, 2)
    }

    #[test]
    fn each_host_draws_its_own_secret_so_runs_do_not_share_isns() {
        let (a, b) = (host(), host());
        assert_ne!(a.secret, b.secret);
        assert_ne!(a.secret, [0, 0]);
    }

    #[test]
    fn each_host_draws_its_own_key_and_keeps_it_secret() {
        let (a, b) = (host(), host());
        assert_ne!(a.hasher.key(), b.hasher.key());
        assert_ne!(*a.hasher.key(), RssKey::default());
        assert!(a.rss_key_is_secret() && b.rss_key_is_secret());
    }

    #[test]
    fn a_pinned_key_a_replaced_hasher_or_a_symmetric_mode_is_not_secret() {
        let mut pinned = host();
        let key = RssKey::default();
        pinned.pin_rss_key(&key);
        assert_eq!(*pinned.hasher.key(), key);
        assert!(!pinned.rss_key_is_secret());

        let mut replaced = host();
        replaced.hasher = rss::RssHasher::default();
        assert!(!replaced.rss_key_is_secret());

        let mut symmetric = host();
        let drawn = *symmetric.hasher.key();
        symmetric.hasher = rss::RssHasher::new(&drawn, rss::SymmetricMode::XorFold);
        assert!(!symmetric.rss_key_is_secret());
    }

    #[test]
    fn the_random_key_is_not_all_zero_or_repeating() {
        let k = random_rss_key();
        assert_ne!(*k.as_bytes(), [0u8; KEY_LEN_BYTES]);
        assert!(!k.is_16bit_periodic());
    }
}
