//! Where a sender places the TCP options of a segment: the same option values laid out the way
//! Linux or FreeBSD does it. Receivers do not care (RFC 9293 §3.2: options may begin on any
//! octet boundary), but packetdrill scripts written against one of them list its layout — the
//! order and the `nop`/`eol` padding — and compare it byte for byte.
//!
//! - [`TcpOptionLayout::Linux`] (`tcp_options_write`): MSS; SACK-permitted + timestamps, or
//!   NOP NOP timestamps, or NOP NOP SACK-permitted; NOP window scale; NOP NOP SACK blocks;
//!   Fast Open NOP-padded to 4 bytes ([`TcpRepr::emit`]).
//! - [`TcpOptionLayout::FreeBsd`] (`tcp_addoptions`): in the order MSS, window scale,
//!   SACK-permitted, timestamps, SACK blocks, Fast Open, each padded with NOPs where FreeBSD
//!   aligns it — MSS at a multiple of 4, window scale at an odd offset, SACK-permitted at an
//!   even one, timestamps and SACK blocks at 2 mod 4, Fast Open unaligned — and the whole list
//!   closed by one EOL and zero padding when it does not end on a 4-byte boundary. SACK blocks
//!   that do not fit the 40 bytes are left out, as FreeBSD does. A SYN-ACK with everything
//!   reads `<mss 1460,nop,wscale 6,sackOK,TS val .. ecr ..>`; without timestamps and window
//!   scaling `<mss 1460,sackOK,eol,eol>`.

use crate::tcp::{TcpPacket, TcpRepr, field, kind};
use crate::{ChecksumCaps, IpPair, Result};

/// How [`TcpRepr::emit_in`] arranges a segment's options (module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TcpOptionLayout {
    #[default]
    Linux,
    FreeBsd,
}

/// Longest options area (RFC 9293 §3.1: data offset at most 15 words).
const OPTIONS_MAX: usize = 40;

/// Options bytes being laid out FreeBSD's way. Invariant: `len <= OPTIONS_MAX`.
struct BsdWriter {
    buf: [u8; OPTIONS_MAX],
    len: usize,
}

impl BsdWriter {
    fn pad_nop_until(&mut self, aligned: impl Fn(usize) -> bool) {
        while !aligned(self.len) && self.len < OPTIONS_MAX {
            self.push(&[kind::NOP]);
        }
    }

    fn room(&self) -> usize {
        OPTIONS_MAX - self.len
    }

    fn push(&mut self, bytes: &[u8]) {
        if let Some(dst) = self.buf.get_mut(self.len..self.len + bytes.len()) {
            dst.copy_from_slice(bytes);
            self.len += bytes.len();
        }
    }
}

impl TcpRepr<'_> {
    /// The options area FreeBSD's `tcp_addoptions` would write for these option values.
    fn freebsd_options(&self) -> BsdWriter {
        let mut w = BsdWriter {
            buf: [0; OPTIONS_MAX],
            len: 0,
        };
        if let Some(mss) = self.max_seg_size {
            w.pad_nop_until(|n| n % 4 == 0);
            if w.room() >= 4 {
                let [hi, lo] = mss.to_be_bytes();
                w.push(&[kind::MSS, 4, hi, lo]);
            }
        }
        if let Some(ws) = self.window_scale {
            w.pad_nop_until(|n| n % 2 == 1);
            if w.room() >= 3 {
                w.push(&[kind::WINDOW_SCALE, 3, ws]);
            }
        }
        if self.sack_permitted {
            w.pad_nop_until(|n| n % 2 == 0);
            if w.room() >= 2 {
                w.push(&[kind::SACK_PERMITTED, 2]);
            }
        }
        if let Some(ts) = self.timestamp {
            w.pad_nop_until(|n| n % 4 == 2);
            if w.room() >= 10 {
                w.push(&[kind::TIMESTAMP, 10]);
                w.push(&ts.tsval.to_be_bytes());
                w.push(&ts.tsecr.to_be_bytes());
            }
        }
        let blocks = self.sack_block_count();
        if blocks > 0 {
            w.pad_nop_until(|n| n % 4 == 2);
            if w.room() >= 2 + 8 {
                let fit = blocks.min((w.room() - 2) / 8);
                w.push(&[kind::SACK, (2 + 8 * fit) as u8]);
                for b in self.sack_blocks.iter().flatten().take(fit) {
                    w.push(&b.left.0.to_be_bytes());
                    w.push(&b.right.0.to_be_bytes());
                }
            }
        }
        if let Some(fo) = &self.fast_open
            && w.room() >= fo.option_len()
        {
            let mut tmp = [0u8; OPTIONS_MAX];
            let n = fo.option_len();
            fo.write(&mut tmp);
            w.push(tmp.get(..n).unwrap_or(&[]));
        }
        if w.len % 4 != 0 {
            // One EOL, then zero padding (the buffer is zeroed already).
            w.push(&[kind::END]);
            w.len = w.len.next_multiple_of(4).min(OPTIONS_MAX);
        }
        w
    }

    /// Bytes of options [`TcpRepr::emit_in`] writes in `layout`; a multiple of 4.
    #[inline]
    pub fn options_len_in(&self, layout: TcpOptionLayout) -> usize {
        match layout {
            TcpOptionLayout::Linux => self.options_len(),
            TcpOptionLayout::FreeBsd => self.freebsd_options().len,
        }
    }

    /// Header length in bytes with the options in `layout`.
    #[inline]
    pub fn header_len_in(&self, layout: TcpOptionLayout) -> usize {
        field::HEADER_LEN + self.options_len_in(layout)
    }

    /// Header plus payload with the options in `layout`.
    #[inline]
    pub fn buffer_len_in(&self, layout: TcpOptionLayout) -> usize {
        self.header_len_in(layout) + self.payload.len()
    }

    /// [`TcpRepr::emit`] with the options in `layout`; the buffer must be
    /// `buffer_len_in(layout)` bytes.
    #[inline]
    pub fn emit_in<T: AsRef<[u8]> + AsMut<[u8]>>(
        &self,
        packet: &mut TcpPacket<T>,
        addrs: &IpPair,
        caps: ChecksumCaps,
        layout: TcpOptionLayout,
    ) -> Result<()> {
        match layout {
            TcpOptionLayout::Linux => self.emit(packet, addrs, caps),
            TcpOptionLayout::FreeBsd => {
                let opts = self.freebsd_options();
                self.emit_with_options(packet, addrs, caps, &opts.buf[..opts.len])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::{SackBlock, SeqNumber, TcpFlags, TcpOption, TcpOptions, TcpTimestamp};
    use crate::tcp_fast_open::FastOpenOption;

    fn repr() -> TcpRepr<'static> {
        TcpRepr::bare(
            1,
            2,
            SeqNumber(10),
            SeqNumber(20),
            TcpFlags::SYN | TcpFlags::ACK,
            65535,
        )
    }

    fn options_in(r: &TcpRepr<'_>, layout: TcpOptionLayout) -> Vec<u8> {
        let addrs = IpPair::V4 {
            src: core::net::Ipv4Addr::new(192, 0, 2, 1),
            dst: core::net::Ipv4Addr::new(192, 0, 2, 2),
        };
        let mut buf = vec![0u8; r.buffer_len_in(layout)];
        r.emit_in(
            &mut TcpPacket::new_unchecked(&mut buf[..]),
            &addrs,
            ChecksumCaps::ALL,
            layout,
        )
        .expect("emits");
        let pkt = TcpPacket::new_checked(&buf[..]).expect("parses");
        let back = TcpRepr::parse(&pkt, &addrs, ChecksumCaps::ALL).expect("parses");
        // The layout changes where the options sit, never what they say.
        assert_eq!(
            (back.max_seg_size, back.window_scale, back.sack_permitted),
            (r.max_seg_size, r.window_scale, r.sack_permitted)
        );
        assert_eq!((back.timestamp, back.fast_open), (r.timestamp, r.fast_open));
        pkt.options().to_vec()
    }

    const TS: TcpTimestamp = TcpTimestamp {
        tsval: 0x0102_0304,
        tsecr: 0,
    };

    #[test]
    fn freebsd_syn_ack_with_every_option_puts_window_scale_second() {
        let mut r = repr();
        r.max_seg_size = Some(1460);
        r.window_scale = Some(6);
        r.sack_permitted = true;
        r.timestamp = Some(TS);
        assert_eq!(
            options_in(&r, TcpOptionLayout::FreeBsd),
            [
                2, 4, 5, 180, 1, 3, 3, 6, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0
            ]
        );
        // Linux: mss, sackOK+TS, nop wscale.
        assert_eq!(
            options_in(&r, TcpOptionLayout::Linux),
            [
                2, 4, 5, 180, 4, 2, 8, 10, 1, 2, 3, 4, 0, 0, 0, 0, 1, 3, 3, 6
            ]
        );
    }

    #[test]
    fn freebsd_closes_an_unaligned_list_with_eol_and_zero_padding() {
        let mut r = repr();
        r.max_seg_size = Some(1460);
        r.sack_permitted = true;
        assert_eq!(
            options_in(&r, TcpOptionLayout::FreeBsd),
            [2, 4, 5, 180, 4, 2, 0, 0]
        );
        r.window_scale = Some(6);
        assert_eq!(
            options_in(&r, TcpOptionLayout::FreeBsd),
            [2, 4, 5, 180, 1, 3, 3, 6, 4, 2, 0, 0]
        );
    }

    #[test]
    fn freebsd_data_segment_pads_timestamps_and_sack_blocks_to_2_mod_4() {
        let mut r = repr();
        r.flags = TcpFlags::ACK;
        r.timestamp = Some(TS);
        r.sack_blocks[0] = Some(SackBlock {
            left: SeqNumber(5),
            right: SeqNumber(6),
        });
        let raw = options_in(&r, TcpOptionLayout::FreeBsd);
        assert_eq!(&raw[..4], &[1, 1, 8, 10]);
        assert_eq!(&raw[12..16], &[1, 1, 5, 10]);
        assert_eq!(raw.len(), 24);
        assert_eq!(raw, options_in(&r, TcpOptionLayout::Linux));
    }

    #[test]
    fn freebsd_leaves_out_sack_blocks_that_do_not_fit() {
        let mut r = repr();
        r.flags = TcpFlags::ACK;
        r.timestamp = Some(TS);
        for (i, slot) in r.sack_blocks.iter_mut().enumerate() {
            let base = 100 * i as u32;
            *slot = Some(SackBlock {
                left: SeqNumber(base),
                right: SeqNumber(base + 10),
            });
        }
        let raw = options_in(&r, TcpOptionLayout::FreeBsd);
        assert_eq!(raw.len(), 40);
        let sack = TcpOptions::new(&raw)
            .filter_map(|o| match o {
                Ok(TcpOption::SackRange(b)) => Some(b.iter().flatten().count()),
                _ => None,
            })
            .next();
        assert_eq!(
            sack,
            Some(3),
            "12 bytes of timestamps leave room for 3 blocks"
        );
    }

    #[test]
    fn freebsd_fast_open_follows_unaligned() {
        let mut r = repr();
        r.max_seg_size = Some(1460);
        r.sack_permitted = true;
        r.fast_open = FastOpenOption::with_cookie(&[9; 8], false);
        assert_eq!(
            options_in(&r, TcpOptionLayout::FreeBsd),
            [2, 4, 5, 180, 4, 2, 34, 10, 9, 9, 9, 9, 9, 9, 9, 9]
        );
        assert_eq!(r.options_len_in(TcpOptionLayout::Linux), 20);
    }
}
