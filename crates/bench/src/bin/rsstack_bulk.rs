//! Bulk transfer between two rsstack stacks over a perfect in-memory link (issue 3).
//!
//! `rsstack_bulk [BYTES] [--verify] [--offload] [--no-timestamps]` — BYTES defaults to 100M (suffixes k, M, G,
//! KiB, MiB, GiB). `--verify` hashes both byte streams and fails on a mismatch (costs
//! instructions, so the callgrind script leaves it off); `--offload` leaves checksums to the
//! "NIC" on both stacks; `--no-timestamps` turns RFC 7323 timestamps off (smoltcp's default). Prints one `key=value` line (see `bench::bulk::summary_line`).

use std::process::ExitCode;

use bench::bulk::{self, BulkOptions};

fn main() -> ExitCode {
    let mut opts = BulkOptions::new(100_000_000);
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--verify" => opts.verify = true,
            "--offload" => opts.checksum_offload = true,
            "--no-timestamps" => opts.timestamps = false,
            s => match bench::parse_bytes(s) {
                Some(n) => opts.bytes = n,
                None => {
                    eprintln!(
                        "usage: rsstack_bulk [BYTES] [--verify] [--offload] [--no-timestamps]"
                    );
                    return ExitCode::from(2);
                }
            },
        }
    }
    match bulk::run(opts) {
        Ok(r) => {
            println!("{}", bulk::summary_line("rsstack", &r));
            match r.hashes {
                Some((sent, received)) if sent != received => ExitCode::FAILURE,
                _ => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("rsstack_bulk: {e}");
            ExitCode::FAILURE
        }
    }
}
