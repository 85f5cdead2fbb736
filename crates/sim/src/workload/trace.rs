//! `SIM_TRACE_PORT`: a frame-by-frame trace of one port's TCP segments and every ARP packet,
//! for replaying a failing soak seed by hand.

use crate::world::World;

/// Debugging aid: `SIM_TRACE_PORT=<port>` prints every TCP segment to or from the port, and
/// every ARP packet, twice: as the sender puts it on the link (marked `sent`) and as the
/// receiver gets it. A `sent` line without its delivery is a frame the link's faults dropped.
pub(crate) fn trace_port_from_env(w: &mut World) {
    let Some(port) = std::env::var("SIM_TRACE_PORT")
        .ok()
        .and_then(|p| p.parse::<u16>().ok())
    else {
        return;
    };
    w.set_send_tap(move |t, _link, dir, frame| {
        if let Some(line) = trace_tcp(frame, port) {
            eprintln!("{t:>12} ns {dir:?} sent {line}");
        }
    });
    w.set_frame_tap(move |t, _link, dir, frame| {
        if let Some(line) = trace_tcp(frame, port) {
            eprintln!("{t:>12} ns {dir:?} {line}");
        }
    });
}

/// A one-line summary of a TCP/IPv4 segment to or from `port`, or of an ARP packet, for
/// `SIM_TRACE_PORT`.
fn trace_tcp(frame: &[u8], port: u16) -> Option<String> {
    let eth = wire::EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() == wire::EtherType::ARP {
        let arp = wire::ArpPacket::new_checked(eth.payload()).ok()?;
        let repr = wire::ArpRepr::parse(&arp).ok()?;
        return Some(format!(
            "ARP {:?} {} ({}) asks/tells {} ({})",
            repr.operation,
            repr.source_protocol_addr,
            repr.source_hardware_addr,
            repr.target_protocol_addr,
            repr.target_hardware_addr
        ));
    }
    let ip = wire::Ipv4Packet::new_checked(eth.payload()).ok()?;
    let tcp = wire::TcpPacket::new_checked(ip.payload()).ok()?;
    let addrs = wire::IpPair::V4 {
        src: ip.src_addr(),
        dst: ip.dst_addr(),
    };
    let repr = wire::TcpRepr::parse(&tcp, &addrs, wire::ChecksumCaps::NONE).ok()?;
    (repr.src_port == port || repr.dst_port == port).then(|| repr.to_string())
}
