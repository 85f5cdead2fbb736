//! Bulk transfer between two rsstack stacks over a perfect in-memory link (issue 3).
//!
//! `rsstack_bulk [BYTES] [--verify] [--offload] [--no-timestamps] [--ecn] [--shard] [--gro]` — BYTES
//! defaults to 100M (suffixes k, M, G, KiB, MiB, GiB). `--verify` hashes both byte streams and
//! fails on a mismatch (costs instructions, so the callgrind script leaves it off); `--offload`
//! leaves checksums to the "NIC" on both stacks; `--no-timestamps` turns RFC 7323 timestamps
//! off (smoltcp's default); `--ecn` has both stacks negotiate ECN (every segment then takes
//! the full input path, not header prediction's); `--shard` runs the transfer between two shard cores (NIC model,
//! NAPI poll, stack, application) instead of two bare stacks (`bench::shard_bulk`), and
//! `--gro` turns the NIC model's receive coalescing on there; `--rss-public` / `--rss-secret`
//! (with `--shard`) tell both stacks their NIC's RSS key, public (the default key: the stacks
//! hash each tuple again for their tables) or secret (hash once), as the runtime configures
//! them (`bench::shard_bulk::ShardRss`). Prints one `key=value` line (see
//! `bench::bulk::summary_line`).

use std::process::ExitCode;

use bench::bulk::{self, BulkOptions};

fn main() -> ExitCode {
    let mut opts = BulkOptions::new(100_000_000);
    let (mut shard, mut gro) = (false, false);
    let mut rss = bench::shard_bulk::ShardRss::None;
    for arg in std::env::args().skip(1) {
        match arg.as_str() {
            "--shard" => shard = true,
            "--gro" => gro = true,
            "--rss-public" => rss = bench::shard_bulk::ShardRss::Public,
            "--rss-secret" => rss = bench::shard_bulk::ShardRss::Secret,
            "--verify" => opts.verify = true,
            "--offload" => opts.checksum_offload = true,
            "--no-timestamps" => opts.timestamps = false,
            "--ecn" => opts.ecn = true,
            s => match bench::parse_bytes(s) {
                Some(n) => opts.bytes = n,
                None => {
                    eprintln!(
                        "usage: rsstack_bulk [BYTES] [--verify] [--offload] [--no-timestamps] [--ecn] [--shard] [--gro] [--rss-public|--rss-secret]"
                    );
                    return ExitCode::from(2);
                }
            },
        }
    }
    let (name, result) = if shard {
        let name = if gro {
            "rsstack-shard-gro"
        } else {
            "rsstack-shard"
        };
        (name, bench::shard_bulk::run_with(opts, gro, rss))
    } else {
        ("rsstack", bulk::run(opts))
    };
    match result {
        Ok(r) => {
            println!("{}", bulk::summary_line(name, &r));
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
