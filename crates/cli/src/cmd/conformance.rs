//! `rsstack conformance PATH... [--profile P] [--expect-passing FILE | --min-passed N]`: runs
//! every packetdrill script under each directory PATH, and each script PATH, against the stack and prints `pass|fail|skip PATH [reason]` per
//! script, then `N passed, N failed, N skipped; assertions: N checked (N held, N failed), N not
//! evaluated`.

use std::io::Write;
use std::path::PathBuf;

use clap::Args;
use conformance::exec::{Outcome, Profile, Tally, expected_passing, run_file, script_files};

use super::CliError;

#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Scripts to run: a directory (its `*.pkt` files, searched recursively; each named by
    /// its path below the directory) or one script (named as given). One or more.
    #[arg(value_name = "PATH", required = true)]
    paths: Vec<PathBuf>,
    /// Stack configuration to run the scripts under: `linux-compat` (the Linux defaults the
    /// Google corpus assumes), `freebsd-compat` (FreeBSD's option layout and sysctl defaults,
    /// for scripts written against FreeBSD) or `default` (the stack's own defaults).
    #[arg(long, default_value = "linux-compat", value_name = "PROFILE")]
    profile: String,
    /// Succeed when at least N scripts pass (the count recorded in the repository), even if
    /// others fail. Without it any failing script makes the command fail.
    #[arg(long, value_name = "N", conflicts_with = "expect_passing")]
    min_passed: Option<usize>,
    /// Succeed when every script FILE lists passes (one name per line, as scripts are named
    /// above: relative to their directory PATH; `#`
    /// comments), even if others fail or skip; fail naming each listed script that does not
    /// pass (or is missing). Scripts that pass without being listed are printed as `new pass`.
    #[arg(long, value_name = "FILE")]
    expect_passing: Option<PathBuf>,
}

pub fn run(args: ConformanceArgs, out: &mut impl Write) -> Result<(), CliError> {
    let profile = Profile::by_name(&args.profile).ok_or_else(|| {
        CliError::Usage(format!(
            "unknown profile `{}` (expected linux-compat, freebsd-compat or default)",
            args.profile
        ))
    })?;
    // (script, its name) for every script, in order; a path that is neither a directory
    // nor a file is a usage error before anything runs.
    let mut scripts: Vec<(PathBuf, String)> = Vec::new();
    for path in &args.paths {
        if path.is_dir() {
            let files = script_files(path)
                .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?;
            for file in files {
                let rel = file.strip_prefix(path).unwrap_or(&file);
                let name = rel.to_string_lossy().replace('\\', "/");
                scripts.push((file, name));
            }
        } else if path.is_file() {
            scripts.push((path.clone(), path.to_string_lossy().replace('\\', "/")));
        } else {
            return Err(CliError::Usage(format!(
                "{} is neither a directory nor a script file",
                path.display()
            )));
        }
    }
    let expected = match &args.expect_passing {
        Some(file) => Some(
            std::fs::read_to_string(file)
                .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", file.display())))?,
        ),
        None => None,
    };
    let expected: Option<std::collections::BTreeSet<&str>> = expected
        .as_deref()
        .map(|t| expected_passing(t).into_iter().collect());
    let mut passed = std::collections::BTreeSet::new();
    let mut tally = Tally::default();
    for (path, rel) in scripts {
        let report = run_file(&path, &profile);
        tally.add_report(&report);
        if report.outcome == Outcome::Pass {
            passed.insert(rel.clone());
        }
        match &report.outcome {
            // Shell and `%{ }%` lines are never run: say how many a passing script had.
            Outcome::Pass if report.skipped_lines > 0 => writeln!(
                out,
                "pass {rel} ({} shell/code lines skipped)",
                report.skipped_lines
            )?,
            Outcome::Pass => writeln!(out, "pass {rel}")?,
            Outcome::Fail { pos, message } => writeln!(out, "fail {rel} {pos}: {message}")?,
            Outcome::Skip { reason } => writeln!(out, "skip {rel} {reason}")?,
        }
    }
    writeln!(out, "{tally}")?;
    if let Some(expected) = expected {
        for new in passed.iter().filter(|p| !expected.contains(p.as_str())) {
            writeln!(out, "new pass {new} (not in the expected-passing list yet)")?;
        }
        let broken: Vec<&str> = expected
            .iter()
            .copied()
            .filter(|e| !passed.contains(*e))
            .collect();
        return if broken.is_empty() {
            Ok(())
        } else {
            Err(CliError::Failed(format!(
                "{} scripts recorded as passing did not pass: {}",
                broken.len(),
                broken.join(", ")
            )))
        };
    }
    match args.min_passed {
        Some(min) if tally.passed < min => Err(CliError::Failed(format!(
            "{} scripts passed, fewer than the recorded {min}",
            tally.passed
        ))),
        Some(_) => Ok(()),
        None if tally.failed > 0 => {
            Err(CliError::Failed(format!("{} scripts failed", tally.failed)))
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus(sub: &str) -> PathBuf {
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../conformance/corpus/packetdrill-google")
            .join(sub)
    }

    fn args(dir: PathBuf, profile: &str, min_passed: Option<usize>) -> ConformanceArgs {
        ConformanceArgs {
            paths: vec![dir],
            profile: profile.to_string(),
            min_passed,
            expect_passing: None,
        }
    }

    #[test]
    fn a_recorded_script_that_does_not_pass_fails_the_run() {
        let dir = std::env::temp_dir().join(format!("rsstack-conf-expect-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("tmp dir");
        let list = dir.join("PASSING");
        let run_with = |text: &str| {
            std::fs::write(&list, text).expect("write list");
            let mut a = args(corpus("close"), "linux-compat", None);
            a.expect_passing = Some(list.clone());
            let mut out = Vec::new();
            let r = run(a, &mut out);
            (r, String::from_utf8(out).expect("utf-8"))
        };
        // All listed pass; one passing script is not listed: reported, not an error.
        let (r, text) =
            run_with("# comment\nclose-local-close-then-remote-fin.pkt\n\nclose-on-syn-sent.pkt\n");
        assert!(r.is_ok(), "{r:?}\n{text}");
        assert!(
            text.contains("new pass close-remote-fin-then-close.pkt"),
            "{text}"
        );
        // A listed script that is missing (or fails, or skips) fails the run, by name.
        let (r, _) = run_with("close-local-close-then-remote-fin.pkt\nno-such-script.pkt\n");
        match r {
            Err(CliError::Failed(msg)) => assert!(msg.contains("no-such-script.pkt"), "{msg}"),
            other => panic!("expected a failure, got {other:?}"),
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn prints_one_line_per_script_and_a_summary() {
        let mut out = Vec::new();
        let r = run(args(corpus("close"), "linux-compat", None), &mut out);
        assert!(r.is_ok(), "{r:?}");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 4, "{text}");
        assert!(lines[0].starts_with("pass close-local-close-then-remote-fin.pkt"));
        assert_eq!(
            lines[3],
            "3 passed, 0 failed, 0 skipped; assertions: 0 checked (0 held, 0 failed), 0 not evaluated"
        );
    }

    #[test]
    fn freebsd_compat_profile_runs_the_freebsd_style_scripts() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../conformance/corpus/freebsd-style");
        let mut out = Vec::new();
        let r = run(args(dir.clone(), "freebsd-compat", None), &mut out);
        assert!(r.is_ok(), "{r:?}\n{}", String::from_utf8_lossy(&out));
        // Linux's option layout is not FreeBSD's: every one of them fails there.
        let mut out = Vec::new();
        let r = run(args(dir, "linux-compat", None), &mut out);
        assert!(matches!(r, Err(CliError::Failed(_))), "{r:?}");
        let text = String::from_utf8_lossy(&out);
        assert!(text.contains("\n0 passed, 3 failed"), "{text}");
    }

    #[test]
    fn single_scripts_and_directories_run_together_each_named_as_given() {
        let one = corpus("close").join("close-on-syn-sent.pkt");
        let mut a = args(one.clone(), "linux-compat", None);
        a.paths.push(corpus("close"));
        let mut out = Vec::new();
        let r = run(a, &mut out);
        assert!(r.is_ok(), "{r:?}");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 5, "{text}");
        assert!(
            lines[0].starts_with(&format!("pass {} ", one.display())),
            "{text}"
        );
        assert!(lines[4].starts_with("4 passed, 0 failed"), "{text}");
    }

    #[test]
    fn a_path_that_is_neither_file_nor_directory_is_a_usage_error() {
        let r = run(
            args(corpus("no-such-dir"), "linux-compat", None),
            &mut Vec::new(),
        );
        assert!(
            matches!(r, Err(CliError::Usage(ref m)) if m.contains("neither")),
            "{r:?}"
        );
    }

    #[test]
    fn unknown_profile_is_a_usage_error() {
        let r = run(args(corpus("close"), "bsd", None), &mut Vec::new());
        assert!(matches!(r, Err(CliError::Usage(_))), "{r:?}");
    }

    #[test]
    fn fewer_passes_than_recorded_fails() {
        let r = run(
            args(corpus("close"), "linux-compat", Some(4)),
            &mut Vec::new(),
        );
        assert!(matches!(r, Err(CliError::Failed(_))), "{r:?}");
        let r = run(
            args(corpus("close"), "linux-compat", Some(3)),
            &mut Vec::new(),
        );
        assert!(r.is_ok(), "{r:?}");
    }
}
