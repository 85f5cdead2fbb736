//! TCP Fast Open (RFC 7413): the settings, the server's cookies and its decision on a SYN.
//!
//! A cookie is a MAC of the client's address (RFC 7413 §4.1.2): here SipHash-2-4 keyed with
//! a 128-bit server secret over the SYN's source then destination address (4 + 4 or 16 + 16
//! bytes), the 64-bit result in little-endian byte order — the cookie Linux computes
//! (`__tcp_fastopen_cookie_gen_cipher`), so a client that learned a cookie from Linux and a
//! script written against Linux see the same bytes. Two keys are kept: the primary, which
//! makes new cookies, and a backup still accepted, so the secret can be rotated without
//! turning every client's cookie away at once ([`FastOpenKeys::rotate`]).
//!
//! The server's decision on a SYN ([`server_decision`]) follows RFC 7413 §4.2.2 and Linux's
//! `tcp_try_fastopen` where the RFC leaves a choice:
//! - no Fast Open option, no data: an ordinary SYN;
//! - a cookie request (empty option): the SYN-ACK carries a cookie, data in the SYN is
//!   dropped (acknowledged later by the ordinary path);
//! - a valid cookie: the data is accepted, the connection may be accepted by the
//!   application and send before the handshake completes; a cookie made with the backup key
//!   also draws the primary key's cookie in the SYN-ACK;
//! - an invalid cookie: data dropped, the SYN-ACK carries a valid cookie;
//! - with [`FastOpenConfig::server_cookie_not_required`], a SYN with data or with the
//!   option is accepted without any cookie;
//! - when the listener is not a Fast Open listener, or its queue of Fast Open children still
//!   in SYN-RECEIVED is full, the SYN is an ordinary one and no cookie is sent.

use core::net::IpAddr;

use wire::tcp::FastOpenOption;

use crate::isn::SipHasher24;

/// Length of the cookies this server makes (Linux's `TCP_FASTOPEN_COOKIE_SIZE`).
pub const COOKIE_LEN: usize = 8;

/// Option space a SYN with data leaves free beyond the MSS (Linux `MAX_TCP_OPTION_SPACE`):
/// the data is sized for the largest options a SYN may carry, so that a middlebox adding
/// options does not push it over the path MTU.
pub const SYN_DATA_OPTION_RESERVE_BYTES: u16 = 40;

/// Fast Open settings of a socket (Linux's `net.ipv4.tcp_fastopen` bits and the
/// `TCP_FASTOPEN` / `TCP_FASTOPEN_CONNECT` socket options). All off by default: RFC 7413 is
/// experimental and Fast Open needs an application that tolerates a replayed SYN's data
/// (RFC 7413 §6.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FastOpenConfig {
    /// Client side allowed (`tcp_fastopen` bit 0x1): `MSG_FASTOPEN` and
    /// `TCP_FASTOPEN_CONNECT` send data in the SYN.
    pub client: bool,
    /// Server side allowed (bit 0x2): a listener with a queue ([`Self::server_queue_max`])
    /// accepts data in SYN.
    pub server: bool,
    /// Client sends data in the SYN without a cookie and without the option (bit 0x4).
    pub client_no_cookie: bool,
    /// Server accepts data in the SYN without a cookie (bit 0x200).
    pub server_cookie_not_required: bool,
    /// Every listener is a Fast Open listener with its backlog as queue, without
    /// `TCP_FASTOPEN` (bit 0x400).
    pub server_without_sockopt: bool,
    /// The listener's `TCP_FASTOPEN` value: how many Fast Open children may be in
    /// SYN-RECEIVED at once (RFC 7413 §5.1 bounds them against SYN floods). 0: the listener
    /// does not answer Fast Open.
    pub server_queue_max: u32,
}

impl FastOpenConfig {
    /// The settings Linux's `net.ipv4.tcp_fastopen` value selects (the bits above; others
    /// ignored). `server_queue_max` is kept: it belongs to the listener.
    pub fn with_sysctl_bits(self, bits: u32) -> FastOpenConfig {
        FastOpenConfig {
            client: bits & 0x1 != 0,
            server: bits & 0x2 != 0,
            client_no_cookie: bits & 0x4 != 0,
            server_cookie_not_required: bits & 0x200 != 0,
            server_without_sockopt: bits & 0x400 != 0,
            server_queue_max: self.server_queue_max,
        }
    }

    /// The queue bound a listener with `backlog` runs with: its `TCP_FASTOPEN` value, else
    /// the backlog when every listener is a Fast Open listener; 0 when the server side is
    /// off.
    pub fn listener_queue_max(&self, backlog: usize) -> u32 {
        if !self.server {
            0
        } else if self.server_queue_max > 0 {
            self.server_queue_max
        } else if self.server_without_sockopt {
            u32::try_from(backlog).unwrap_or(u32::MAX)
        } else {
            0
        }
    }
}

/// A 128-bit server secret.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct FastOpenKey {
    k0: u64,
    k1: u64,
}

impl core::fmt::Debug for FastOpenKey {
    // A secret: never printed.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("FastOpenKey(..)")
    }
}

impl FastOpenKey {
    /// A key from 16 bytes (the `TCP_FASTOPEN_KEY` socket option's format).
    pub fn from_bytes(b: [u8; 16]) -> FastOpenKey {
        let mut lo = [0u8; 8];
        let mut hi = [0u8; 8];
        lo.copy_from_slice(&b[..8]);
        hi.copy_from_slice(&b[8..]);
        FastOpenKey {
            k0: u64::from_le_bytes(lo),
            k1: u64::from_le_bytes(hi),
        }
    }

    /// A key from the four 32-bit words of Linux's `tcp_fastopen_key` sysctl
    /// (`a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4`), each stored little-endian.
    pub fn from_words(w: [u32; 4]) -> FastOpenKey {
        let mut b = [0u8; 16];
        for (chunk, word) in b.chunks_exact_mut(4).zip(w) {
            chunk.copy_from_slice(&word.to_le_bytes());
        }
        FastOpenKey::from_bytes(b)
    }

    /// Parses the sysctl's text form, `xxxxxxxx-xxxxxxxx-xxxxxxxx-xxxxxxxx` (hex words).
    pub fn parse_words(text: &str) -> Option<FastOpenKey> {
        let mut w = [0u32; 4];
        let mut parts = text.trim().split('-');
        for slot in &mut w {
            *slot = u32::from_str_radix(parts.next()?, 16).ok()?;
        }
        parts.next().is_none().then(|| FastOpenKey::from_words(w))
    }

    /// The cookie of a client at `client` talking to this server at `server`.
    pub fn cookie(&self, client: IpAddr, server: IpAddr) -> [u8; COOKIE_LEN] {
        let mut h = SipHasher24::new(self.k0, self.k1);
        for a in [client, server] {
            match a {
                IpAddr::V4(v4) => h.write(&v4.octets()),
                IpAddr::V6(v6) => h.write(&v6.octets()),
            }
        }
        h.finish().to_le_bytes()
    }
}

/// The primary key (makes cookies) and an optional backup (still accepted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastOpenKeys {
    pub primary: FastOpenKey,
    pub backup: Option<FastOpenKey>,
}

/// Which key a cookie was made with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CookieCheck {
    Primary,
    Backup,
    Invalid,
}

impl FastOpenKeys {
    /// One key, no backup.
    pub fn new(primary: FastOpenKey) -> FastOpenKeys {
        FastOpenKeys {
            primary,
            backup: None,
        }
    }

    /// Key rotation: `next` makes cookies from now on, the current primary is still
    /// accepted (as the backup), the old backup no longer.
    pub fn rotate(&mut self, next: FastOpenKey) {
        self.backup = Some(self.primary);
        self.primary = next;
    }

    /// Checks a cookie a client presented (constant-time comparison: a wrong guess must not
    /// tell how many leading bytes were right).
    pub fn check(&self, cookie: &[u8], client: IpAddr, server: IpAddr) -> CookieCheck {
        let same = |key: &FastOpenKey| {
            let good = key.cookie(client, server);
            cookie.len() == COOKIE_LEN
                && good
                    .iter()
                    .zip(cookie)
                    .fold(0u8, |acc, (a, b)| acc | (a ^ b))
                    == 0
        };
        if same(&self.primary) {
            CookieCheck::Primary
        } else if self.backup.as_ref().is_some_and(same) {
            CookieCheck::Backup
        } else {
            CookieCheck::Invalid
        }
    }
}

/// What a listener does with a SYN ([`server_decision`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SynDecision {
    /// Accept the SYN's data and let the connection be accepted (and send) before the
    /// handshake completes.
    pub accept_data: bool,
    /// The Fast Open option for the SYN-ACK (a cookie for the client to use next time).
    pub syn_ack_option: Option<FastOpenOption>,
}

impl SynDecision {
    /// An ordinary SYN.
    pub const ORDINARY: SynDecision = SynDecision {
        accept_data: false,
        syn_ack_option: None,
    };
}

/// The listener's decision on a SYN with `syn_option` (its Fast Open option) and
/// `syn_data_bytes` of data, from `client` to `server`. `queue_has_room`: the listener is a
/// Fast Open listener and fewer than its queue bound of Fast Open children are in
/// SYN-RECEIVED.
pub fn server_decision(
    cfg: &FastOpenConfig,
    keys: &FastOpenKeys,
    queue_has_room: bool,
    syn_option: Option<&FastOpenOption>,
    syn_data_bytes: usize,
    client: IpAddr,
    server: IpAddr,
) -> SynDecision {
    if !cfg.server || !queue_has_room || (syn_data_bytes == 0 && syn_option.is_none()) {
        return SynDecision::ORDINARY;
    }
    if cfg.server_cookie_not_required {
        return SynDecision {
            accept_data: true,
            syn_ack_option: None,
        };
    }
    let Some(opt) = syn_option else {
        // Data without the option: an ordinary SYN (the data waits for its retransmission).
        return SynDecision::ORDINARY;
    };
    let fresh = FastOpenOption::with_cookie(&keys.primary.cookie(client, server), opt.experimental);
    if opt.is_request() {
        return SynDecision {
            accept_data: false,
            syn_ack_option: fresh,
        };
    }
    match keys.check(opt.cookie(), client, server) {
        CookieCheck::Primary => SynDecision {
            accept_data: true,
            syn_ack_option: None,
        },
        CookieCheck::Backup => SynDecision {
            accept_data: true,
            syn_ack_option: fresh,
        },
        CookieCheck::Invalid => SynDecision {
            accept_data: false,
            syn_ack_option: fresh,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;

    const CLIENT: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 0, 2, 1));
    const SERVER: IpAddr = IpAddr::V4(Ipv4Addr::new(192, 168, 0, 1));

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02x}")).collect()
    }

    fn server_on() -> FastOpenConfig {
        FastOpenConfig::default().with_sysctl_bits(0x3)
    }

    #[test]
    fn cookies_equal_linux_for_its_documented_keys() {
        // Known answers: the cookies Linux's own packetdrill scripts expect for these keys
        // and addresses (IPv4 and IPv6, sysctl word form and socket-option byte form).
        let k = FastOpenKey::parse_words("a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4").unwrap();
        assert_eq!(hex(&k.cookie(CLIENT, SERVER)), "3021b9d889017eeb");
        let c6: IpAddr = "fd3d:fa7b:d17d::1".parse().unwrap();
        let s6: IpAddr = "fd3d:a0b:17d6::1".parse().unwrap();
        assert_eq!(hex(&k.cookie(c6, s6)), "c1d1e9742a47a9bc");
        let zero = FastOpenKey::from_words([0; 4]);
        assert_eq!(hex(&zero.cookie(CLIENT, SERVER)), "b7c12350a90dc8f5");
        let bytes = [
            0xf7, 0x63, 0xbf, 0xa0, 0x81, 0x3d, 0x80, 0xed, 0x30, 0x1d, 0x64, 0xcd, 0x90, 0x4a,
            0xbc, 0xce,
        ];
        let client: IpAddr = "10.248.0.2".parse().unwrap();
        let server: IpAddr = "192.168.0.2".parse().unwrap();
        assert_eq!(
            hex(&FastOpenKey::from_bytes(bytes).cookie(client, server)),
            "00abaaabe8e954c2"
        );
        assert_eq!(
            FastOpenKey::parse_words("a0bf63f7-ed803d81-cd641d30-cebc4a90"),
            Some(FastOpenKey::from_bytes(bytes))
        );
    }

    #[test]
    fn malformed_sysctl_keys_are_refused() {
        assert!(FastOpenKey::parse_words("a1a1a1a1-b2b2b2b2-c3c3c3c3").is_none());
        assert!(FastOpenKey::parse_words("a1a1a1a1-b2b2b2b2-c3c3c3c3-d4d4d4d4-1").is_none());
        assert!(FastOpenKey::parse_words("zz-0-0-0").is_none());
    }

    #[test]
    fn cookie_depends_on_the_client_address() {
        let k = FastOpenKey::from_words([1, 2, 3, 4]);
        let other: IpAddr = "192.0.2.2".parse().unwrap();
        assert_ne!(k.cookie(CLIENT, SERVER), k.cookie(other, SERVER));
    }

    #[test]
    fn rotation_keeps_the_old_key_valid_as_backup_and_then_drops_it() {
        let (a, b, c) = (
            FastOpenKey::from_words([1; 4]),
            FastOpenKey::from_words([2; 4]),
            FastOpenKey::from_words([3; 4]),
        );
        let mut keys = FastOpenKeys::new(a);
        let old = a.cookie(CLIENT, SERVER);
        assert_eq!(keys.check(&old, CLIENT, SERVER), CookieCheck::Primary);
        keys.rotate(b);
        assert_eq!(keys.check(&old, CLIENT, SERVER), CookieCheck::Backup);
        keys.rotate(c);
        assert_eq!(keys.check(&old, CLIENT, SERVER), CookieCheck::Invalid);
        assert_eq!(keys.check(&old[..4], CLIENT, SERVER), CookieCheck::Invalid);
    }

    #[test]
    fn a_cookie_request_gets_a_cookie_of_the_same_form_and_no_data_is_accepted() {
        let keys = FastOpenKeys::new(FastOpenKey::from_words([7; 4]));
        for exp in [false, true] {
            let req = FastOpenOption::request(exp);
            let d = server_decision(&server_on(), &keys, true, Some(&req), 10, CLIENT, SERVER);
            assert!(!d.accept_data);
            let opt = d.syn_ack_option.unwrap();
            assert_eq!(opt.experimental, exp);
            assert_eq!(opt.cookie(), &keys.primary.cookie(CLIENT, SERVER));
        }
    }

    #[test]
    fn a_valid_cookie_accepts_the_data_and_an_invalid_one_draws_a_fresh_cookie() {
        let keys = FastOpenKeys::new(FastOpenKey::from_words([7; 4]));
        let good = keys.primary.cookie(CLIENT, SERVER);
        let opt = FastOpenOption::with_cookie(&good, false).unwrap();
        let d = server_decision(&server_on(), &keys, true, Some(&opt), 10, CLIENT, SERVER);
        assert_eq!(
            d,
            SynDecision {
                accept_data: true,
                syn_ack_option: None
            }
        );
        // A valid cookie with no data is still a Fast Open connection (RFC 7413 §4.2.2:
        // the server may send data in SYN-RECEIVED).
        let d = server_decision(&server_on(), &keys, true, Some(&opt), 0, CLIENT, SERVER);
        assert!(d.accept_data);
        let bad = FastOpenOption::with_cookie(&[0xaa; 8], false).unwrap();
        let d = server_decision(&server_on(), &keys, true, Some(&bad), 10, CLIENT, SERVER);
        assert!(!d.accept_data);
        assert_eq!(d.syn_ack_option, Some(opt));
    }

    #[test]
    fn a_backup_key_cookie_is_accepted_and_replaced() {
        let mut keys = FastOpenKeys::new(FastOpenKey::from_words([7; 4]));
        let old = FastOpenOption::with_cookie(&keys.primary.cookie(CLIENT, SERVER), true).unwrap();
        keys.rotate(FastOpenKey::from_words([8; 4]));
        let d = server_decision(&server_on(), &keys, true, Some(&old), 10, CLIENT, SERVER);
        assert!(d.accept_data);
        let fresh = d.syn_ack_option.unwrap();
        assert_eq!(fresh.cookie(), &keys.primary.cookie(CLIENT, SERVER));
        assert!(fresh.experimental);
    }

    #[test]
    fn no_fast_open_when_off_when_the_queue_is_full_or_for_data_without_the_option() {
        let keys = FastOpenKeys::new(FastOpenKey::from_words([7; 4]));
        let req = FastOpenOption::request(false);
        let off = FastOpenConfig::default();
        assert_eq!(
            server_decision(&off, &keys, true, Some(&req), 10, CLIENT, SERVER),
            SynDecision::ORDINARY
        );
        assert_eq!(
            server_decision(&server_on(), &keys, false, Some(&req), 10, CLIENT, SERVER),
            SynDecision::ORDINARY
        );
        assert_eq!(
            server_decision(&server_on(), &keys, true, None, 10, CLIENT, SERVER),
            SynDecision::ORDINARY
        );
        assert_eq!(
            server_decision(&server_on(), &keys, true, None, 0, CLIENT, SERVER),
            SynDecision::ORDINARY
        );
    }

    #[test]
    fn cookie_not_required_accepts_data_without_any_option() {
        let keys = FastOpenKeys::new(FastOpenKey::from_words([7; 4]));
        let cfg = FastOpenConfig::default().with_sysctl_bits(0x202);
        let d = server_decision(&cfg, &keys, true, None, 1000, CLIENT, SERVER);
        assert_eq!(
            d,
            SynDecision {
                accept_data: true,
                syn_ack_option: None
            }
        );
        // A pure SYN without the option stays ordinary.
        assert_eq!(
            server_decision(&cfg, &keys, true, None, 0, CLIENT, SERVER),
            SynDecision::ORDINARY
        );
    }

    #[test]
    fn listener_queue_comes_from_the_sockopt_or_the_backlog() {
        let on = FastOpenConfig::default().with_sysctl_bits(0x2);
        assert_eq!(on.listener_queue_max(5), 0);
        let all = FastOpenConfig::default().with_sysctl_bits(0x402);
        assert_eq!(all.listener_queue_max(5), 5);
        let sockopt = FastOpenConfig {
            server_queue_max: 2,
            ..on
        };
        assert_eq!(sockopt.listener_queue_max(5), 2);
        let server_off = FastOpenConfig {
            server_queue_max: 2,
            ..FastOpenConfig::default().with_sysctl_bits(0x1)
        };
        assert_eq!(server_off.listener_queue_max(5), 0);
    }
}
