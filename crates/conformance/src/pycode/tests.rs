//! The evaluator on the statements the corpus writes.

use super::*;

struct Info(Vec<(&'static str, Option<i64>)>);

impl Names for Info {
    fn lookup(&self, name: &str) -> Lookup {
        match self.0.iter().find(|(n, _)| *n == name) {
            Some((_, Some(v))) => Lookup::Value(*v),
            Some((_, None)) => Lookup::Unavailable(format!("{name} unknown")),
            None if name.starts_with("tcpi_") => Lookup::Unavailable(format!("no {name}")),
            None => Lookup::NotMine,
        }
    }
}

fn run(code: &str, info: &Info) -> (Counts, Result<(), CodeError>) {
    run_block(code, &mut Env::default(), info)
}

fn cwnd(n: i64) -> Info {
    Info(vec![
        ("tcpi_snd_cwnd", Some(n)),
        ("tcpi_options", Some(7)),
        ("tcpi_rtt", Some(20_000)),
        ("tcpi_ca_state", Some(3)),
        ("tcpi_lost", None),
    ])
}

#[test]
fn assert_with_message_passes_and_fails_on_the_value() {
    let (c, r) = run("assert tcpi_snd_cwnd == 10, tcpi_snd_cwnd", &cwnd(10));
    assert_eq!(
        (c, r),
        (
            Counts {
                checked: 1,
                passed: 1
            },
            Ok(())
        )
    );
    let (c, r) = run(
        "assert tcpi_snd_cwnd == 10, 'cwnd=%d' % tcpi_snd_cwnd",
        &cwnd(12),
    );
    assert_eq!(
        c,
        Counts {
            checked: 1,
            passed: 0
        }
    );
    let Err(CodeError::Failed { message, .. }) = r else {
        panic!("{r:?}")
    };
    assert!(message.ends_with("cwnd=12"), "{message}");
}

#[test]
fn statements_split_on_newlines_semicolons_and_continue_after_backslash() {
    let code = "print(tcpi_snd_cwnd); assert tcpi_snd_cwnd == 10,tcpi_snd_cwnd\n\
                assert 15000 <= tcpi_rtt <= 25000, 'rtt=%d' % tcpi_rtt;\\\n  \
                assert (tcpi_options & TCPI_OPT_SACK) != 0  # comment\n";
    assert_eq!(assertions_in_block(code), 3);
    assert_eq!(
        run(code, &cwnd(10)),
        (
            Counts {
                checked: 3,
                passed: 3
            },
            Ok(())
        )
    );
}

#[test]
fn chained_comparison_needs_every_link() {
    assert!(
        run("assert 25000 <= tcpi_rtt <= 36000", &cwnd(1))
            .1
            .is_err()
    );
    assert!(
        run("assert 1 < 2 < 3 and not 3 < 2 or 0", &cwnd(1))
            .1
            .is_ok()
    );
}

#[test]
fn variables_persist_across_blocks_and_augmented_assignment_adds() {
    let mut env = Env::default();
    let info = cwnd(59);
    assert!(run_block("cwnd = 58", &mut env, &info).1.is_ok());
    let (c, r) = run_block(
        "cwnd += 1; assert tcpi_snd_cwnd == cwnd, tcpi_snd_cwnd",
        &mut env,
        &info,
    );
    assert_eq!((c.passed, r), (1, Ok(())));
    let r = run_block("TCP_INFINITE_SSTHRESH = 0x7fffffff", &mut env, &info).1;
    assert!(r.is_ok());
    assert!(
        run_block(
            "assert TCP_INFINITE_SSTHRESH == 2147483647",
            &mut env,
            &info
        )
        .1
        .is_ok()
    );
}

#[test]
fn constants_name_linux_states() {
    let (c, r) = run(
        "assert tcpi_ca_state == TCP_CA_Recovery, 'ca_state: %d rtt: %d' % (tcpi_ca_state, tcpi_rtt)",
        &cwnd(1),
    );
    assert_eq!((c.passed, r), (1, Ok(())));
}

#[test]
fn unknown_field_or_syntax_is_unsupported_never_passed() {
    let (c, r) = run(
        "assert tcpi_snd_cwnd == 10; assert tcpi_lost == 1",
        &cwnd(10),
    );
    assert_eq!(
        c,
        Counts {
            checked: 1,
            passed: 1
        }
    );
    assert_eq!(r, Err(CodeError::Unsupported("tcpi_lost unknown".into())));
    for code in [
        "assert tcpi_busy_time == 0",
        "import os",
        "assert len(x) == 1",
        "assert 1.5 > 1",
        "assert undefined_name == 1",
        "assert 4 / 2 == 2",
    ] {
        assert!(
            matches!(run(code, &cwnd(1)).1, Err(CodeError::Unsupported(_))),
            "{code}"
        );
    }
}

#[test]
fn arithmetic_follows_python() {
    for code in [
        "assert 7 // 2 == 3 and -7 // 2 == -4 and -7 % 3 == 2 and 7 % -3 == -2",
        "assert 1 + 2 * 3 == 7 and (1 + 2) * 3 == 9 and 1 << 4 == 16 and 0x10 | 1 == 17",
        "assert ~0 == -1 and 6 ^ 3 == 5 and -(2) == -2",
    ] {
        assert_eq!(run(code, &cwnd(1)).1, Ok(()), "{code}");
    }
}
