//! Prints, per directory of a packetdrill corpus, what the scripts need from the stack.
//!
//! `cargo run -p conformance --example inventory [DIR]` (default: the Google subset under
//! `crates/conformance/corpus/packetdrill-google/`, copied into the repository).

use conformance::inventory::Inventory;
use conformance::parse_script;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

fn walk(dir: &Path, out: &mut Vec<PathBuf>) -> std::io::Result<()> {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
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

fn main() -> ExitCode {
    let root = std::env::args_os()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/packetdrill-google"));
    let mut files = Vec::new();
    if let Err(e) = walk(&root, &mut files) {
        eprintln!("cannot read {}: {e}", root.display());
        return ExitCode::FAILURE;
    }
    let mut per_dir: BTreeMap<String, Inventory> = BTreeMap::new();
    let mut all = Inventory::default();
    let mut failed = 0;
    for f in &files {
        let dir = f
            .parent()
            .and_then(|p| p.strip_prefix(&root).ok())
            .map(|p| p.display().to_string())
            .unwrap_or_default();
        let text = match std::fs::read_to_string(f) {
            Ok(t) => t,
            Err(e) => {
                eprintln!("{}: {e}", f.display());
                failed += 1;
                continue;
            }
        };
        match parse_script(&text) {
            Ok(s) => {
                per_dir.entry(dir).or_default().add(&s);
                all.add(&s);
            }
            Err(e) => {
                eprintln!("{}:{e}", f.display());
                failed += 1;
            }
        }
    }
    for (dir, inv) in &per_dir {
        println!("{dir}/\n{inv}");
    }
    println!("ALL\n{all}");
    if failed > 0 {
        eprintln!("{failed} scripts failed to parse");
        return ExitCode::FAILURE;
    }
    ExitCode::SUCCESS
}
