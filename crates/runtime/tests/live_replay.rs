//! Live hosts without root: a pcap file replayed as received traffic (`LiveIo::PcapIn`), the
//! host's transmissions read back from its `--capture` file.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use apps::http::{FileSet, HttpServer};
use platform::pcap::{PcapReader, PcapWriter};
use runtime::{HostConfig, HostLimits, LiveConfig, LiveIo, LiveReport, run_host};
use stack::{InterfaceConfig, Ipv4Cidr};
use wire::EthernetAddress;

const OUR_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x01];
const PEER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 0x02];
const OUR_IP: [u8; 4] = [10, 0, 0, 1];
const PEER_IP: [u8; 4] = [10, 0, 0, 2];

fn arp_request() -> Vec<u8> {
    let mut f = Vec::with_capacity(42);
    f.extend_from_slice(&[0xff; 6]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x08, 0x06, 0, 1, 0x08, 0x00, 6, 4, 0, 1]);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&PEER_IP);
    f.extend_from_slice(&[0; 6]);
    f.extend_from_slice(&OUR_IP);
    f
}

/// A SYN from the peer's `sport` to our port 80, with an MSS option; checksums correct.
fn syn(sport: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(14 + 20 + 24);
    f.extend_from_slice(&OUR_MAC);
    f.extend_from_slice(&PEER_MAC);
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ip = [0u8; 20];
    ip[0] = 0x45;
    ip[2..4].copy_from_slice(&44u16.to_be_bytes());
    ip[6] = 0x40;
    ip[8] = 64;
    ip[9] = 6;
    ip[12..16].copy_from_slice(&PEER_IP);
    ip[16..20].copy_from_slice(&OUR_IP);
    let c = wire::checksum::finish(wire::checksum::sum(&ip));
    ip[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&ip);
    let mut tcp = [0u8; 24];
    tcp[0..2].copy_from_slice(&sport.to_be_bytes());
    tcp[2..4].copy_from_slice(&80u16.to_be_bytes());
    tcp[4..8].copy_from_slice(&(0x1000_0000u32 + u32::from(sport)).to_be_bytes());
    tcp[12] = 6 << 4;
    tcp[13] = 0x02;
    tcp[14..16].copy_from_slice(&65535u16.to_be_bytes());
    tcp[20..24].copy_from_slice(&[2, 4, 0x05, 0xb4]);
    let pseudo = wire::checksum::pseudo_header_v4(PEER_IP.into(), OUR_IP.into(), 6, 24);
    let c = wire::checksum::finish(wire::checksum::combine(&[
        pseudo,
        wire::checksum::sum(&tcp),
    ]));
    tcp[16..18].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&tcp);
    f
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("rsstack-{}-{name}", std::process::id()))
}

fn write_pcap(path: &PathBuf, frames: &[Vec<u8>]) {
    let mut w = PcapWriter::new(std::fs::File::create(path).expect("create pcap")).expect("header");
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(i as u64 * 1000, f).expect("record");
    }
    w.flush().expect("flush");
}

fn read_pcap(path: &PathBuf) -> Vec<Vec<u8>> {
    let r = PcapReader::new(std::fs::File::open(path).expect("open capture")).expect("header");
    r.map(|rec| rec.expect("record").data).collect()
}

/// Source ports of the SYN-ACKs our host sent (from 10.0.0.1:80 to the peer).
fn syn_ack_ports(frames: &[Vec<u8>]) -> Vec<u16> {
    frames
        .iter()
        .filter(|f| {
            f.len() >= 54
                && f[12..14] == [0x08, 0x00]
                && f[23] == 6
                && f[26..30] == OUR_IP
                && f[30..34] == PEER_IP
                && f[34..36] == 80u16.to_be_bytes()
                && f[47] & 0x12 == 0x12
        })
        .map(|f| u16::from_be_bytes([f[36], f[37]]))
        .collect()
}

fn replay(shards: u16, frames: &[Vec<u8>], tag: &str) -> (LiveReport<HttpServer>, Vec<Vec<u8>>) {
    let input = temp(&format!("{tag}-in.pcap"));
    let capture = temp(&format!("{tag}-cap.pcap"));
    write_pcap(&input, frames);
    let iface = InterfaceConfig::new(EthernetAddress(OUR_MAC), Ipv4Cidr::new(OUR_IP.into(), 24));
    let cfg = HostConfig::new(iface, shards);
    let cfg = HostConfig { queues: 1, ..cfg };
    let live = LiveConfig {
        io: LiveIo::PcapIn {
            path: input.clone(),
        },
        capture: Some(capture.clone()),
    };
    let files = Arc::new(FileSet::demo(64));
    let limits = HostLimits {
        duration: Some(Duration::from_millis(400)),
        stop_when_done: false,
        monitor_every: Duration::from_millis(5),
    };
    let report = run_host(
        &cfg,
        &live,
        move |_| HttpServer::new(80, files.clone()),
        limits,
        Arc::new(AtomicBool::new(false)),
        |_| {},
    )
    .expect("run_host over a replay");
    let captured = read_pcap(&capture);
    let _ = std::fs::remove_file(&input);
    let _ = std::fs::remove_file(&capture);
    (report, captured)
}

#[test]
fn a_replayed_syn_to_port_80_gets_a_syn_ack_in_the_capture() {
    let (report, captured) = replay(1, &[arp_request(), syn(40000)], "one");
    assert_eq!(
        syn_ack_ports(&captured),
        vec![40000],
        "{} frames",
        captured.len()
    );
    // The capture holds what came in (2 frames) and what went out (ARP reply, SYN-ACK).
    let p = report.port_counters();
    assert_eq!(p.replay_frames, 2);
    assert_eq!(p.tx_frames, p.tx_discarded);
    assert_eq!(report.capture_records, Some(p.rx_frames + p.tx_frames));
    assert_eq!(captured.len() as u64, p.rx_frames + p.tx_frames);
    assert_eq!(report.host.cross_shard_messages(), 0);
}

#[test]
fn with_four_shards_flows_are_forwarded_to_their_owners_and_arp_reaches_every_shard() {
    let ports: Vec<u16> = (0..32).map(|i| 41000 + i * 7).collect();
    let mut frames = vec![arp_request()];
    frames.extend(ports.iter().map(|&p| syn(p)));
    let (report, captured) = replay(4, &frames, "four");
    let mut got = syn_ack_ports(&captured);
    got.sort_unstable();
    assert_eq!(got, ports, "every flow answered, once, by its owner");
    let shards = &report.host.shards;
    // Shard 0 read everything: the ARP frame was copied to the three others...
    assert_eq!(shards[0].neighbour_copies, 3);
    assert!(shards.iter().skip(1).all(|s| s.neighbour_copies == 0));
    // ...and the SYNs of flows owned elsewhere crossed over, counted.
    let forwarded: u64 = shards.iter().map(|s| s.cross_shard_rx).sum();
    assert_eq!(report.host.cross_shard_messages(), forwarded);
    assert!(forwarded > 3, "{forwarded}");
    // Owners other than shard 0 answered (their neighbour caches knew the peer from the copy).
    let answering = shards.iter().filter(|s| s.tx_frames > 0).count();
    assert!(answering >= 3, "{answering} shards transmitted");
    assert_eq!(report.host.drops(), 0);
}
