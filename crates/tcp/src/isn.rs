//! Initial sequence numbers (RFC 6528) and SYN cookies (RFC 4987 §3.6).
//!
//! Both use SipHash-2-4 (Aumasson & Bernstein), written here to keep the crate free of
//! dependencies. Addresses are passed as bytes (4 for IPv4, 16 for IPv6) so this crate needs
//! no IP types.

use wire::tcp::{SeqNumber, TcpFlags, TcpRepr};

use crate::config::{Config, NS_PER_S};

/// Streaming SipHash-2-4.
#[derive(Debug, Clone)]
pub struct SipHasher24 {
    v: [u64; 4],
    tail: u64,
    ntail: usize,
    length: usize,
}

#[inline]
fn sipround(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

impl SipHasher24 {
    /// A hasher keyed with the 128-bit key `(k0, k1)`.
    pub fn new(k0: u64, k1: u64) -> SipHasher24 {
        SipHasher24 {
            v: [
                k0 ^ 0x736f_6d65_7073_6575,
                k1 ^ 0x646f_7261_6e64_6f6d,
                k0 ^ 0x6c79_6765_6e65_7261,
                k1 ^ 0x7465_6462_7974_6573,
            ],
            tail: 0,
            ntail: 0,
            length: 0,
        }
    }

    fn compress(&mut self, m: u64) {
        self.v[3] ^= m;
        sipround(&mut self.v);
        sipround(&mut self.v);
        self.v[0] ^= m;
    }

    /// Absorbs bytes.
    pub fn write(&mut self, data: &[u8]) {
        self.length += data.len();
        for &b in data {
            self.tail |= u64::from(b) << (8 * self.ntail);
            self.ntail += 1;
            if self.ntail == 8 {
                let m = self.tail;
                self.compress(m);
                self.tail = 0;
                self.ntail = 0;
            }
        }
    }

    /// The 64-bit hash.
    pub fn finish(&self) -> u64 {
        let mut h = self.clone();
        let b = ((h.length as u64 & 0xff) << 56) | h.tail;
        h.compress(b);
        h.v[2] ^= 0xff;
        for _ in 0..4 {
            sipround(&mut h.v);
        }
        h.v[0] ^ h.v[1] ^ h.v[2] ^ h.v[3]
    }
}

/// One side of a connection's 4-tuple, as bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint<'a> {
    /// 4 bytes (IPv4) or 16 bytes (IPv6).
    pub addr: &'a [u8],
    pub port: u16,
}

fn hash_tuple(h: &mut SipHasher24, local: Endpoint<'_>, remote: Endpoint<'_>) {
    // Length-prefix the addresses so (a, bc) and (ab, c) hash differently.
    h.write(&[local.addr.len() as u8]);
    h.write(local.addr);
    h.write(&local.port.to_be_bytes());
    h.write(&[remote.addr.len() as u8]);
    h.write(remote.addr);
    h.write(&remote.port.to_be_bytes());
}

/// RFC 6528 §3: ISN = M + F(localip, localport, remoteip, remoteport, secretkey), with M a
/// timer ticking every 4 µs and F a keyed hash (SipHash-2-4 here).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsnGenerator {
    key: [u64; 2],
}

impl IsnGenerator {
    /// A generator keyed with 128 secret bits (the host draws them from its seeded RNG).
    pub fn new(key: [u64; 2]) -> IsnGenerator {
        IsnGenerator { key }
    }

    /// The initial sequence number for a connection at `now`.
    pub fn isn(&self, now: u64, local: Endpoint<'_>, remote: Endpoint<'_>) -> SeqNumber {
        let mut h = SipHasher24::new(self.key[0], self.key[1]);
        hash_tuple(&mut h, local, remote);
        let f = h.finish() as u32;
        // M: 4 µs ticks (RFC 6528 §3, after RFC 793's clock).
        let m = (now / 4_000) as u32;
        SeqNumber(m.wrapping_add(f))
    }
}

/// MSS values a SYN cookie can encode (3 bits): the largest not above the peer's is chosen.
pub const COOKIE_MSS_TABLE: [u16; 8] = [216, 536, 1220, 1360, 1400, 1440, 1452, 1460];

/// Length of one cookie time slot (the counter in the top 5 bits).
pub const COOKIE_SLOT_NS: u64 = 64 * NS_PER_S;

/// A SYN cookie that passed validation: what the stack needs to build the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ValidCookie {
    /// Our ISN (the cookie).
    pub iss: SeqNumber,
    /// The peer's ISN.
    pub irs: SeqNumber,
    /// The MSS recovered from the cookie.
    pub mss: u16,
    /// Options recovered from the timestamp echo (`None` when the handshake ran without
    /// timestamps, so only the MSS survived).
    pub options: Option<CookieOptions>,
}

/// Options a SYN cookie carries in the low bits of the SYN-ACK's TSval (the Linux scheme):
/// they come back in the final ACK's TSecr.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CookieOptions {
    /// The window scale the peer's SYN offered, if any.
    pub peer_wscale: Option<u8>,
    /// The peer's SYN carried SACK-permitted (and we enable SACK).
    pub sack: bool,
}

/// Low TSval bits used for cookie options: 4 bits of window scale (15 = none), 1 bit SACK,
/// 1 marker bit.
const COOKIE_TS_BITS: u32 = 6;
const COOKIE_TS_MASK: u32 = (1 << COOKIE_TS_BITS) - 1;
const COOKIE_TS_MARKER: u32 = 1 << 5;
const COOKIE_TS_SACK: u32 = 1 << 4;
const COOKIE_TS_NO_WSCALE: u32 = 0xf;

impl CookieOptions {
    fn encode(self) -> u32 {
        let ws = self
            .peer_wscale
            .map_or(COOKIE_TS_NO_WSCALE, |w| u32::from(w.min(14)));
        COOKIE_TS_MARKER | if self.sack { COOKIE_TS_SACK } else { 0 } | ws
    }

    fn decode(bits: u32) -> Option<CookieOptions> {
        if bits & COOKIE_TS_MARKER == 0 {
            return None;
        }
        let ws = bits & 0xf;
        Some(CookieOptions {
            peer_wscale: (ws != COOKIE_TS_NO_WSCALE).then(|| ws.min(14) as u8),
            sack: bits & COOKIE_TS_SACK != 0,
        })
    }
}

/// SYN cookies (RFC 4987 §3.6): when the accept backlog is full, the listener answers a SYN
/// with a SYN-ACK whose ISN encodes what it would have stored, and keeps nothing.
///
/// Layout of the 32-bit cookie: `t mod 32` (5 bits, `t` = 64 s slots) | MSS index (3 bits) |
/// 24 bits of SipHash over (key, 4-tuple, peer ISN, t, MSS index). A cookie is valid in its own
/// slot and the next one (64–128 s). Options other than MSS are not kept: a connection built
/// from a cookie runs without window scaling, timestamps or SACK.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynCookies {
    key: [u64; 2],
}

impl SynCookies {
    /// Keyed with 128 secret bits.
    pub fn new(key: [u64; 2]) -> SynCookies {
        SynCookies { key }
    }

    fn mac(
        &self,
        local: Endpoint<'_>,
        remote: Endpoint<'_>,
        irs: SeqNumber,
        t: u32,
        mss_idx: u32,
    ) -> u32 {
        let mut h = SipHasher24::new(self.key[0], self.key[1]);
        hash_tuple(&mut h, local, remote);
        h.write(&irs.0.to_be_bytes());
        h.write(&t.to_be_bytes());
        h.write(&[mss_idx as u8]);
        (h.finish() as u32) & 0x00ff_ffff
    }

    /// The cookie ISN for a SYN carrying `irs` and advertising `peer_mss` (if any).
    pub fn generate(
        &self,
        now: u64,
        local: Endpoint<'_>,
        remote: Endpoint<'_>,
        irs: SeqNumber,
        peer_mss: Option<u16>,
    ) -> SeqNumber {
        let mss = peer_mss.unwrap_or(536);
        let idx = COOKIE_MSS_TABLE
            .iter()
            .rposition(|&m| m <= mss)
            .unwrap_or(0) as u32;
        let t = (now / COOKIE_SLOT_NS) as u32;
        let mac = self.mac(local, remote, irs, t, idx);
        SeqNumber(((t & 0x1f) << 27) | (idx << 24) | mac)
    }

    /// Checks the ACK completing a cookie handshake. `None` when forged or expired.
    pub fn validate(
        &self,
        now: u64,
        local: Endpoint<'_>,
        remote: Endpoint<'_>,
        ack_seg: &TcpRepr<'_>,
    ) -> Option<ValidCookie> {
        if !ack_seg.flags.contains(TcpFlags::ACK)
            || ack_seg.flags.intersects(TcpFlags::SYN | TcpFlags::RST)
        {
            return None;
        }
        let cookie = (ack_seg.ack_number - 1).0;
        let irs = ack_seg.seq_number - 1;
        let idx = (cookie >> 24) & 0x7;
        let t_now = (now / COOKIE_SLOT_NS) as u32;
        for age in 0..2u32 {
            let t = t_now.wrapping_sub(age);
            if (t & 0x1f) != cookie >> 27 {
                continue;
            }
            if self.mac(local, remote, irs, t, idx) == cookie & 0x00ff_ffff {
                let mss = COOKIE_MSS_TABLE.get(idx as usize).copied().unwrap_or(536);
                return Some(ValidCookie {
                    iss: SeqNumber(cookie),
                    irs,
                    mss,
                    options: ack_seg
                        .timestamp
                        .and_then(|ts| CookieOptions::decode(ts.tsecr & COOKIE_TS_MASK)),
                });
            }
        }
        None
    }

    /// The SYN-ACK answering `syn` with cookie `iss`. When the SYN carries timestamps (and
    /// `config` enables them), window scale and SACK-permitted are offered too and remembered
    /// in the low bits of our TSval, which the peer echoes (the Linux scheme); otherwise only
    /// the MSS survives. `ts_offset` must be the one later passed to
    /// [`crate::Connection::from_syn_cookie`] so the timestamp clock is continuous.
    pub fn syn_ack(
        config: &Config,
        syn: &TcpRepr<'_>,
        iss: SeqNumber,
        now: u64,
        ts_offset: u32,
    ) -> TcpRepr<'static> {
        let config = config.validated();
        let mut r = TcpRepr {
            max_seg_size: Some(config.mss_bytes),
            ..TcpRepr::bare(
                syn.dst_port,
                syn.src_port,
                iss,
                syn.seq_number + 1,
                TcpFlags::SYN | TcpFlags::ACK,
                config.recv_buffer_bytes.min(0xffff) as u16,
            )
        };
        if let (Some(peer_ts), true) = (syn.timestamp, config.timestamps) {
            let opts = CookieOptions {
                peer_wscale: if config.window_scale {
                    syn.window_scale
                } else {
                    None
                },
                sack: syn.sack_permitted && config.sack,
            };
            let clock = ((now / crate::config::NS_PER_MS) as u32).wrapping_add(ts_offset);
            // Keep the encoded TSval at or below the clock so later segments never go back in
            // time for the peer's PAWS.
            let mut tsval = (clock & !COOKIE_TS_MASK) | opts.encode();
            if (tsval.wrapping_sub(clock) as i32) > 0 {
                tsval = tsval.wrapping_sub(1 << COOKIE_TS_BITS);
            }
            r.timestamp = Some(wire::tcp::TcpTimestamp {
                tsval,
                tsecr: peer_ts.tsval,
            });
            if opts.peer_wscale.is_some() {
                r.window_scale = Some(crate::connection::wscale_for(config.recv_buffer_bytes));
            }
            r.sack_permitted = opts.sack;
        }
        r
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn paper_key() -> (u64, u64) {
        let k: Vec<u8> = (0u8..16).collect();
        let k0 = u64::from_le_bytes(k[..8].try_into().unwrap());
        let k1 = u64::from_le_bytes(k[8..].try_into().unwrap());
        (k0, k1)
    }

    #[test]
    fn siphash_matches_reference_vectors() {
        let (k0, k1) = paper_key();
        // Appendix A of the SipHash paper: 15-byte message 00..0e.
        let msg: Vec<u8> = (0u8..15).collect();
        let mut h = SipHasher24::new(k0, k1);
        h.write(&msg);
        assert_eq!(h.finish(), 0xa129_ca61_49be_45e5);
        // Reference vector for the empty message.
        assert_eq!(SipHasher24::new(k0, k1).finish(), 0x726f_db47_dd0e_0e31);
    }

    #[test]
    fn siphash_streaming_equals_one_shot() {
        let (k0, k1) = paper_key();
        let msg: Vec<u8> = (0u8..40).collect();
        let mut a = SipHasher24::new(k0, k1);
        a.write(&msg);
        let mut b = SipHasher24::new(k0, k1);
        b.write(&msg[..3]);
        b.write(&msg[3..17]);
        b.write(&msg[17..]);
        assert_eq!(a.finish(), b.finish());
    }

    const L: Endpoint<'static> = Endpoint {
        addr: &[10, 0, 0, 1],
        port: 80,
    };
    const R: Endpoint<'static> = Endpoint {
        addr: &[10, 0, 0, 2],
        port: 40000,
    };

    #[test]
    fn isn_advances_with_the_4us_clock_and_differs_per_tuple() {
        let g = IsnGenerator::new([1, 2]);
        let a = g.isn(0, L, R);
        let b = g.isn(4_000 * 10, L, R);
        assert_eq!(b.diff(a), 10);
        let other = Endpoint { port: 40001, ..R };
        assert_ne!(g.isn(0, L, other), a);
        assert_ne!(IsnGenerator::new([3, 4]).isn(0, L, R), a);
    }

    fn ack_for(iss: SeqNumber, irs: SeqNumber) -> TcpRepr<'static> {
        TcpRepr::bare(R.port, L.port, irs + 1, iss + 1, TcpFlags::ACK, 1000)
    }

    #[test]
    fn syn_cookie_round_trips_mss_within_two_slots() {
        let c = SynCookies::new([7, 9]);
        let irs = SeqNumber(123_456);
        let now = 1_000 * NS_PER_S;
        let iss = c.generate(now, L, R, irs, Some(1400));
        let v = c
            .validate(now + COOKIE_SLOT_NS, L, R, &ack_for(iss, irs))
            .unwrap();
        assert_eq!(
            v,
            ValidCookie {
                iss,
                irs,
                mss: 1400,
                options: None
            }
        );
        // Expired after two slots.
        assert_eq!(
            c.validate(now + 3 * COOKIE_SLOT_NS, L, R, &ack_for(iss, irs)),
            None
        );
    }

    #[test]
    fn cookie_options_round_trip_through_the_timestamp_echo() {
        let c = SynCookies::new([7, 9]);
        let config = Config::default();
        let mut syn = ack_for(SeqNumber(0), SeqNumber(99));
        syn.flags = TcpFlags::SYN;
        syn.seq_number = SeqNumber(99);
        syn.window_scale = Some(7);
        syn.sack_permitted = true;
        syn.timestamp = Some(wire::tcp::TcpTimestamp {
            tsval: 5555,
            tsecr: 0,
        });
        let now = 123_456 * crate::config::NS_PER_MS;
        let iss = c.generate(now, L, R, syn.seq_number, Some(1460));
        let synack = SynCookies::syn_ack(&config, &syn, iss, now, 1000);
        let ts = synack.timestamp.unwrap();
        assert_eq!(ts.tsecr, 5555);
        let clock = 123_456 + 1000;
        assert!(
            ts.tsval <= clock && clock - ts.tsval < 64,
            "TSval stays at or below the clock"
        );
        assert_eq!(synack.window_scale, Some(3));
        assert!(synack.sack_permitted);
        let mut ack = ack_for(iss, SeqNumber(99));
        ack.timestamp = Some(wire::tcp::TcpTimestamp {
            tsval: 5600,
            tsecr: ts.tsval,
        });
        let v = c.validate(now, L, R, &ack).unwrap();
        assert_eq!(
            v.options,
            Some(CookieOptions {
                peer_wscale: Some(7),
                sack: true
            })
        );
    }

    #[test]
    fn cookie_without_timestamps_keeps_only_the_mss() {
        let c = SynCookies::new([7, 9]);
        let mut syn = ack_for(SeqNumber(0), SeqNumber(99));
        syn.flags = TcpFlags::SYN;
        syn.window_scale = Some(7);
        syn.sack_permitted = true;
        let iss = c.generate(0, L, R, SeqNumber(99), Some(1460));
        let synack = SynCookies::syn_ack(&Config::default(), &syn, iss, 0, 0);
        assert_eq!(
            (synack.window_scale, synack.sack_permitted, synack.timestamp),
            (None, false, None)
        );
    }

    #[test]
    fn forged_syn_cookie_is_rejected() {
        let c = SynCookies::new([7, 9]);
        let irs = SeqNumber(5);
        let iss = c.generate(0, L, R, irs, Some(1460));
        assert_eq!(c.validate(0, L, R, &ack_for(iss + 1, irs)), None);
        assert_eq!(c.validate(0, L, R, &ack_for(iss, irs + 1)), None);
        let other = Endpoint { port: 1, ..R };
        assert_eq!(c.validate(0, L, other, &ack_for(iss, irs)), None);
    }
}
