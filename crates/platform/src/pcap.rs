//! Classic libpcap capture files (the format `tcpdump -w` writes and Wireshark opens).
//!
//! Layout (all fields in the writer's byte order, which the magic number reveals):
//! - a 24-byte file header: magic, version 2.4, zone offset, accuracy, snapshot length, link type;
//! - per packet a 16-byte record header — seconds, sub-second part, captured length, original
//!   length — followed by the captured bytes.
//!
//! [`PcapWriter`] writes nanosecond-resolution files (magic `0xa1b23c4d`) because rsstack's
//! clocks are `u64` nanoseconds. [`PcapReader`] reads both resolutions in both byte orders and
//! treats every length as hostile: a record longer than the file's snapshot length or than
//! [`MAX_RECORD_BYTES`], or a file that ends inside a record, is a typed [`PcapError`].
#![deny(unsafe_code)]

use std::io::{self, Read, Write};

/// Magic number of microsecond-resolution files.
pub const MAGIC_MICROS: u32 = 0xa1b2_c3d4;
/// Magic number of nanosecond-resolution files.
pub const MAGIC_NANOS: u32 = 0xa1b2_3c4d;
/// `LINKTYPE_ETHERNET`: frames start with an Ethernet II header.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// Snapshot length the writer declares: larger than any frame rsstack emits (64 KiB TSO
/// super-frames included).
pub const DEFAULT_SNAPLEN_BYTES: u32 = 262_144;
/// The reader refuses records larger than this, whatever the file header claims, so a corrupt
/// length cannot make it allocate without bound.
pub const MAX_RECORD_BYTES: u32 = 262_144;

const FILE_HEADER_BYTES: usize = 24;
const RECORD_HEADER_BYTES: usize = 16;
const NANOS_PER_SEC: u64 = 1_000_000_000;

/// What can go wrong reading a capture file.
#[derive(Debug, thiserror::Error)]
pub enum PcapError {
    #[error("not a pcap file (magic number {0:#010x})")]
    BadMagic(u32),
    #[error("unsupported pcap version {major}.{minor}")]
    UnsupportedVersion { major: u16, minor: u16 },
    #[error("file ends inside a {0}")]
    Truncated(&'static str),
    #[error("record of {len_bytes} bytes exceeds the limit of {limit_bytes}")]
    RecordTooLong { len_bytes: u32, limit_bytes: u32 },
    #[error("record captures {captured} bytes of a {original}-byte packet")]
    CapturedExceedsOriginal { captured: u32, original: u32 },
    #[error(transparent)]
    Io(#[from] io::Error),
}

/// One captured packet.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// Capture time in nanoseconds since the Unix epoch (or since the start of a simulation).
    pub timestamp_ns: u64,
    /// Length of the packet on the wire; `data.len()` may be shorter if it was cut at snaplen.
    pub original_len: u32,
    /// The captured bytes.
    pub data: Vec<u8>,
}

/// Writes a nanosecond-resolution pcap stream.
///
/// Invariant: the file header has been written when `new` returns, so an empty capture is still
/// a valid file.
#[derive(Debug)]
pub struct PcapWriter<W: Write> {
    out: W,
    snaplen_bytes: u32,
    records: u64,
}

impl<W: Write> PcapWriter<W> {
    /// Starts a capture of Ethernet frames.
    pub fn new(out: W) -> io::Result<Self> {
        Self::with_link_type(out, LINKTYPE_ETHERNET, DEFAULT_SNAPLEN_BYTES)
    }

    /// Starts a capture with an explicit link type and snapshot length.
    pub fn with_link_type(mut out: W, link_type: u32, snaplen_bytes: u32) -> io::Result<Self> {
        let mut header = [0u8; FILE_HEADER_BYTES];
        header[0..4].copy_from_slice(&MAGIC_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes());
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // Zone offset and timestamp accuracy: 0, as every modern writer sets them.
        header[16..20].copy_from_slice(&snaplen_bytes.to_le_bytes());
        header[20..24].copy_from_slice(&link_type.to_le_bytes());
        out.write_all(&header)?;
        Ok(PcapWriter {
            out,
            snaplen_bytes,
            records: 0,
        })
    }

    /// Appends one frame seen at `timestamp_ns`; frames longer than the snapshot length are cut
    /// and keep their original length in the record header.
    pub fn write_frame(&mut self, timestamp_ns: u64, frame: &[u8]) -> io::Result<()> {
        let original_len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let captured_len = original_len.min(self.snaplen_bytes);
        let captured = frame.get(..captured_len as usize).unwrap_or(frame);
        let secs = u32::try_from(timestamp_ns / NANOS_PER_SEC).unwrap_or(u32::MAX);
        let nanos = (timestamp_ns % NANOS_PER_SEC) as u32;
        let mut header = [0u8; RECORD_HEADER_BYTES];
        header[0..4].copy_from_slice(&secs.to_le_bytes());
        header[4..8].copy_from_slice(&nanos.to_le_bytes());
        header[8..12].copy_from_slice(&captured_len.to_le_bytes());
        header[12..16].copy_from_slice(&original_len.to_le_bytes());
        self.out.write_all(&header)?;
        self.out.write_all(captured)?;
        self.records += 1;
        Ok(())
    }

    /// Records written so far.
    pub fn records(&self) -> u64 {
        self.records
    }

    /// Flushes buffered output.
    pub fn flush(&mut self) -> io::Result<()> {
        self.out.flush()
    }

    /// Flushes and returns the underlying writer.
    pub fn into_inner(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// Reads a pcap stream record by record.
#[derive(Debug)]
pub struct PcapReader<R: Read> {
    input: R,
    big_endian: bool,
    nanos: bool,
    snaplen_bytes: u32,
    link_type: u32,
}

impl<R: Read> PcapReader<R> {
    /// Reads and checks the file header.
    pub fn new(mut input: R) -> Result<Self, PcapError> {
        let mut header = [0u8; FILE_HEADER_BYTES];
        read_exact_or(&mut input, &mut header, "file header")?;
        let magic_le = u32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let (big_endian, nanos) = match magic_le {
            MAGIC_MICROS => (false, false),
            MAGIC_NANOS => (false, true),
            m if m.swap_bytes() == MAGIC_MICROS => (true, false),
            m if m.swap_bytes() == MAGIC_NANOS => (true, true),
            other => return Err(PcapError::BadMagic(other)),
        };
        let u16_at = |i: usize| {
            let b = [header[i], header[i + 1]];
            if big_endian {
                u16::from_be_bytes(b)
            } else {
                u16::from_le_bytes(b)
            }
        };
        let u32_at = |i: usize| {
            let b = [header[i], header[i + 1], header[i + 2], header[i + 3]];
            if big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (major, minor) = (u16_at(4), u16_at(6));
        if major != 2 {
            return Err(PcapError::UnsupportedVersion { major, minor });
        }
        Ok(PcapReader {
            input,
            big_endian,
            nanos,
            snaplen_bytes: u32_at(16),
            link_type: u32_at(20),
        })
    }

    /// The link type the file declares (1 = Ethernet).
    pub fn link_type(&self) -> u32 {
        self.link_type
    }

    /// The snapshot length the file declares.
    pub fn snaplen_bytes(&self) -> u32 {
        self.snaplen_bytes
    }

    /// The next record, `Ok(None)` at a clean end of file.
    pub fn next_record(&mut self) -> Result<Option<Record>, PcapError> {
        let mut header = [0u8; RECORD_HEADER_BYTES];
        let got = read_up_to(&mut self.input, &mut header)?;
        if got == 0 {
            return Ok(None);
        }
        if got < RECORD_HEADER_BYTES {
            return Err(PcapError::Truncated("record header"));
        }
        let field = |i: usize| {
            let b = [header[i], header[i + 1], header[i + 2], header[i + 3]];
            if self.big_endian {
                u32::from_be_bytes(b)
            } else {
                u32::from_le_bytes(b)
            }
        };
        let (secs, frac, captured, original) = (field(0), field(4), field(8), field(12));
        // Some writers declare snaplen 0 or a small snaplen and still write longer records; the
        // hard cap is what protects us, the declared snaplen only when it is meaningful.
        let limit = if self.snaplen_bytes == 0 {
            MAX_RECORD_BYTES
        } else {
            self.snaplen_bytes.clamp(65_535, MAX_RECORD_BYTES)
        };
        if captured > limit {
            return Err(PcapError::RecordTooLong {
                len_bytes: captured,
                limit_bytes: limit,
            });
        }
        if captured > original {
            return Err(PcapError::CapturedExceedsOriginal { captured, original });
        }
        let sub_ns = if self.nanos {
            u64::from(frac)
        } else {
            u64::from(frac) * 1_000
        };
        let mut data = vec![0u8; captured as usize];
        read_exact_or(&mut self.input, &mut data, "record body")?;
        Ok(Some(Record {
            timestamp_ns: u64::from(secs) * NANOS_PER_SEC + sub_ns,
            original_len: original,
            data,
        }))
    }
}

impl<R: Read> Iterator for PcapReader<R> {
    type Item = Result<Record, PcapError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_record().transpose()
    }
}

/// Reads as many bytes as are available up to `buf.len()`; fewer only at end of file.
fn read_up_to(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match input.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(filled)
}

fn read_exact_or(
    input: &mut impl Read,
    buf: &mut [u8],
    what: &'static str,
) -> Result<(), PcapError> {
    if read_up_to(input, buf)? < buf.len() {
        return Err(PcapError::Truncated(what));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn capture(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
        let mut w = PcapWriter::new(Vec::new()).expect("header");
        for (t, f) in frames {
            w.write_frame(*t, f).expect("record");
        }
        w.into_inner().expect("flush")
    }

    #[test]
    fn empty_capture_is_a_valid_file() {
        let bytes = capture(&[]);
        assert_eq!(bytes.len(), FILE_HEADER_BYTES);
        let mut r = PcapReader::new(bytes.as_slice()).expect("header parses");
        assert_eq!(r.link_type(), LINKTYPE_ETHERNET);
        assert!(r.next_record().expect("clean eof").is_none());
    }

    #[test]
    fn reads_big_endian_microsecond_files() {
        let mut bytes = Vec::new();
        bytes.extend_from_slice(&MAGIC_MICROS.to_be_bytes());
        bytes.extend_from_slice(&2u16.to_be_bytes());
        bytes.extend_from_slice(&4u16.to_be_bytes());
        bytes.extend_from_slice(&[0; 8]);
        bytes.extend_from_slice(&65_535u32.to_be_bytes());
        bytes.extend_from_slice(&1u32.to_be_bytes());
        for v in [7u32, 250_000, 3, 60] {
            bytes.extend_from_slice(&v.to_be_bytes());
        }
        bytes.extend_from_slice(&[1, 2, 3]);
        let mut r = PcapReader::new(bytes.as_slice()).expect("header");
        let rec = r.next_record().expect("record").expect("one record");
        assert_eq!(rec.timestamp_ns, 7_250_000_000);
        assert_eq!(rec.original_len, 60);
        assert_eq!(rec.data, vec![1, 2, 3]);
    }

    #[test]
    fn hostile_files_are_typed_errors() {
        assert!(matches!(
            PcapReader::new(&[0u8; 10][..]),
            Err(PcapError::Truncated(_))
        ));
        assert!(matches!(
            PcapReader::new(&[0u8; 24][..]),
            Err(PcapError::BadMagic(0))
        ));
        let mut v3 = capture(&[]);
        v3[4] = 3;
        assert!(matches!(
            PcapReader::new(v3.as_slice()),
            Err(PcapError::UnsupportedVersion { major: 3, .. })
        ));

        let good = capture(&[(1, vec![0xaa; 100])]);
        // Cut inside the record header, then inside the body.
        for cut in [
            FILE_HEADER_BYTES + 5,
            FILE_HEADER_BYTES + RECORD_HEADER_BYTES + 50,
        ] {
            let mut r = PcapReader::new(&good[..cut]).expect("header");
            assert!(
                matches!(r.next_record(), Err(PcapError::Truncated(_))),
                "cut at {cut}"
            );
        }
        // A record length of 4 GiB must not allocate.
        let mut huge = good.clone();
        huge[FILE_HEADER_BYTES + 8..FILE_HEADER_BYTES + 12]
            .copy_from_slice(&u32::MAX.to_le_bytes());
        huge[FILE_HEADER_BYTES + 12..FILE_HEADER_BYTES + 16]
            .copy_from_slice(&u32::MAX.to_le_bytes());
        let mut r = PcapReader::new(huge.as_slice()).expect("header");
        assert!(matches!(
            r.next_record(),
            Err(PcapError::RecordTooLong { .. })
        ));
        // Captured longer than original.
        let mut odd = good;
        odd[FILE_HEADER_BYTES + 12..FILE_HEADER_BYTES + 16].copy_from_slice(&10u32.to_le_bytes());
        let mut r = PcapReader::new(odd.as_slice()).expect("header");
        assert!(matches!(
            r.next_record(),
            Err(PcapError::CapturedExceedsOriginal { .. })
        ));
    }

    #[test]
    fn frames_longer_than_snaplen_are_cut_and_keep_their_length() {
        let mut w = PcapWriter::with_link_type(Vec::new(), LINKTYPE_ETHERNET, 64).expect("header");
        w.write_frame(5, &[9u8; 100]).expect("record");
        let bytes = w.into_inner().expect("flush");
        let rec = PcapReader::new(bytes.as_slice())
            .expect("header")
            .next_record()
            .expect("record")
            .expect("some");
        assert_eq!(rec.data.len(), 64);
        assert_eq!(rec.original_len, 100);
    }

    proptest! {
        #[test]
        fn written_records_read_back_unchanged(
            frames in proptest::collection::vec(
                (0u64..4_000_000_000_000_000_000, proptest::collection::vec(any::<u8>(), 0..1600)),
                0..20,
            )
        ) {
            let bytes = capture(&frames);
            let read: Vec<Record> = PcapReader::new(bytes.as_slice())
                .expect("header")
                .collect::<Result<_, _>>()
                .expect("records");
            prop_assert_eq!(read.len(), frames.len());
            for (rec, (t, f)) in read.iter().zip(&frames) {
                prop_assert_eq!(rec.timestamp_ns, *t);
                prop_assert_eq!(&rec.data, f);
                prop_assert_eq!(rec.original_len as usize, f.len());
            }
        }

        #[test]
        fn arbitrary_bytes_never_panic_the_reader(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            if let Ok(reader) = PcapReader::new(bytes.as_slice()) {
                for rec in reader.take(50) {
                    if rec.is_err() { break; }
                }
            }
        }
    }
}
