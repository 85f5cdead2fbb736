//! The world calls hosts in the documented order, with non-decreasing time.

use sim::toy::{Recorder, SeqSender};
use sim::{ChannelConfig, Dir, Host, PortId, World};
use std::any::Any;
use std::cell::RefCell;
use std::rc::Rc;

const P0: PortId = PortId(0);

type Log = Rc<RefCell<Vec<(u64, &'static str)>>>;

/// Logs every call. Sends one reply per frame received, and wants one timeout at 5 us.
struct Probe {
    log: Log,
    replies_due: u32,
    timeout_ns: Option<u64>,
    last_now_ns: u64,
}

impl Probe {
    fn note(&mut self, now_ns: u64, what: &'static str) {
        assert!(now_ns >= self.last_now_ns, "time went backwards at {what}");
        self.last_now_ns = now_ns;
        self.log.borrow_mut().push((now_ns, what));
    }
}

impl Host for Probe {
    fn handle_frame(&mut self, now_ns: u64, _port: PortId, _frame: &[u8]) {
        self.note(now_ns, "handle_frame");
        self.replies_due += 1;
    }
    fn handle_timeout(&mut self, now_ns: u64) {
        self.note(now_ns, "handle_timeout");
        self.timeout_ns = None;
    }
    fn poll_transmit(&mut self, now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        self.note(now_ns, "poll_transmit");
        if self.replies_due == 0 {
            return None;
        }
        self.replies_due -= 1;
        Some((P0, vec![0u8; 8]))
    }
    fn poll_timeout(&self) -> Option<u64> {
        self.log.borrow_mut().push((u64::MAX, "poll_timeout"));
        self.timeout_ns
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn world_calls_handle_then_drains_transmit_then_polls_timeout() {
    let log: Log = Rc::default();
    let mut w = World::new(1);
    let probe = w.add_host(Box::new(Probe {
        log: Rc::clone(&log),
        replies_due: 0,
        timeout_ns: Some(5_000),
        last_now_ns: 0,
    }));
    let peer = w.add_host(Box::new(SeqSender::new(P0, 1, 8, 0)));
    w.connect(
        (peer, P0),
        (probe, P0),
        ChannelConfig::default().delay_ns(2_000),
    )
    .expect("fresh ports");
    w.run_until_idle(100).expect("finite run");
    let names: Vec<&str> = log.borrow().iter().map(|e| e.1).collect();
    assert_eq!(
        names,
        [
            // t=0: first activation after add_host.
            "poll_transmit",
            "poll_timeout",
            // t=2us: the peer's frame arrives; the reply is drained, then the timer re-read.
            "handle_frame",
            "poll_transmit",
            "poll_transmit",
            "poll_timeout",
            // t=5us: the deadline is confirmed, handled, output drained, timer re-read.
            "poll_timeout",
            "handle_timeout",
            "poll_transmit",
            "poll_timeout",
        ]
    );
    let times: Vec<u64> = log
        .borrow()
        .iter()
        .map(|e| e.0)
        .filter(|&t| t != u64::MAX)
        .collect();
    assert_eq!(times, [0, 2_000, 2_000, 2_000, 5_000, 5_000]);
    assert_eq!(w.now_ns(), 5_000);
}

/// Emits `left` frames, all at once.
struct Firehose {
    left: u32,
}

impl Host for Firehose {
    fn handle_frame(&mut self, _now_ns: u64, _port: PortId, _frame: &[u8]) {}
    fn handle_timeout(&mut self, _now_ns: u64) {}
    fn poll_transmit(&mut self, _now_ns: u64) -> Option<(PortId, Vec<u8>)> {
        self.left = self.left.checked_sub(1)?;
        Some((P0, self.left.to_be_bytes().to_vec()))
    }
    fn poll_timeout(&self) -> Option<u64> {
        None
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}

#[test]
fn a_huge_burst_is_cut_into_activations_and_nothing_is_lost() {
    let n = World::TRANSMIT_BURST_MAX as u32 + 10;
    let mut w = World::new(1);
    let tx = w.add_host(Box::new(Firehose { left: n }));
    let rx = w.add_host(Box::new(Recorder::default()));
    let link = w
        .connect(
            (tx, P0),
            (rx, P0),
            ChannelConfig::default().queue_max(usize::MAX, usize::MAX),
        )
        .expect("fresh ports");
    w.run_until_idle(100_000).expect("finite run");
    assert_eq!(w.counters().transmit_bursts_cut, 1);
    assert_eq!(
        w.link_counters(link, Dir::AToB)
            .map(|c| c.delivered_packets),
        Some(u64::from(n))
    );
    assert_eq!(
        w.host::<Recorder>(rx).map(|r| r.frames.len()),
        Some(n as usize)
    );
}
