//! The short-connection harness completes every exchange and leaves no connection behind.

use bench::short::{self, ShortOptions};

#[test]
fn every_short_connection_completes_with_ten_frames_or_so_each() {
    let r = short::run(ShortOptions::new(50)).expect("run");
    assert_eq!(r.completed, 50);
    // SYN, SYN-ACK, ACK, request, response, FINs and their ACKs: 7 to 12 frames each.
    let per_conn = r.frames as f64 / 50.0;
    assert!(
        (6.0..=12.0).contains(&per_conn),
        "{per_conn} frames per connection"
    );
}
