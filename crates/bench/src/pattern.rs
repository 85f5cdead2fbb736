//! The bytes a bulk sender streams, and a hash of a byte stream to prove the receiver read
//! exactly what was sent.

/// Period of the payload pattern: a prime, so pattern boundaries never line up with segment,
/// chunk or buffer sizes.
pub const PERIOD_BYTES: usize = 65_521;

/// A repeating payload pattern. [`Pattern::chunk`] hands out up to [`PERIOD_BYTES`] bytes
/// starting at any stream offset without copying.
#[derive(Debug, Clone)]
pub struct Pattern {
    /// Two periods back to back, so any window of one period is contiguous.
    bytes: Vec<u8>,
}

impl Default for Pattern {
    fn default() -> Self {
        Pattern::new()
    }
}

impl Pattern {
    pub fn new() -> Pattern {
        let bytes = (0..2 * PERIOD_BYTES)
            .map(|i| {
                let i = i % PERIOD_BYTES;
                (i.wrapping_mul(131) ^ (i >> 7)) as u8
            })
            .collect();
        Pattern { bytes }
    }

    /// The stream's bytes from `offset`, at most `max_bytes` (and at most one period).
    pub fn chunk(&self, offset: u64, max_bytes: usize) -> &[u8] {
        let start = (offset % PERIOD_BYTES as u64) as usize;
        let len = max_bytes.min(PERIOD_BYTES);
        self.bytes.get(start..start + len).unwrap_or(&[])
    }
}

/// FNV-1a over a byte stream: order-sensitive, so a reordered, lost or duplicated byte
/// changes it. Feeding a stream in any split gives the same value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamHash(pub u64);

impl Default for StreamHash {
    fn default() -> Self {
        StreamHash(0xcbf2_9ce4_8422_2325)
    }
}

impl StreamHash {
    pub fn update(&mut self, bytes: &[u8]) {
        let mut h = self.0;
        for &b in bytes {
            h = (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3);
        }
        self.0 = h;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_follow_the_stream_across_the_period() {
        let p = Pattern::new();
        let whole: Vec<u8> = p.chunk(0, PERIOD_BYTES).to_vec();
        let off = PERIOD_BYTES as u64 * 3 + 100;
        assert_eq!(p.chunk(off, 10), &whole[100..110]);
        assert_eq!(p.chunk(off, usize::MAX).len(), PERIOD_BYTES);
    }

    #[test]
    fn stream_hash_ignores_how_the_stream_is_split() {
        let data: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut a = StreamHash::default();
        a.update(&data);
        let mut b = StreamHash::default();
        for part in data.chunks(7) {
            b.update(part);
        }
        assert_eq!(a, b);
        let mut c = StreamHash::default();
        c.update(&data[1..]);
        assert_ne!(a, c);
    }
}
