//! Moves one live connection back and forth between two server stacks (see `bench::moves`).
//!
//! `move_conns [MOVES]` (default 100,000) prints one `key=value` line; the callgrind script
//! counts `move_loop` and divides by `moves`.

use std::process::ExitCode;

use bench::moves::{self, MoveOptions};

fn main() -> ExitCode {
    let mut opts = MoveOptions {
        moves: 100_000,
        unread_bytes: 8 * 1024,
        unsent_bytes: 4 * 1024,
    };
    for arg in std::env::args().skip(1) {
        match arg.parse::<u32>() {
            Ok(n) if n > 0 => opts.moves = n,
            _ => {
                eprintln!("usage: move_conns [MOVES]");
                return ExitCode::from(2);
            }
        }
    }
    match moves::run(opts) {
        Ok(r) => {
            println!(
                "moves={} unread_bytes={} unsent_bytes={} wall_ns={} ns_per_move={}",
                r.moves,
                opts.unread_bytes,
                opts.unsent_bytes,
                r.wall_ns,
                r.wall_ns / u64::from(r.moves.max(1))
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("move_conns: {e}");
            ExitCode::FAILURE
        }
    }
}
