//! Just enough Ethernet/IP/TCP parsing to count data segments on the wire, the same way for
//! both stacks (no dependency on either stack's parser).

const ETH_HEADER_BYTES: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const IP_PROTO_TCP: u8 = 6;
const IPV6_HEADER_BYTES: usize = 40;

fn be16(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_be_bytes([*b.get(at)?, *b.get(at + 1)?]))
}

/// Bytes of TCP payload an Ethernet frame carries: `None` for anything that is not a
/// well-formed unfragmented TCP segment over IPv4 or IPv6 (no extension headers).
pub fn tcp_payload_len(frame: &[u8]) -> Option<usize> {
    let (tcp_at, tcp_len) = match be16(frame, 12)? {
        ETHERTYPE_IPV4 => {
            let ip = ETH_HEADER_BYTES;
            let ihl = usize::from(frame.get(ip)? & 0x0f) * 4;
            let total = usize::from(be16(frame, ip + 2)?);
            if *frame.get(ip + 9)? != IP_PROTO_TCP {
                return None;
            }
            (ip + ihl, total.checked_sub(ihl)?)
        }
        ETHERTYPE_IPV6 => {
            let ip = ETH_HEADER_BYTES;
            if *frame.get(ip + 6)? != IP_PROTO_TCP {
                return None;
            }
            (ip + IPV6_HEADER_BYTES, usize::from(be16(frame, ip + 4)?))
        }
        _ => return None,
    };
    let data_offset = usize::from(frame.get(tcp_at + 12)? >> 4) * 4;
    if frame.len() < tcp_at + tcp_len {
        return None;
    }
    tcp_len.checked_sub(data_offset)
}

/// True when the frame is a TCP segment carrying payload (a "data segment").
pub fn is_data_segment(frame: &[u8]) -> bool {
    tcp_payload_len(frame).is_some_and(|n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v4_tcp(payload: usize, ts: bool) -> Vec<u8> {
        let tcp_hdr = if ts { 32 } else { 20 };
        let total = 20 + tcp_hdr + payload;
        let mut f = vec![0u8; 14 + total];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        f[16..18].copy_from_slice(&(total as u16).to_be_bytes());
        f[23] = IP_PROTO_TCP;
        f[14 + 20 + 12] = ((tcp_hdr / 4) as u8) << 4;
        f
    }

    #[test]
    fn counts_payload_of_ipv4_segments() {
        assert_eq!(tcp_payload_len(&v4_tcp(1448, true)), Some(1448));
        assert_eq!(tcp_payload_len(&v4_tcp(0, false)), Some(0));
        assert!(is_data_segment(&v4_tcp(1, false)));
        assert!(!is_data_segment(&v4_tcp(0, true)));
    }

    #[test]
    fn rejects_truncated_and_non_tcp_frames() {
        let f = v4_tcp(100, false);
        assert_eq!(tcp_payload_len(&f[..f.len() - 1]), None);
        assert_eq!(tcp_payload_len(&f[..20]), None);
        let mut udp = f.clone();
        udp[23] = 17;
        assert_eq!(tcp_payload_len(&udp), None);
        assert_eq!(tcp_payload_len(&[]), None);
    }
}
