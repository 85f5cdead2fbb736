//! Runs every script of a corpus against the stack and prints one line per script.
//!
//! `cargo run -p conformance --example run_corpus [DIR]` (default: the Google subset);
//! the `rsstack conformance` command does the same with a profile choice.

use conformance::exec::{Profile, Tally, run_file, script_files};
use std::path::{Path, PathBuf};

fn main() -> std::io::Result<()> {
    let root = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google"));
    let profile = Profile::linux_compat();
    let mut tally = Tally::default();
    for path in script_files(&root)? {
        let report = run_file(&path, &profile);
        tally.add_report(&report);
        let rel = path.strip_prefix(&root).unwrap_or(&path);
        println!("{} {}", rel.display(), report.outcome);
    }
    println!("{tally}");
    Ok(())
}
