//! The TCP flush's train path: a connection in the steady bulk state is asked once for the
//! run of full segments it may send now (`tcp::Connection::poll_transmit_train`, which
//! advances its state once for the run), and the frames are written in a tight loop — one
//! pool buffer each, the payload copied from the send ring, the header from the train's with
//! the sequence number (and PSH on the last) patched.
//!
//! Invariant: the frames are those the per-segment path (`tcp_flush_one`'s loop over
//! `poll_transmit_tso`) would queue, byte for byte and in the same order, and the connection
//! ends the same (the stack test `trains_emit_the_frames_of_single_segments` and the engine's
//! twin test `tcp/tests/train.rs`). Switched off by `Stack::set_tcp_trains(false)`, which the
//! twin test uses for its reference world.

use wire::IpPair;

use crate::egress::TcpIpFields;
use crate::sockets::Socket;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::TcpState;

impl TcpCx<'_> {
    /// Sends connection `i`'s train if it has one (see the module): true when it sent one.
    /// `mtu_room_bytes` is what the MTU leaves after the IP and a bare TCP header (a
    /// segment's options and payload must fit it). Never more segments than the
    /// transmit queue has room for, so none is dropped for want of it.
    #[inline]
    pub(crate) fn tcp_flush_train(
        &mut self,
        now: u64,
        i: usize,
        pair: &IpPair,
        mtu_room_bytes: usize,
    ) -> bool {
        if !self.tcp.trains {
            return false;
        }
        // The cheap test first: most flushes of request/response traffic stop here.
        if !matches!(self.sockets.get(i), Some(Socket::Tcp(TcpState::Conn(c))) if c.conn.train_candidate())
        {
            return false;
        }
        let IpPair::V4 { dst, .. } = *pair else {
            return false;
        };
        let Some(dst_mac) = self.egress.train_route(now, dst) else {
            return false;
        };
        let room = self.egress.tx_room();
        let Some(Socket::Tcp(TcpState::Conn(c))) = self.sockets.get_mut(i) else {
            return false;
        };
        let segments_max = u16::try_from(room).unwrap_or(u16::MAX);
        let Some(train) = c
            .conn
            .poll_transmit_train(now, segments_max, mtu_room_bytes)
        else {
            return false;
        };
        let opts = c.sock_opts();
        let ip = TcpIpFields {
            ecn: c.conn.transmit_ecn(),
            tos: opts.tos,
            dont_frag: opts.pmtu.dont_fragment(),
        };
        self.egress.count_train_segments(train.segments);
        let conn = &c.conn;
        self.egress.send_tcp_train(
            pair,
            dst_mac,
            train.segments,
            usize::from(train.seg_bytes),
            |j| train.segment(j),
            |j, dst| conn.train_payload(&train, j, dst),
            ip,
        );
        true
    }
}
