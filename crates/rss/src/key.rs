//! The 40-byte RSS secret key.
//!
//! Microsoft's RSS specification ("RSS Hashing Functions", "Verifying the RSS Hash
//! Calculation") defines a 40-byte key: enough for the longest input it hashes, a TCP/IPv6
//! 4-tuple of 36 bytes, plus the 32-bit window the last input bit needs (36·8 + 32 = 320 bits).

use core::fmt;

/// Key length in bytes (320 bits). Invariant of [`RssKey`]: always exactly this long.
pub const KEY_LEN_BYTES: usize = 40;

/// The default key of Microsoft's verification suite, also the default of many NIC drivers.
const DEFAULT_KEY: [u8; KEY_LEN_BYTES] = [
    0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3, 0x8f, 0xb0,
    0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3, 0x80, 0x30, 0xf2, 0x0c,
    0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
];

/// A Toeplitz secret key: 40 bytes, used most-significant bit first.
///
/// `Default` is Microsoft's verification key
/// (`6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct RssKey {
    bytes: [u8; KEY_LEN_BYTES],
}

impl Default for RssKey {
    fn default() -> Self {
        Self { bytes: DEFAULT_KEY }
    }
}

/// Why a textual key was rejected by [`RssKey::from_hex`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyError {
    /// A character other than a hex digit or a `:` separator.
    BadCharacter,
    /// Not exactly 80 hex digits (40 bytes).
    BadLength,
    /// A `:` that does not sit between two complete bytes (e.g. `6:d5a…` or a trailing `:`).
    BadSeparator,
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self {
            KeyError::BadCharacter => "RSS key: character is neither a hex digit nor ':'",
            KeyError::BadLength => "RSS key: expected exactly 80 hex digits (40 bytes)",
            KeyError::BadSeparator => "RSS key: ':' must separate whole bytes",
        };
        f.write_str(what)
    }
}

impl core::error::Error for KeyError {}

impl RssKey {
    /// A key from raw bytes.
    pub const fn new(bytes: [u8; KEY_LEN_BYTES]) -> Self {
        Self { bytes }
    }

    /// The symmetric key `0x6d5a` repeated 20 times (Woo & Park, "Scalable TCP Session
    /// Monitoring with Symmetric Receive-side Scaling", 2012).
    ///
    /// Its 32-bit windows repeat with a period of 16 bits, so the hash of any input whose
    /// fields are whole 16-bit words depends only on the XOR of those words: swapping source
    /// and destination leaves it unchanged. The price: at most 65,536 distinct hash values
    /// (see [`crate::SymmetricMode::RepeatedKey`]).
    pub const fn symmetric() -> Self {
        Self::repeated_u16(0x6d5a)
    }

    /// A key made of one 16-bit word repeated 20 times (a 16-bit-periodic, symmetric key).
    pub const fn repeated_u16(word: u16) -> Self {
        let [hi, lo] = word.to_be_bytes();
        let mut bytes = [0u8; KEY_LEN_BYTES];
        let mut i = 0;
        while i < KEY_LEN_BYTES {
            bytes[i] = if i % 2 == 0 { hi } else { lo };
            i += 1;
        }
        Self { bytes }
    }

    /// The key bytes, most significant first.
    pub const fn as_bytes(&self) -> &[u8; KEY_LEN_BYTES] {
        &self.bytes
    }

    /// Whether the key is 16-bit periodic (every byte equals the one two places before it),
    /// which makes the Toeplitz hash symmetric for address/port swaps.
    pub fn is_16bit_periodic(&self) -> bool {
        self.bytes.windows(3).all(|w| w.first() == w.get(2))
    }

    /// Parses 80 hex digits, optionally with `:` between bytes (the `ethtool -x` format).
    ///
    /// Accepts upper- and lower-case digits. Separators are all-or-nothing per position: a `:`
    /// may only follow a complete byte and must be followed by another byte.
    pub fn from_hex(text: &str) -> Result<Self, KeyError> {
        let mut bytes = [0u8; KEY_LEN_BYTES];
        let mut count_nibbles: usize = 0;
        let mut last_was_separator = false;
        for c in text.trim().chars() {
            if c == ':' {
                if count_nibbles == 0 || count_nibbles % 2 != 0 || last_was_separator {
                    return Err(KeyError::BadSeparator);
                }
                last_was_separator = true;
                continue;
            }
            let nibble = c.to_digit(16).ok_or(KeyError::BadCharacter)?;
            last_was_separator = false;
            let slot = bytes
                .get_mut(count_nibbles / 2)
                .ok_or(KeyError::BadLength)?;
            // `to_digit(16)` returns < 16, so the cast is lossless.
            *slot = (*slot << 4) | nibble as u8;
            count_nibbles += 1;
        }
        if last_was_separator {
            return Err(KeyError::BadSeparator);
        }
        if count_nibbles != 2 * KEY_LEN_BYTES {
            return Err(KeyError::BadLength);
        }
        Ok(Self { bytes })
    }

    /// The 32-bit window of the key starting at bit `offset_bits` (bit 0 = MSB of byte 0).
    ///
    /// Bits past the end of the key read as zero, so inputs longer than 36 bytes still hash
    /// deterministically (the reference and the fast implementation agree on this).
    pub fn window_u32(&self, offset_bits: usize) -> u32 {
        let byte = offset_bits / 8;
        let shift = offset_bits % 8;
        // Take 5 bytes (40 bits) starting at `byte`, zero past the end, and slide.
        let mut wide: u64 = 0;
        for k in 0..5 {
            let b = self.bytes.get(byte + k).copied().unwrap_or(0);
            wide = (wide << 8) | u64::from(b);
        }
        // `wide` holds 40 bits; the wanted window is its bits [shift, shift + 32).
        ((wide >> (8 - shift)) & 0xffff_ffff) as u32
    }
}

impl fmt::Display for RssKey {
    /// Lower-case hex with `:` between bytes, as `ethtool -x` prints it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, b) in self.bytes.iter().enumerate() {
            if i > 0 {
                f.write_str(":")?;
            }
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for RssKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RssKey({self})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEFAULT_HEX: &str =
        "6d5a56da255b0ec24167253d43a38fb0d0ca2bcbae7b30b477cb2da38030f20c6a42b73bbeac01fa";

    #[test]
    fn default_key_is_microsoft_verification_key() {
        assert_eq!(RssKey::from_hex(DEFAULT_HEX), Ok(RssKey::default()));
    }

    #[test]
    fn display_round_trips_through_from_hex_with_separators() {
        let text = RssKey::default().to_string();
        assert_eq!(text.len(), 80 + 39);
        assert!(text.starts_with("6d:5a:56:da"));
        assert_eq!(RssKey::from_hex(&text), Ok(RssKey::default()));
    }

    #[test]
    fn from_hex_accepts_upper_case() {
        assert_eq!(
            RssKey::from_hex(&DEFAULT_HEX.to_uppercase()),
            Ok(RssKey::default())
        );
    }

    #[test]
    fn from_hex_rejects_bad_input_with_typed_errors() {
        assert_eq!(RssKey::from_hex(""), Err(KeyError::BadLength));
        assert_eq!(
            RssKey::from_hex(&DEFAULT_HEX[..78]),
            Err(KeyError::BadLength)
        );
        assert_eq!(
            RssKey::from_hex(&format!("{DEFAULT_HEX}00")),
            Err(KeyError::BadLength)
        );
        assert_eq!(
            RssKey::from_hex(&DEFAULT_HEX.replacen('6', "g", 1)),
            Err(KeyError::BadCharacter)
        );
        assert_eq!(
            RssKey::from_hex(&format!("6:{}", &DEFAULT_HEX[1..])),
            Err(KeyError::BadSeparator)
        );
        assert_eq!(
            RssKey::from_hex(&format!("{DEFAULT_HEX}:")),
            Err(KeyError::BadSeparator)
        );
        assert_eq!(
            RssKey::from_hex(&format!("6d::{}", &DEFAULT_HEX[2..])),
            Err(KeyError::BadSeparator)
        );
    }

    #[test]
    fn symmetric_key_is_6d5a_repeated_and_periodic() {
        let key = RssKey::symmetric();
        assert!(key.as_bytes().chunks(2).all(|w| w == [0x6d, 0x5a]));
        assert!(key.is_16bit_periodic());
        assert!(!RssKey::default().is_16bit_periodic());
    }

    #[test]
    fn key_window_slides_bit_by_bit_and_zero_fills_past_the_end() {
        let key = RssKey::default();
        assert_eq!(key.window_u32(0), 0x6d5a_56da);
        assert_eq!(key.window_u32(8), 0x5a56_da25);
        assert_eq!(key.window_u32(3), (0x6d5a_56da_u32 << 3) | (0x25 >> 5));
        assert_eq!(key.window_u32(288), 0xbeac_01fa);
        assert_eq!(key.window_u32(296), 0xac01_fa00);
        assert_eq!(key.window_u32(320), 0);
        assert_eq!(key.window_u32(10_000), 0);
    }
}
