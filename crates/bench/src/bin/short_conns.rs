//! Short connections between two rsstack stacks over a perfect in-memory link: each one a
//! 100-byte request and a 1 KiB response, then close (see `bench::short`).
//!
//! `short_conns [CONNECTIONS]` (default 10,000) prints one `key=value` line; the callgrind
//! script counts `short_connections_loop` and divides by `completed`.

use std::process::ExitCode;

use bench::short::{self, ShortOptions};

fn main() -> ExitCode {
    let mut opts = ShortOptions::new(10_000);
    for arg in std::env::args().skip(1) {
        match arg.parse::<u32>() {
            Ok(n) if n > 0 => opts.connections = n,
            _ => {
                eprintln!("usage: short_conns [CONNECTIONS]");
                return ExitCode::from(2);
            }
        }
    }
    match short::run(opts) {
        Ok(r) => {
            let per_conn_ns = r.wall_ns / u64::from(r.completed.max(1));
            println!(
                "connections={} completed={} frames={} wall_ns={} ns_per_connection={per_conn_ns}",
                opts.connections, r.completed, r.frames, r.wall_ns
            );
            if r.completed == opts.connections {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("short_conns: {e}");
            ExitCode::FAILURE
        }
    }
}
