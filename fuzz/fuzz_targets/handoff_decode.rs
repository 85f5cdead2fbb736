//! Fuzz the handoff interface's decoders and conversation checker: the input as a
//! `ConnectionSnapshot` encoding (which must then import), then as a conversation — a
//! direction byte (even: host → engine, odd: engine → host) before each command — decoded and
//! checked by the receiving side's `Conversation` and shown to the sending side's. Every
//! accepted decode re-encodes to exactly the bytes it used (the formats are canonical).
//! `crates/shard/tests/handoff_fuzz.rs` runs the same loop over seeded inputs in the suite.
#![no_main]

use libfuzzer_sys::fuzz_target;
use shard::handoff::{Conversation, EngineCmd, HandoffError, HostCmd, Limits, Side};
use tcp::{Connection, ConnectionSnapshot};

/// A decoded snapshot imports into a connection whose invariants hold.
fn assert_imports(s: &ConnectionSnapshot) {
    let c = Connection::import(0, s).expect("a decoded snapshot imports");
    assert_eq!(c.invariant_violation(), None);
}

fuzz_target!(|data: &[u8]| {
    if let Ok((s, used)) = ConnectionSnapshot::decode(data) {
        let mut again = Vec::new();
        s.encode(&mut again);
        assert_eq!(again, &data[..used]);
        assert_eq!(ConnectionSnapshot::decode(&again), Ok((s.clone(), used)));
        assert_imports(&s);
    }
    let limits = Limits {
        connections_max: 8,
        requests_max: 8,
        ..Limits::default()
    };
    let mut host = Conversation::new(Side::Host, limits);
    let mut engine = Conversation::new(Side::Engine, limits);
    let mut rest = data;
    while let Some((&dir, after)) = rest.split_first() {
        let mut again = Vec::new();
        let used = if dir & 1 == 0 {
            match engine.decode_host(after) {
                Ok((cmd, used)) => {
                    cmd.encode(&mut again);
                    assert_eq!(HostCmd::decode(&again), Ok((cmd.clone(), used)));
                    if let HostCmd::Handoff { snapshot, .. } = &cmd {
                        assert_imports(snapshot);
                    }
                    let _ = host.host_cmd(&cmd);
                    used
                }
                Err(HandoffError::Refused(_)) => HostCmd::decode(after).expect("decoded once").1,
                Err(HandoffError::Malformed(_)) => break,
            }
        } else {
            match host.decode_engine(after) {
                Ok((cmd, used)) => {
                    cmd.encode(&mut again);
                    assert_eq!(EngineCmd::decode(&again), Ok((cmd.clone(), used)));
                    if let EngineCmd::Restore { snapshot, .. } = &cmd {
                        assert_imports(snapshot);
                    }
                    let _ = engine.engine_cmd(&cmd);
                    used
                }
                Err(HandoffError::Refused(_)) => EngineCmd::decode(after).expect("decoded once").1,
                Err(HandoffError::Malformed(_)) => break,
            }
        };
        if !again.is_empty() {
            assert_eq!(again, &after[..used]);
        }
        assert!(host.live_connections() <= 8 && engine.live_connections() <= 8);
        rest = &after[used..];
    }
});
