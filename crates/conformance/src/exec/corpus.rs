//! Running a corpus: finding its scripts, running one file, the expected-passing list and the
//! pass/fail/skip tally.

use super::*;

/// Every `.pkt` file under `root`, sorted (directories walked in name order).
pub fn script_files(root: &std::path::Path) -> std::io::Result<Vec<std::path::PathBuf>> {
    fn walk(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) -> std::io::Result<()> {
        let mut entries = Vec::new();
        for e in std::fs::read_dir(dir)? {
            entries.push(e?.path());
        }
        entries.sort();
        for p in entries {
            if p.is_dir() {
                walk(&p, out)?;
            } else if p.extension().is_some_and(|x| x == "pkt") {
                out.push(p);
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(root, &mut out)?;
    Ok(out)
}

/// The IP version a script file runs in when its options name none: IPv6 for a file whose
/// name ends in `v6.pkt`, as upstream's `run_all.py` decides (it runs such scripts over IPv6
/// only, those ending in `v4.pkt` over IPv4 and IPv4-mapped IPv6, every other one in all
/// three modes; this runner runs each script once, the others over IPv4). `None`: IPv4.
pub fn ip_version_from_file_name(path: &std::path::Path) -> Option<&'static str> {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.ends_with("v6.pkt"))
        .then_some("ipv6")
}

/// Gives `script`, read from `path`, the IP version [`ip_version_from_file_name`] names when
/// its own options name none (as an `--ip_version` script option).
pub fn apply_file_name_options(script: &mut crate::ast::Script, path: &std::path::Path) {
    if let Some(v) = ip_version_from_file_name(path)
        && !script.options.iter().any(|o| o.name == "ip_version")
    {
        script.options.push(crate::ast::ScriptOption {
            name: "ip_version".to_string(),
            value: Some(v.to_string()),
        });
    }
}

/// Reads, parses and runs one script file (with [`apply_file_name_options`]); an unreadable
/// file is a failure at 0:0.
pub fn run_file(path: &std::path::Path, profile: &Profile) -> RunReport {
    match std::fs::read_to_string(path) {
        Ok(text) => match crate::parse_script(&text) {
            Ok(mut script) => {
                apply_file_name_options(&mut script, path);
                run_script(&script, profile)
            }
            Err(_) => run_text(&text, profile),
        },
        Err(e) => RunReport {
            outcome: Outcome::Fail {
                pos: Pos::default(),
                message: format!("cannot read: {e}"),
            },
            skipped_lines: 0,
            assertions_checked: 0,
            assertions_passed: 0,
            assertions_failed: 0,
            assertions_skipped: 0,
            other_socket_segments: 0,
        },
    }
}

/// The script paths of an expected-passing list (`crates/conformance/PASSING`): one path per
/// line, relative to the corpus root; blank lines and lines starting with `#` are ignored,
/// surrounding whitespace is trimmed.
pub fn expected_passing(list: &str) -> Vec<&str> {
    list.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect()
}

/// Pass/fail/skip counts over a set of scripts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Tally {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// `%{ }%` assertions evaluated, over the scripts added with [`Tally::add_report`].
    pub assertions_checked: usize,
    /// Of those, the ones that held ...
    pub assertions_passed: usize,
    /// ... and the ones that did not.
    pub assertions_failed: usize,
    /// `%{ }%` assertions reached and not evaluated, likewise.
    pub assertions_skipped: usize,
}

impl Tally {
    /// Counts a script's outcome and its assertions.
    pub fn add_report(&mut self, r: &RunReport) {
        self.add(&r.outcome);
        self.assertions_checked += r.assertions_checked;
        self.assertions_passed += r.assertions_passed;
        self.assertions_failed += r.assertions_failed;
        self.assertions_skipped += r.assertions_skipped;
    }

    pub fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Pass => self.passed += 1,
            Outcome::Fail { .. } => self.failed += 1,
            Outcome::Skip { .. } => self.skipped += 1,
        }
    }
}

impl fmt::Display for Tally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} passed, {} failed, {} skipped; assertions: {} checked ({} held, {} failed), \
             {} not evaluated",
            self.passed,
            self.failed,
            self.skipped,
            self.assertions_checked,
            self.assertions_passed,
            self.assertions_failed,
            self.assertions_skipped
        )
    }
}
