//! TCP output over the socket table: the dirty-set flush into the egress part — each dirty
//! connection drained into the transmit queue, as trains of full segments where it can
//! (`tcp_train.rs`) and segment by segment otherwise — and what follows a drain (TIME-WAIT,
//! freeing a finished connection's slot).

use tcp::State;
use wire::TcpFlags;

use crate::egress::{
    ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, IPV6_HEADER_LEN, TCP_HEADER_MIN, header_only,
};
use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::TcpState;

impl TcpCx<'_> {
    /// Drains dirty connections into the transmit queue while it has room.
    /// Drains dirty connections round-robin from a cursor, so when the transmit queue fills
    /// the next flush starts with the connection after the one that filled it.
    pub(crate) fn tcp_flush(&mut self, now: u64) {
        loop {
            let next = self
                .tcp
                .dirty
                .next_from(self.tcp.flush_cursor)
                .or_else(|| self.tcp.dirty.first());
            let Some(i) = next else {
                break;
            };
            self.tcp.flush_cursor = i.saturating_add(1);
            if !self.tcp_flush_one(now, i) {
                break;
            }
        }
    }

    /// Drains connection `i`'s output into the transmit queue. False when the queue filled
    /// first (the connection stays dirty).
    pub(crate) fn tcp_flush_one(&mut self, now: u64, i: usize) -> bool {
        let mtu = usize::from(self.cfg.interface.mtu_bytes);
        let tso_bytes_max = self
            .cfg
            .tx_offload
            .tso_payload_bytes_max
            .min(crate::config::TSO_PAYLOAD_BYTES_MAX) as usize;
        // The connection's addresses do not change while it drains: unpacked once into the
        // pair the frame writer takes (`None` for a slot that holds no connection, or
        // addresses of two families, which no connection has: the loop leaves at once).
        let addrs = match self.sockets.get_mut(i) {
            Some(Socket::Tcp(TcpState::Conn(c))) => {
                let (local_ip, remote_ip) = c.ips();
                crate::egress::tcp_pair(local_ip, remote_ip).map(|p| (p, remote_ip))
            }
            _ => None,
        };
        let ip_len = if addrs.as_ref().is_some_and(|(pair, _)| pair.is_ipv6()) {
            IPV6_HEADER_LEN
        } else {
            IPV4_HEADER_LEN
        };
        // The payload room of a frame without TCP options, and whether the device segments.
        let mtu_room = mtu.saturating_sub(ip_len + TCP_HEADER_MIN);
        let trains = tso_bytes_max == 0;
        let mut drained = true;
        loop {
            if self.egress.tx_full() {
                drained = false;
                break;
            }
            // Full segments of new data in the steady bulk state: as a train (`tcp_train.rs`).
            if trains
                && let Some((pair, _)) = addrs.as_ref()
                && self.tcp_flush_train(now, i, pair, mtu_room)
            {
                continue;
            }
            // The slot through the socket table itself (not `conn_mut`, which borrows the
            // whole context): `c` stays usable beside `self.egress` for the whole iteration,
            // one slot lookup per segment instead of two.
            let (Some(Socket::Tcp(TcpState::Conn(c))), Some((pair, remote_ip))) =
                (self.sockets.get_mut(i), addrs.as_ref())
            else {
                break;
            };
            if c.fastopen_deferred() {
                // A deferred Fast Open sends nothing before its first send.
                break;
            }
            // One buffer per frame: the engine writes the payload after room for the headers
            // (a TCP header as long as the last one), `send_tcp_frame` emits them in front.
            // The payload room is what the MTU leaves after a bare TCP header.
            let payload_at = ETHERNET_HEADER_LEN + ip_len + self.egress.tx_header_guess();
            // With TSO the room is the device's limit; the engine sends whole segments of
            // its MSS up to it (`poll_transmit_tso`). Not while the neighbour is unresolved:
            // a frame beyond the MTU could not wait in its queue.
            // What the next segment can carry at most (asked only with TSO on): a control
            // segment (SYN-ACK, ACK, FIN, RST, a window probe) or a small write needs no
            // TSO-sized buffer. Without this, a burst of them (a reclaim walk's RSTs,
            // SYN-ACKs to a flood) would hold 64 KiB per frame queued for transmission.
            let tso_bytes_max = if tso_bytes_max > 0
                && c.conn
                    .send_queue_bytes()
                    .min(c.conn.send_window_bytes() as usize)
                    > mtu_room
                && self.egress.tso_route_ready(now, *remote_ip)
            {
                tso_bytes_max
            } else {
                0
            };
            let room = if tso_bytes_max > 0 {
                tso_bytes_max
            } else {
                mtu_room
            };
            let mut frame = self.egress.take_frame_buf(payload_at + room);
            let layout = self.egress.cfg.tcp_option_layout;
            let segments_max = if tso_bytes_max > 0 {
                let per = usize::from(c.conn.eff_mss()).max(1);
                u16::try_from(tso_bytes_max / per).unwrap_or(u16::MAX)
            } else {
                1
            };
            let Some(seg) = c.conn.poll_transmit_tso(
                now,
                frame.get_mut(payload_at..).unwrap_or_default(),
                segments_max,
            ) else {
                self.egress.recycle(frame);
                break;
            };
            let n = seg.payload.len();
            let mut header = header_only(&seg);
            if header.flags.contains(TcpFlags::SYN) {
                // The first SYN-ACK of a Fast Open exchange carries the cookie; an active
                // Fast Open's first SYN its cookie or cookie request.
                header.fast_open = c
                    .rare_if_any_mut()
                    .and_then(|r| r.fastopen_syn_option.take());
                c.rare_tidy();
            }
            let gso_size = if tso_bytes_max > 0 {
                c.conn.segment_payload_bytes(header.header_len_in(layout))
            } else {
                0
            };
            let opts = c.sock_opts();
            let ip = crate::egress::TcpIpFields {
                ecn: c.conn.transmit_ecn(),
                tos: opts.tos,
                dont_frag: opts.pmtu.dont_fragment(),
            };
            self.egress
                .send_tcp_frame(now, pair, &header, frame, payload_at, n, gso_size, ip);
        }
        self.tcp_notify_after_output(now, i);
        if drained {
            self.tcp.dirty.remove(i);
            self.tcp_after_output(now, i);
        }
        drained
    }

    /// Removes a finished connection from the table and frees its slot when nobody will read
    /// it any more.
    pub(crate) fn tcp_after_output(&mut self, now: u64, i: usize) {
        let Some(c) = self.conn_mut(i) else {
            return;
        };
        if c.conn.state() == State::TimeWait && c.app_closed && self.tcp_time_wait_enter(now, i) {
            return;
        }
        let Some(c) = self.conn_mut(i) else {
            return;
        };
        if c.conn.state() != State::Closed {
            // Transmitting may arm the retransmission timer.
            self.tcp_rearm(i);
            return;
        }
        let (key, was_in_table, app_closed) = (c.key(), c.in_table, c.app_closed);
        let parent = c.parent.map(|p| p as usize);
        let unread = c.conn.recv_queue_bytes() > 0;
        c.in_table = false;
        self.tcp_rearm(i);
        if was_in_table {
            self.tcp.conns.remove(key.table_hash, i);
            self.tcp.counters.tcp_connections_closed += 1;
        }
        if let Some(li) = parent {
            if unread {
                // Reset before being accepted, holding data its peer sent: it stays in the
                // backlog (bounded by it), and `accept` hands it over so the data is read,
                // then the error (Linux keeps such a child in its accept queue).
                return;
            }
            // Died before being accepted: nobody holds its handle.
            if let Some(l) = self.listener_mut(li) {
                l.pending.retain(|&x| x != i);
            }
            self.free_slot(i);
        } else if app_closed {
            self.free_slot(i);
        }
    }
}
