//! Helpers for the handoff tests: real snapshots from a real connection pair, and a
//! conversation with one live connection.
#![allow(dead_code)]

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use shard::handoff::{Cid, Conversation, EngineCmd, FourTuple, HostCmd, Limits, ReqId, Side};
use tcp::{Config, Connection, ConnectionSnapshot};
use wire::tcp::SeqNumber;

pub const NOW_NS: u64 = 1_000_000_000;
pub const HOST_PORT: u16 = 80;
pub const PEER_PORT: u16 = 40_000;

/// The host's 4-tuple for a connection whose local port is `local_port`.
pub fn tuple(local_port: u16) -> FourTuple {
    FourTuple {
        local: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), local_port)),
        remote: SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), PEER_PORT)),
    }
}

/// Delivers everything `from` has to send to `to`; true if anything moved.
fn pump(from: &mut Connection, to: &mut Connection) -> bool {
    let mut buf = vec![0u8; 65536];
    let mut any = false;
    while let Some(seg) = from.poll_transmit(NOW_NS, &mut buf) {
        to.handle_segment(NOW_NS, &seg);
        any = true;
    }
    any
}

/// A snapshot of the host's end of an established connection on `local_port` that has
/// received `unread` (not yet read by the application) and sent `in_flight` (not yet
/// acknowledged).
pub fn snapshot_with(local_port: u16, unread: &[u8], in_flight: &[u8]) -> ConnectionSnapshot {
    let config = Config::default();
    let mut peer = Connection::connect(
        NOW_NS,
        &config,
        PEER_PORT,
        local_port,
        SeqNumber(0x1234_5678),
        7,
    );
    let mut buf = vec![0u8; 65536];
    let syn = peer.poll_transmit(NOW_NS, &mut buf).expect("SYN");
    let syn = wire::tcp::TcpRepr {
        payload: &[],
        ..syn
    };
    let mut host = Connection::accept(NOW_NS, &config, &syn, SeqNumber(0x9abc_def0), 3).unwrap();
    while pump(&mut host, &mut peer) | pump(&mut peer, &mut host) {}
    peer.send(unread).unwrap();
    while pump(&mut host, &mut peer) | pump(&mut peer, &mut host) {}
    host.send(in_flight).unwrap();
    // The peer never sees it: in flight at the move.
    host.flush_delayed_ack();
    while host.poll_transmit(NOW_NS, &mut buf).is_some() {}
    let s = host.export(NOW_NS).expect("export");
    assert_eq!(s.recv_unread, unread);
    assert_eq!(s.send_unacked.len() + s.send_unsent.len(), in_flight.len());
    s
}

/// A plain established snapshot on `local_port`.
pub fn snapshot(local_port: u16) -> ConnectionSnapshot {
    snapshot_with(local_port, b"", b"")
}

/// A conversation on `side` in which the connection on `HOST_PORT` (100 bytes unread, 200
/// in flight at the handoff) was handed off with request 1 and accepted as cid 7.
pub fn live(side: Side) -> (Conversation, Cid) {
    let mut c = Conversation::new(side, Limits::default());
    let cid = Cid(7);
    c.host_cmd(&HostCmd::Handoff {
        req: ReqId(1),
        tuple: tuple(HOST_PORT),
        snapshot: Box::new(snapshot_with(HOST_PORT, &[1; 100], &[2; 200])),
    })
    .unwrap();
    c.engine_cmd(&EngineCmd::HandoffAccepted { req: ReqId(1), cid })
        .unwrap();
    (c, cid)
}

/// Encodes, decodes (as a host command, and not as an engine one) and returns what decoded.
pub fn host_round_trip(cmd: &HostCmd) -> HostCmd {
    let mut bytes = Vec::new();
    cmd.encode(&mut bytes);
    let (back, used) = HostCmd::decode(&bytes).expect("decodes");
    assert_eq!(used, bytes.len());
    assert_eq!(&back, cmd);
    let mut again = Vec::new();
    back.encode(&mut again);
    assert_eq!(again, bytes, "canonical");
    assert_eq!(
        EngineCmd::decode(&bytes).err(),
        Some(shard::handoff::DecodeError::WrongDirection(bytes[0]))
    );
    back
}

/// Encodes, decodes (as an engine command, and not as a host one) and returns what decoded.
pub fn engine_round_trip(cmd: &EngineCmd) -> EngineCmd {
    let mut bytes = Vec::new();
    cmd.encode(&mut bytes);
    let (back, used) = EngineCmd::decode(&bytes).expect("decodes");
    assert_eq!(used, bytes.len());
    assert_eq!(&back, cmd);
    let mut again = Vec::new();
    back.encode(&mut again);
    assert_eq!(again, bytes, "canonical");
    assert_eq!(
        HostCmd::decode(&bytes).err(),
        Some(shard::handoff::DecodeError::WrongDirection(bytes[0]))
    );
    back
}
