//! Every command of seed 002's Figures 4 and 5: encoded, decoded, and fed to a
//! [`Conversation`] whose effect is checked; plus the out-of-order cases the checker refuses.

mod handoff_common;

use handoff_common::{
    HOST_PORT, engine_round_trip, host_round_trip, live, snapshot, snapshot_with, tuple,
};
use shard::handoff::{
    CheckError, Cid, CidState, Conversation, DecodeError, EngineCmd, EngineCtrl, HandoffError,
    HostCmd, HostCtrl, Limits, PAYLOAD_BYTES_MAX, RecvFlags, RefuseReason, ReqId, ResourceKind,
    RestoreCause, SendFlags, Side,
};
use tcp::KeepaliveConfig;

// ---- host → engine (Figure 4) ----

#[test]
fn handoff_round_trips_and_opens_a_pending_request_for_its_tuple() {
    for side in [Side::Host, Side::Engine] {
        let mut c = Conversation::new(side, Limits::default());
        let cmd = host_round_trip(&HostCmd::Handoff {
            req: ReqId(42),
            tuple: tuple(HOST_PORT),
            snapshot: Box::new(snapshot_with(HOST_PORT, b"unread", b"in flight")),
        });
        c.host_cmd(&cmd).unwrap();
        assert!(c.request_pending(ReqId(42)));
        assert!(c.is_offloaded(&tuple(HOST_PORT)));
        assert_eq!(c.live_connections(), 0);
        // The same request id again, and the same tuple under another id: refused.
        assert_eq!(c.host_cmd(&cmd), Err(CheckError::DuplicateRequest));
        let HostCmd::Handoff { snapshot, .. } = cmd else {
            unreachable!()
        };
        let again = HostCmd::Handoff {
            req: ReqId(43),
            tuple: tuple(HOST_PORT),
            snapshot,
        };
        assert_eq!(c.host_cmd(&again), Err(CheckError::TupleAlreadyOffloaded));
        assert_eq!(c.counters().refused.tuple_already_offloaded, 1);
        assert_eq!(c.counters().host_cmds, 1);
    }
}

#[test]
fn handoff_whose_snapshot_is_not_its_tuples_is_refused() {
    let mut c = Conversation::new(Side::Engine, Limits::default());
    let cmd = HostCmd::Handoff {
        req: ReqId(1),
        tuple: tuple(HOST_PORT),
        snapshot: Box::new(snapshot(81)),
    };
    assert_eq!(c.host_cmd(&cmd), Err(CheckError::SnapshotMismatch));
    assert!(!c.is_offloaded(&tuple(HOST_PORT)));
    let mut bad = snapshot(HOST_PORT);
    bad.send_unacked.push(0);
    let cmd = HostCmd::Handoff {
        req: ReqId(1),
        tuple: tuple(HOST_PORT),
        snapshot: Box::new(bad),
    };
    assert_eq!(c.host_cmd(&cmd), Err(CheckError::SnapshotInconsistent));
}

#[test]
fn restore_round_trips_and_moves_the_connection_to_restoring() {
    let (mut c, cid) = live(Side::Host);
    c.host_cmd(&host_round_trip(&HostCmd::Restore { cid }))
        .unwrap();
    assert_eq!(c.cid_state(cid), CidState::Restoring);
    // The host has let go: no more commands from it...
    assert_eq!(
        c.host_cmd(&HostCmd::Post { cid, len_bytes: 10 }),
        Err(CheckError::NotLive)
    );
    // ...while the engine's last reports still arrive, then its Restore ends it.
    c.engine_cmd(&EngineCmd::Ack { cid, len_bytes: 50 })
        .unwrap();
    c.engine_cmd(&EngineCmd::Restore {
        cid,
        snapshot: Box::new(snapshot(HOST_PORT)),
        cause: RestoreCause::Requested,
    })
    .unwrap();
    assert_eq!(c.cid_state(cid), CidState::Gone);
}

#[test]
fn send_round_trips_and_extends_what_the_engine_may_ack() {
    let (mut c, cid) = live(Side::Engine);
    // 200 bytes were in flight at the handoff.
    assert_eq!(
        c.engine_cmd(&EngineCmd::Ack {
            cid,
            len_bytes: 201
        }),
        Err(CheckError::AckBeyondSent)
    );
    for flags in [SendFlags::NONE, SendFlags::MORE] {
        let cmd = host_round_trip(&HostCmd::Send {
            cid,
            data: vec![9; 100],
            flags,
        });
        c.host_cmd(&cmd).unwrap();
    }
    c.engine_cmd(&EngineCmd::Ack {
        cid,
        len_bytes: 400,
    })
    .unwrap();
    assert_eq!(
        c.engine_cmd(&EngineCmd::Ack { cid, len_bytes: 1 }),
        Err(CheckError::AckBeyondSent)
    );
    let too_long = HostCmd::Send {
        cid,
        data: vec![0; PAYLOAD_BYTES_MAX + 1],
        flags: SendFlags::NONE,
    };
    assert_eq!(c.host_cmd(&too_long), Err(CheckError::PayloadTooLong));
    let mut bytes = Vec::new();
    too_long.encode(&mut bytes);
    assert_eq!(
        HostCmd::decode(&bytes).err(),
        Some(DecodeError::PayloadTooLong)
    );
}

#[test]
fn recvd_round_trips_and_never_exceeds_what_was_delivered() {
    let (mut c, cid) = live(Side::Host);
    // 100 bytes were unread at the handoff: the host may report them read.
    c.host_cmd(&host_round_trip(&HostCmd::Recvd {
        cid,
        len_bytes: 100,
    }))
    .unwrap();
    assert_eq!(
        c.host_cmd(&HostCmd::Recvd { cid, len_bytes: 1 }),
        Err(CheckError::RecvdBeyondDelivered)
    );
    c.engine_cmd(&EngineCmd::Recv {
        cid,
        data: vec![5; 30],
        flags: RecvFlags::NONE,
    })
    .unwrap();
    c.host_cmd(&HostCmd::Recvd { cid, len_bytes: 30 }).unwrap();
    assert_eq!(c.counters().refused.recvd_beyond_delivered, 1);
}

#[test]
fn ctrl_round_trips_every_host_command_and_close_ends_sending() {
    let (mut c, cid) = live(Side::Engine);
    let options = [
        HostCtrl::Nodelay(true),
        HostCtrl::Nodelay(false),
        HostCtrl::Cork(true),
        HostCtrl::SendBufferBytes(1 << 20),
        HostCtrl::RecvBufferBytes(65_535),
        HostCtrl::Keepalive(None),
        HostCtrl::Keepalive(Some(KeepaliveConfig {
            idle_ns: 7_200_000_000_000,
            interval_ns: 75_000_000_000,
            probes_max: 9,
        })),
    ];
    for cmd in options {
        c.host_cmd(&host_round_trip(&HostCmd::Ctrl { cid, cmd }))
            .unwrap();
    }
    let send = HostCmd::Send {
        cid,
        data: b"x".to_vec(),
        flags: SendFlags::NONE,
    };
    c.host_cmd(&send).unwrap();
    c.host_cmd(&host_round_trip(&HostCmd::Ctrl {
        cid,
        cmd: HostCtrl::ShutdownWrite,
    }))
    .unwrap();
    assert_eq!(c.host_cmd(&send), Err(CheckError::SendAfterShutdown));
    c.host_cmd(&host_round_trip(&HostCmd::Ctrl {
        cid,
        cmd: HostCtrl::Close,
    }))
    .unwrap();
    assert_eq!(
        c.cid_state(cid),
        CidState::Live,
        "close lets the engine finish"
    );
    c.host_cmd(&host_round_trip(&HostCmd::Ctrl {
        cid,
        cmd: HostCtrl::Abort,
    }))
    .unwrap();
    assert_eq!(c.cid_state(cid), CidState::Restoring, "abort lets go");
    assert_eq!(c.counters().refused.send_after_shutdown, 1);
}

#[test]
fn forward_round_trips_for_a_live_connection_only() {
    let (mut c, cid) = live(Side::Engine);
    let packet = vec![0x45; 60];
    c.host_cmd(&host_round_trip(&HostCmd::Forward {
        cid,
        packet: packet.clone(),
    }))
    .unwrap();
    assert_eq!(
        c.host_cmd(&HostCmd::Forward {
            cid: Cid(99),
            packet
        }),
        Err(CheckError::UnknownCid)
    );
    assert_eq!(
        c.host_cmd(&HostCmd::Forward {
            cid,
            packet: vec![0; PAYLOAD_BYTES_MAX + 1]
        }),
        Err(CheckError::PayloadTooLong)
    );
}

#[test]
fn post_round_trips_for_a_live_connection_only() {
    let (mut c, cid) = live(Side::Engine);
    c.host_cmd(&host_round_trip(&HostCmd::Post {
        cid,
        len_bytes: 65_536,
    }))
    .unwrap();
    assert_eq!(
        c.host_cmd(&HostCmd::Post {
            cid: Cid(99),
            len_bytes: 1
        }),
        Err(CheckError::UnknownCid)
    );
    // Below the highest cid issued and not held: gone, so stale on the engine's side.
    assert_eq!(
        c.host_cmd(&HostCmd::Post {
            cid: Cid(3),
            len_bytes: 1
        }),
        Err(CheckError::StaleCid)
    );
    assert_eq!(c.counters().refused.unknown_cid, 1);
}

// ---- engine → host (Figure 5 and the handoff's answer) ----

#[test]
fn handoff_accepted_round_trips_and_makes_the_connection_live() {
    let (mut c, cid) = live(Side::Host);
    assert_eq!(c.cid_state(cid), CidState::Live);
    assert!(!c.request_pending(ReqId(1)));
    engine_round_trip(&EngineCmd::HandoffAccepted { req: ReqId(1), cid });
    // The request is answered: a second answer is refused, and a new one may not reuse cids.
    assert_eq!(
        c.engine_cmd(&EngineCmd::HandoffAccepted { req: ReqId(1), cid }),
        Err(CheckError::UnknownRequest)
    );
    c.host_cmd(&HostCmd::Handoff {
        req: ReqId(2),
        tuple: tuple(81),
        snapshot: Box::new(snapshot(81)),
    })
    .unwrap();
    assert_eq!(
        c.engine_cmd(&EngineCmd::HandoffAccepted { req: ReqId(2), cid }),
        Err(CheckError::CidReused)
    );
    c.engine_cmd(&EngineCmd::HandoffAccepted {
        req: ReqId(2),
        cid: Cid(8),
    })
    .unwrap();
    assert_eq!(c.live_connections(), 2);
}

#[test]
fn handoff_refused_round_trips_and_gives_the_tuple_back() {
    let mut c = Conversation::new(Side::Host, Limits::default());
    let handoff = HostCmd::Handoff {
        req: ReqId(5),
        tuple: tuple(HOST_PORT),
        snapshot: Box::new(snapshot(HOST_PORT)),
    };
    c.host_cmd(&handoff).unwrap();
    for reason in [
        RefuseReason::NoConnections,
        RefuseReason::NoBufferMemory,
        RefuseReason::Busy,
        RefuseReason::BadSnapshot,
        RefuseReason::ShuttingDown,
    ] {
        engine_round_trip(&EngineCmd::HandoffRefused {
            req: ReqId(5),
            reason,
        });
    }
    c.engine_cmd(&EngineCmd::HandoffRefused {
        req: ReqId(5),
        reason: RefuseReason::NoConnections,
    })
    .unwrap();
    assert!(!c.is_offloaded(&tuple(HOST_PORT)));
    // The host keeps the connection and may try again later.
    c.host_cmd(&handoff).unwrap();
}

#[test]
fn recv_round_trips_and_stops_after_the_peers_fin() {
    let (mut c, cid) = live(Side::Host);
    for flags in [RecvFlags::NONE, RecvFlags::PUSH] {
        c.engine_cmd(&engine_round_trip(&EngineCmd::Recv {
            cid,
            data: b"hello".to_vec(),
            flags,
        }))
        .unwrap();
    }
    c.host_cmd(&HostCmd::Recvd {
        cid,
        len_bytes: 110,
    })
    .unwrap();
    c.engine_cmd(&EngineCmd::Ctrl {
        cid,
        cmd: EngineCtrl::PeerFin,
    })
    .unwrap();
    assert_eq!(
        c.engine_cmd(&EngineCmd::Recv {
            cid,
            data: b"late".to_vec(),
            flags: RecvFlags::NONE
        }),
        Err(CheckError::RecvAfterEnd)
    );
}

#[test]
fn ack_round_trips_and_never_exceeds_what_was_sent() {
    let (mut c, cid) = live(Side::Host);
    c.engine_cmd(&engine_round_trip(&EngineCmd::Ack {
        cid,
        len_bytes: 150,
    }))
    .unwrap();
    c.engine_cmd(&EngineCmd::Ack { cid, len_bytes: 50 })
        .unwrap();
    assert_eq!(
        c.engine_cmd(&EngineCmd::Ack { cid, len_bytes: 1 }),
        Err(CheckError::AckBeyondSent)
    );
    assert_eq!(c.counters().refused.ack_beyond_sent, 1);
}

#[test]
fn ctrl_round_trips_every_engine_event_and_deallocated_ends_the_connection() {
    let (mut c, cid) = live(Side::Host);
    for cmd in [
        EngineCtrl::PeerFin,
        EngineCtrl::Reset,
        EngineCtrl::TimedOut,
        EngineCtrl::Deallocated,
    ] {
        engine_round_trip(&EngineCmd::Ctrl { cid, cmd });
    }
    let fin = EngineCmd::Ctrl {
        cid,
        cmd: EngineCtrl::PeerFin,
    };
    c.engine_cmd(&fin).unwrap();
    assert_eq!(c.engine_cmd(&fin), Err(CheckError::DuplicateEvent));
    let reset = EngineCmd::Ctrl {
        cid,
        cmd: EngineCtrl::Reset,
    };
    c.engine_cmd(&reset).unwrap();
    assert_eq!(c.engine_cmd(&reset), Err(CheckError::DuplicateEvent));
    c.engine_cmd(&EngineCmd::Ctrl {
        cid,
        cmd: EngineCtrl::Deallocated,
    })
    .unwrap();
    assert_eq!(c.cid_state(cid), CidState::Gone);
    assert!(!c.is_offloaded(&tuple(HOST_PORT)));
    // Nothing may follow the de-allocation.
    assert_eq!(c.engine_cmd(&fin), Err(CheckError::UnknownCid));
}

#[test]
fn resource_round_trips_and_bounds_the_hosts_handoffs() {
    let limits = Limits {
        connections_max: 4,
        ..Limits::default()
    };
    let mut host = Conversation::new(Side::Host, limits);
    for kind in [
        ResourceKind::Connections,
        ResourceKind::BufferBytes,
        ResourceKind::BudgetPackets,
    ] {
        let cmd = engine_round_trip(&EngineCmd::Resource { kind, count: 1 });
        host.engine_cmd(&cmd).unwrap();
        let over = EngineCmd::Resource {
            kind,
            count: limits.max(kind) + 1,
        };
        assert_eq!(host.engine_cmd(&over), Err(CheckError::ResourceBeyondMax));
    }
    // One connection advertised: one handoff, then the host must wait.
    let handoff = |req, port| HostCmd::Handoff {
        req: ReqId(req),
        tuple: tuple(port),
        snapshot: Box::new(snapshot(port)),
    };
    host.host_cmd(&handoff(1, 81)).unwrap();
    assert_eq!(
        host.host_cmd(&handoff(2, 82)),
        Err(CheckError::BeyondAdvertisement)
    );
    host.engine_cmd(&EngineCmd::Resource {
        kind: ResourceKind::Connections,
        count: 2,
    })
    .unwrap();
    host.host_cmd(&handoff(2, 82)).unwrap();
    assert_eq!(host.counters().refused.resource_beyond_max, 3);
    assert_eq!(host.counters().refused.beyond_advertisement, 1);
}

#[test]
fn restore_from_the_engine_round_trips_every_cause_and_returns_the_connection() {
    let causes = [
        RestoreCause::TimeWait,
        RestoreCause::Closing,
        RestoreCause::ResourceExhaustion,
        RestoreCause::Requested,
        RestoreCause::EngineShutdown,
    ];
    for cause in causes {
        let (mut c, cid) = live(Side::Host);
        let cmd = engine_round_trip(&EngineCmd::Restore {
            cid,
            snapshot: Box::new(snapshot(HOST_PORT)),
            cause,
        });
        if cause == RestoreCause::Requested {
            // Only as an answer to the host's Restore.
            assert_eq!(c.engine_cmd(&cmd), Err(CheckError::UnrequestedRestore));
            c.host_cmd(&HostCmd::Restore { cid }).unwrap();
        }
        c.engine_cmd(&cmd).unwrap();
        assert_eq!(c.cid_state(cid), CidState::Gone);
        assert!(!c.is_offloaded(&tuple(HOST_PORT)));
    }
    // A restored snapshot must be the connection's.
    let (mut c, cid) = live(Side::Host);
    let wrong = EngineCmd::Restore {
        cid,
        snapshot: Box::new(snapshot(81)),
        cause: RestoreCause::TimeWait,
    };
    assert_eq!(c.engine_cmd(&wrong), Err(CheckError::SnapshotMismatch));
    assert_eq!(c.cid_state(cid), CidState::Live);
}

// ---- crossing in flight, and malformed bytes ----

#[test]
fn host_commands_crossing_the_engines_restore_are_stale_on_the_engine_side() {
    let (mut engine, cid) = live(Side::Engine);
    engine
        .engine_cmd(&EngineCmd::Restore {
            cid,
            snapshot: Box::new(snapshot(HOST_PORT)),
            cause: RestoreCause::ResourceExhaustion,
        })
        .unwrap();
    // The host sent these before it saw the Restore.
    for cmd in [
        HostCmd::Send {
            cid,
            data: b"late".to_vec(),
            flags: SendFlags::NONE,
        },
        HostCmd::Restore { cid },
    ] {
        assert_eq!(engine.host_cmd(&cmd), Err(CheckError::StaleCid));
    }
    assert_eq!(engine.counters().refused.stale_cid, 2);
    // A cid never issued is not stale but unknown.
    assert_eq!(
        engine.host_cmd(&HostCmd::Restore { cid: Cid(1000) }),
        Err(CheckError::UnknownCid)
    );
}

#[test]
fn malformed_bytes_are_refused_and_counted_by_reason() {
    let (mut c, cid) = live(Side::Engine);
    let mut valid = Vec::new();
    HostCmd::Recvd { cid, len_bytes: 1 }.encode(&mut valid);
    let cases: Vec<(Vec<u8>, DecodeError)> = vec![
        (vec![], DecodeError::Truncated),
        (valid[..valid.len() - 1].to_vec(), DecodeError::Truncated),
        (vec![0x00, 0, 0, 0, 0], DecodeError::UnknownKind(0)),
        (vec![0x84, 8, 0, 0, 0], DecodeError::WrongDirection(0x84)),
        // Recvd declaring 9 bytes of fields.
        (
            [&[0x04, 9, 0, 0, 0][..], &[0; 9]].concat(),
            DecodeError::BadLength,
        ),
        // Send with an unknown flag bit.
        (
            vec![0x03, 6, 0, 0, 0, 7, 0, 0, 0, 0x80, b'x'],
            DecodeError::InvalidField("send flags"),
        ),
        // Ctrl with an unknown code.
        (
            vec![0x05, 5, 0, 0, 0, 7, 0, 0, 0, 99],
            DecodeError::InvalidField("host ctrl"),
        ),
    ];
    for (bytes, want) in &cases {
        assert_eq!(
            c.decode_host(bytes).err(),
            Some(HandoffError::Malformed(*want)),
            "{bytes:?}"
        );
    }
    let m = c.counters().malformed;
    assert_eq!(
        (
            m.truncated,
            m.unknown_kind,
            m.wrong_direction,
            m.bad_length,
            m.invalid_field
        ),
        (2, 1, 1, 1, 2)
    );
    // A well-formed command that does not fit the conversation is refused, not malformed.
    let mut beyond = Vec::new();
    HostCmd::Recvd {
        cid,
        len_bytes: 1_000,
    }
    .encode(&mut beyond);
    assert_eq!(
        c.decode_host(&beyond).err(),
        Some(HandoffError::Refused(CheckError::RecvdBeyondDelivered))
    );
    assert_eq!(c.decode_host(&valid).unwrap().1, valid.len());
}

#[test]
fn every_truncation_of_every_command_is_refused() {
    let cid = Cid(7);
    let host = [
        HostCmd::Handoff {
            req: ReqId(1),
            tuple: tuple(HOST_PORT),
            snapshot: Box::new(snapshot_with(HOST_PORT, b"abc", b"defg")),
        },
        HostCmd::Restore { cid },
        HostCmd::Send {
            cid,
            data: b"data".to_vec(),
            flags: SendFlags::MORE,
        },
        HostCmd::Recvd { cid, len_bytes: 3 },
        HostCmd::Ctrl {
            cid,
            cmd: HostCtrl::Keepalive(Some(KeepaliveConfig::default())),
        },
        HostCmd::Forward {
            cid,
            packet: vec![1, 2, 3],
        },
        HostCmd::Post { cid, len_bytes: 9 },
    ];
    for cmd in &host {
        let mut b = Vec::new();
        cmd.encode(&mut b);
        for len in 0..b.len() {
            assert_eq!(
                HostCmd::decode(&b[..len]).err(),
                Some(DecodeError::Truncated),
                "{:?} cut at {len}",
                cmd.kind()
            );
        }
    }
    let engine = [
        EngineCmd::HandoffAccepted { req: ReqId(1), cid },
        EngineCmd::HandoffRefused {
            req: ReqId(1),
            reason: RefuseReason::Busy,
        },
        EngineCmd::Recv {
            cid,
            data: b"xyz".to_vec(),
            flags: RecvFlags::PUSH,
        },
        EngineCmd::Ack { cid, len_bytes: 3 },
        EngineCmd::Ctrl {
            cid,
            cmd: EngineCtrl::Reset,
        },
        EngineCmd::Resource {
            kind: ResourceKind::BufferBytes,
            count: 1 << 20,
        },
        EngineCmd::Restore {
            cid,
            snapshot: Box::new(snapshot(HOST_PORT)),
            cause: RestoreCause::TimeWait,
        },
    ];
    for cmd in &engine {
        let mut b = Vec::new();
        cmd.encode(&mut b);
        for len in 0..b.len() {
            assert_eq!(
                EngineCmd::decode(&b[..len]).err(),
                Some(DecodeError::Truncated),
                "{:?} cut at {len}",
                cmd.kind()
            );
        }
    }
}
