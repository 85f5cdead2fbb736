//! The seed 002 Figure 7/8 harness moves data on host and engine connections alike and counts
//! what the figures need.

use bench::offload_bulk::{OffloadBulkOptions, OffloadWorld};

#[test]
fn offloaded_connections_carry_the_bulk_through_the_engine_with_send_and_ack_commands() {
    let mut w = OffloadWorld::new(OffloadBulkOptions::new(4, 4), 50).expect("setup");
    assert_eq!(w.engine_connections(), 4);
    let c = w.run(5_000, 0).expect("run");
    assert!(c.bytes > 1_000_000, "{c:?}");
    assert!(c.engine_packets >= c.packets * 9 / 10, "{c:?}");
    assert_eq!(c.messages.host_tx_frames + c.messages.host_rx_frames, 0);
    assert!(c.messages.send > 0 && c.messages.ack > 0, "{c:?}");
}

#[test]
fn host_connections_carry_the_bulk_without_a_command() {
    let mut w = OffloadWorld::new(OffloadBulkOptions::new(4, 0), 50).expect("setup");
    let c = w.run(5_000, 0).expect("run");
    assert!(c.bytes > 1_000_000, "{c:?}");
    assert_eq!(c.engine_packets, 0);
    assert_eq!(c.messages.commands(), 0);
    assert!(
        c.messages.host_tx_frames > c.messages.host_rx_frames,
        "{c:?}"
    );
}
