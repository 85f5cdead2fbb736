//! Record boundaries (`MSG_EOR`, Linux `tcp_sendmsg`'s `TCP_SKB_CB(skb)->eor`): data written
//! with [`Connection::send_record`] ends a record, and no segment ever carries bytes of two
//! records — not on first transmission, not on retransmission, not as one TSO segment.
//!
//! The boundaries are kept beside the TCB, boxed on the first record (most connections never
//! write one), as a bounded list of sequence numbers: each is the first sequence number after
//! a record (its end, exclusive). A boundary is forgotten once SND.UNA reaches it (no segment
//! can start before it any more). At most [`RECORDS_OUTSTANDING_MAX`] boundaries are kept: a
//! record write that would need one more is refused (nothing queued, the caller waits for
//! ACKs as for a full send buffer).
//!
//! They move with the connection: [`Connection::export`] carries the ends above SND.UNA
//! (`ConnectionSnapshot::record_ends`), [`Connection::import`] restores them.

use std::collections::VecDeque;

use wire::tcp::SeqNumber;

use super::*;

/// Record ends a connection keeps at most (records written and not yet fully acknowledged).
pub const RECORDS_OUTSTANDING_MAX: usize = 256;

/// The record ends above SND.UNA, oldest first.
///
/// Invariant: strictly increasing (in sequence space), each within the send buffer's span
/// (after SND.UNA, at most its end), at most [`RECORDS_OUTSTANDING_MAX`] entries.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecordEnds {
    ends: VecDeque<SeqNumber>,
}

impl RecordEnds {
    /// The ends after `una`, oldest first (what a snapshot carries).
    pub(crate) fn ends_after(&self, una: SeqNumber) -> Vec<SeqNumber> {
        self.ends.iter().copied().filter(|e| una.lt(*e)).collect()
    }
}

/// The boxed boundaries for a snapshot's checked `ends` (`ConnectionSnapshot::check`: strictly
/// increasing, bounded); `None` when there are none.
pub(crate) fn records_from_ends(ends: &[SeqNumber]) -> Option<Box<RecordEnds>> {
    (!ends.is_empty()).then(|| {
        Box::new(RecordEnds {
            ends: ends.iter().copied().collect(),
        })
    })
}

impl Connection {
    /// `send` with `MSG_EOR`: queues `data` as the end of a record (the bytes queued before it
    /// and not yet ended belong to the same record). Returns how many bytes fit; the record
    /// ends only when all of `data` fit, so a partial write leaves the record open and the
    /// caller's next `send_record` (with the rest) ends it. `Ok(0)` when nothing fits or when
    /// [`RECORDS_OUTSTANDING_MAX`] records are outstanding.
    pub fn send_record(&mut self, data: &[u8]) -> Result<usize, Error> {
        self.records_trim();
        if self
            .records
            .as_ref()
            .is_some_and(|r| r.ends.len() >= RECORDS_OUTSTANDING_MAX)
        {
            return Ok(0);
        }
        let n = self.send(data)?;
        if n == data.len() && n > 0 {
            let end = self.snd.buf_seq + self.send_buf.len() as u32;
            let r = self.records.get_or_insert_with(Box::default);
            if r.ends.back() != Some(&end) {
                r.ends.push_back(end);
            }
        }
        Ok(n)
    }

    /// Record boundaries kept now (for tests and checkers).
    pub fn records_outstanding(&self) -> usize {
        self.records.as_ref().map_or(0, |r| r.ends.len())
    }

    /// Forgets the boundaries SND.UNA reached, and the box once none is left.
    pub(super) fn records_trim(&mut self) {
        let una = self.snd.una.max(self.snd.buf_seq);
        if let Some(r) = self.records.as_mut() {
            while r.ends.front().is_some_and(|e| !una.lt(*e)) {
                r.ends.pop_front();
            }
            if r.ends.is_empty() {
                self.records = None;
            }
        }
    }

    /// Bytes from `seq` to the end of the record it belongs to, when a record end lies ahead
    /// of it; `None` when no record boundary follows `seq` (it may run to the buffer's end).
    pub(super) fn record_room(&self, seq: SeqNumber) -> Option<u32> {
        let r = self.records.as_ref()?;
        r.ends
            .iter()
            .find(|e| seq.lt(**e))
            .map(|e| e.diff(seq).max(0) as u32)
    }

    /// A segment of `len` bytes at `seq`, cut at the end of its record: the length, and
    /// whether it ends the record. Out of line: connections without records never call it.
    #[cold]
    #[inline(never)]
    pub(super) fn clip_to_record(&self, seq: SeqNumber, len: usize) -> (usize, bool) {
        match self.record_room(seq) {
            Some(r) if (r as usize) <= len => (r as usize, true),
            _ => (len, false),
        }
    }

    /// The run of `unsent` bytes at SND.NXT new data may send at once: up to the next record
    /// end (forgetting the ends SND.UNA passed), and whether it is the last run (no record
    /// end before the end of the data). Out of line, as [`Connection::clip_to_record`].
    #[cold]
    #[inline(never)]
    pub(super) fn record_run(&mut self, unsent: u32) -> (u32, bool) {
        self.records_trim();
        match self.record_room(self.snd.nxt) {
            Some(r) if r < unsent => (r, false),
            _ => (unsent, true),
        }
    }
}
