//! What a connection's buffers hold in memory, for a stack-wide buffer budget (the stack's
//! `tcp_mem` pressure states): the storage its rings allocated so far (rings allocate on the
//! first write and grow by doubling, so this is not the configured capacity).

use super::*;

impl Connection {
    /// Bytes of storage the send and receive rings hold now (out-of-order data lives in the
    /// receive ring's storage, so it is included).
    pub fn buffer_allocated_bytes(&self) -> usize {
        self.send_buf.allocated_bytes() + self.recv_buf.allocated_bytes()
    }

    /// Bytes the send ring can take without allocating: its allocated storage less what it
    /// holds (0 before the first write).
    pub fn send_allocated_free_bytes(&self) -> usize {
        self.send_buf
            .allocated_bytes()
            .saturating_sub(self.send_buf.len())
    }
}
