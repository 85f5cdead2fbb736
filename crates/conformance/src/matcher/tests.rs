//! Unit tests of the matcher: packet fields, options, inbound building, super-segments.

use super::*;
use crate::ast::Action;
use crate::parse::parse_event;

const PEER: u32 = 0x8000_0000;
const STACK: u32 = 0xffff_fff0; // close to wrapping on purpose

fn line(src: &str) -> TcpLine {
    match parse_event(&format!("+0 {src}")).expect("parses").action {
        Action::Tcp(t) => t,
        other => panic!("not TCP: {other:?}"),
    }
}

fn seg(flags: TcpFlags, seq: u32, ack: u32, payload: &[u8]) -> TcpRepr<'_> {
    TcpRepr {
        payload,
        ..TcpRepr::bare(8080, 40000, SeqNumber(seq), SeqNumber(ack), flags, 502)
    }
}

const SA: TcpFlags = TcpFlags(TcpFlags::SYN.0 | TcpFlags::ACK.0);
const PA: TcpFlags = TcpFlags(TcpFlags::PSH.0 | TcpFlags::ACK.0);

/// A context where the stack's SYN-ACK (ISN `STACK`) has already been matched.
fn established() -> MatchContext {
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let syn_ack = line("> S. 0:0(0) ack 1 <...>");
    ctx.match_outbound(&syn_ack, &seg(SA, STACK, PEER + 1, &[]))
        .expect("SYN-ACK matches");
    ctx
}

fn err_text(r: Result<(), MatchError>) -> String {
    r.expect_err("must mismatch").to_string()
}

#[test]
fn outbound_syn_teaches_stack_isn_and_ts_offset() {
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let want = line("> S 0:0(0) <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 8>");
    let mut got = seg(TcpFlags::SYN, 1_000_000, 0, &[]);
    got.max_seg_size = Some(1460);
    got.sack_permitted = true;
    got.timestamp = Some(TcpTimestamp {
        tsval: 5555,
        tsecr: 0,
    });
    got.window_scale = Some(8);
    assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
    assert_eq!(ctx.seq.stack_base, Some(SeqNumber(1_000_000)));
    assert_eq!(ctx.ts_val_offset, Some(5455));
    assert_eq!(ctx.seq.stack_live(1), Some(SeqNumber(1_000_001)));
}

#[test]
fn wrong_flags_say_expected_and_got() {
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let want = line("> S. 0:0(0) ack 1 <...>");
    let got = seg(TcpFlags::SYN, STACK, PEER + 1, &[]);
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "expected flags S. got S"
    );
}

#[test]
fn wrong_window_says_both_values() {
    let mut ctx = established();
    let want = line("> . 1:1(0) ack 1 win 65535");
    let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
    got.window_len = 29200;
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "expected win 65535 got 29200"
    );
}

#[test]
fn option_mismatch_prints_both_option_lists() {
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let want = line("> S 0:0(0) <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 8>");
    let mut got = seg(TcpFlags::SYN, 7, 0, &[]);
    got.max_seg_size = Some(1460);
    got.timestamp = Some(TcpTimestamp {
        tsval: 100,
        tsecr: 0,
    });
    got.window_scale = Some(7);
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "option mismatch: expected <mss 1460,sackOK,TS val 100 ecr 0,nop,wscale 8>, \
         got <mss 1460,TS val 100 ecr 0,wscale 7>"
    );
}

#[test]
fn seq_and_ack_mismatches_are_reported_script_relative_and_together() {
    let mut ctx = established();
    let want = line("> P. 1:1001(1000) ack 1");
    let data = [0u8; 460];
    let got = seg(PA, STACK.wrapping_add(1001), PEER + 5, &data);
    let e = ctx.match_outbound(&want, &got).expect_err("mismatch");
    assert_eq!(e.mismatches.len(), 3);
    assert_eq!(
        e.to_string(),
        "expected seq 1 got 1001; expected payload length 1000 got 460; expected ack 1 got 5"
    );
}

#[test]
fn data_segment_across_sequence_wrap_matches() {
    let mut ctx = established();
    let want = line("> P. 1:1001(1000) ack 1");
    let data = [0u8; 1000];
    // STACK + 1 wraps past 2^32 within this segment.
    let got = seg(PA, STACK.wrapping_add(1), PEER + 1, &data);
    assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
}

#[test]
fn outbound_data_before_any_syn_reports_unknown_isn() {
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let want = line("> . 1:1(0) ack 1");
    let got = seg(TcpFlags::ACK, 5, PEER + 1, &[]);
    assert_eq!(
        ctx.match_outbound(&want, &got).map_err(|e| e.mismatches),
        Err(vec![Mismatch::StackIsnUnknown])
    );
}

#[test]
fn inbound_line_is_not_an_outbound_expectation() {
    let mut ctx = established();
    let want = line("< . 1:1(0) ack 1 win 257");
    let got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "line is not an outbound packet"
    );
}

#[test]
fn absent_options_reject_a_segment_carrying_timestamps() {
    let mut ctx = established();
    let want = line("> . 1:1(0) ack 1");
    let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
    got.timestamp = Some(TcpTimestamp { tsval: 1, tsecr: 2 });
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "option mismatch: expected no options, got <TS val 1 ecr 2>"
    );
    let any = line("> . 1:1(0) ack 1 <...>");
    assert_eq!(ctx.match_outbound(&any, &got), Ok(()));
}

#[test]
fn ts_val_is_checked_in_ticks_only_when_asked() {
    // ts_recent/fin_tsval.pkt: --tcp_ts_tick_usecs=1000 --tolerance_usecs=7000.
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    ctx.ts_tick_usecs = Some(1000);
    ctx.tolerance_usecs = 7000;
    assert_eq!(ctx.ts_tolerance_ticks(), Some(7));
    let syn_ack = line("> S. 0:0(0) ack 1 <mss 1460,sackOK,TS val 100 ecr 100>");
    let mut got = seg(SA, STACK, PEER + 1, &[]);
    got.max_seg_size = Some(1460);
    got.sack_permitted = true;
    got.timestamp = Some(TcpTimestamp {
        tsval: 9100,
        tsecr: 100,
    });
    assert_eq!(ctx.match_outbound(&syn_ack, &got), Ok(()));
    assert_eq!(ctx.ts_val_offset, Some(9000));

    let fin = line("> F. 1:1(0) ack 1 <nop,nop,TS val 1200 ecr 200>");
    let ts = |tsval| {
        let mut s = seg(
            TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0),
            STACK + 1,
            PEER + 1,
            &[],
        );
        s.timestamp = Some(TcpTimestamp { tsval, tsecr: 200 });
        s
    };
    assert_eq!(ctx.match_outbound(&fin, &ts(10_207)), Ok(()));
    assert_eq!(ctx.match_outbound(&fin, &ts(10_193)), Ok(()));
    assert_eq!(
        err_text(ctx.match_outbound(&fin, &ts(10_208))),
        "expected TS val 1200 (±7 ticks) got 1208"
    );
    // Without --tcp_ts_tick_usecs the value is not checked.
    ctx.ts_tick_usecs = None;
    assert_eq!(ctx.match_outbound(&fin, &ts(99_999)), Ok(()));
}

#[test]
fn ts_ecr_is_compared_literally() {
    let mut ctx = established();
    let want = line("> . 1:1(0) ack 1001 <nop,nop,TS val 200 ecr 201>");
    let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1001, &[]);
    got.timestamp = Some(TcpTimestamp {
        tsval: 200,
        tsecr: 200,
    });
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "option mismatch: expected <nop,nop,TS val 200 ecr 201>, got <TS val 200 ecr 200>"
    );
}

#[test]
fn outbound_sack_blocks_are_in_the_peer_space() {
    let mut ctx = established();
    let want = line("> . 1:1(0) ack 1 <nop,nop,sack 1001:2001>");
    let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
    got.sack_blocks[0] = Some(SackBlock {
        left: SeqNumber(PEER + 1001),
        right: SeqNumber(PEER + 2001),
    });
    assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
    got.sack_blocks[0] = Some(SackBlock {
        left: SeqNumber(PEER + 1001),
        right: SeqNumber(PEER + 3001),
    });
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "option mismatch: expected <nop,nop,sack 1001:2001>, got <sack 1001:3001>"
    );
}

#[test]
fn fast_open_option_is_compared_by_form_and_cookie() {
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let want = line("> S 0:0(0) <mss 1460,FO,nop,nop>");
    let mut got = seg(TcpFlags::SYN, 1, 0, &[]);
    got.max_seg_size = Some(1460);
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "option mismatch: expected <mss 1460,FO,nop,nop>, got <mss 1460>"
    );
    got.fast_open = Some(FastOpenOption::request(false));
    assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
    // The experimental form is not the same option.
    got.fast_open = Some(FastOpenOption::request(true));
    assert!(ctx.match_outbound(&want, &got).is_err());
    let want = line("> S. 0:0(0) <mss 1460,FOEXP 0011223344556677>");
    let mut got = seg(TcpFlags::SYN | TcpFlags::ACK, 1, 1, &[]);
    got.max_seg_size = Some(1460);
    got.fast_open =
        FastOpenOption::with_cookie(&[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77], true);
    assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
    got.fast_open =
        FastOpenOption::with_cookie(&[0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x78], true);
    assert!(ctx.match_outbound(&want, &got).is_err());
    // A cookie name the executor did not resolve never matches.
    let want = line("> S. 0:0(0) <mss 1460,FOEXP TFO_COOKIE>");
    assert!(ctx.match_outbound(&want, &got).is_err());
}

#[test]
fn inbound_syn_builds_a_repr_in_the_peer_space() {
    let ctx = MatchContext::new(SeqNumber(PEER));
    let l = line("< S 0:0(0) win 32792 <mss 1000,sackOK,nop,nop,nop,wscale 7>");
    let r = ctx.build_inbound(&l, 40000, 8080, &[]).expect("builds");
    assert_eq!(r.seq_number, SeqNumber(PEER));
    assert_eq!(r.flags, TcpFlags::SYN);
    assert_eq!(r.window_len, 32792);
    assert_eq!(r.max_seg_size, Some(1000));
    assert_eq!(r.window_scale, Some(7));
    assert!(r.sack_permitted);
    assert_eq!((r.src_port, r.dst_port), (40000, 8080));
}

#[test]
fn inbound_ack_sack_and_ecr_map_into_the_stack_space() {
    let mut ctx = established();
    ctx.ts_val_map.insert(100, 9100);
    let l = line("< . 1:1001(1000) ack 4001 win 320 <sack 5001:7001,nop,nop,TS val 201 ecr 100>");
    let payload = [7u8; 1000];
    let r = ctx.build_inbound(&l, 1, 2, &payload).expect("builds");
    assert_eq!(r.seq_number, SeqNumber(PEER + 1));
    assert_eq!(r.ack_number, SeqNumber(STACK.wrapping_add(4001)));
    assert_eq!(
        r.sack_blocks[0],
        Some(SackBlock {
            left: SeqNumber(STACK.wrapping_add(5001)),
            right: SeqNumber(STACK.wrapping_add(7001)),
        })
    );
    assert_eq!(r.sack_blocks[1], None);
    assert_eq!(
        r.timestamp,
        Some(TcpTimestamp {
            tsval: 201,
            tsecr: 9100
        })
    );
    assert_eq!(r.payload.len(), 1000);
}

#[test]
fn inbound_ack_without_an_ack_number_acknowledges_the_stacks_isn() {
    // packetdrill maps the ACK field of every segment with the ACK bit, written or not: an
    // unwritten one is script sequence 0 (`gro/gro-mss-option`: `< . 1:10001(10000) win 320`).
    let ctx = established();
    let payload = [0u8; 100];
    let r = ctx
        .build_inbound(&line("< . 1:101(100) win 320"), 1, 2, &payload)
        .expect("builds");
    assert_eq!(r.ack_number, SeqNumber(STACK));
    let r = ctx
        .build_inbound(&line("< R 1:1(0) win 0"), 1, 2, &[])
        .expect("builds");
    assert_eq!(r.ack_number, SeqNumber(0), "no ACK bit: the field stays 0");
}

#[test]
fn inbound_lines_that_cannot_be_built_yield_typed_errors() {
    let fresh = MatchContext::new(SeqNumber(PEER));
    let ctx = established();
    let cases: [(&MatchContext, &str, usize, BuildError); 7] = [
        (&ctx, "> . 1:1(0) ack 1", 0, BuildError::NotInbound),
        (
            &ctx,
            "< P. 1:11(10) ack 1 win 1",
            3,
            BuildError::PayloadLen {
                expected_bytes: 10,
                got_bytes: 3,
            },
        ),
        (&ctx, "< . 1:1(0) ack 1", 0, BuildError::MissingWindow),
        (
            &fresh,
            "< . 1:1(0) ack 1 win 1",
            0,
            BuildError::StackIsnUnknown,
        ),
        (
            &ctx,
            "< . 1:1(0) ack 1 win 1 <...>",
            0,
            BuildError::AnyOptions,
        ),
        (
            &ctx,
            "< . 1:1(0) ack 1 win 1 <sack 1:2 3:4 5:6 7:8 9:10>",
            0,
            BuildError::TooManySackBlocks,
        ),
        (
            &ctx,
            "< S. 0:0(0) ack 1 win 1 <FO abcd12>",
            0,
            BuildError::Unrepresentable(
                "FO cookie of a length RFC 7413 does not allow (0, or 4 to 16 even)",
            ),
        ),
    ];
    for (c, src, len, want) in cases {
        let payload = vec![0u8; len];
        assert_eq!(
            c.build_inbound(&line(src), 1, 2, &payload),
            Err(want),
            "{src}"
        );
    }
}

#[test]
fn inbound_ecr_must_echo_a_ts_val_the_stack_sent() {
    let mut ctx = established();
    let ack = line("< . 1:1(0) ack 1 win 257 <nop,nop,TS val 200 ecr 100>");
    assert_eq!(
        ctx.build_inbound(&ack, 1, 2, &[]),
        Err(BuildError::NoTsValMapping { script_ecr: 100 })
    );
    assert_eq!(
        BuildError::NoTsValMapping { script_ecr: 100 }.to_string(),
        "TS ecr 100 echoes no TS val the stack has sent"
    );
    ctx.ts_val_map.insert(100, 0xdead_beef);
    let r = ctx.build_inbound(&ack, 1, 2, &[]).expect("builds");
    assert_eq!(r.timestamp.map(|t| t.tsecr), Some(0xdead_beef));
    // Without the ACK bit the ecr goes out as written (here a SYN's 0).
    let syn = line("< S 0:0(0) win 20000 <mss 1000,sackOK,TS val 100 ecr 0>");
    let r = ctx.build_inbound(&syn, 1, 2, &[]).expect("builds");
    assert_eq!(
        r.timestamp,
        Some(TcpTimestamp {
            tsval: 100,
            tsecr: 0
        })
    );
}

#[test]
fn matched_outbound_ts_vals_are_recorded_for_later_echoes() {
    let mut ctx = established();
    let want = line("> . 1:1(0) ack 1 <nop,nop,TS val 200 ecr 7>");
    let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
    got.timestamp = Some(TcpTimestamp {
        tsval: 5_000_200,
        tsecr: 7,
    });
    assert_eq!(ctx.match_outbound(&want, &got), Ok(()));
    assert_eq!(ctx.ts_val_map.get(&200), Some(&5_000_200));
}

#[test]
fn urgent_pointer_must_be_zero_when_the_line_omits_urg() {
    let mut ctx = established();
    let want = line("> . 1:1(0) ack 1");
    let mut got = seg(TcpFlags::ACK, STACK + 1, PEER + 1, &[]);
    got.urgent_pointer = 3;
    assert_eq!(
        err_text(ctx.match_outbound(&want, &got)),
        "expected urg 0 got 3"
    );
}

#[test]
fn super_segment_is_matched_by_mss_sized_pieces() {
    let mut ctx = established();
    let want = line("> P. 1:10001(10000) ack 1");
    let mut acc = SuperSegment::new(&want);
    let data = [0u8; 1000];
    for i in 0..10u32 {
        let flags = if i == 9 { PA } else { TcpFlags::ACK };
        let got = seg(flags, STACK.wrapping_add(1 + 1000 * i), PEER + 1, &data);
        let p = acc.push(&mut ctx, &got).expect("piece matches");
        if i == 9 {
            assert_eq!(p, Progress::Complete);
        } else {
            assert_eq!(
                p,
                Progress::Partial {
                    covered_bytes: 1000 * (i + 1),
                    remaining_bytes: 1000 * (9 - i),
                }
            );
        }
    }
    assert_eq!(acc.covered_bytes(), 10_000);
}

#[test]
fn super_segment_accepts_one_whole_segment() {
    let mut ctx = established();
    let want = line("> P. 1:2001(2000) ack 1");
    let data = [0u8; 2000];
    let mut acc = SuperSegment::new(&want);
    let got = seg(PA, STACK.wrapping_add(1), PEER + 1, &data);
    assert_eq!(acc.push(&mut ctx, &got), Ok(Progress::Complete));
}

#[test]
fn super_segment_rejects_a_gap_and_keeps_its_place() {
    let mut ctx = established();
    let want = line("> P. 1:3001(3000) ack 1");
    let mut acc = SuperSegment::new(&want);
    let data = [0u8; 1000];
    acc.push(
        &mut ctx,
        &seg(TcpFlags::ACK, STACK.wrapping_add(1), PEER + 1, &data),
    )
    .expect("first piece");
    let skipped = seg(TcpFlags::ACK, STACK.wrapping_add(2001), PEER + 1, &data);
    assert_eq!(
        acc.push(&mut ctx, &skipped).expect_err("gap").to_string(),
        "expected seq 1001 got 2001"
    );
    assert_eq!(acc.covered_bytes(), 1000);
}

#[test]
fn super_segment_rejects_overrun_and_early_fin_and_missing_final_push() {
    let mut ctx = established();
    let want = line("> FP. 13001:20001(7000) ack 1");
    let fin_ack = TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0);
    let big = [0u8; 8000];
    let mut acc = SuperSegment::new(&want);
    assert_eq!(
        acc.push(
            &mut ctx,
            &seg(PA, STACK.wrapping_add(13001), PEER + 1, &big)
        )
        .expect_err("overrun")
        .to_string(),
        "expected payload length 7000 got 8000"
    );
    let piece = [0u8; 1000];
    assert_eq!(
        acc.push(
            &mut ctx,
            &seg(fin_ack, STACK.wrapping_add(13001), PEER + 1, &piece)
        )
        .expect_err("FIN before the end")
        .to_string(),
        "expected flags . got F."
    );
    let rest = [0u8; 6000];
    acc.push(
        &mut ctx,
        &seg(TcpFlags::ACK, STACK.wrapping_add(13001), PEER + 1, &piece),
    )
    .expect("first piece");
    assert_eq!(
        acc.push(
            &mut ctx,
            &seg(fin_ack, STACK.wrapping_add(14001), PEER + 1, &rest)
        )
        .expect_err("last piece lacks PSH")
        .to_string(),
        "expected flags FP. got F."
    );
    let last = seg(
        TcpFlags(fin_ack.0 | TcpFlags::PSH.0),
        STACK.wrapping_add(14001),
        PEER + 1,
        &rest,
    );
    assert_eq!(acc.push(&mut ctx, &last), Ok(Progress::Complete));
}

#[test]
fn super_segment_with_mss_rejects_sub_mss_pieces_before_the_last() {
    let mut ctx = established();
    let want = line("> P. 1:2501(2500) ack 1");
    let mut acc = SuperSegment::new(&want).with_mss(1000);
    let small = [0u8; 500];
    assert_eq!(
        acc.push(
            &mut ctx,
            &seg(TcpFlags::ACK, STACK.wrapping_add(1), PEER + 1, &small)
        )
        .expect_err("sub-MSS first piece")
        .to_string(),
        "expected a segment of 1000 bytes (MSS, the last one at most that) got 500"
    );
    let full = [0u8; 1000];
    for i in 0..2u32 {
        let got = seg(
            TcpFlags::ACK,
            STACK.wrapping_add(1 + 1000 * i),
            PEER + 1,
            &full,
        );
        acc.push(&mut ctx, &got).expect("MSS piece");
    }
    let got = seg(PA, STACK.wrapping_add(2001), PEER + 1, &small);
    assert_eq!(acc.push(&mut ctx, &got), Ok(Progress::Complete));
    assert!(acc.is_complete());
    // Nothing more belongs to a complete line.
    assert!(acc.push(&mut ctx, &got).is_err());
}

#[test]
fn super_segment_can_ignore_psh_policy() {
    let mut ctx = established();
    let want = line("> . 1:2001(2000) ack 1");
    let data = [0u8; 1000];
    let first = seg(TcpFlags::ACK, STACK.wrapping_add(1), PEER + 1, &data);
    let last_with_psh = seg(PA, STACK.wrapping_add(1001), PEER + 1, &data);
    let mut strict = SuperSegment::new(&want);
    strict.push(&mut ctx, &first).expect("first piece");
    assert_eq!(
        strict
            .push(&mut ctx, &last_with_psh)
            .expect_err("PSH on the last piece")
            .to_string(),
        "expected flags . got P."
    );
    let mut lenient = SuperSegment::new(&want).ignore_psh();
    lenient.push(&mut ctx, &first).expect("first piece");
    assert_eq!(
        lenient.push(&mut ctx, &last_with_psh),
        Ok(Progress::Complete)
    );
}

#[test]
fn zero_length_line_is_matched_by_one_empty_segment() {
    let mut ctx = established();
    let want = line("> F. 1:1(0) ack 1");
    let mut acc = SuperSegment::new(&want);
    let fin = seg(
        TcpFlags(TcpFlags::FIN.0 | TcpFlags::ACK.0),
        STACK.wrapping_add(1),
        PEER + 1,
        &[],
    );
    assert_eq!(acc.push(&mut ctx, &fin), Ok(Progress::Complete));
}

#[test]
fn option_layout_checks_order_padding_and_lengths() {
    let want = [
        TcpOption::Mss(1460),
        TcpOption::Nop,
        TcpOption::Nop,
        TcpOption::SackPermitted,
        TcpOption::Nop,
        TcpOption::WindowScale(8),
    ];
    let raw = [2, 4, 5, 180, 1, 1, 4, 2, 1, 3, 3, 8];
    assert_eq!(check_option_layout(&want, &raw), Ok(()));
    // Linux's other order: sackOK first, nops elsewhere.
    let other = [2, 4, 5, 180, 4, 2, 1, 1, 1, 3, 3, 8];
    assert_eq!(
        check_option_layout(&want, &other).map_err(|e| e.to_string()),
        Err("option #1: expected kind 1 len 1, got kind 4 len 2".to_string())
    );
    // Padding after an eol is walked byte by byte (packetdrill's iterator): the script lists
    // it, or the segment must have none.
    let padded = [2, 4, 5, 180, 1, 1, 4, 2, 1, 3, 3, 8, 0, 0, 0, 0];
    assert_eq!(
        check_option_layout(&want, &padded),
        Err(LayoutError::Count {
            expected: 6,
            actual: 10
        })
    );
    let freebsd = [
        TcpOption::Mss(1460),
        TcpOption::SackPermitted,
        TcpOption::Eol,
        TcpOption::Eol,
    ];
    assert_eq!(
        check_option_layout(&freebsd, &[2, 4, 5, 180, 4, 2, 0, 0]),
        Ok(())
    );
    assert_eq!(
        check_option_layout(&freebsd[..3], &[2, 4, 5, 180, 4, 2, 0, 0]),
        Err(LayoutError::Count {
            expected: 3,
            actual: 4
        })
    );
    assert_eq!(
        check_option_layout(&want[..2], &raw),
        Err(LayoutError::Count {
            expected: 2,
            actual: 6
        })
    );
    assert_eq!(
        check_option_layout(&want, &[2, 4, 5]),
        Err(LayoutError::Malformed { index: 0 })
    );
    assert_eq!(
        check_option_layout(&want, &[1, 2]),
        Err(LayoutError::Malformed { index: 1 })
    );
    // A FO cookie request (kind 34, no cookie) is an unknown kind to wire, counted by length.
    assert_eq!(
        check_option_layout(&[TcpOption::FastOpen(vec![]), TcpOption::Nop], &[34, 2, 1]),
        Ok(())
    );
}

#[test]
fn raw_options_text_keeps_wire_order_and_padding() {
    let seq = SeqSpace::new(SeqNumber(PEER));
    assert_eq!(
        raw_options_text(&[2, 4, 5, 180, 1, 1, 4, 2, 1, 3, 3, 8], &seq),
        "<mss 1460,nop,nop,sackOK,nop,wscale 8>"
    );
    assert_eq!(
        raw_options_text(&[2, 4, 5, 180, 4, 2, 0, 0], &seq),
        "<mss 1460,sackOK,eol,eol>"
    );
    let left = PEER.wrapping_add(1001).to_be_bytes();
    let right = PEER.wrapping_add(2001).to_be_bytes();
    let mut sack = vec![1, 1, 5, 10];
    sack.extend_from_slice(&left);
    sack.extend_from_slice(&right);
    assert_eq!(raw_options_text(&sack, &seq), "<nop,nop,sack 1001:2001>");
    assert_eq!(raw_options_text(&[34, 2, 1, 1], &seq), "<FO,nop,nop>");
    assert_eq!(
        raw_options_text(&[99, 3, 7, 1], &seq),
        "<kind 99 len 3,nop>"
    );
    assert_eq!(raw_options_text(&[2, 9], &seq), "<malformed>");
}

#[test]
fn ts_ecr_scaled_moves_an_unknown_ecr_by_the_stack_clock_offset() {
    // fastopen/client/synack-data.pkt: `--tcp_ts_ecr_scaled` and a SYN-ACK echoing a TS val
    // the stack never sent (ecr 9999).
    let mut ctx = MatchContext::new(SeqNumber(PEER));
    let syn = line("> S 0:0(0) <mss 1460,sackOK,TS val 1 ecr 0,nop,wscale 8>");
    let mut got = seg(TcpFlags::SYN, STACK, 0, &[]);
    got.max_seg_size = Some(1460);
    got.sack_permitted = true;
    got.window_scale = Some(8);
    got.timestamp = Some(TcpTimestamp {
        tsval: 501,
        tsecr: 0,
    });
    assert_eq!(ctx.match_outbound(&syn, &got), Ok(()));
    let syn_ack = line("< S. 0:0(0) ack 1 win 5840 <mss 1040,TS val 7 ecr 9999>");
    let echo = |ctx: &MatchContext| {
        ctx.build_inbound(&syn_ack, 40_000, 8_080, &[])
            .map(|r| r.timestamp.map(|t| t.tsecr))
    };
    assert_eq!(
        echo(&ctx).unwrap_err(),
        BuildError::NoTsValMapping { script_ecr: 9999 },
        "without the option an unknown ecr is refused"
    );
    ctx.ts_ecr_scaled = true;
    assert_eq!(echo(&ctx), Ok(Some(9999 + 500)));
    // A known val still maps exactly.
    let ack = line("< . 1:1(0) ack 1 win 5840 <nop,nop,TS val 8 ecr 1>");
    let r = ctx.build_inbound(&ack, 40_000, 8_080, &[]).unwrap();
    assert_eq!(r.timestamp.map(|t| t.tsecr), Some(501));
}
