//! Bounded single-producer/single-consumer rings.
//!
//! Built on `std::sync::mpsc::sync_channel` (a bounded array queue). The producer half is not
//! `Clone` here, so each ring has exactly one producer and one consumer by construction.

use std::sync::mpsc::{Receiver, SyncSender, TryRecvError, TrySendError, sync_channel};

/// The sending half of a ring.
#[derive(Debug)]
pub struct Producer<T> {
    tx: SyncSender<T>,
}

/// The receiving half of a ring.
#[derive(Debug)]
pub struct Consumer<T> {
    rx: Receiver<T>,
}

/// A ring of `slots` entries (at least 1).
pub fn ring<T>(slots: usize) -> (Producer<T>, Consumer<T>) {
    let (tx, rx) = sync_channel(slots.max(1));
    (Producer { tx }, Consumer { rx })
}

impl<T> Producer<T> {
    /// Pushes `item`, or hands it back when the ring is full (or the consumer is gone).
    pub fn push(&self, item: T) -> Result<(), T> {
        match self.tx.try_send(item) {
            Ok(()) => Ok(()),
            Err(TrySendError::Full(v)) | Err(TrySendError::Disconnected(v)) => Err(v),
        }
    }
}

impl<T> Consumer<T> {
    /// The oldest entry, if any.
    pub fn pop(&self) -> Option<T> {
        match self.rx.try_recv() {
            Ok(v) => Some(v),
            Err(TryRecvError::Empty) | Err(TryRecvError::Disconnected) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn full_ring_hands_the_item_back() {
        let (p, c) = ring(2);
        assert!(p.push(1).is_ok());
        assert!(p.push(2).is_ok());
        assert_eq!(p.push(3), Err(3));
        assert_eq!(c.pop(), Some(1));
        assert!(p.push(3).is_ok());
        assert_eq!((c.pop(), c.pop(), c.pop()), (Some(2), Some(3), None));
    }
}
