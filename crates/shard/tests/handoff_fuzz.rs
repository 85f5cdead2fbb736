//! The handoff codec and checker under arbitrary input: a round-trip property over generated
//! commands, and a deterministic fuzz run (seeded random bytes and mutated valid
//! conversations, a few thousand each) through the decoders and both sides' checkers — the
//! suite's stand-in for `fuzz/fuzz_targets/handoff_decode.rs`, which `scripts/test.sh` only
//! compiles.

mod handoff_common;

use std::sync::OnceLock;

use handoff_common::{HOST_PORT, snapshot_with, tuple};
use proptest::prelude::*;
use shard::handoff::{
    Cid, Conversation, EngineCmd, EngineCtrl, HandoffError, HostCmd, HostCtrl, Limits, RecvFlags,
    RefuseReason, ReqId, ResourceKind, RestoreCause, SendFlags, Side,
};
use tcp::{ConnectionSnapshot, KeepaliveConfig};

/// Real snapshots on ports 80..84 with different buffer contents.
fn snapshots() -> &'static [ConnectionSnapshot] {
    static POOL: OnceLock<Vec<ConnectionSnapshot>> = OnceLock::new();
    POOL.get_or_init(|| {
        (0..4u16)
            .map(|i| {
                snapshot_with(
                    HOST_PORT + i,
                    &vec![i as u8; usize::from(i) * 300],
                    &vec![0xa0 | i as u8; usize::from(3 - i) * 500],
                )
            })
            .collect()
    })
}

fn cid() -> impl Strategy<Value = Cid> {
    (0u32..12).prop_map(Cid)
}

fn payload() -> impl Strategy<Value = Vec<u8>> {
    proptest::collection::vec(any::<u8>(), 0..300)
}

fn host_ctrl() -> impl Strategy<Value = HostCtrl> {
    prop_oneof![
        Just(HostCtrl::Close),
        Just(HostCtrl::ShutdownWrite),
        Just(HostCtrl::Abort),
        any::<bool>().prop_map(HostCtrl::Nodelay),
        any::<bool>().prop_map(HostCtrl::Cork),
        any::<u32>().prop_map(HostCtrl::SendBufferBytes),
        any::<u32>().prop_map(HostCtrl::RecvBufferBytes),
        Just(HostCtrl::Keepalive(None)),
        (any::<u64>(), any::<u64>(), any::<u8>()).prop_map(|(idle_ns, interval_ns, probes_max)| {
            HostCtrl::Keepalive(Some(KeepaliveConfig {
                idle_ns,
                interval_ns,
                probes_max,
            }))
        }),
    ]
}

fn host_cmd() -> impl Strategy<Value = HostCmd> {
    prop_oneof![
        (0u32..4, 0usize..4).prop_map(|(req, i)| HostCmd::Handoff {
            req: ReqId(req),
            tuple: tuple(HOST_PORT + i as u16),
            snapshot: Box::new(snapshots()[i].clone()),
        }),
        cid().prop_map(|cid| HostCmd::Restore { cid }),
        (cid(), payload(), any::<bool>()).prop_map(|(cid, data, more)| HostCmd::Send {
            cid,
            data,
            flags: if more {
                SendFlags::MORE
            } else {
                SendFlags::NONE
            },
        }),
        (cid(), 0u32..400).prop_map(|(cid, len_bytes)| HostCmd::Recvd { cid, len_bytes }),
        (cid(), host_ctrl()).prop_map(|(cid, cmd)| HostCmd::Ctrl { cid, cmd }),
        (cid(), payload()).prop_map(|(cid, packet)| HostCmd::Forward { cid, packet }),
        (cid(), any::<u32>()).prop_map(|(cid, len_bytes)| HostCmd::Post { cid, len_bytes }),
    ]
}

fn engine_cmd() -> impl Strategy<Value = EngineCmd> {
    prop_oneof![
        (0u32..4, cid()).prop_map(|(req, cid)| EngineCmd::HandoffAccepted {
            req: ReqId(req),
            cid
        }),
        (0u32..4, 0usize..5).prop_map(|(req, r)| EngineCmd::HandoffRefused {
            req: ReqId(req),
            reason: [
                RefuseReason::NoConnections,
                RefuseReason::NoBufferMemory,
                RefuseReason::Busy,
                RefuseReason::BadSnapshot,
                RefuseReason::ShuttingDown,
            ][r],
        }),
        (cid(), payload(), any::<bool>()).prop_map(|(cid, data, push)| EngineCmd::Recv {
            cid,
            data,
            flags: if push {
                RecvFlags::PUSH
            } else {
                RecvFlags::NONE
            },
        }),
        (cid(), 0u32..1000).prop_map(|(cid, len_bytes)| EngineCmd::Ack { cid, len_bytes }),
        (cid(), 0usize..4).prop_map(|(cid, k)| EngineCmd::Ctrl {
            cid,
            cmd: [
                EngineCtrl::PeerFin,
                EngineCtrl::Reset,
                EngineCtrl::TimedOut,
                EngineCtrl::Deallocated,
            ][k],
        }),
        (0usize..3, any::<u64>()).prop_map(|(k, count)| EngineCmd::Resource {
            kind: [
                ResourceKind::Connections,
                ResourceKind::BufferBytes,
                ResourceKind::BudgetPackets,
            ][k],
            count,
        }),
        (cid(), 0usize..4, 0usize..5).prop_map(|(cid, i, c)| EngineCmd::Restore {
            cid,
            snapshot: Box::new(snapshots()[i].clone()),
            cause: [
                RestoreCause::TimeWait,
                RestoreCause::Closing,
                RestoreCause::ResourceExhaustion,
                RestoreCause::Requested,
                RestoreCause::EngineShutdown,
            ][c],
        }),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// A stream of commands of both directions, encoded back to back, decodes to the same
    /// commands using every byte, and re-encodes to the same bytes.
    #[test]
    fn command_streams_round_trip(
        cmds in proptest::collection::vec(
            prop_oneof![host_cmd().prop_map(Ok), engine_cmd().prop_map(Err)], 1..12),
    ) {
        let mut bytes = Vec::new();
        for c in &cmds {
            match c {
                Ok(h) => h.encode(&mut bytes),
                Err(e) => e.encode(&mut bytes),
            }
        }
        let mut at = 0;
        let mut again = Vec::new();
        for c in &cmds {
            match c {
                Ok(h) => {
                    let (d, used) = HostCmd::decode(&bytes[at..]).unwrap();
                    prop_assert_eq!(&d, h);
                    d.encode(&mut again);
                    at += used;
                }
                Err(e) => {
                    let (d, used) = EngineCmd::decode(&bytes[at..]).unwrap();
                    prop_assert_eq!(&d, e);
                    d.encode(&mut again);
                    at += used;
                }
            }
        }
        prop_assert_eq!(at, bytes.len());
        prop_assert_eq!(again, bytes);
    }

    /// Any sequence of commands, legal or not, leaves both checkers counting exactly one
    /// outcome per command (accepted or refused by reason), never panicking.
    #[test]
    fn checkers_count_one_outcome_per_command(
        cmds in proptest::collection::vec(
            prop_oneof![host_cmd().prop_map(Ok), engine_cmd().prop_map(Err)], 1..40),
    ) {
        for side in [Side::Host, Side::Engine] {
            let mut c = Conversation::new(side, Limits { connections_max: 4, ..Limits::default() });
            for cmd in &cmds {
                let _ = match cmd {
                    Ok(h) => c.host_cmd(h),
                    Err(e) => c.engine_cmd(e),
                };
            }
            let n = c.counters();
            prop_assert_eq!(n.host_cmds + n.engine_cmds + refused_total(&c), cmds.len() as u64);
            prop_assert!(c.live_connections() <= 4);
        }
    }
}

fn refused_total(c: &Conversation) -> u64 {
    let r = c.counters().refused;
    let all = [
        r.unknown_request,
        r.duplicate_request,
        r.too_many_requests,
        r.tuple_already_offloaded,
        r.beyond_advertisement,
        r.cid_reused,
        r.table_full,
        r.unknown_cid,
        r.stale_cid,
        r.not_live,
        r.send_after_shutdown,
        r.recv_after_end,
        r.recvd_beyond_delivered,
        r.ack_beyond_sent,
        r.payload_too_long,
        r.duplicate_event,
        r.resource_beyond_max,
        r.unrequested_restore,
        r.snapshot_mismatch,
        r.snapshot_inconsistent,
    ];
    all.iter().sum()
}

fn malformed_total(c: &Conversation) -> u64 {
    let m = c.counters().malformed;
    m.truncated
        + m.unknown_kind
        + m.wrong_direction
        + m.bad_length
        + m.invalid_field
        + m.payload_too_long
        + m.snapshot
}

/// xorshift64*: a seeded stream, the same on every run.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// A legal conversation, host and engine commands interleaved, encoded back to back, with a
/// direction byte before each command (0 host, 1 engine) — the fuzz input's layout.
fn valid_conversation() -> Vec<u8> {
    let cid = Cid(1);
    let mut out = Vec::new();
    let host = |c: HostCmd, out: &mut Vec<u8>| {
        out.push(0);
        c.encode(out);
    };
    host(
        HostCmd::Handoff {
            req: ReqId(1),
            tuple: tuple(HOST_PORT + 1),
            snapshot: Box::new(snapshots()[1].clone()),
        },
        &mut out,
    );
    let engine = |c: EngineCmd, out: &mut Vec<u8>| {
        out.push(1);
        c.encode(out);
    };
    engine(EngineCmd::HandoffAccepted { req: ReqId(1), cid }, &mut out);
    host(
        HostCmd::Send {
            cid,
            data: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            flags: SendFlags::NONE,
        },
        &mut out,
    );
    engine(
        EngineCmd::Recv {
            cid,
            data: b"HTTP/1.1 200 OK\r\n".to_vec(),
            flags: RecvFlags::PUSH,
        },
        &mut out,
    );
    engine(EngineCmd::Ack { cid, len_bytes: 10 }, &mut out);
    host(HostCmd::Recvd { cid, len_bytes: 17 }, &mut out);
    host(
        HostCmd::Ctrl {
            cid,
            cmd: HostCtrl::Nodelay(true),
        },
        &mut out,
    );
    host(
        HostCmd::Forward {
            cid,
            packet: vec![0x45; 40],
        },
        &mut out,
    );
    host(
        HostCmd::Post {
            cid,
            len_bytes: 4096,
        },
        &mut out,
    );
    engine(
        EngineCmd::Resource {
            kind: ResourceKind::Connections,
            count: 100,
        },
        &mut out,
    );
    engine(
        EngineCmd::Ctrl {
            cid,
            cmd: EngineCtrl::PeerFin,
        },
        &mut out,
    );
    host(HostCmd::Restore { cid }, &mut out);
    engine(
        EngineCmd::Restore {
            cid,
            snapshot: Box::new(snapshots()[1].clone()),
            cause: RestoreCause::Requested,
        },
        &mut out,
    );
    out
}

/// A decoded snapshot imports into a connection whose invariants hold.
fn assert_imports(s: &ConnectionSnapshot) {
    let c = tcp::Connection::import(0, s).expect("a decoded snapshot imports");
    assert_eq!(c.invariant_violation(), None);
}

/// What the fuzz target does with one input: the whole input as a snapshot, then as a
/// conversation (a direction byte, a command, and so on) through both sides' checkers.
/// Every accepted decode re-encodes to the bytes it used. Returns the commands decoded.
fn exercise(data: &[u8], host: &mut Conversation, engine: &mut Conversation) -> usize {
    if let Ok((s, used)) = ConnectionSnapshot::decode(data) {
        let mut again = Vec::new();
        s.encode(&mut again);
        assert_eq!(again, &data[..used]);
        assert_imports(&s);
    }
    let mut rest = data;
    let mut decoded = 0;
    while let Some((&dir, after)) = rest.split_first() {
        let mut again = Vec::new();
        // Decode (and check) on the receiving side, then show the command to the sender.
        let used = if dir & 1 == 0 {
            match engine.decode_host(after) {
                Ok((cmd, used)) => {
                    cmd.encode(&mut again);
                    if let HostCmd::Handoff { snapshot, .. } = &cmd {
                        assert_imports(snapshot);
                    }
                    let _ = host.host_cmd(&cmd);
                    used
                }
                Err(HandoffError::Refused(_)) => HostCmd::decode(after).unwrap().1,
                Err(HandoffError::Malformed(_)) => break,
            }
        } else {
            match host.decode_engine(after) {
                Ok((cmd, used)) => {
                    cmd.encode(&mut again);
                    if let EngineCmd::Restore { snapshot, .. } = &cmd {
                        assert_imports(snapshot);
                    }
                    let _ = engine.engine_cmd(&cmd);
                    used
                }
                Err(HandoffError::Refused(_)) => EngineCmd::decode(after).unwrap().1,
                Err(HandoffError::Malformed(_)) => break,
            }
        };
        if !again.is_empty() {
            assert_eq!(again, &after[..used]);
        }
        decoded += 1;
        rest = &after[used..];
    }
    decoded
}

#[test]
fn the_valid_conversation_is_accepted_by_both_sides() {
    let bytes = valid_conversation();
    let mut host = Conversation::new(Side::Host, Limits::default());
    let mut engine = Conversation::new(Side::Engine, Limits::default());
    assert_eq!(exercise(&bytes, &mut host, &mut engine), 13);
    for c in [&host, &engine] {
        assert_eq!(refused_total(c), 0, "{:?}", c.counters());
        assert_eq!(c.counters().host_cmds + c.counters().engine_cmds, 13);
        assert_eq!(c.live_connections(), 0);
    }
}

#[test]
fn seeded_random_bytes_and_mutated_conversations_never_panic_and_are_counted() {
    let valid = valid_conversation();
    let mut rng = Rng(0x5eed_0f4a_4d0f_f001);
    let mut host = Conversation::new(Side::Host, Limits::default());
    let mut engine = Conversation::new(Side::Engine, Limits::default());
    let mut decoded = 0;
    let mut inputs = 0;
    // Random bytes, biased towards valid kinds and small lengths so the decoders get past
    // the header.
    for _ in 0..4_000 {
        let len = rng.below(80);
        let mut b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        if len > 6 && rng.below(2) == 0 {
            b[1] = [
                0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87,
            ][rng.below(14)];
            b[2] = rng.below(24) as u8;
            b[3] = 0;
            b[4] = 0;
            b[5] = 0;
        }
        decoded += exercise(&b, &mut host, &mut engine);
        inputs += 1;
    }
    // Mutations of the valid conversation: byte flips, insertions, deletions, truncations.
    for _ in 0..3_000 {
        let mut b = valid.clone();
        for _ in 0..=rng.below(4) {
            let at = rng.below(b.len());
            match rng.below(4) {
                0 => b[at] ^= 1 << rng.below(8),
                1 => b[at] = rng.next() as u8,
                2 => b.insert(at, rng.next() as u8),
                _ => {
                    b.remove(at);
                }
            }
        }
        if rng.below(8) == 0 {
            let cut = rng.below(b.len());
            b.truncate(cut);
        }
        // A fresh pair each time, so the mutated conversation starts from the beginning.
        let mut h = Conversation::new(Side::Host, Limits::default());
        let mut e = Conversation::new(Side::Engine, Limits::default());
        decoded += exercise(&b, &mut h, &mut e);
        inputs += 1;
        for c in [&h, &e] {
            assert!(c.live_connections() <= 1);
        }
    }
    assert_eq!(inputs, 7_000);
    assert!(
        decoded > 10_000,
        "the mutations reach deep into the conversations ({decoded})"
    );
    // Both decoders saw malformed input and refused it by reason.
    assert!(malformed_total(&host) > 0 && malformed_total(&engine) > 0);
}
