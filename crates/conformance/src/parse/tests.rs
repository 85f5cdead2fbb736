//! Unit tests of the parser.

use super::*;

fn tcp(src: &str) -> TcpLine {
    match parse_event(src).expect("parses").action {
        Action::Tcp(t) => t,
        other => panic!("not a TCP line: {other:?}"),
    }
}

fn call(src: &str) -> SyscallLine {
    match parse_event(src).expect("parses").action {
        Action::Syscall(c) => c,
        other => panic!("not a call: {other:?}"),
    }
}

fn err(src: &str) -> ParseError {
    parse_script(src).expect_err("must not parse")
}

#[test]
fn inbound_syn_line_yields_all_fields() {
    let t = tcp("+.1 < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>");
    assert_eq!(t.direction, Direction::Inbound);
    assert_eq!(t.flags, TcpFlags::SYN);
    assert_eq!(
        t.seq,
        SeqRange {
            start: 0,
            end: 0,
            len_bytes: 0
        }
    );
    assert_eq!(t.ack, None);
    assert_eq!(t.win, Some(32792));
    assert_eq!(
        t.options,
        TcpOptionsSpec::List(vec![
            TcpOption::Mss(1000),
            TcpOption::SackPermitted,
            TcpOption::Nop,
            TcpOption::Nop,
            TcpOption::Nop,
            TcpOption::WindowScale(7),
        ])
    );
}

#[test]
fn outbound_line_with_sack_blocks_and_timestamps() {
    let t = tcp("+0 > . 1:1(0) ack 1001 <nop,nop,TS val 200 ecr 201,sack 2001:3001 6001:7001>");
    assert_eq!(t.direction, Direction::Outbound);
    assert_eq!(t.flags, TcpFlags::ACK);
    assert_eq!(t.ack, Some(1001));
    assert_eq!(t.win, None);
    assert_eq!(
        t.options,
        TcpOptionsSpec::List(vec![
            TcpOption::Nop,
            TcpOption::Nop,
            TcpOption::Timestamp { val: 200, ecr: 201 },
            TcpOption::Sack(vec![(2001, 3001), (6001, 7001)]),
        ])
    );
}

#[test]
fn flag_words_map_to_tcp_flags() {
    let cases: [(&str, TcpFlags); 9] = [
        ("S", TcpFlags::SYN),
        ("S.", TcpFlags::SYN | TcpFlags::ACK),
        (".", TcpFlags::ACK),
        ("P.", TcpFlags::PSH | TcpFlags::ACK),
        ("F.", TcpFlags::FIN | TcpFlags::ACK),
        ("FP.", TcpFlags::FIN | TcpFlags::PSH | TcpFlags::ACK),
        ("R", TcpFlags::RST),
        ("-", TcpFlags::NONE),
        ("SEW", TcpFlags::SYN | TcpFlags::ECE | TcpFlags::CWR),
    ];
    for (word, flags) in cases {
        assert_eq!(
            tcp(&format!("0 < {word} 0:0(0) win 1")).flags,
            flags,
            "{word}"
        );
    }
}

#[test]
fn any_options_and_fast_open_cookies() {
    assert_eq!(tcp("0 > S 0:0(0) <...>").options, TcpOptionsSpec::Any);
    assert_eq!(
        tcp("0 < S. 123:123(0) ack 1 win 1 <FO abcd1234,nop,FO>").options,
        TcpOptionsSpec::List(vec![
            TcpOption::FastOpen(vec![0xab, 0xcd, 0x12, 0x34]),
            TcpOption::Nop,
            TcpOption::FastOpen(vec![]),
        ])
    );
}

#[test]
fn every_time_form_parses_to_microseconds() {
    let cases = [
        ("0", EventTime::Absolute { at_usecs: 0 }),
        (
            "2",
            EventTime::Absolute {
                at_usecs: 2_000_000,
            },
        ),
        (
            "+.1",
            EventTime::Relative {
                after_usecs: 100_000,
            },
        ),
        ("+.002", EventTime::Relative { after_usecs: 2_000 }),
        ("+ 0.00", EventTime::Relative { after_usecs: 0 }),
        (
            "+ 1.2 ~ + 1.240",
            EventTime::RelativeRange {
                start_usecs: 1_200_000,
                end_usecs: 1_240_000,
            },
        ),
        ("*", EventTime::Any),
        (
            "+0...0.200",
            EventTime::RelativeBlocking {
                start_usecs: 0,
                end_usecs: 200_000,
            },
        ),
        (
            "+.1...0.200",
            EventTime::RelativeBlocking {
                start_usecs: 100_000,
                end_usecs: 200_000,
            },
        ),
        (
            "0...0.2",
            EventTime::AbsoluteBlocking {
                start_usecs: 0,
                end_usecs: 200_000,
            },
        ),
        (
            "0.1~0.2",
            EventTime::AbsoluteRange {
                start_usecs: 100_000,
                end_usecs: 200_000,
            },
        ),
        (
            "+1.2~+1.240",
            EventTime::RelativeRange {
                start_usecs: 1_200_000,
                end_usecs: 1_240_000,
            },
        ),
    ];
    for (text, time) in cases {
        let ev = parse_event(&format!("{text} close(3) = 0")).expect(text);
        assert_eq!(ev.time, time, "{text}");
    }
}

#[test]
fn a_note_may_follow_the_return_value_without_an_errno() {
    let c = call("+0 fcntl(3, F_GETFL) = 0x2 (flags O_RDWR)");
    assert_eq!(c.ret, Expr::Int(2));
    assert_eq!(c.errno, None);
    assert_eq!(c.errno_note.as_deref(), Some("flags O_RDWR"));
    let c = call("+0 setsockopt(3, SOL_TCP, TCP_FASTOPEN_KEY, \"\", 0) = -1 (Invalid Argument)");
    assert_eq!(c.ret, Expr::Int(-1));
    assert_eq!(c.errno, None);
    assert_eq!(c.errno_note.as_deref(), Some("Invalid Argument"));
    assert_eq!(
        c.to_string(),
        "setsockopt(3, SOL_TCP, TCP_FASTOPEN_KEY, \"\", 0) = -1 (Invalid Argument)"
    );
}

#[test]
fn errno_and_its_note_are_split() {
    let c = call("+0 connect(3, ..., ...) = -1 EINPROGRESS (Operation now in progress)");
    assert_eq!(c.kind(), Some(SyscallKind::Connect));
    assert_eq!(c.args, vec![Expr::Int(3), Expr::Ellipsis, Expr::Ellipsis]);
    assert_eq!(c.ret, Expr::Int(-1));
    assert_eq!(c.errno.as_deref(), Some("EINPROGRESS"));
    assert_eq!(c.errno_note.as_deref(), Some("Operation now in progress"));
    let bare = call("+0 sendto(4, NULL, 1, MSG_FASTOPEN, ..., ...) = -1");
    assert_eq!(bare.errno, None);
    assert_eq!(bare.args[1], Expr::Symbol("NULL".into()));
}

#[test]
fn sendmsg_spanning_lines_yields_nested_structs() {
    let c = call(
        "+0 sendmsg(4, {msg_name(...)=...,\n   msg_iov(3)=[{..., 100}, {..., 200}],\n\t\tmsg_flags=0}, MSG_MORE) = 495",
    );
    let Expr::Struct(fields) = &c.args[1] else {
        panic!("not a struct: {:?}", c.args[1]);
    };
    assert_eq!(fields.len(), 3);
    assert_eq!(fields[0].name.as_deref(), Some("msg_name"));
    assert_eq!(fields[0].param, Some(Expr::Ellipsis));
    assert_eq!(fields[1].param, Some(Expr::Int(3)));
    let Expr::List(iov) = &fields[1].value else {
        panic!("iov not a list");
    };
    assert_eq!(
        iov[1],
        Expr::Struct(vec![
            Field {
                name: None,
                param: None,
                value: Expr::Ellipsis
            },
            Field {
                name: None,
                param: None,
                value: Expr::Int(200)
            },
        ])
    );
    assert_eq!(c.ret, Expr::Int(495));
}

#[test]
fn or_expressions_hex_and_calls_parse() {
    let c = call("+0 epoll_ctl(5, EPOLL_CTL_ADD, 4, {events=EPOLLOUT|EPOLLIN|EPOLLET, fd=4}) = 0");
    let Expr::Struct(f) = &c.args[3] else {
        panic!("not a struct")
    };
    assert_eq!(
        f[0].value,
        Expr::Or(vec![
            Expr::Symbol("EPOLLOUT".into()),
            Expr::Symbol("EPOLLIN".into()),
            Expr::Symbol("EPOLLET".into()),
        ])
    );
    let c = call("+0 setsockopt(4, SOL_TCP, TCP_NOTSENT_LOWAT, [0xffffffff], 4) = 0");
    assert_eq!(c.args[3], Expr::List(vec![Expr::Int(0xffff_ffff)]));
    let c = call("+0 bind(3, htons(8080), \"x y\") = 0");
    assert_eq!(c.args[1], Expr::Call("htons".into(), vec![Expr::Int(8080)]));
    assert_eq!(c.args[2], Expr::Str("x y".into()));
}

#[test]
fn unknown_tcp_option_becomes_unsupported_node_with_its_text() {
    let ev = parse_event("+0 > S 0:0(0) <mss 1460,mpcapable 1> // trailing").expect("parses");
    assert_eq!(
        ev.action,
        Action::Unsupported("> S 0:0(0) <mss 1460,mpcapable 1>".into())
    );
}

#[test]
fn md5_option_parses_its_digest_and_refuses_odd_hex() {
    let l = tcp("+0 > S 0:0(0) <mss 1460,md5 00112233445566778899aabbccddeeff>");
    let TcpOptionsSpec::List(list) = &l.options else {
        panic!("no option list");
    };
    assert_eq!(
        list[1],
        TcpOption::Md5(vec![
            0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0xcc, 0xdd,
            0xee, 0xff
        ])
    );
    assert_eq!(
        l.unmodelled(),
        Some("the TCP MD5 signature option (RFC 2385)")
    );
    assert_eq!(
        err("0 > S 0:0(0) <md5 abc>\n").kind,
        ParseErrorKind::BadDigest
    );
}

#[test]
fn symbolic_fast_open_cookie_parses_to_a_named_option() {
    let ev = parse_event("+0 < S 0:10(10) win 1 <mss 1012,FOEXP TFO_COOKIE, FO>").expect("parses");
    let Action::Tcp(l) = ev.action else {
        panic!("not a TCP line");
    };
    assert_eq!(
        l.options,
        TcpOptionsSpec::List(vec![
            TcpOption::Mss(1012),
            TcpOption::FastOpenNamed {
                experimental: true,
                name: "TFO_COOKIE".into()
            },
            TcpOption::FastOpen(vec![]),
        ])
    );
    assert_eq!(l.options.to_string(), "<mss 1012,FOEXP TFO_COOKIE,FO>");
}

#[test]
fn accecn_flags_become_unsupported_nodes() {
    for text in [
        "< SEWA 0:0(0) win 32792 <mss 1050,nop,nop,sackOK,nop,wscale 8>",
        "> SW. 0:0(0) ack 1 <mss 1460,ECN e1b 1 ceb 0 e0b 1,nop>",
    ] {
        let ev = parse_event(&format!("+0 {text}")).expect(text);
        assert_eq!(ev.action, Action::Unsupported(text.to_string()));
    }
}

#[test]
fn ip_level_fields_and_ports_are_typed_and_reported_unmodelled() {
    let l = tcp("0 < [ect0] S 0:0(0) win 1");
    assert_eq!(
        l.ip,
        Some(IpInfo {
            tos: Some(TosSpec::Ect0),
            flow_label: None,
            ttl: None
        })
    );
    assert_eq!(l.unmodelled(), None, "the traffic class is modelled");
    // Parentheses mean the same; the printer writes brackets.
    let l = tcp("0 > (tos 0x2, flowlabel 0x12345) . 1:1(0) ack 1");
    assert_eq!(
        l.ip,
        Some(IpInfo {
            tos: Some(TosSpec::Tos(2)),
            flow_label: Some(0x12345),
            ttl: None
        })
    );
    assert_eq!(
        l.to_string(),
        "> [tos 0x02, flowlabel 0x12345] . 1:1(0) ack 1"
    );
    assert_eq!(
        tcp("0 < [ttl 9] . 1:1(0) win 1").ip.and_then(|i| i.ttl),
        Some(9)
    );
    // The traffic class either way; `[ect01]` only outbound; the flow label and TTL not.
    assert_eq!(tcp("0 < [noecn] S 0:0(0) win 1").unmodelled(), None);
    assert_eq!(tcp("0 > [noecn] S. 0:0(0) ack 1").unmodelled(), None);
    assert_eq!(tcp("0 > [ect01] . 1:1(0) ack 1").unmodelled(), None);
    assert!(tcp("0 < [ect01] . 1:1(0) win 1").unmodelled().is_some());
    assert!(tcp("0 < [ttl 9] . 1:1(0) win 1").unmodelled().is_some());
    assert!(
        tcp("0 > (tos 0x2, flowlabel 0x12345) . 1:1(0) ack 1")
            .unmodelled()
            .is_some()
    );
    let l = tcp("0 < 40000>8080 S 0:0(0) win 1");
    assert_eq!(l.ports, Some((40000, 8080)));
    assert_eq!(l.to_string(), "< 40000>8080 S 0:0(0) win 1");
    assert_eq!(
        err("0 < [flowlabel 0x100000] S 0:0(0) win 1\n").kind,
        ParseErrorKind::NumberTooLarge
    );
    assert_eq!(
        err("0 < [blue] S 0:0(0) win 1\n").kind,
        ParseErrorKind::Expected("ECN codepoint, tos, flowlabel or ttl")
    );
}

#[test]
fn udp_and_icmp_lines_are_typed_nodes() {
    assert_eq!(
        parse_event("+0 < udp (1472)").expect("udp").action,
        Action::Udp(UdpLine {
            direction: Direction::Inbound,
            ip: None,
            ports: None,
            len_bytes: 1472
        })
    );
    assert_eq!(
        parse_event("+0 > [ce] udp 53>5353 (20)")
            .expect("udp")
            .action,
        Action::Udp(UdpLine {
            direction: Direction::Outbound,
            ip: Some(IpInfo {
                tos: Some(TosSpec::Ce),
                flow_label: None,
                ttl: None
            }),
            ports: Some((53, 5353)),
            len_bytes: 20
        })
    );
    assert_eq!(
        parse_event("+0 > icmp unreachable   frag_needed mtu 1200")
            .expect("icmp")
            .action,
        Action::Icmp(IcmpLine {
            direction: Direction::Outbound,
            ip: None,
            text: "unreachable frag_needed mtu 1200".into()
        })
    );
}

#[test]
fn string_prefix_concatenation_and_assignment_expressions() {
    let c = call("+0 write(3, \"GET /\"..., 5) = 5");
    assert_eq!(c.args[1], Expr::StrPrefix("GET /".into()));
    let c = call("+0 f(\"ab\" \"cd\", [SO_X=1|2]) = 0");
    assert_eq!(c.args[0], Expr::Strs(vec!["ab".into(), "cd".into()]));
    assert_eq!(
        c.args[1],
        Expr::List(vec![Expr::Assign(
            "SO_X".into(),
            Box::new(Expr::Or(vec![Expr::Int(1), Expr::Int(2)]))
        )])
    );
    assert_eq!(c.to_string(), "f(\"ab\" \"cd\", [SO_X=1|2]) = 0");
}

#[test]
fn quoted_script_option_values_keep_their_spaces() {
    let s = parse_script("--define=CC=\"reno cubic\" --x=`a b`\n0 close(3) = 0\n").expect("parses");
    assert_eq!(s.options[0].value.as_deref(), Some("CC=\"reno cubic\""));
    assert_eq!(s.options[1].value.as_deref(), Some("`a b`"));
    assert_eq!(
        err("--define=CC=\"reno\n0 close(3) = 0\n").kind,
        ParseErrorKind::Unterminated("quoted option value")
    );
}

#[test]
fn options_comments_and_untimed_blocks() {
    let s = parse_script(
        "// head\n--tolerance_usecs=10000\n--verbose\n/* block\n comment */\n`a\nb`\n0 %{ x }%\n",
    )
    .expect("parses");
    assert_eq!(s.tolerance_usecs(), 10_000);
    assert_eq!(s.options[1].value, None);
    assert_eq!(s.events[0].time, EventTime::Unspecified);
    assert_eq!(s.events[0].action, Action::Shell("a\nb".into()));
    assert_eq!(s.events[0].pos, Pos { line: 6, col: 1 });
    assert_eq!(s.events[1].action, Action::Code(" x ".into()));
    assert_eq!(s.events[1].pos, Pos { line: 8, col: 1 });
    assert_eq!(
        parse_script("0 close(3) = 0")
            .expect("ok")
            .tolerance_usecs(),
        4000
    );
}

#[test]
fn bad_sequence_range_reports_line_and_column() {
    let e = err("0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n  +0 < S 0:0 win 1\n");
    assert_eq!((e.line, e.col), (2, 13));
    assert_eq!(e.kind, ParseErrorKind::Expected("("));
    assert_eq!(e.to_string(), "2:13: expected (");
}

#[test]
fn inconsistent_sequence_range_is_rejected() {
    let e = err("0 < P. 1:1001(999) ack 1 win 1");
    assert_eq!(e.kind, ParseErrorKind::InconsistentSeqRange);
    assert_eq!((e.line, e.col), (1, 8));
}

#[test]
fn malformed_inputs_yield_typed_errors() {
    let cases: [(&str, ParseErrorKind); 10] = [
        (
            "0 %{ never closed",
            ParseErrorKind::Unterminated("%{ code }%"),
        ),
        ("`never closed", ParseErrorKind::Unterminated("`command`")),
        ("/* open", ParseErrorKind::Unterminated("/* comment")),
        ("+0.0000001 close(3) = 0", ParseErrorKind::TimeTooPrecise),
        ("+0.2~+0.1 > S 0:0(0)", ParseErrorKind::TimeRangeBackwards),
        ("0 close(3) = 0\n--x=1", ParseErrorKind::OptionAfterEvent),
        ("0 < SS 0:0(0) win 1", ParseErrorKind::BadFlags),
        ("0 < S 0:0(0) win 65536", ParseErrorKind::NumberTooLarge),
        ("0 < S 0:0(0) win 1 <FO abc>", ParseErrorKind::BadCookie),
        (
            "0 < S 4294967296:0(0) win 1",
            ParseErrorKind::NumberTooLarge,
        ),
    ];
    for (src, kind) in cases {
        assert_eq!(err(src).kind, kind, "{src}");
    }
    assert_eq!(
        err("0 close(3 = 0").kind,
        ParseErrorKind::Expected("',' or ')'")
    );
    assert_eq!(
        err("0 = 3").kind.to_string().split(' ').next(),
        Some("expected")
    );
}

/// A comment right after the flags ends them as whitespace would: the line is then a TCP line
/// missing its sequence numbers (an error), not an unsupported line whose kept text, the
/// comment dropped, would parse differently (found by the `packetdrill_parse` fuzzer).
#[test]
fn a_comment_glued_to_the_flags_ends_them() {
    for src in ["+0 < F// note\n", "+0 < F/* note */\n", "+0 < -// note\n"] {
        let e = parse_script(src).expect_err(src);
        assert_eq!(e.kind, ParseErrorKind::Expected("number"), "{src}: {e}");
    }
    let line = tcp("+0 < S. 0:0(0) ack 1 win 100// note\n");
    assert_eq!(line.win, Some(100));
}
