//! The HTTP server's application timeouts, after nginx's: `client_header_timeout` (the whole
//! request head must arrive within it: from the accept for the first request, from its first
//! byte for the next ones), `keepalive_timeout` (an idle keep-alive connection, and one
//! draining the peer after our last response) and `send_timeout` (no send progress, i.e. the
//! stack's send buffer took nothing more of the response, for that long). Each ends the
//! connection and is counted in [`crate::http::ServerStats`]: a header or keep-alive timeout
//! closes it (FIN), a send timeout aborts it (RST), so a peer that stopped reading stops
//! pinning its send buffer.

use crate::NS_PER_S;

/// The three timeouts; `None` turns one off.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HttpTimeouts {
    /// Default 60 s (nginx `client_header_timeout`).
    pub header_ns: Option<u64>,
    /// Default 75 s (nginx `keepalive_timeout`).
    pub keepalive_ns: Option<u64>,
    /// Default 60 s (nginx `send_timeout`).
    pub send_ns: Option<u64>,
}

impl Default for HttpTimeouts {
    fn default() -> Self {
        HttpTimeouts {
            header_ns: Some(60 * NS_PER_S),
            keepalive_ns: Some(75 * NS_PER_S),
            send_ns: Some(60 * NS_PER_S),
        }
    }
}

/// What a connection is waiting for, which picks its timeout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    /// A request head (or the rest of one).
    Header,
    /// The next request on a kept-alive connection, or the peer's FIN after our last answer.
    KeepAlive,
    /// Room in the send buffer for the response.
    Send,
}

impl HttpTimeouts {
    /// The deadline of a connection in `phase` since `since_ns`.
    pub(crate) fn deadline_ns(&self, phase: Phase, since_ns: u64) -> Option<u64> {
        let limit = match phase {
            Phase::Header => self.header_ns,
            Phase::KeepAlive => self.keepalive_ns,
            Phase::Send => self.send_ns,
        }?;
        Some(since_ns.saturating_add(limit))
    }
}
