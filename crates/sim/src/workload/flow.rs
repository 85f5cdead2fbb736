//! One endpoint's byte streams in the soak: the pattern checker of an incoming stream and the
//! flow that sends its own stream, reads and checks the peer's, half-closes and closes.

use stack::{SocketError, SocketHandle, Stack};

use super::pattern::Pattern;

/// Checks an incoming byte stream against its pattern.
#[derive(Debug, Clone)]
pub(super) struct StreamCheck {
    pattern: Pattern,
    pub(super) received: u64,
    pub(super) expected: u64,
}

impl StreamCheck {
    pub(super) fn new(stream_id: u64, expected: u64) -> Self {
        StreamCheck {
            pattern: Pattern::new(stream_id),
            received: 0,
            expected,
        }
    }

    pub(super) fn stream_id(&self) -> u64 {
        self.pattern.stream_id()
    }

    /// Checks the next bytes of the stream. On error `received` counts the good bytes before
    /// the first bad one, and the message names that byte.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        let room = usize::try_from(self.expected - self.received).unwrap_or(usize::MAX);
        let within = bytes.get(..room).unwrap_or(bytes);
        if let Some(k) = self.pattern.first_mismatch(self.received, within) {
            self.received += k as u64;
            let (b, want) = (within[k], self.pattern.byte(self.received));
            return Err(format!(
                "stream {:#x}: offset {} holds {b:#04x}, expected {want:#04x}",
                self.stream_id(),
                self.received
            ));
        }
        self.received += within.len() as u64;
        if bytes.len() > within.len() {
            return Err(format!(
                "stream {:#x}: byte beyond the {} expected",
                self.stream_id(),
                self.expected
            ));
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
    tx_pattern: Pattern,
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

/// The applications' read and write size: at most one pattern window, so a write is one
/// slice of the table.
pub(super) const CHUNK_BYTES: usize = 16 * 1024;
const _: () = assert!(CHUNK_BYTES <= super::pattern::WINDOW_BYTES_MAX);

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
            tx_pattern: Pattern::new(tx_stream),
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
            // A slice of the shared pattern table: nothing generated, nothing copied.
            let data = self.tx_pattern.window(self.tx_sent, n);
            match stack.tcp_send(self.handle, data) {
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
                            self.rx.stream_id(),
                            self.rx.received,
                            self.rx.expected
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
