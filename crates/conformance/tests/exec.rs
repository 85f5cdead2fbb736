//! The executor on its own: hand-written scripts that must pass or fail in a known way, and
//! the whole suite against the scripts recorded in `PASSING`.

use conformance::exec::{
    Outcome, Profile, Tally, expected_passing, run_file, run_text, script_files,
};
use std::path::{Path, PathBuf};

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google")
}

const HANDSHAKE: &str = "\
`../common/defaults.sh`
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 setsockopt(3, SOL_SOCKET, SO_REUSEADDR, [1], 4) = 0
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
+0 < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>
+0 > S. 0:0(0) ack 1 <mss 1460,nop,nop,sackOK,nop,wscale 8>
+.01 < . 1:1(0) ack 1 win 257
+0 accept(3, ..., ...) = 4
";

#[test]
fn handshake_then_echo_of_data_passes() {
    let script = format!(
        "{HANDSHAKE}\
+.01 < P. 1:1001(1000) ack 1 win 257
+0 > . 1:1(0) ack 1001
+0 write(4, ..., 500) = 500
+0 > P. 1:501(500) ack 1001
+.01 < . 1001:1001(0) ack 501 win 257
+0 read(4, ..., 2000) = 1000
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    assert_eq!(
        report.skipped_lines, 1,
        "the backtick line is counted as skipped"
    );
}

#[test]
fn assertions_are_evaluated_against_the_socket_under_tests_tcp_info() {
    let script = format!(
        "{HANDSHAKE}\
+0 %{{ assert tcpi_snd_cwnd == 10, tcpi_snd_cwnd; print(1); assert tcpi_state == TCP_ESTABLISHED }}%
+0 %{{ mss = 1000 }}%
+0 %{{ assert tcpi_snd_mss == mss and (tcpi_options & TCPI_OPT_SACK) != 0 }}%
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    assert_eq!(
        (
            report.assertions_checked,
            report.assertions_passed,
            report.assertions_skipped
        ),
        (3, 3, 0)
    );
    let mut tally = Tally::default();
    tally.add_report(&report);
    assert_eq!(
        tally.to_string(),
        "1 passed, 0 failed, 0 skipped; assertions: 3 checked (3 held, 0 failed), 0 not evaluated"
    );
}

#[test]
fn a_false_assertion_fails_the_script_at_its_line() {
    let script = format!("{HANDSHAKE}+0 %{{ assert tcpi_snd_cwnd == 11, tcpi_snd_cwnd }}%\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = &report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 10);
    assert!(message.contains("tcpi_snd_cwnd=10"), "{message}");
    assert_eq!(
        (report.assertions_checked, report.assertions_failed),
        (1, 1)
    );
}

#[test]
fn a_script_with_unevaluated_assertions_is_a_skip_not_a_pass() {
    // `tcpi_pacing_rate` is a field the stack does not provide (no pacing): not judged.
    let script = format!(
        "{HANDSHAKE}\
+0 %{{ assert tcpi_snd_cwnd == 10, tcpi_snd_cwnd; assert tcpi_pacing_rate > 0; assert 1 }}%
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.assertions_checked, 1);
    assert_eq!(report.assertions_skipped, 2);
    let Outcome::Skip { reason } = &report.outcome else {
        panic!("expected a skip, got {}", report.outcome);
    };
    assert!(reason.contains("tcpi_pacing_rate"), "{reason}");
    // A block without an assertion (a definition) does not make a pass hollow.
    let script = format!("{HANDSHAKE}+0 %{{ TCP_INFINITE_SSTHRESH = 0x7fffffff }}%\n");
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn local_and_remote_ip_options_set_the_addresses() {
    let script = format!(
        "--local_ip=192.168.0.2\n--remote_ip=10.248.0.3\n{HANDSHAKE}\
+.01 < P. 1:1001(1000) ack 1 win 257
+0 > . 1:1(0) ack 1001
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    let report = run_text(
        &format!("--local_ip=fd::1\n{HANDSHAKE}"),
        &Profile::linux_compat(),
    );
    assert!(
        matches!(&report.outcome, Outcome::Skip { reason } if reason.contains("--local_ip=fd::1")),
        "{}",
        report.outcome
    );
}

#[test]
fn ipv6_mode_runs_over_the_stack_s_ipv6() {
    // IPv6's 40-byte header leaves an MSS of 1440 on a 1500-byte MTU.
    let handshake = HANDSHAKE.replace("<mss 1460,", "<mss 1440,");
    let body = format!(
        "{handshake}\
+.01 < P. 1:1001(1000) ack 1 win 257
+0 > . 1:1(0) ack 1001
+0 write(4, ..., 500) = 500
+0 > P. 1:501(500) ack 1001
"
    );
    for opts in [
        "--ip_version=ipv6\n",
        "--ip_version=ipv6\n--local_ip=fd::1\n",
    ] {
        let report = run_text(&format!("{opts}{body}"), &Profile::linux_compat());
        assert_eq!(report.outcome, Outcome::Pass, "{opts}: {}", report.outcome);
    }
    // The stack connecting over IPv6, to a peer that answers with a nonzero ISN.
    let client = "\
--ip_version=ipv6
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 fcntl(3, F_SETFL, O_RDWR|O_NONBLOCK) = 0
+0 connect(3, ..., ...) = -1 EINPROGRESS (Operation now in progress)
+0 > S 0:0(0) <...>
+.01 < S. 700:700(0) ack 1 win 32000 <mss 1000,nop,wscale 7>
+0 > . 1:1(0) ack 1
+.01 < P. 1:101(100) ack 1 win 257
+0 > . 1:1(0) ack 101
+0 read(3, ..., 1000) = 100
";
    let report = run_text(client, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    // An IPv4 address in IPv6 mode is a skip naming the option.
    let report = run_text(
        &format!("--ip_version=ipv6\n--remote_ip=10.0.0.1\n{body}"),
        &Profile::linux_compat(),
    );
    assert!(
        matches!(&report.outcome, Outcome::Skip { reason } if reason.contains("--remote_ip")),
        "{}",
        report.outcome
    );
}

#[test]
fn ipv4_mapped_ipv6_mode_runs_af_inet6_sockets_over_ipv4() {
    let script = HANDSHAKE.replace("socket(...,", "socket(AF_INET6,");
    let report = run_text(&script, &Profile::linux_compat());
    assert!(
        matches!(&report.outcome, Outcome::Skip { .. }),
        "{}",
        report.outcome
    );
    let report = run_text(
        &format!("--ip_version=ipv4-mapped-ipv6\n{script}"),
        &Profile::linux_compat(),
    );
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn strict_segments_forbids_a_super_segment_and_mss_is_accepted() {
    let body = format!(
        "{HANDSHAKE}\
+0 write(4, ..., 2000) = 2000
+0 > P. 1:2001(2000) ack 1
"
    );
    let report = run_text(&body, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    let report = run_text(
        &format!("--strict_segments\n{body}"),
        &Profile::linux_compat(),
    );
    let Outcome::Fail { message, .. } = &report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert!(message.contains("--strict_segments"), "{message}");
    let gro = format!(
        "--mss=500\n{HANDSHAKE}\
+.01 < . 1:2001(2000) ack 1 win 257
+0 > . 1:1(0) ack 2001
"
    );
    let report = run_text(&gro, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

/// packetdrill numbers the peer's later segments from the ISN its SYN carried.
#[test]
fn peer_numbers_after_a_nonzero_isn_syn_count_from_it() {
    let script = "\
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
+0 < S 5000:5000(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>
+0 > S. 1234:1234(0) ack 5001 <mss 1460,nop,nop,sackOK,nop,wscale 8>
+.01 < . 1:1(0) ack 1 win 257
+0 accept(3, ..., ...) = 4
+.01 < P. 1:1001(1000) ack 1 win 257
+0 > . 1:1(0) ack 1001
+0 read(4, ..., 2000) = 1000
";
    let report = run_text(script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn wrong_window_fails_naming_line_and_both_values() {
    let script = "\
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
+0 < S 0:0(0) win 32792 <mss 1000,nop,wscale 7>
+0 > S. 0:0(0) ack 1 win 1000 <mss 1460,nop,wscale 8>
";
    let report = run_text(script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 5);
    assert!(message.contains("`> S. 0:0(0) ack 1 win 1000"), "{message}");
    assert!(
        message.contains("got `S. 0:0(0) ack 1 win 65535"),
        "{message}"
    );
    assert!(message.contains("expected win 1000 got 65535"), "{message}");
}

#[test]
fn missing_packet_fails_with_the_expected_line() {
    let script = format!("{HANDSHAKE}+0 > P. 1:101(100) ack 1\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 10);
    assert!(message.contains("nothing was sent"), "{message}");
}

const WRITE_THEN_DUPACK: &str = "+0 write(4, ..., 100) = 100\n+.1 < . 1:1(0) ack 1 win 257\n";

#[test]
fn a_packet_sent_before_its_window_fails_on_timing_at_its_line() {
    // The data leaves at the write (0 s), the line expects it after the inbound ACK at 0.1 s:
    // as in packetdrill, the segment is judged at the outbound line, on its send time.
    let script = format!("{HANDSHAKE}{WRITE_THEN_DUPACK}+0 > P. 1:101(100) ack 1\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 12, "the outbound line");
    assert!(message.contains("timing"), "{message}");
    assert!(message.contains("early"), "{message}");
    assert!(message.contains("P. 1:101(100) ack 1"), "{message}");
}

#[test]
fn a_packet_sent_just_before_an_inbound_line_matches_the_outbound_line_after_it() {
    // Sent at 0.1 s, 2 ms before the inbound ACK; its line expects it at 0.102 s, within the
    // 4 ms tolerance: packetdrill passes this, and so do we.
    let script = format!(
        "{HANDSHAKE}+.1 write(4, ..., 100) = 100\n+.002 < . 1:1(0) ack 1 win 257\n\
         +0 > P. 1:101(100) ack 1\n"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn an_unwanted_packet_fails_at_the_next_outbound_line() {
    // The stack sends its data; the script expects a bare ACK first.
    let script = format!(
        "{HANDSHAKE}+0 write(4, ..., 100) = 100\n+0 < . 1:1(0) ack 1 win 257\n+0 > . 1:1(0) ack 1\n"
    );
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 12, "the outbound line");
    assert!(message.contains("1:101(100)"), "{message}");
}

#[test]
fn packets_after_the_last_outbound_line_are_not_checked() {
    // As in packetdrill, which compares outbound traffic only against outbound lines.
    let script = format!("{HANDSHAKE}{WRITE_THEN_DUPACK}");
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn unsupported_option_skips_with_reason() {
    let script = "0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
                  +0 setsockopt(3, SOL_TCP, TCP_CORK, [1], 4) = 0\n";
    let report = run_text(script, &Profile::linux_compat());
    let Outcome::Skip { reason } = report.outcome else {
        panic!("expected a skip, got {}", report.outcome);
    };
    assert!(reason.contains("TCP_CORK"), "{reason}");
}

#[test]
fn wrong_return_value_fails_with_both_values() {
    let script = format!("{HANDSHAKE}+0 write(4, ..., 100) = 99\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 10);
    assert!(message.contains("expected return 99, got 100"), "{message}");
}

/// Every script recorded in `PASSING` (paths relative to the full suite's root) still passes.
#[test]
fn every_script_recorded_as_passing_passes() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google-all");
    let recorded = expected_passing(include_str!("../PASSING"));
    assert!(!recorded.is_empty());
    let mut tally = Tally::default();
    let mut broken = Vec::new();
    for rel in &recorded {
        let report = run_file(&root.join(rel), &Profile::linux_compat());
        tally.add_report(&report);
        if report.outcome != Outcome::Pass {
            broken.push(format!("{rel} {}", report.outcome));
        }
    }
    assert!(broken.is_empty(), "{tally}\n{}", broken.join("\n"));
    // The list names each script once and every file it names exists.
    let mut sorted = recorded.clone();
    sorted.sort_unstable();
    sorted.dedup();
    assert_eq!(sorted.len(), recorded.len(), "duplicate entries in PASSING");
    assert!(script_files(&root).expect("suite readable").len() >= recorded.len());
}

#[test]
fn option_order_is_checked() {
    let script = "\
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
+0 < S 0:0(0) win 32792 <mss 1000,nop,wscale 7>
+0 > S. 0:0(0) ack 1 <nop,wscale 8,mss 1460>
";
    let report = run_text(script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 5);
    assert!(message.contains("option layout"), "{message}");
}

#[test]
fn super_segment_matches_back_to_back_pieces() {
    // The peer's MSS is 1000: the stack sends three segments for the TSO super-segment.
    let script = format!(
        "{HANDSHAKE}+0 write(4, ..., 3000) = 3000\n+0 > P. 1:3001(3000) ack 1\n\
         +.01 < . 1:1(0) ack 3001 win 257\n"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    // One byte more than was written is never covered.
    let script = format!("{HANDSHAKE}+0 write(4, ..., 3000) = 3000\n+0 > P. 1:3002(3001) ack 1\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 11);
    assert!(message.contains("after 3000 bytes"), "{message}");
}

/// Scripts are input: a script with any one event removed must end in a verdict, never a
/// panic or a hang.
#[test]
fn corpus_scripts_with_an_event_removed_end_in_a_verdict() {
    let mut runs = 0;
    for path in script_files(&corpus()).expect("corpus readable") {
        let text = std::fs::read_to_string(&path).expect("script readable");
        let Ok(script) = conformance::parse_script(&text) else {
            continue;
        };
        for i in 0..script.events.len() {
            let mut cut = script.clone();
            cut.events.remove(i);
            let _ = conformance::exec::run_script(&cut, &Profile::linux_compat());
            runs += 1;
        }
    }
    assert!(runs > 500, "{runs}");
}

#[test]
fn blocking_call_left_outstanding_at_the_end_fails() {
    let script = format!("{HANDSHAKE}+0...0.1 read(4, ..., 1000) = 1000\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 10);
    assert!(message.contains("did not return"), "{message}");
}

#[test]
fn sendmsg_writes_the_iovecs_total_and_msg_more_holds_the_tail() {
    // Three iovecs (100 + 200 + 195 bytes) with MSG_MORE stay queued; a sendmsg without it
    // pushes all 500 bytes in one segment.
    let script = format!(
        "{HANDSHAKE}\
+0 setsockopt(4, SOL_TCP, TCP_NODELAY, [1], 4) = 0
+0 sendmsg(4, {{msg_name(...)=..., msg_iov(3)=[{{..., 100}}, {{..., 200}}, {{..., 195}}],
               msg_flags=0}}, MSG_MORE) = 495
+.01 sendmsg(4, {{msg_name(...)=..., msg_iov(1)=[{{..., 5}}], msg_flags=0}}, 0) = 5
+0 > P. 1:501(500) ack 1
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn sendmsg_with_a_wrong_iovec_count_fails_naming_it() {
    let script = format!(
        "{HANDSHAKE}\
+0 sendmsg(4, {{msg_name(...)=..., msg_iov(2)=[{{..., 100}}], msg_flags=0}}, 0) = 100
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { message, .. } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert!(message.contains("msg_iov(2) lists 1 iovecs"), "{message}");
}

#[test]
fn so_sndbuf_reads_back_doubled_and_a_wrong_value_fails() {
    // Linux doubles SO_SNDBUF; under linux-compat the stack holds less payload than that
    // (per-segment overhead), and getsockopt still reports Linux's figure.
    let set_get = |want: u32| {
        format!(
            "{HANDSHAKE}\
+0 setsockopt(4, SOL_SOCKET, SO_SNDBUF, [21000], 4) = 0
+0 getsockopt(4, SOL_SOCKET, SO_SNDBUF, [{want}], [4]) = 0
"
        )
    };
    let profile = Profile::linux_compat();
    let report = run_text(&set_get(42_000), &profile);
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    let report = run_text(&set_get(21_000), &profile);
    let Outcome::Fail { message, .. } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert!(
        message.contains("expected SO_SNDBUF 21000, got 42000"),
        "{message}"
    );
}

#[test]
fn linux_compat_send_buffer_admits_whole_skbs_past_sk_sndbuf() {
    // A 20000-byte `sk_sndbuf` (10000 doubled), skbs of 16 segments (half the peer's
    // 32896-byte window): the first skb sends the initial window as it fills (five 2-segment
    // packets) and fills again to 16000 unsent bytes; the charge, 26000 bytes plus six skb
    // overheads, then refuses a second skb. The stack's default would take 20000.
    let script = format!(
        "{HANDSHAKE}\
+0 setsockopt(4, SOL_SOCKET, SO_SNDBUF, [10000], 4) = 0
+0 fcntl(4, F_SETFL, O_RDWR|O_NONBLOCK) = 0
+0 write(4, ..., 30000) = 26000
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn epoll_edge_triggered_reports_each_arrival_once_and_level_triggered_until_read() {
    let script = format!(
        "{HANDSHAKE}\
+0 fcntl(4, F_SETFL, O_RDWR|O_NONBLOCK) = 0
+0 epoll_create(1) = 5
+0 epoll_ctl(5, EPOLL_CTL_ADD, 4, {{events=EPOLLIN|EPOLLET, fd=4}}) = 0
+0 epoll_create(1) = 6
+0 epoll_ctl(6, EPOLL_CTL_ADD, 4, {{events=EPOLLIN, fd=4}}) = 0
+0 epoll_wait(5, {{events=0, ptr=0}}, 1, 0) = 0
+0 < P. 1:1001(1000) ack 1 win 257
+0 > . 1:1(0) ack 1001
+0 epoll_wait(5, {{events=EPOLLIN, fd=4}}, 1, 0) = 1
+0 epoll_wait(5, {{events=0, ptr=0}}, 1, 0) = 0
+0 epoll_wait(6, {{events=EPOLLIN, fd=4}}, 1, 0) = 1
+0 epoll_wait(6, {{events=EPOLLIN, fd=4}}, 1, 0) = 1
+0 read(4, ..., 1000) = 1000
+0 epoll_wait(6, {{events=0, ptr=0}}, 1, 0) = 0
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn epoll_wait_with_the_wrong_events_fails_naming_both() {
    let script = format!(
        "{HANDSHAKE}\
+0 epoll_create(1) = 5
+0 epoll_ctl(5, EPOLL_CTL_ADD, 4, {{events=EPOLLIN|EPOLLOUT|EPOLLET, fd=4}}) = 0
+0 epoll_wait(5, {{events=EPOLLIN|EPOLLOUT, fd=4}}, 1, 0) = 1
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { pos, message } = report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert_eq!(pos.line, 12, "the epoll_wait line");
    assert!(
        message.contains("expected {events=EPOLLIN|EPOLLOUT, fd=4}, got {events=EPOLLOUT, fd=4}"),
        "{message}"
    );
}

#[test]
fn sendmsg_with_msg_zerocopy_and_empty_iovecs_sends_the_same_bytes() {
    let script = format!(
        "{HANDSHAKE}\
+0 setsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [1], 4) = 0
+0 setsockopt(4, SOL_TCP, TCP_NODELAY, [1], 4) = 0
+0 sendmsg(4, {{msg_name(...)=..., msg_iov(3)=[{{..., 0}}, {{..., 30}}, {{..., 0}}],
               msg_flags=0}}, MSG_ZEROCOPY) = 30
+0 > P. 1:31(30) ack 1
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn fcntl_getfl_ioctl_queues_peek_so_error_and_sendto_go_through_the_stack() {
    let script = format!(
        "{HANDSHAKE}\
+0 fcntl(4, F_GETFL) = 0x2 (flags O_RDWR)
+0 fcntl(4, F_SETFL, O_RDWR|O_NONBLOCK) = 0
+0 fcntl(4, F_GETFL) = 0x802 (flags O_RDWR|O_NONBLOCK)
+0 getsockopt(4, SOL_SOCKET, SO_ERROR, [0], [4]) = 0
+0 recv(4, ..., 100, MSG_PEEK) = -1 EAGAIN (Resource temporarily unavailable)
+.01 < P. 1:1001(1000) ack 1 win 257
+0 > . 1:1(0) ack 1001
+0 ioctl(4, SIOCINQ, [1000]) = 0
+0 recv(4, ..., 100, MSG_PEEK) = 100
+0 ioctl(4, SIOCINQ, [1000]) = 0
+0 read(4, ..., 2000) = 1000
+0 ioctl(4, SIOCINQ, [0]) = 0
+0 sendto(4, ..., 500, 0, ..., ...) = 500
+0 > P. 1:501(500) ack 1001
+0 ioctl(4, SIOCOUTQ, [500]) = 0
+.01 < . 1001:1001(0) ack 501 win 257
+0 ioctl(4, SIOCOUTQ, [0]) = 0
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn user_timeout_and_keepalive_options_reach_the_connection() {
    let script = format!(
        "{HANDSHAKE}\
+0 setsockopt(4, SOL_TCP, TCP_USER_TIMEOUT, [3000], 4) = 0
+0 setsockopt(4, SOL_TCP, TCP_KEEPIDLE, [1], 4) = 0
+0 setsockopt(4, SOL_SOCKET, SO_KEEPALIVE, [1], 4) = 0
+1 > . 0:0(0) ack 1
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn shell_commands_that_change_the_host_skip_the_script() {
    let script = format!("{HANDSHAKE}+0 `tc qdisc replace dev tun0 root pfifo limit 0`\n");
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Skip { reason } = &report.outcome else {
        panic!("expected a skip, got {}", report.outcome);
    };
    assert!(reason.contains("pfifo limit 0"), "{reason}");
}

#[test]
fn epoll_oneshot_and_exclusive_follow_linux_rules() {
    let script = format!(
        "{HANDSHAKE}\
+0 epoll_create(1) = 5
+0 epoll_ctl(5, EPOLL_CTL_ADD, 4, {{events=EPOLLOUT|EPOLLEXCLUSIVE|EPOLLONESHOT, fd=4}}) = -1 EINVAL (Invalid argument)
+0 epoll_ctl(5, EPOLL_CTL_ADD, 4, {{events=EPOLLOUT|EPOLLEXCLUSIVE, fd=4}}) = 0
+0 epoll_ctl(5, EPOLL_CTL_MOD, 4, {{events=EPOLLOUT, fd=4}}) = -1 EINVAL (Invalid argument)
+0 epoll_wait(5, {{events=EPOLLOUT, fd=4}}, 1, 0) = 1
+0 epoll_create(1) = 6
+0 epoll_ctl(6, EPOLL_CTL_ADD, 4, {{events=EPOLLOUT|EPOLLONESHOT, fd=4}}) = 0
+0 epoll_wait(6, {{events=EPOLLOUT, fd=4}}, 1, 0) = 1
+0 epoll_wait(6, {{events=0, ptr=0}}, 1, 0) = 0
+0 epoll_ctl(6, EPOLL_CTL_MOD, 4, {{events=EPOLLOUT|EPOLLONESHOT, fd=4}}) = 0
+0 epoll_wait(6, {{events=EPOLLOUT, fd=4}}, 1, 0) = 1
+0 epoll_wait(6, {{events=0, ptr=0}}, 1, 0) = 0
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn error_queue_options_reach_the_stack_and_read_back() {
    let script = format!(
        "{HANDSHAKE}\
+0 setsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [2], 4) = -1 EINVAL (Invalid argument)
+0 getsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [0], [4]) = 0
+0 setsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [1], 4) = 0
+0 getsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [1], [4]) = 0
+0 setsockopt(4, SOL_SOCKET, SO_MARK, [666], 4) = 0
+0 getsockopt(4, SOL_SOCKET, SO_MARK, [666], [4]) = 0
+0 getsockopt(4, SOL_TCP, TCP_NOTSENT_LOWAT, [0], [4]) = 0
+0 setsockopt(4, SOL_TCP, TCP_NOTSENT_LOWAT, [0xffffffff], 4) = 0
+0 getsockopt(4, SOL_TCP, TCP_NOTSENT_LOWAT, [0xffffffff], [4]) = 0
+0 recvmsg(4, {{msg_name(...)=..., msg_iov(1)=[{{...,0}}], msg_flags=MSG_ERRQUEUE, msg_control=[]}}, MSG_ERRQUEUE) = -1 EAGAIN (Resource temporarily unavailable)
+0 send(4, ..., 100, MSG_ZEROCOPY|MSG_EOR) = 100
+0 > P. 1:101(100) ack 1
+.01 < . 1:1(0) ack 101 win 257
+0 recvmsg(4, {{msg_name(...)=..., msg_iov(1)=[{{...,0}}], msg_flags=MSG_ERRQUEUE, msg_control=[{{cmsg_level=CMSG_LEVEL_IP, cmsg_type=CMSG_TYPE_RECVERR, cmsg_data={{ee_errno=0, ee_origin=SO_EE_ORIGIN_ZEROCOPY, ee_type=0, ee_code=SO_EE_CODE_ZEROCOPY_COPIED, ee_info=0, ee_data=0}}}}]}}, MSG_ERRQUEUE) = 0
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
}

#[test]
fn a_zero_copy_notification_other_than_the_scripts_fails_it() {
    let script = format!(
        "{HANDSHAKE}\
+0 setsockopt(4, SOL_SOCKET, SO_ZEROCOPY, [1], 4) = 0
+0 send(4, ..., 100, MSG_ZEROCOPY) = 100
+0 > P. 1:101(100) ack 1
+.01 < . 1:1(0) ack 101 win 257
+0 recvmsg(4, {{msg_name(...)=..., msg_iov(1)=[{{...,0}}], msg_flags=MSG_ERRQUEUE, msg_control=[{{cmsg_level=CMSG_LEVEL_IP, cmsg_type=CMSG_TYPE_RECVERR, cmsg_data={{ee_errno=0, ee_origin=SO_EE_ORIGIN_ZEROCOPY, ee_type=0, ee_code=SO_EE_CODE_ZEROCOPY_COPIED, ee_info=0, ee_data=1}}}}]}}, MSG_ERRQUEUE) = 0
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    let Outcome::Fail { message, .. } = &report.outcome else {
        panic!("expected a failure, got {}", report.outcome);
    };
    assert!(
        message.contains("expected ee_data=1, got Some(0)"),
        "{message}"
    );
}

/// A passive ECN connection (`tcp_ecn=2`): the script's `[ce]` on an inbound data segment
/// reaches the stack (its ACK echoes ECE), and the outbound lines' codepoints are checked.
fn ecn_script(outbound_data: &str, ack_line: &str) -> String {
    format!(
        "\
`sysctl -q net.ipv4.tcp_ecn=2`
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 setsockopt(3, SOL_SOCKET, SO_REUSEADDR, [1], 4) = 0
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
+0 < SEW 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>
+0 > SE. 0:0(0) ack 1 <mss 1460,nop,nop,sackOK,nop,wscale 8>
+.01 < . 1:1(0) ack 1 win 257
+0 accept(3, ..., ...) = 4
+0 write(4, ..., 500) = 500
+0 > {outbound_data} P. 1:501(500) ack 1
+.01 < [ce] P. 1:101(100) ack 501 win 257
+0 > {ack_line} 501:501(0) ack 101
"
    )
}

#[test]
fn ip_ecn_annotations_set_inbound_codepoints_and_check_outbound_ones() {
    let profile = Profile::linux_compat();
    let pass = run_text(&ecn_script("[ect0]", "[noecn] E."), &profile);
    assert_eq!(pass.outcome, Outcome::Pass, "{}", pass.outcome);
    let either = run_text(&ecn_script("[ect01]", "E."), &profile);
    assert_eq!(either.outcome, Outcome::Pass, "{}", either.outcome);
    // Data leaves ECT(0), not Not-ECT: the check is strict.
    let wrong = run_text(&ecn_script("[noecn]", "E."), &profile);
    assert!(
        matches!(wrong.outcome, Outcome::Fail { .. }),
        "{}",
        wrong.outcome
    );
    // Without the `[ce]` mark reaching the stack, its ACK would carry no ECE.
    let no_ce = ecn_script("[ect0]", "E.").replace("[ce] P.", "[ect0] P.");
    let r = run_text(&no_ce, &profile);
    assert!(matches!(r.outcome, Outcome::Fail { .. }), "{}", r.outcome);
}

#[test]
fn nstat_grep_fails_the_script_unless_the_counter_moved() {
    // An ICMP error quoting a sequence number outside SND.UNA..SND.NXT is dropped and counted
    // (`TcpExtOutOfWindowIcmps`); `nstat | grep` sees it only when it happened since the
    // last `nstat`.
    let check = "+0 `nstat | grep TcpExtOutOfWindowIcmps > /dev/null`\n";
    let moved = format!(
        "{HANDSHAKE}+0 `nstat > /dev/null`\n+0 < icmp unreachable host_unreachable [5000:6000(1000)]\n{check}"
    );
    let report = run_text(&moved, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    let still = format!("{HANDSHAKE}+0 `nstat > /dev/null`\n{check}");
    let report = run_text(&still, &Profile::linux_compat());
    assert!(
        matches!(&report.outcome, Outcome::Fail { pos, .. } if pos.line == 11),
        "{}",
        report.outcome
    );
    // A counter the stack has no counterpart for cannot be judged.
    let unknown = format!("{HANDSHAKE}+0 `nstat | grep TcpExtTCPLossProbes`\n");
    let report = run_text(&unknown, &Profile::linux_compat());
    assert!(
        matches!(report.outcome, Outcome::Skip { .. }),
        "{}",
        report.outcome
    );
}

#[test]
fn an_in_window_icmp_error_reaches_the_connection_and_a_v6_file_name_runs_over_ipv6() {
    // A hard error about the established connection's data is soft there (RFC 5461): the
    // connection goes on and the script can still exchange data.
    let script = format!(
        "{HANDSHAKE}\
+0 write(4, ..., 500) = 500
+0 > P. 1:501(500) ack 1
+0 < icmp unreachable port_unreachable [1:501(500)]
+.01 < . 1:1(0) ack 501 win 257
+0 write(4, ..., 10) = 10
+0 > P. 501:511(10) ack 1
"
    );
    let report = run_text(&script, &Profile::linux_compat());
    assert_eq!(report.outcome, Outcome::Pass, "{}", report.outcome);
    // The IP version a script's file name gives, as upstream's run_all.py.
    use conformance::exec::ip_version_from_file_name;
    assert_eq!(
        ip_version_from_file_name(Path::new("mtu_probe/basic-v6.pkt")),
        Some("ipv6")
    );
    assert_eq!(
        ip_version_from_file_name(Path::new(
            "x/syn-data-icmp-unreach-frag-needed-with-seq-ipv6.pkt"
        )),
        Some("ipv6")
    );
    assert_eq!(
        ip_version_from_file_name(Path::new("mtu_probe/basic-v4.pkt")),
        None
    );
    assert_eq!(ip_version_from_file_name(Path::new("v6/simple.pkt")), None);
}
