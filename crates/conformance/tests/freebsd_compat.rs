//! The `freebsd-compat` profile: the stack lays its options out as FreeBSD's
//! `tcp_addoptions` does, and the hand-written FreeBSD-style scripts
//! (`corpus/freebsd-style/`, ours) pass under it and fail under `linux-compat`.

use conformance::exec::{Outcome, Profile, run_file, run_text, script_files};
use std::path::Path;

const LISTEN: &str = "\
0 socket(..., SOCK_STREAM, IPPROTO_TCP) = 3
+0 bind(3, ..., ...) = 0
+0 listen(3, 1) = 0
";

fn outcome(script: &str, profile: &Profile) -> Outcome {
    run_text(script, profile).outcome
}

#[test]
fn freebsd_compat_syn_ack_puts_window_scale_after_mss_and_timestamps_last() {
    let script = format!(
        "{LISTEN}+0 < S 0:0(0) win 65535 <mss 1460,nop,wscale 6,sackOK,TS val 7 ecr 0>\n\
         +0 > S. 0:0(0) ack 1 win 65535 <mss 1460,nop,wscale 6,sackOK,TS val 1 ecr 7>\n"
    );
    assert_eq!(outcome(&script, &Profile::freebsd_compat()), Outcome::Pass);
    // Linux's layout of the same options is another one.
    let Outcome::Fail { pos, message } = outcome(&script, &Profile::linux_compat()) else {
        panic!("linux-compat must not lay options out as FreeBSD");
    };
    assert_eq!(pos.line, 5);
    assert!(message.contains("got <mss 1460,sackOK,TS"), "{message}");
}

#[test]
fn freebsd_compat_pads_an_unaligned_option_list_with_eol_not_nop() {
    let script = format!(
        "{LISTEN}+0 < S 0:0(0) win 65535 <mss 1460,sackOK,eol,eol>\n\
         +0 > S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK,eol,eol>\n"
    );
    assert_eq!(outcome(&script, &Profile::freebsd_compat()), Outcome::Pass);
    // The padding must be listed: a line without it does not match FreeBSD's segment.
    let unpadded = script.replace(
        "> S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK,eol,eol>",
        "> S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK>",
    );
    let Outcome::Fail { message, .. } = outcome(&unpadded, &Profile::freebsd_compat()) else {
        panic!("unlisted padding must not match");
    };
    assert!(message.contains("option layout"), "{message}");
    // The message shows what is on the wire, padding included.
    assert!(
        message.contains("with options <mss 1460,sackOK,eol,eol> on the wire"),
        "{message}"
    );
}

#[test]
fn freebsd_compat_delays_a_lone_segments_ack_by_100_ms() {
    let script = format!(
        "{LISTEN}+0 < S 0:0(0) win 65535 <mss 1460,sackOK,eol,eol>\n\
         +0 > S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK,eol,eol>\n\
         +.05 < . 1:1(0) ack 1 win 65535\n\
         +0 accept(3, ..., ...) = 4\n\
         +0 < P. 1:101(100) ack 1 win 65535\n\
         +.1 > . 1:1(0) ack 101\n"
    );
    assert_eq!(outcome(&script, &Profile::freebsd_compat()), Outcome::Pass);
    let early = script.replace("+.1 > . 1:1(0) ack 101", "+.04 > . 1:1(0) ack 101");
    assert!(matches!(
        outcome(&early, &Profile::freebsd_compat()),
        Outcome::Fail { .. }
    ));
}

#[test]
fn profile_names_select_the_profiles() {
    assert_eq!(
        Profile::by_name("freebsd-compat").map(|p| p.name),
        Some("freebsd-compat")
    );
    assert_eq!(
        Profile::by_name("freebsd-compat").map(|p| p.tcp_option_layout),
        Some(wire::TcpOptionLayout::FreeBsd)
    );
    assert_eq!(
        Profile::by_name("linux-compat").map(|p| p.tcp_option_layout),
        Some(wire::TcpOptionLayout::Linux)
    );
}

/// Every script of `corpus/freebsd-style/` passes under `freebsd-compat` and fails under
/// `linux-compat` (each depends on FreeBSD's layout or defaults).
#[test]
fn every_freebsd_style_script_passes_under_freebsd_compat_only() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/freebsd-style");
    let files = script_files(&dir).expect("corpus readable");
    assert!(files.len() >= 3, "{files:?}");
    for path in files {
        let freebsd = run_file(&path, &Profile::freebsd_compat()).outcome;
        assert_eq!(freebsd, Outcome::Pass, "{}", path.display());
        let linux = run_file(&path, &Profile::linux_compat()).outcome;
        assert!(
            matches!(linux, Outcome::Fail { .. }),
            "{}: {linux}",
            path.display()
        );
    }
}

#[test]
fn freebsd_sysctls_in_a_script_change_the_stack_or_skip_it() {
    let body = "+0 < S 0:0(0) win 65535 <mss 1460,sackOK,eol,eol>\n\
                +0 > S. 0:0(0) ack 1 win 65535 <mss 1460,sackOK,eol,eol>\n\
                +.05 < . 1:1(0) ack 1 win 65535\n\
                +0 accept(3, ..., ...) = 4\n\
                +0 < P. 1:101(100) ack 1 win 65535\n\
                +.04 > . 1:1(0) ack 101\n";
    let faster = format!("`sysctl -w net.inet.tcp.delacktime=40`\n{LISTEN}{body}");
    assert_eq!(outcome(&faster, &Profile::freebsd_compat()), Outcome::Pass);
    // Without the sysctl the ACK waits 100 ms.
    let plain = format!("{LISTEN}{body}");
    assert!(matches!(
        outcome(&plain, &Profile::freebsd_compat()),
        Outcome::Fail { .. }
    ));
    // A setting the stack cannot honour skips the script rather than being ignored.
    let unknown = format!("`sysctl -w net.inet.tcp.functions_default=rack`\n{LISTEN}{body}");
    let Outcome::Skip { reason } = outcome(&unknown, &Profile::freebsd_compat()) else {
        panic!("an unsupported FreeBSD sysctl must skip");
    };
    assert!(reason.contains("functions_default=rack"), "{reason}");
}
