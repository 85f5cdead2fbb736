//! The `packetdrill_parse` fuzz target's seeded stand-in: the same body
//! (`fuzz_body/packetdrill_parse.rs`: parse, print, parse again, same content) over the
//! corpus scripts mutated from a fixed seed — bytes flipped, inserted and deleted, lines
//! swapped, duplicated and cut — and over random bytes.

use std::path::{Path, PathBuf};

#[path = "fuzz_body/packetdrill_parse.rs"]
mod packetdrill_parse;

/// SplitMix64 (no dependency): the inputs are the same on every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn scripts(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("corpus dir")
        .map(|e| e.expect("entry").path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            scripts(&p, out);
        } else if p.extension().is_some_and(|e| e == "pkt") {
            out.push(p);
        }
    }
}

/// Mutates `text` a few times: byte edits, line swaps, duplications and cuts.
fn mutate(rng: &mut Rng, text: &[u8]) -> Vec<u8> {
    const TOKENS: [&[u8]; 12] = [
        b"<", b">", b"[", b"]", b"{", b"}", b"%{", b"}%", b"...", b"+0.1", b"S.", b"win ",
    ];
    let mut lines: Vec<Vec<u8>> = text.split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
    for _ in 0..1 + rng.below(4) {
        let n = lines.len();
        match rng.below(6) {
            0 => lines.swap(rng.below(n), rng.below(n)),
            1 => {
                let l = lines[rng.below(n)].clone();
                lines.insert(rng.below(n), l);
            }
            2 if n > 1 => {
                lines.remove(rng.below(n));
            }
            _ => {
                let l = &mut lines[rng.below(n)];
                let at = rng.below(l.len() + 1);
                match rng.below(4) {
                    0 if at < l.len() => l[at] = rng.next() as u8,
                    1 if at < l.len() => {
                        l.remove(at);
                    }
                    2 => {
                        let t = TOKENS[rng.below(TOKENS.len())];
                        l.splice(at..at, t.iter().copied());
                    }
                    _ => l.truncate(at),
                }
            }
        }
    }
    lines.join(&b'\n')
}

#[test]
fn mutated_corpus_scripts_parse_and_print_consistently() {
    let mut paths = Vec::new();
    scripts(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus"),
        &mut paths,
    );
    assert!(paths.len() > 100, "found {} scripts", paths.len());
    let texts: Vec<Vec<u8>> = paths
        .iter()
        .map(|p| std::fs::read(p).expect("read"))
        .collect();
    let mut rng = Rng(0x9acd_d111);
    let mut parsed = 0;
    let runs = 3_000;
    for i in 0..runs {
        let input = mutate(&mut rng, &texts[i % texts.len()]);
        let r = std::panic::catch_unwind(|| packetdrill_parse::run(&input));
        match r {
            Ok(ok) => parsed += usize::from(ok),
            Err(_) => panic!(
                "{}: mutation {i} failed:\n{}",
                paths[i % paths.len()].display(),
                String::from_utf8_lossy(&input)
            ),
        }
    }
    // Many mutations leave a valid script: the round trip was checked on those.
    assert!(
        parsed > runs / 10,
        "only {parsed} of {runs} mutated scripts parsed"
    );
}

#[test]
fn random_bytes_never_panic_the_parsers() {
    const ALPHABET: &[u8] = b"0123456789.<>[]{}%+-:, SFRP.acklenwinoptsmsstsvalecr\n\t";
    let mut rng = Rng(0xb17e5);
    for _ in 0..2_000 {
        let len = rng.below(300);
        let input: Vec<u8> = (0..len)
            .map(|_| ALPHABET[rng.below(ALPHABET.len())])
            .collect();
        packetdrill_parse::run(&input);
    }
}

/// Every input the fuzzer ever failed on (`tests/fuzz_regressions/packetdrill_parse/`, the
/// artifact files as libFuzzer wrote them) runs through the same body and must pass now.
#[test]
fn inputs_the_fuzzer_once_failed_on_now_round_trip() {
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fuzz_regressions/packetdrill_parse");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("regression dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    assert!(
        !files.is_empty(),
        "no regression inputs in {}",
        dir.display()
    );
    for f in &files {
        let input = std::fs::read(f).expect("read");
        if std::panic::catch_unwind(|| packetdrill_parse::run(&input)).is_err() {
            panic!("{} fails again", f.display());
        }
    }
}
