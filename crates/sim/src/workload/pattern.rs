//! The soak's position-keyed byte pattern ([`super::pattern_byte`]), generated and checked a
//! block at a time.
//!
//! `pattern_byte(s, o)` is the top byte of `(o ^ R) · C` (wrapping, `R = s.rotate_left(23)`)
//! XOR the offset's low byte. Within one 256-byte block (`o = base | i`, `base` a multiple of
//! 256) `o ^ R = A + j` with `A = (base ^ R) & !0xff` and `j = i ^ (R & 0xff) < 256`, so
//! `(o ^ R) · C = A·C + j·C`: one multiplication per block, and per byte an addition of the
//! stream's precomputed `lanes[i] = (i ^ (R & 0xff)) · C`, a shift and an XOR — a loop the
//! compiler vectorises. The bytes are exactly `pattern_byte`'s (a unit test compares them).

use super::pattern_byte;

/// The multiplier of [`super::pattern_byte`].
const PATTERN_MUL: u64 = 0x9e37_79b9_7f4a_7c15;
const BLOCK_BYTES: u64 = 256;

/// One stream's pattern generator.
#[derive(Clone)]
pub(super) struct Pattern {
    stream_id: u64,
    /// `stream_id.rotate_left(23)` with its low byte cleared (that byte is in `lanes`).
    rot_high: u64,
    /// `lanes[i] = (i ^ (rot & 0xff)) · C` (wrapping), split into 32-bit halves so the
    /// per-byte loop works on 32-bit lanes (4 to a 128-bit vector) with an explicit carry.
    lanes: Box<Lanes>,
}

#[derive(Clone)]
struct Lanes {
    high: [u32; BLOCK_BYTES as usize],
    low: [u32; BLOCK_BYTES as usize],
}

/// `IOTA[i] = i`: the offset's low byte XORed into each pattern byte.
const IOTA: [u8; BLOCK_BYTES as usize] = {
    let mut t = [0u8; BLOCK_BYTES as usize];
    let mut i = 0;
    while i < t.len() {
        t[i] = i as u8;
        i += 1;
    }
    t
};

impl core::fmt::Debug for Pattern {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Pattern({:#x})", self.stream_id)
    }
}

impl Pattern {
    pub(super) fn new(stream_id: u64) -> Self {
        let rot = stream_id.rotate_left(23);
        let low = rot & 0xff;
        let lane = |i: usize| ((i as u64) ^ low).wrapping_mul(PATTERN_MUL);
        let lanes = Box::new(Lanes {
            high: core::array::from_fn(|i| (lane(i) >> 32) as u32),
            low: core::array::from_fn(|i| lane(i) as u32),
        });
        Pattern {
            stream_id,
            rot_high: rot & !0xff,
            lanes,
        }
    }

    pub(super) fn stream_id(&self) -> u64 {
        self.stream_id
    }

    /// The whole 256-byte block starting at `base` (a multiple of 256): a fixed-length loop
    /// the compiler vectorises.
    #[inline]
    fn block(&self, base: u64, out: &mut [u8; BLOCK_BYTES as usize]) {
        let ac = (base ^ self.rot_high).wrapping_mul(PATTERN_MUL);
        let (ac_high, ac_low) = ((ac >> 32) as u32, ac as u32);
        let lanes = &*self.lanes;
        for i in 0..out.len() {
            // Top byte of the 64-bit sum ac + lane, from 32-bit halves and the low carry.
            let low = ac_low.wrapping_add(lanes.low[i]);
            let carry = u32::from(low < ac_low);
            let high = ac_high.wrapping_add(lanes.high[i]).wrapping_add(carry);
            out[i] = ((high >> 24) as u8) ^ IOTA[i];
        }
    }

    /// `out[k] = pattern_byte(stream_id, offset + k)` for every `k`.
    pub(super) fn fill(&self, offset: u64, out: &mut [u8]) {
        let mut at = offset;
        let mut rest = out;
        let mut tmp = [0u8; BLOCK_BYTES as usize];
        while !rest.is_empty() {
            let first = (at % BLOCK_BYTES) as usize;
            let take = rest.len().min(BLOCK_BYTES as usize - first);
            let (part, tail) = rest.split_at_mut(take);
            match <&mut [u8; BLOCK_BYTES as usize]>::try_from(&mut *part) {
                Ok(whole) => self.block(at, whole),
                Err(_) => {
                    self.block(at - first as u64, &mut tmp);
                    part.copy_from_slice(tmp.get(first..first + take).unwrap_or(&[]));
                }
            }
            at += take as u64;
            rest = tail;
        }
    }

    /// The index of the first byte of `bytes` that is not the pattern at `offset + index`.
    pub(super) fn first_mismatch(&self, offset: u64, bytes: &[u8]) -> Option<usize> {
        let mut expected = [0u8; BLOCK_BYTES as usize];
        let mut done = 0usize;
        while done < bytes.len() {
            let at = offset + done as u64;
            let first = (at % BLOCK_BYTES) as usize;
            let take = (bytes.len() - done).min(BLOCK_BYTES as usize - first);
            self.block(at - first as u64, &mut expected);
            let want = expected.get(first..first + take).unwrap_or(&[]);
            let got = bytes.get(done..done + take).unwrap_or(&[]);
            if want != got {
                return got
                    .iter()
                    .zip(want)
                    .position(|(a, b)| a != b)
                    .map(|k| done + k);
            }
            done += take;
        }
        None
    }

    /// The byte at `offset` (for messages).
    pub(super) fn byte(&self, offset: u64) -> u8 {
        pattern_byte(self.stream_id, offset)
    }
}

/// Pattern bytes of one outgoing stream generated once each and kept until sent: the
/// application offers the stack the same bytes again after a short write, so without this
/// cache every offer regenerates up to a whole chunk.
///
/// Invariant: `buf[k]` for `k < valid` is the pattern byte at `start + k`; `buf` only grows
/// (zero-filled once per byte of capacity, never per request) and stays at most
/// `2 · chunk` bytes once requests of at most `chunk` bytes are served.
#[derive(Debug, Clone)]
pub(super) struct TxCache {
    start: u64,
    valid: usize,
    buf: Vec<u8>,
}

impl TxCache {
    pub(super) fn new() -> Self {
        TxCache {
            start: 0,
            valid: 0,
            buf: Vec::new(),
        }
    }

    /// The pattern bytes `[from, from + n)`; `from` never goes backwards in use (a request
    /// before the cached range regenerates it).
    pub(super) fn bytes(&mut self, pattern: &Pattern, from: u64, n: usize, chunk: usize) -> &[u8] {
        let end_cached = self.start + self.valid as u64;
        if from < self.start || from > end_cached {
            self.valid = 0;
            self.start = from;
        }
        let mut skip = (from - self.start) as usize;
        if skip + n > 2 * chunk.max(n) {
            // Slide the unsent bytes to the front.
            self.buf.copy_within(skip..self.valid, 0);
            self.valid -= skip;
            self.start = from;
            skip = 0;
        }
        if self.valid < skip + n {
            let end = skip + n;
            if self.buf.len() < end {
                self.buf
                    .resize(end.next_power_of_two().min(2 * chunk.max(n)).max(end), 0);
            }
            let at = self.start + self.valid as u64;
            pattern.fill(at, self.buf.get_mut(self.valid..end).unwrap_or(&mut []));
            self.valid = end;
        }
        self.buf.get(skip..skip + n).unwrap_or(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fill_equals_pattern_byte_across_block_edges() {
        for stream in [0u64, 1, 7, 0xdead_beef_1234_5678, u64::MAX] {
            let p = Pattern::new(stream);
            for offset in [0u64, 1, 255, 256, 300, 65_535, (1 << 40) - 3] {
                let mut out = vec![0u8; 1_000];
                p.fill(offset, &mut out);
                for (k, b) in out.iter().enumerate() {
                    assert_eq!(
                        *b,
                        pattern_byte(stream, offset + k as u64),
                        "{stream} {offset} {k}"
                    );
                }
            }
        }
    }

    #[test]
    fn first_mismatch_finds_the_first_wrong_byte_only() {
        let p = Pattern::new(42);
        let mut data = vec![0u8; 700];
        p.fill(1_000, &mut data);
        assert_eq!(p.first_mismatch(1_000, &data), None);
        data[600] ^= 1;
        data[650] ^= 1;
        assert_eq!(p.first_mismatch(1_000, &data), Some(600));
        assert_eq!(p.first_mismatch(1_001, &data[1..]), Some(599));
    }

    #[test]
    fn tx_cache_serves_overlapping_requests_with_pattern_bytes_and_stays_bounded() {
        let p = Pattern::new(9);
        let mut c = TxCache::new();
        let mut from = 0u64;
        for (n, accepted) in [(100, 30), (100, 100), (64, 0), (64, 64), (100, 7)].repeat(50) {
            let got = c.bytes(&p, from, n, 128).to_vec();
            let want: Vec<u8> = (0..n as u64).map(|k| pattern_byte(9, from + k)).collect();
            assert_eq!(got, want);
            assert!(
                c.buf.len() <= 256 && c.valid <= c.buf.len(),
                "{}",
                c.buf.len()
            );
            from += accepted;
        }
    }
}
