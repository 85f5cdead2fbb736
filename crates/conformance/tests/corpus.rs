//! Every script of the Google packetdrill subset parses, and printing then re-parsing gives the
//! same AST.

use conformance::ast::{Action, ScriptStats};
use conformance::parse_script;
use std::path::{Path, PathBuf};

/// `../shared/conformance/packetdrill-google/` from the repository root.
fn corpus_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/conformance/packetdrill-google")
}

fn pkt_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()))
        .map(|e| e.expect("dir entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            pkt_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "pkt") {
            out.push(p);
        }
    }
}

fn corpus() -> Vec<(PathBuf, String)> {
    let mut files = Vec::new();
    pkt_files(&corpus_dir(), &mut files);
    files
        .into_iter()
        .map(|p| {
            let text = std::fs::read_to_string(&p).expect("read script");
            (p, text)
        })
        .collect()
}

/// The subset holds exactly 54 scripts (SOURCE.md); if this changes, update the count knowingly.
const CORPUS_SCRIPTS: usize = 54;

#[test]
fn every_corpus_script_parses() {
    let scripts = corpus();
    assert_eq!(scripts.len(), CORPUS_SCRIPTS);
    let mut total = ScriptStats::default();
    let mut failures = Vec::new();
    for (path, text) in &scripts {
        match parse_script(text) {
            Ok(s) => {
                assert!(!s.events.is_empty(), "{} has no events", path.display());
                total += s.stats();
            }
            Err(e) => failures.push(format!("{}:{e}", path.display())),
        }
    }
    assert!(
        failures.is_empty(),
        "parse failures:\n{}",
        failures.join("\n")
    );
    // Figures for the whole corpus; a change here means the parser changed its reading.
    println!("{total:?}");
    // Cross-checked with grep over the corpus: 316 `<` lines, 271 `>` lines, 483 calls,
    // 62 `%{` blocks, 59 backtick blocks (13 of them span two lines).
    let expected = ScriptStats {
        tcp_inbound: 316,
        tcp_outbound: 271,
        syscalls: 483,
        shell: 59,
        code: 62,
        ..ScriptStats::default()
    };
    assert_eq!(total, expected);
    assert_eq!(total.unsupported, 0, "unsupported packet lines: {total:?}");
}

#[test]
fn every_corpus_script_round_trips_through_the_printer() {
    for (path, text) in corpus() {
        let first = parse_script(&text).expect("parses");
        let printed = first.to_string();
        let second = parse_script(&printed).unwrap_or_else(|e| {
            panic!("{}: reprint does not parse: {e}\n{printed}", path.display())
        });
        assert!(
            first.same_content(&second),
            "{}: AST changed through print/parse\n{printed}",
            path.display()
        );
        // Printing is a fixpoint after one round.
        assert_eq!(printed, second.to_string(), "{}", path.display());
    }
}

#[test]
fn corpus_python_and_shell_blocks_are_kept_verbatim() {
    let (_, text) = corpus()
        .into_iter()
        .find(|(p, _)| p.ends_with("fast_recovery/prr-ss-10pkt-lost-1.pkt"))
        .expect("script present");
    let s = parse_script(&text).expect("parses");
    let code: Vec<&String> = s
        .events
        .iter()
        .filter_map(|e| match &e.action {
            Action::Code(c) => Some(c),
            _ => None,
        })
        .collect();
    assert_eq!(code.len(), 2);
    assert!(code[0].contains("assert tcpi_ca_state == TCP_CA_Recovery, tcpi_ca_state"));
    assert!(matches!(&s.events[0].action, Action::Shell(c) if c == "../common/defaults.sh"));
}
