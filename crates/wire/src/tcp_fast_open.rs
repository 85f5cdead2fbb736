//! The TCP Fast Open option (RFC 7413 §4.1.1): kind 34, or the experimental form that
//! predates its assignment — kind 254 with the 16-bit magic 0xF989 (RFC 6994 §3) — which
//! Linux still sends when the peer used it.
//!
//! Layout on the wire: `34, 2 + n, cookie[n]` or `254, 4 + n, 0xF9, 0x89, cookie[n]`, where
//! n = 0 asks for a cookie and 4 ≤ n ≤ 16, n even, carries one (RFC 7413 §4.1.1). Emitted
//! last, after the SACK blocks, and padded to a 4-byte boundary with NOPs (Linux's
//! `tcp_options_write` layout).

/// Option kind assigned to Fast Open (RFC 7413 §4.1.1).
pub const KIND_FAST_OPEN: u8 = 34;
/// The shared experimental option kind (RFC 6994).
pub const KIND_EXPERIMENTAL: u8 = 254;
/// The experiment identifier of Fast Open in a kind-254 option.
pub const FAST_OPEN_MAGIC: u16 = 0xF989;
/// Shortest cookie (RFC 7413 §4.1.1).
pub const COOKIE_LEN_MIN: usize = 4;
/// Longest cookie (RFC 7413 §4.1.1).
pub const COOKIE_LEN_MAX: usize = 16;

/// A Fast Open option: a cookie request (empty cookie) or a cookie.
///
/// Invariant: `len` is 0 or an even number in `COOKIE_LEN_MIN..=COOKIE_LEN_MAX`; bytes of
/// `cookie` past `len` are zero (so `==` compares the cookies).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FastOpenOption {
    cookie: [u8; COOKIE_LEN_MAX],
    len: u8,
    /// Sent (or to be sent) in the experimental kind-254 form.
    pub experimental: bool,
}

impl FastOpenOption {
    /// A cookie request (RFC 7413 §4.1.2: the option with an empty cookie).
    pub const fn request(experimental: bool) -> FastOpenOption {
        FastOpenOption {
            cookie: [0; COOKIE_LEN_MAX],
            len: 0,
            experimental,
        }
    }

    /// An option carrying `cookie`; `None` unless its length is 0 or an even number of bytes
    /// from 4 to 16.
    pub fn with_cookie(cookie: &[u8], experimental: bool) -> Option<FastOpenOption> {
        let n = cookie.len();
        if n != 0 && (!(COOKIE_LEN_MIN..=COOKIE_LEN_MAX).contains(&n) || n % 2 == 1) {
            return None;
        }
        let mut c = FastOpenOption::request(experimental);
        c.cookie[..n].copy_from_slice(cookie);
        c.len = n as u8;
        Some(c)
    }

    /// The cookie (empty for a request).
    pub fn cookie(&self) -> &[u8] {
        &self.cookie[..usize::from(self.len)]
    }

    /// True for a cookie request.
    pub fn is_request(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the option itself (kind, length, magic, cookie), before padding.
    pub fn option_len(&self) -> usize {
        let base = if self.experimental { 4 } else { 2 };
        base + usize::from(self.len)
    }

    /// Bytes the option takes in the header: `option_len` rounded up to a multiple of 4.
    pub fn padded_len(&self) -> usize {
        (self.option_len() + 3) & !3
    }

    /// Parses the body (the bytes after kind and length) of a kind-34 option, or of a
    /// kind-254 option (`experimental`, which must start with the magic). `None` for an
    /// experimental option of another experiment or a cookie of a length RFC 7413 does not
    /// allow (Linux's `tcp_parse_fastopen_option` ignores those too).
    pub fn parse(kind: u8, body: &[u8]) -> Option<FastOpenOption> {
        match kind {
            KIND_FAST_OPEN => FastOpenOption::with_cookie(body, false),
            KIND_EXPERIMENTAL => match body {
                [0xF9, 0x89, cookie @ ..] => FastOpenOption::with_cookie(cookie, true),
                _ => None,
            },
            _ => None,
        }
    }

    /// Writes the padded option into `out[..padded_len()]` (NOPs after the cookie); returns
    /// the bytes written, 0 when `out` is too short.
    pub fn write(&self, out: &mut [u8]) -> usize {
        let padded = self.padded_len();
        let Some(out) = out.get_mut(..padded) else {
            return 0;
        };
        let len = self.option_len() as u8;
        let head = if self.experimental {
            let [m0, m1] = FAST_OPEN_MAGIC.to_be_bytes();
            out[..4].copy_from_slice(&[KIND_EXPERIMENTAL, len, m0, m1]);
            4
        } else {
            out[..2].copy_from_slice(&[KIND_FAST_OPEN, len]);
            2
        };
        let end = head + usize::from(self.len);
        out[head..end].copy_from_slice(self.cookie());
        out[end..].fill(1);
        padded
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookie_lengths_outside_rfc7413_are_refused() {
        assert!(FastOpenOption::with_cookie(&[1, 2], false).is_none());
        assert!(FastOpenOption::with_cookie(&[1, 2, 3, 4, 5], false).is_none());
        assert!(FastOpenOption::with_cookie(&[0; 18], false).is_none());
        assert!(
            FastOpenOption::with_cookie(&[], false)
                .unwrap()
                .is_request()
        );
        assert_eq!(
            FastOpenOption::with_cookie(&[9; 16], true)
                .unwrap()
                .cookie(),
            &[9; 16]
        );
    }

    #[test]
    fn kind_34_and_experimental_forms_round_trip_with_nop_padding() {
        let c = FastOpenOption::with_cookie(&[0xab, 0xcd, 0x12, 0x34], false).unwrap();
        let mut buf = [0u8; 40];
        assert_eq!(c.write(&mut buf), 8);
        assert_eq!(&buf[..8], &[34, 6, 0xab, 0xcd, 0x12, 0x34, 1, 1]);
        assert_eq!(FastOpenOption::parse(34, &buf[2..6]), Some(c));
        let e = FastOpenOption::with_cookie(&[1, 2, 3, 4, 5, 6, 7, 8], true).unwrap();
        assert_eq!(e.write(&mut buf), 12);
        assert_eq!(&buf[..4], &[254, 12, 0xf9, 0x89]);
        assert_eq!(FastOpenOption::parse(254, &buf[2..12]), Some(e));
        // Another experiment's kind-254 option is not Fast Open.
        assert_eq!(FastOpenOption::parse(254, &[0x12, 0x34, 1, 2, 3, 4]), None);
        let r = FastOpenOption::request(false);
        assert_eq!(r.write(&mut buf), 4);
        assert_eq!(&buf[..4], &[34, 2, 1, 1]);
        assert_eq!(c.write(&mut buf[..7]), 0);
    }
}
