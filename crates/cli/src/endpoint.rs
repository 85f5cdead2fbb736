//! Parsing of `IP[:PORT]` endpoints as the CLI accepts them.
//!
//! IPv4: `66.9.149.187` or `66.9.149.187:2794`. IPv6: `3ffe:2501:200:3::1` or, with a port,
//! `[3ffe:2501:200:3::1]:1766` (RFC 3986 §3.2.2 brackets; a bare IPv6 address cannot carry a port
//! because its colons are ambiguous).

use core::net::{IpAddr, SocketAddr};

/// An address with an optional port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Endpoint {
    pub addr: IpAddr,
    pub port: Option<u16>,
}

/// Parses `IP`, `IPv4:PORT` or `[IPv6]:PORT`; the error is one human-readable sentence.
pub fn parse_endpoint(text: &str) -> Result<Endpoint, String> {
    let text = text.trim();
    if let Ok(addr) = text.parse::<IpAddr>() {
        return Ok(Endpoint { addr, port: None });
    }
    if let Ok(sock) = text.parse::<SocketAddr>() {
        return Ok(Endpoint {
            addr: sock.ip(),
            port: Some(sock.port()),
        });
    }
    if let Some(inner) = text.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
        if let Ok(addr) = inner.parse::<core::net::Ipv6Addr>() {
            return Ok(Endpoint {
                addr: IpAddr::V6(addr),
                port: None,
            });
        }
    }
    Err(format!(
        "'{text}' is not an address: expected IPv4[:PORT], IPv6 or [IPv6]:PORT with PORT in 0..=65535"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_every_accepted_form() {
        let v4 = parse_endpoint("66.9.149.187:2794").expect("v4 with port");
        assert_eq!(v4.port, Some(2794));
        assert_eq!(parse_endpoint("66.9.149.187").expect("v4").port, None);
        let v6 = parse_endpoint("[3ffe:2501:200:3::1]:1766").expect("v6 with port");
        assert_eq!(v6.port, Some(1766));
        assert!(v6.addr.is_ipv6());
        assert_eq!(parse_endpoint("ff02::1").expect("v6").port, None);
        assert_eq!(
            parse_endpoint("[ff02::1]").expect("bracketed v6").port,
            None
        );
    }

    #[test]
    fn rejects_garbage_ports_and_addresses() {
        for bad in [
            "",
            "1.2.3",
            "1.2.3.4:",
            "1.2.3.4:65536",
            "1.2.3.4:-1",
            "ff02::1:80:x",
            "[ff02::1]:",
            "host:80",
        ] {
            assert!(parse_endpoint(bad).is_err(), "{bad:?} should be rejected");
        }
    }
}
