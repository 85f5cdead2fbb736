//! TCP Fast Open (RFC 7413), server side, in the stack: the stack-wide switches and keys
//! (Linux's `net.ipv4.tcp_fastopen` and `tcp_fastopen_key`), a listener's queue bound and
//! key (`TCP_FASTOPEN`, `TCP_FASTOPEN_KEY`: [`SocketOption::FastOpenQueue`],
//! [`SocketOption::FastOpenKey`]), the decision on each SYN a listener receives
//! ([`tcp::fastopen::server_decision`]) and what the stack keeps per child: the cookie its
//! first SYN-ACK carries and whether its SYN's data was accepted (`TCPI_OPT_SYN_DATA`).
//! Neither fits in the engine's 1,024-byte TCB, and both matter only around the handshake.
//!
//! A Fast Open child (data accepted, or allowed, with its SYN) is acceptable by the
//! application while still in SYN-RECEIVED: its listener turns readable at once. Its data
//! waits in the child's receive buffer like any other; nothing is delivered twice.
//!
//! The queue bound counts the listener's children not yet accepted that are Fast Open
//! children still in SYN-RECEIVED (Linux counts accepted ones too, until their handshake
//! completes); it is bounded by the listener's backlog either way.
//!
//! [`SocketOption::FastOpenQueue`]: crate::SocketOption::FastOpenQueue
//! [`SocketOption::FastOpenKey`]: crate::SocketOption::FastOpenKey

use tcp::State;
use tcp::fastopen::{FastOpenConfig, FastOpenKey, FastOpenKeys, SynDecision, server_decision};
use wire::TcpRepr;

use crate::Stack;
use crate::socket::{Readiness, SocketError, SocketHandle};
use crate::sockets::{Socket, Sockets};
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{FlowKey, TcpState};

impl Stack {
    /// Sets the stack-wide Fast Open switches (Linux `net.ipv4.tcp_fastopen`); a listener's
    /// `server_queue_max` comes from its own [`crate::SocketOption::FastOpenQueue`]. Applies
    /// to SYNs that arrive from now on. Off by default
    /// ([`crate::StackConfig::tcp_fastopen`]).
    pub fn tcp_set_fastopen(&mut self, cfg: FastOpenConfig) {
        self.tcp_cx().tcp.fastopen = cfg;
    }

    /// The stack-wide Fast Open switches.
    pub fn tcp_fastopen(&self) -> FastOpenConfig {
        self.tcp_view().0.fastopen
    }

    /// Sets the server keys listeners without a key of their own use (Linux
    /// `net.ipv4.tcp_fastopen_key`, `primary,backup`). The stack starts with a key derived
    /// from [`crate::StackConfig::secret`].
    pub fn tcp_set_fastopen_keys(&mut self, keys: FastOpenKeys) {
        self.tcp_cx().tcp.fastopen_keys = keys;
    }

    /// Key rotation (RFC 7413 §4.1.2 leaves its schedule to the server): `next` makes
    /// cookies from now on, the current key is still accepted as the backup.
    pub fn tcp_rotate_fastopen_key(&mut self, next: FastOpenKey) {
        self.tcp_cx().tcp.fastopen_keys.rotate(next);
    }
}

/// True when connection `h`'s SYN brought data it accepted (`TCPI_OPT_SYN_DATA`).
pub(crate) fn syn_data_acked(sockets: &Sockets, h: SocketHandle) -> bool {
    let Ok(i) = sockets.index(h) else {
        return false;
    };
    matches!(sockets.get(i), Some(Socket::Tcp(TcpState::Conn(c))) if c.syn_data_acked)
}

impl TcpCx<'_> {
    /// Listener `li`'s Fast Open decision on `syn` (an ordinary SYN without any cost when it
    /// has neither the option nor data).
    pub(crate) fn fastopen_decision(
        &mut self,
        li: usize,
        key: &FlowKey,
        syn: &TcpRepr<'_>,
    ) -> SynDecision {
        if syn.fast_open.is_none() && syn.payload.is_empty() {
            return SynDecision::ORDINARY;
        }
        let Some(Socket::Tcp(TcpState::Listener(l))) = self.sockets.get(li) else {
            return SynDecision::ORDINARY;
        };
        let cfg = FastOpenConfig {
            server_queue_max: l.fastopen_queue_max,
            ..self.tcp.fastopen
        };
        let queue_max = cfg.listener_queue_max(l.backlog_max);
        let in_syn_received = l
            .pending
            .iter()
            .filter(|&&ci| match self.sockets.get(ci) {
                Some(Socket::Tcp(TcpState::Conn(c))) => {
                    c.conn.is_fast_open_child() && c.conn.state() == State::SynReceived
                }
                _ => false,
            })
            .count();
        let room = (in_syn_received as u64) < u64::from(queue_max);
        let keys = l.fastopen_keys.unwrap_or(self.tcp.fastopen_keys);
        let d = server_decision(
            &cfg,
            &keys,
            room,
            syn.fast_open.as_ref(),
            syn.payload.len(),
            key.tuple().remote.ip(),
            key.tuple().local.ip(),
        );
        let counters = &mut self.tcp.counters;
        if queue_max > 0 && !room {
            counters.tcp_fastopen_queue_full += 1;
        }
        if d.syn_ack_option.is_some() {
            counters.tcp_fastopen_cookies_sent += 1;
        }
        if !d.accept_data && !syn.payload.is_empty() {
            // The client retransmits what the SYN-ACK does not acknowledge (RFC 7413 §4.2.2).
            counters.tcp_fastopen_syn_data_dropped += 1;
        }
        d
    }

    /// After a child of listener `li` was opened with `decision`: the cookie for its first
    /// SYN-ACK, `TCPI_OPT_SYN_DATA`, and, for a Fast Open child, the listener readable now.
    pub(crate) fn fastopen_note_child(
        &mut self,
        li: usize,
        key: &FlowKey,
        decision: SynDecision,
        syn_data_bytes: usize,
    ) {
        let Some(ci) = self.tcp.lookup(self.sockets, key) else {
            return;
        };
        let Some(c) = self.conn_mut(ci) else {
            return;
        };
        if decision.syn_ack_option.is_some() {
            c.rare_mut().fastopen_syn_option = decision.syn_ack_option;
        }
        c.syn_data_acked = syn_data_bytes > 0;
        if decision.accept_data {
            self.tcp.counters.tcp_fastopen_children += 1;
            self.sockets.notify(li, Readiness::READABLE);
        }
    }

    /// `TCP_FASTOPEN_KEY` on listener `i`.
    pub(crate) fn fastopen_set_listener_key(
        &mut self,
        i: usize,
        key: [u8; 16],
    ) -> Result<(), SocketError> {
        match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Listener(l))) => {
                l.fastopen_keys = Some(FastOpenKeys::new(FastOpenKey::from_bytes(key)));
                Ok(())
            }
            _ => Err(SocketError::InvalidState),
        }
    }
}
