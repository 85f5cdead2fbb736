//! A connection's socket extension ([`SockExt`]: options, zero-copy and timestamp tracking,
//! the error queue) as bytes, so it moves with the connection: the exporting stack puts them
//! in `tcp::ConnectionSnapshot::socket_ext`, the importing one reads them back.
//!
//! Format (little-endian): a version byte ([`EXT_VERSION`]); the options (`zerocopy`, `mark`,
//! `notsent_lowat_bytes`, the five timestamping flags, `tos`, the path MTU discovery mode
//! 0–3); `written`, `zc_next_id`,
//! `ts_key_base`; `zc_pending` (a `u16` count, then `end`, `first_id`, `last_id` each);
//! `ts_pending` (a `u16` count, then `last_byte`, `departed` each); the error queue (a `u8`
//! count, then per entry a tag — 0 zero-copy range, 1 transmit timestamp — and its fields).
//! `bool`s are one byte 0 or 1. Decoding refuses anything else, a count beyond its bound,
//! offsets out of order and trailing bytes; it never panics and allocates no more than the
//! bounds allow. Timestamps already queued keep their values (the exporter's clock).

use std::collections::VecDeque;

use super::{
    ERRQUEUE_NOTIFICATIONS_MAX, Notification, PathMtuDiscovery, SockExt, SockOpts,
    TIMESTAMPED_SENDS_OUTSTANDING_MAX, TimestampedSend, TxTimestampKind, TxTimestamping,
    ZEROCOPY_SENDS_OUTSTANDING_MAX, ZeroCopySend,
};

/// The layout version written first.
const EXT_VERSION: u8 = 1;

impl SockExt {
    /// Appends the encoding (module documentation) to `out`. Within the bounds the type
    /// keeps, at most ~27 KiB: under `tcp::SOCKET_EXT_BYTES_MAX`.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) {
        let o = &self.opts;
        out.push(EXT_VERSION);
        out.push(u8::from(o.zerocopy));
        out.extend_from_slice(&o.mark.to_le_bytes());
        out.extend_from_slice(&o.notsent_lowat_bytes.to_le_bytes());
        let t = o.tx_timestamping;
        for b in [t.scheduled, t.sent, t.acked, t.opt_id, t.ts_only] {
            out.push(u8::from(b));
        }
        out.push(o.tos);
        out.push(match o.pmtu {
            PathMtuDiscovery::Want => 0,
            PathMtuDiscovery::Dont => 1,
            PathMtuDiscovery::Do => 2,
            PathMtuDiscovery::Probe => 3,
        });
        out.extend_from_slice(&self.written.to_le_bytes());
        out.extend_from_slice(&self.zc_next_id.to_le_bytes());
        out.extend_from_slice(&self.ts_key_base.to_le_bytes());
        // Counts are within their bounds (type invariant), all below 2^16.
        out.extend_from_slice(&(self.zc_pending.len() as u16).to_le_bytes());
        for z in &self.zc_pending {
            out.extend_from_slice(&z.end.to_le_bytes());
            out.extend_from_slice(&z.first_id.to_le_bytes());
            out.extend_from_slice(&z.last_id.to_le_bytes());
        }
        out.extend_from_slice(&(self.ts_pending.len() as u16).to_le_bytes());
        for t in &self.ts_pending {
            out.extend_from_slice(&t.last_byte.to_le_bytes());
            out.push(u8::from(t.departed));
        }
        out.push(self.errqueue.len() as u8);
        for n in &self.errqueue {
            match *n {
                Notification::ZeroCopy {
                    first_id,
                    last_id,
                    copied,
                } => {
                    out.push(0);
                    out.extend_from_slice(&first_id.to_le_bytes());
                    out.extend_from_slice(&last_id.to_le_bytes());
                    out.push(u8::from(copied));
                }
                Notification::TxTimestamp { kind, key, at_ns } => {
                    out.push(1);
                    out.push(match kind {
                        TxTimestampKind::Scheduled => 0,
                        TxTimestampKind::Sent => 1,
                        TxTimestampKind::Acked => 2,
                    });
                    out.extend_from_slice(&key.to_le_bytes());
                    out.extend_from_slice(&at_ns.to_le_bytes());
                }
            }
        }
    }

    /// Reads an encoding back; `None` for anything [`SockExt::encode`] cannot have written.
    pub(crate) fn decode(bytes: &[u8]) -> Option<SockExt> {
        let mut r = Reader(bytes);
        if r.u8()? != EXT_VERSION {
            return None;
        }
        let zerocopy = r.bool()?;
        let mark = r.u32()?;
        let notsent_lowat_bytes = r.u32()?;
        let tx_timestamping = TxTimestamping {
            scheduled: r.bool()?,
            sent: r.bool()?,
            acked: r.bool()?,
            opt_id: r.bool()?,
            ts_only: r.bool()?,
        };
        let tos = r.u8()?;
        let pmtu = match r.u8()? {
            0 => PathMtuDiscovery::Want,
            1 => PathMtuDiscovery::Dont,
            2 => PathMtuDiscovery::Do,
            3 => PathMtuDiscovery::Probe,
            _ => return None,
        };
        if tos & super::ECN_BITS != 0 {
            return None;
        }
        let written = r.u64()?;
        let zc_next_id = r.u32()?;
        let ts_key_base = r.u64()?;
        let zc_count = usize::from(r.u16()?);
        if zc_count > ZEROCOPY_SENDS_OUTSTANDING_MAX {
            return None;
        }
        let mut zc_pending = VecDeque::with_capacity(zc_count);
        for _ in 0..zc_count {
            let z = ZeroCopySend {
                end: r.u64()?,
                first_id: r.u32()?,
                last_id: r.u32()?,
            };
            let ordered = zc_pending
                .back()
                .is_none_or(|p: &ZeroCopySend| p.end <= z.end);
            if !ordered || z.end > written {
                return None;
            }
            zc_pending.push_back(z);
        }
        let ts_count = usize::from(r.u16()?);
        if ts_count > TIMESTAMPED_SENDS_OUTSTANDING_MAX {
            return None;
        }
        let mut ts_pending = VecDeque::with_capacity(ts_count);
        for _ in 0..ts_count {
            let t = TimestampedSend {
                last_byte: r.u64()?,
                departed: r.bool()?,
            };
            let ordered = ts_pending
                .back()
                .is_none_or(|p: &TimestampedSend| p.last_byte <= t.last_byte);
            if !ordered || t.last_byte > written {
                return None;
            }
            ts_pending.push_back(t);
        }
        let queued = usize::from(r.u8()?);
        if queued > ERRQUEUE_NOTIFICATIONS_MAX {
            return None;
        }
        let mut errqueue = VecDeque::with_capacity(queued);
        for _ in 0..queued {
            errqueue.push_back(match r.u8()? {
                0 => Notification::ZeroCopy {
                    first_id: r.u32()?,
                    last_id: r.u32()?,
                    copied: r.bool()?,
                },
                1 => Notification::TxTimestamp {
                    kind: match r.u8()? {
                        0 => TxTimestampKind::Scheduled,
                        1 => TxTimestampKind::Sent,
                        2 => TxTimestampKind::Acked,
                        _ => return None,
                    },
                    key: r.u32()?,
                    at_ns: r.u64()?,
                },
                _ => return None,
            });
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(SockExt {
            opts: SockOpts {
                zerocopy,
                mark,
                notsent_lowat_bytes,
                tx_timestamping,
                tos,
                pmtu,
            },
            written,
            zc_next_id,
            zc_pending,
            ts_key_base,
            ts_pending,
            errqueue,
        })
    }
}

/// Checked little-endian reads; each consumes from the front.
struct Reader<'a>(&'a [u8]);

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.0.split_first_chunk::<N>()?;
        self.0 = rest;
        Some(*head)
    }
    fn u8(&mut self) -> Option<u8> {
        self.take::<1>().map(|[b]| b)
    }
    fn bool(&mut self) -> Option<bool> {
        match self.u8()? {
            0 => Some(false),
            1 => Some(true),
            _ => None,
        }
    }
    fn u16(&mut self) -> Option<u16> {
        self.take().map(u16::from_le_bytes)
    }
    fn u32(&mut self) -> Option<u32> {
        self.take().map(u32::from_le_bytes)
    }
    fn u64(&mut self) -> Option<u64> {
        self.take().map(u64::from_le_bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn busy() -> SockExt {
        let mut e = SockExt::new(
            SockOpts {
                zerocopy: true,
                mark: 0xdead_beef,
                notsent_lowat_bytes: 16_384,
                tx_timestamping: TxTimestamping {
                    scheduled: true,
                    sent: false,
                    acked: true,
                    opt_id: true,
                    ts_only: false,
                },
                tos: 0x28,
                pmtu: PathMtuDiscovery::Dont,
            },
            5000,
        );
        e.written = 9000;
        e.zc_next_id = 3;
        e.zc_pending.extend([
            ZeroCopySend {
                end: 6000,
                first_id: 0,
                last_id: 1,
            },
            ZeroCopySend {
                end: 9000,
                first_id: 2,
                last_id: 2,
            },
        ]);
        e.ts_key_base = 77;
        e.ts_pending.push_back(TimestampedSend {
            last_byte: 8999,
            departed: true,
        });
        e.errqueue.extend([
            Notification::ZeroCopy {
                first_id: 0,
                last_id: 0,
                copied: true,
            },
            Notification::TxTimestamp {
                kind: TxTimestampKind::Acked,
                key: 4999,
                at_ns: 123_456_789,
            },
        ]);
        e
    }

    fn same(a: &SockExt, b: &SockExt) -> bool {
        let mut x = Vec::new();
        let mut y = Vec::new();
        a.encode(&mut x);
        b.encode(&mut y);
        x == y
            && a.opts == b.opts
            && a.errqueue == b.errqueue
            && a.written == b.written
            && a.zc_pending.len() == b.zc_pending.len()
            && a.ts_pending.len() == b.ts_pending.len()
    }

    #[test]
    fn an_extension_survives_its_encoding_whole() {
        let e = busy();
        let mut bytes = Vec::new();
        e.encode(&mut bytes);
        let back = SockExt::decode(&bytes).expect("decodes");
        assert!(same(&e, &back));
        assert!(bytes.len() <= tcp::SOCKET_EXT_BYTES_MAX);
    }

    #[test]
    fn every_truncation_and_every_extra_byte_is_refused() {
        let mut bytes = Vec::new();
        busy().encode(&mut bytes);
        for cut in 0..bytes.len() {
            assert!(SockExt::decode(&bytes[..cut]).is_none(), "cut at {cut}");
        }
        bytes.push(0);
        assert!(SockExt::decode(&bytes).is_none());
    }

    #[test]
    fn out_of_order_offsets_bad_tags_and_counts_beyond_bounds_are_refused() {
        let mut e = busy();
        e.zc_pending.swap(0, 1);
        let mut bytes = Vec::new();
        e.encode(&mut bytes);
        assert!(
            SockExt::decode(&bytes).is_none(),
            "zero-copy ends out of order"
        );
        let mut bytes = Vec::new();
        busy().encode(&mut bytes);
        // The version byte, then a bool that is neither 0 nor 1.
        let mut bad = bytes.clone();
        bad[0] = EXT_VERSION + 1;
        assert!(SockExt::decode(&bad).is_none());
        let mut bad = bytes.clone();
        bad[1] = 2;
        assert!(SockExt::decode(&bad).is_none());
        // The zero-copy count (after 1 + 1 + 4 + 4 + 5 + 1 + 1 + 8 + 4 + 8 bytes) beyond its
        // bound.
        let at = 37;
        let mut bad = bytes.clone();
        bad[at..at + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert!(SockExt::decode(&bad).is_none());
        // Any single byte changed never panics.
        for i in 0..bytes.len() {
            for v in [0u8, 1, 2, 0x7f, 0xff] {
                let mut m = bytes.clone();
                m[i] = v;
                let _ = SockExt::decode(&m);
            }
        }
    }
}
