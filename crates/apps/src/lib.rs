//! Applications written once against the per-shard application API (the `app` crate, re-exported
//! here), run unchanged by both drivers of the shard core: the deterministic simulator (`sim`)
//! and real threads (`runtime`).
//!
//! - [`http`]: an HTTP/1.1 server over an in-memory file set (keep-alive, `Content-Length`,
//!   404, `Content-Type` by extension, `HEAD`), loadable from a directory;
//! - [`load`]: a closed-loop HTTP/1.1 load client over K keep-alive connections;
//! - [`echo`] and [`discard`]: RFC 862 and RFC 863 TCP servers;
//! - [`ttcp`]: NTttcp-style bulk sender and receiver with byte counts and timestamps;
//! - [`get`]: a one-shot HTTP/1.1 `GET` client (`Content-Length`, chunked, or until close).
#![deny(unsafe_code)]

pub mod discard;
pub mod echo;
pub mod get;
pub mod http;
pub mod http_timeouts;
pub mod load;
mod serve;
pub mod ttcp;

pub use app::{App, Conn, Ctx, Listener, ShardInfo};

/// Nanoseconds per second.
pub const NS_PER_S: u64 = 1_000_000_000;

#[cfg(test)]
mod tests {
    use core::net::{IpAddr, Ipv4Addr, SocketAddr};

    use super::App;
    use crate::ttcp::{TtcpSendConfig, TtcpSender};

    #[test]
    fn none_is_an_idle_done_app_and_some_delegates() {
        let none: Option<TtcpSender> = None;
        assert!(none.done());
        assert_eq!(none.progress(), 0);
        assert_eq!(none.poll_timeout(), None);
        let some = Some(TtcpSender::new(TtcpSendConfig {
            remote: SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 5001),
            bytes_per_conn: 1,
            conns: 1,
        }));
        assert!(!some.done(), "a sender that has not started is not done");
    }
}
