//! What a connection's buffers hold in memory, for a stack-wide buffer budget (the stack's
//! `tcp_mem` pressure states): the storage its rings allocated so far (rings allocate on the
//! first write and grow by doubling, so this is not the configured capacity).

use super::*;

impl Connection {
    /// Bytes of storage the send and receive rings hold now (out-of-order data lives in the
    /// receive ring's storage, so it is included).
    pub fn buffer_allocated_bytes(&self) -> usize {
        // The send ring's header only when it has storage (`held::SEND_STORAGE`): a
        // receiver's segments then read no byte of it.
        let send = if self.out.held & held::SEND_STORAGE != 0 {
            self.send_buf.allocated_bytes()
        } else {
            0
        };
        send + self.recv_buf.allocated_bytes()
    }

    /// Sets `out.held`'s [`held::SEND_STORAGE`] from the send ring, after any call that may
    /// allocate or free its storage (a write, a capacity change, a release).
    pub(super) fn note_send_storage(&mut self) {
        if self.send_buf.allocated_bytes() != 0 {
            self.out.held |= held::SEND_STORAGE;
        } else {
            self.out.held &= !held::SEND_STORAGE;
        }
    }

    /// Bytes the send ring can take without allocating: its allocated storage less what it
    /// holds (0 before the first write).
    pub fn send_allocated_free_bytes(&self) -> usize {
        self.send_buf
            .allocated_bytes()
            .saturating_sub(self.send_buf.len())
    }

    /// Gives back the storage of each ring that holds nothing (the send ring: everything
    /// acknowledged; the receive ring: everything read, nothing out of order), and RACK's
    /// record table when nothing is in flight; returns the bytes released. The next write
    /// allocates again (`ring`; the record table on the next transmission).
    pub fn release_idle_buffers(&mut self) -> usize {
        let send = self.send_buf.release_if_empty();
        self.note_send_storage();
        send + self.recv_buf.release_if_empty()
            + self.rack.as_mut().map_or(0, Rack::release_if_empty)
    }
}
