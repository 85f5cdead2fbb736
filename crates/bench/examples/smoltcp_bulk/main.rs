//! Bulk transfer between two smoltcp interfaces over a perfect in-memory link: the
//! side-by-side peer of `rsstack_bulk` (issue 3).
//!
//! `smoltcp_bulk [BYTES] [--verify] [--offload] [--timestamps]`; prints the same
//! `key=value` line as `rsstack_bulk`.

use std::process::ExitCode;

use bench::bulk::{BulkOptions, summary_line};

mod harness;

fn main() -> ExitCode {
    let mut opts = BulkOptions::new(100_000_000);
    // smoltcp's default; see harness.rs on why timestamps are off.
    opts.timestamps = false;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--verify" => opts.verify = true,
            "--offload" => opts.checksum_offload = true,
            "--timestamps" => opts.timestamps = true,
            s => match bench::parse_bytes(s) {
                Some(n) => opts.bytes = n,
                None => {
                    eprintln!("usage: smoltcp_bulk [BYTES] [--verify] [--offload] [--timestamps]");
                    return ExitCode::from(2);
                }
            },
        }
    }
    match harness::run(opts) {
        Ok(r) => {
            println!("{}", summary_line("smoltcp", &r));
            match r.hashes {
                Some((sent, received)) if sent != received => ExitCode::FAILURE,
                _ => ExitCode::SUCCESS,
            }
        }
        Err(e) => {
            eprintln!("smoltcp_bulk: {e}");
            ExitCode::FAILURE
        }
    }
}
