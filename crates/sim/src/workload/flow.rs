//! One endpoint's byte streams in the soak: the pattern checker of an incoming stream and the
//! flow that sends its own stream, reads and checks the peer's, half-closes and closes.

use stack::{SocketError, SocketHandle, Stack};

use super::pattern_byte;

/// Checks an incoming byte stream against its pattern.
#[derive(Debug, Clone)]
pub(super) struct StreamCheck {
    pub(super) stream_id: u64,
    pub(super) received: u64,
    pub(super) expected: u64,
}

impl StreamCheck {
    pub(super) fn new(stream_id: u64, expected: u64) -> Self {
        StreamCheck {
            stream_id,
            received: 0,
            expected,
        }
    }

    pub(super) fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        for &b in bytes {
            if self.received >= self.expected {
                return Err(format!(
                    "stream {:#x}: byte beyond the {} expected",
                    self.stream_id, self.expected
                ));
            }
            let want = pattern_byte(self.stream_id, self.received);
            if b != want {
                return Err(format!(
                    "stream {:#x}: offset {} holds {b:#04x}, expected {want:#04x}",
                    self.stream_id, self.received
                ));
            }
            self.received += 1;
        }
        Ok(())
    }

    pub(super) fn complete(&self) -> bool {
        self.received == self.expected
    }
}

/// One endpoint of a connection: sends its stream, reads and checks the peer's, half-closes
/// after sending, closes after both directions are done.
#[derive(Debug)]
pub(super) struct Flow {
    pub(super) handle: SocketHandle,
    pub(super) tx_stream: u64,
    pub(super) tx_total: u64,
    /// How much of the stream the application has released so far (request/response
    /// workloads release it in steps).
    pub(super) tx_allowed: u64,
    pub(super) tx_sent: u64,
    pub(super) tx_shutdown: bool,
    pub(super) rx: StreamCheck,
    pub(super) rx_eof: bool,
    /// Stop reading at this offset (a handoff waits for the move there).
    pub(super) rx_pause_at: Option<u64>,
    pub(super) error: Option<SocketError>,
    pub(super) closed: bool,
}

pub(super) const CHUNK_BYTES: usize = 16 * 1024;

impl Flow {
    pub(super) fn new(
        handle: SocketHandle,
        tx_stream: u64,
        tx_total: u64,
        rx_stream: u64,
        rx_total: u64,
    ) -> Self {
        Flow {
            handle,
            tx_stream,
            tx_total,
            tx_allowed: tx_total,
            tx_sent: 0,
            tx_shutdown: false,
            rx: StreamCheck::new(rx_stream, rx_total),
            rx_eof: false,
            rx_pause_at: None,
            error: None,
            closed: false,
        }
    }

    pub(super) fn done(&self) -> bool {
        self.closed
    }

    pub(super) fn succeeded(&self) -> bool {
        self.error.is_none() && self.rx_eof && self.rx.complete() && self.tx_sent == self.tx_total
    }

    /// Moves data both ways without blocking. A protocol violation is returned as an error
    /// string (the seed fails); a connection error is recorded and ends the flow.
    pub(super) fn pump(
        &mut self,
        now: u64,
        stack: &mut Stack,
        scratch: &mut [u8],
    ) -> Result<(), String> {
        if self.closed {
            return Ok(());
        }
        while self.error.is_none() && self.tx_sent < self.tx_allowed {
            let n = usize::try_from(self.tx_allowed - self.tx_sent)
                .map_or(scratch.len(), |r| r.min(scratch.len()));
            for (i, b) in scratch.iter_mut().take(n).enumerate() {
                *b = pattern_byte(self.tx_stream, self.tx_sent + i as u64);
            }
            match stack.tcp_send(self.handle, &scratch[..n]) {
                Ok(k) => self.tx_sent += k as u64,
                Err(SocketError::WouldBlock) => break,
                Err(e) => self.error = Some(e),
            }
        }
        // Half-close only once synchronized: CLOSE in SYN-SENT deletes the TCB
        // (RFC 9293 §3.10.4), which is not what "no more data" means.
        let synchronized = stack
            .tcp_state(self.handle)
            .is_some_and(|s| s.is_synchronized());
        if self.error.is_none()
            && self.tx_sent == self.tx_total
            && !self.tx_shutdown
            && synchronized
        {
            match stack.tcp_shutdown(self.handle) {
                Ok(()) => self.tx_shutdown = true,
                Err(SocketError::WouldBlock) => {}
                Err(e) => self.error = Some(e),
            }
        }
        while self.error.is_none() && !self.rx_eof {
            let room = match self.rx_pause_at {
                Some(at) if at <= self.rx.received => break,
                Some(at) => usize::try_from(at - self.rx.received)
                    .map_or(scratch.len(), |r| r.min(scratch.len())),
                None => scratch.len(),
            };
            match stack.tcp_recv(self.handle, &mut scratch[..room]) {
                Ok(n) => self.rx.feed(&scratch[..n])?,
                Err(SocketError::WouldBlock) => break,
                Err(SocketError::Finished) => {
                    self.rx_eof = true;
                    if !self.rx.complete() {
                        return Err(format!(
                            "stream {:#x}: peer finished after {} of {} bytes without an error",
                            self.rx.stream_id, self.rx.received, self.rx.expected
                        ));
                    }
                }
                Err(e) => self.error = Some(e),
            }
        }
        if self.error.is_some() || (self.rx_eof && self.tx_shutdown) {
            // A failed connection is aborted on close by the stack if needed; either way the
            // handle is given back.
            let _ = stack.close(now, self.handle);
            self.closed = true;
        }
        Ok(())
    }
}
