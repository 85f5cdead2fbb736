//! Addresses of the memory a connection's next segment or application call will touch
//! outside its TCB, for prefetch hints (`stack`'s `tcp_prefetch`: with many connections that
//! memory is cold, and asking for all of it at once overlaps the misses). Address arithmetic
//! only: nothing here reads through the addresses or changes the connection.

use crate::connection::Connection;

impl Connection {
    /// The first byte the next write of each ring stores: `[send ring, receive ring]`
    /// ([`crate::ring::Ring::tail_addr`]; dangling for a ring with no storage). The send
    /// ring's is where the application's next `send` copies to; the receive ring's is where
    /// the next in-order segment's text lands and, once everything received was read, where
    /// the next `recv` reads from.
    #[inline]
    pub fn ring_tail_addrs(&self) -> [*const u8; 2] {
        [self.send_buf.tail_addr(), self.recv_buf.tail_addr()]
    }
}
