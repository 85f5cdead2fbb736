//! Property: printing any AST the parser can produce and parsing it back gives the same AST.

use conformance::ast::*;
use conformance::{parse_event, parse_script};
use proptest::prelude::*;
use wire::tcp::TcpFlags;

fn usecs() -> impl Strategy<Value = u64> {
    prop_oneof![0u64..2_000_000, 0u64..10_000_000_000]
}

fn ordered() -> impl Strategy<Value = (u64, u64)> {
    (usecs(), 0u64..5_000_000).prop_map(|(a, d)| (a, a + d))
}

fn event_time() -> impl Strategy<Value = EventTime> {
    prop_oneof![
        Just(EventTime::Any),
        usecs().prop_map(|at_usecs| EventTime::Absolute { at_usecs }),
        usecs().prop_map(|after_usecs| EventTime::Relative { after_usecs }),
        ordered().prop_map(|(start_usecs, end_usecs)| EventTime::AbsoluteRange {
            start_usecs,
            end_usecs
        }),
        ordered().prop_map(|(start_usecs, end_usecs)| EventTime::RelativeRange {
            start_usecs,
            end_usecs
        }),
        ordered().prop_map(|(start_usecs, end_usecs)| EventTime::AbsoluteBlocking {
            start_usecs,
            end_usecs
        }),
        ordered().prop_map(|(start_usecs, end_usecs)| EventTime::RelativeBlocking {
            start_usecs,
            end_usecs
        }),
    ]
}

fn direction() -> impl Strategy<Value = Direction> {
    prop_oneof![Just(Direction::Inbound), Just(Direction::Outbound)]
}

fn tcp_option() -> impl Strategy<Value = TcpOption> {
    prop_oneof![
        Just(TcpOption::Nop),
        Just(TcpOption::Eol),
        any::<u16>().prop_map(TcpOption::Mss),
        any::<u8>().prop_map(TcpOption::WindowScale),
        Just(TcpOption::SackPermitted),
        prop::collection::vec((any::<u32>(), any::<u32>()), 1..5).prop_map(TcpOption::Sack),
        (any::<u32>(), any::<u32>()).prop_map(|(val, ecr)| TcpOption::Timestamp { val, ecr }),
        prop::collection::vec(any::<u8>(), 0..17).prop_map(TcpOption::FastOpen),
        prop::collection::vec(any::<u8>(), 1..17).prop_map(TcpOption::Md5),
    ]
}

fn tos_spec() -> impl Strategy<Value = TosSpec> {
    prop_oneof![
        Just(TosSpec::NoEcn),
        Just(TosSpec::Ect0),
        Just(TosSpec::Ect1),
        Just(TosSpec::Ce),
        Just(TosSpec::Ect01),
        any::<u8>().prop_map(TosSpec::Tos),
    ]
}

/// The forms packetdrill's `ip_info` allows: a TOS spec, a flow label, both, or a TTL.
fn ip_info() -> impl Strategy<Value = Option<IpInfo>> {
    let label = 0u32..(1 << 20);
    prop::option::of(prop_oneof![
        tos_spec().prop_map(|t| IpInfo {
            tos: Some(t),
            flow_label: None,
            ttl: None
        }),
        label.clone().prop_map(|l| IpInfo {
            tos: None,
            flow_label: Some(l),
            ttl: None
        }),
        (tos_spec(), label).prop_map(|(t, l)| IpInfo {
            tos: Some(t),
            flow_label: Some(l),
            ttl: None
        }),
        any::<u8>().prop_map(|t| IpInfo {
            tos: None,
            flow_label: None,
            ttl: Some(t)
        }),
    ])
}

fn options_spec() -> impl Strategy<Value = TcpOptionsSpec> {
    prop_oneof![
        Just(TcpOptionsSpec::Absent),
        Just(TcpOptionsSpec::Any),
        prop::collection::vec(tcp_option(), 0..8).prop_map(TcpOptionsSpec::List),
    ]
}

prop_compose! {
    fn tcp_line()(
        direction in direction(),
        flags in any::<u8>(),
        start in any::<u32>(),
        len_bytes in prop_oneof![0u32..70_000, any::<u32>()],
        ack in any::<Option<u32>>(),
        win in any::<Option<u16>>(),
        urg in any::<Option<u16>>(),
        options in options_spec(),
        ip in ip_info(),
        ports in any::<Option<(u16, u16)>>(),
    ) -> TcpLine {
        TcpLine {
            direction,
            ip,
            ports,
            flags: TcpFlags(flags),
            seq: SeqRange { start, end: start.wrapping_add(len_bytes), len_bytes },
            ack,
            win,
            urg,
            options,
        }
    }
}

fn ident() -> impl Strategy<Value = String> {
    "[A-Za-z_][A-Za-z0-9_]{0,10}"
}

fn expr() -> impl Strategy<Value = Expr> {
    let leaf = prop_oneof![
        Just(Expr::Ellipsis),
        (-(1i64 << 40)..(1i64 << 40)).prop_map(Expr::Int),
        ident().prop_map(Expr::Symbol),
        "[a-z0-9 ./_-]{0,12}".prop_map(Expr::Str),
        "[a-z0-9 ./_-]{0,12}".prop_map(Expr::StrPrefix),
        prop::collection::vec("[a-z0-9 ./_-]{0,6}", 2..4).prop_map(Expr::Strs),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        // An `Or` operand is neither an `Or` nor an `Assign` (whose value would take the rest
        // of the `|` chain).
        let operand = inner.clone().prop_filter("no nested Or or Assign", |e| {
            !matches!(e, Expr::Or(_) | Expr::Assign(..))
        });
        prop_oneof![
            prop::collection::vec(operand, 2..4).prop_map(Expr::Or),
            (ident(), inner.clone()).prop_map(|(n, v)| Expr::Assign(n, Box::new(v))),
            prop::collection::vec(inner.clone(), 0..4).prop_map(Expr::List),
            (ident(), prop::collection::vec(inner.clone(), 0..3))
                .prop_map(|(n, a)| Expr::Call(n, a)),
            prop::collection::vec(field(inner), 0..4).prop_map(Expr::Struct),
        ]
    })
}

fn field(inner: impl Strategy<Value = Expr> + Clone) -> impl Strategy<Value = Field> {
    prop_oneof![
        // A positional `NAME=value` is a named field.
        inner
            .clone()
            .prop_filter("positional Assign reads as a named field", |e| {
                !matches!(e, Expr::Assign(..))
            })
            .prop_map(|value| Field {
                name: None,
                param: None,
                value
            }),
        (ident(), inner.clone()).prop_map(|(n, value)| Field {
            name: Some(n),
            param: None,
            value
        }),
        (ident(), inner.clone(), inner).prop_map(|(n, p, value)| Field {
            name: Some(n),
            param: Some(p),
            value
        }),
    ]
}

fn syscall() -> impl Strategy<Value = SyscallLine> {
    (
        ident(),
        prop::collection::vec(expr(), 0..5),
        expr(),
        prop::option::of((
            "E[A-Z0-9_]{1,10}",
            prop::option::of("[A-Za-z][A-Za-z ]{0,20}"),
        )),
    )
        .prop_map(|(name, args, ret, err)| {
            let (errno, errno_note) = match err {
                Some((e, n)) => (Some(e), n),
                None => (None, None),
            };
            SyscallLine {
                name,
                args,
                ret,
                errno,
                errno_note,
            }
        })
}

fn timed_action() -> impl Strategy<Value = Action> {
    prop_oneof![
        4 => tcp_line().prop_map(Action::Tcp),
        3 => syscall().prop_map(Action::Syscall),
        1 => (direction(), ip_info(), any::<Option<(u16, u16)>>(), any::<u32>()).prop_map(
            |(direction, ip, ports, len_bytes)| Action::Udp(UdpLine {
                direction,
                ip,
                ports,
                len_bytes
            })
        ),
        1 => (direction(), ip_info(), prop::collection::vec("[a-z0-9_]{1,8}", 0..5)).prop_map(
            |(direction, ip, w)| Action::Icmp(IcmpLine {
                direction,
                ip,
                text: w.join(" ")
            })
        ),
        1 => "[^`]{0,40}".prop_map(Action::Shell),
        1 => "[a-z0-9 =\n{}%()]{0,40}"
            .prop_filter("no block end inside", |s| !s.contains("}%"))
            .prop_map(Action::Code),
    ]
}

fn event() -> impl Strategy<Value = Event> {
    prop_oneof![
        5 => (event_time(), timed_action()).prop_map(|(time, action)| Event {
            pos: Pos::default(),
            time,
            action
        }),
        1 => "[^`]{0,20}".prop_map(|s| Event {
            pos: Pos::default(),
            time: EventTime::Unspecified,
            action: Action::Shell(s)
        }),
    ]
}

fn script() -> impl Strategy<Value = Script> {
    (
        prop::collection::vec(
            (
                "[a-z_]{1,12}",
                prop::option::of(prop_oneof!["[a-z0-9_.]{1,8}", "[A-Z]{1,4}=\"[a-z ]{0,8}\"",]),
            )
                .prop_map(|(name, value)| ScriptOption { name, value }),
            0..3,
        ),
        prop::collection::vec(event(), 0..12),
    )
        .prop_map(|(options, events)| Script { options, events })
}

proptest! {
    #[test]
    fn printed_tcp_line_parses_back_equal(line in tcp_line(), time in event_time()) {
        let ev = Event { pos: Pos::default(), time, action: Action::Tcp(line) };
        let text = ev.to_string();
        let back = parse_event(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert_eq!(back.time, ev.time, "{}", text);
        prop_assert_eq!(back.action, ev.action, "{}", text);
    }

    #[test]
    fn printed_syscall_parses_back_equal(call in syscall()) {
        let ev = Event {
            pos: Pos::default(),
            time: EventTime::Relative { after_usecs: 0 },
            action: Action::Syscall(call),
        };
        let text = ev.to_string();
        let back = parse_event(&text).map_err(|e| TestCaseError::fail(format!("{e}: {text}")))?;
        prop_assert_eq!(back.action, ev.action, "{}", text);
    }

    #[test]
    fn printed_script_parses_back_equal(s in script()) {
        let text = s.to_string();
        let back = parse_script(&text).map_err(|e| TestCaseError::fail(format!("{e}:\n{text}")))?;
        prop_assert!(s.same_content(&back), "{}\n---\n{}", text, back);
    }

    /// Any input yields a script or a typed error, never a panic.
    #[test]
    fn arbitrary_text_never_panics(text in "[ -~\n\t]{0,200}") {
        let _ = parse_script(&text);
    }

    /// Mangled real script text yields a script or a typed error, never a panic.
    #[test]
    fn truncated_script_never_panics(cut in 0usize..600) {
        let src = "0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3\n\
                   +0 sendmsg(4, {msg_name(...)=..., msg_iov(1)=[{..., 40}], msg_flags=0}, MSG_MORE) = 40\n\
                   +.1 < S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>\n\
                   +.1~+.105 > P. 3001:4001(1000) ack 1 <nop,nop,TS val 1 ecr 2,sack 1:2>\n\
                   +.01 %{ assert x }%\n`a`\n";
        let end = cut.min(src.len());
        if let Some(prefix) = src.get(..end) {
            let _ = parse_script(prefix);
        }
    }
}
