//! Heap footprint of idle established connections (issue 3, memory (b)).
//!
//! `idle_conns [N]` (default 100000) opens N connections between two stacks over the
//! in-memory link, lets them idle, and measures the heap with a counting global allocator:
//! bytes currently allocated (requested sizes, so malloc's own per-block overhead is not in
//! the figure; the RSS change from /proc/self/statm is printed beside it as a cross-check).
//! The per-stack figure is what dropping that stack frees, minus what an empty stack with the
//! same configuration holds.
//!
//! Why an allocator and not only /proc: RSS moves in pages, includes freed-but-cached memory
//! and cannot tell the client stack from the server stack; counting allocations is exact and
//! attributes bytes by dropping one stack at a time.
// The counting allocator (an unsafe trait impl) is `src/live_alloc.rs`, which allows unsafe
// code for itself alone.

use std::process::ExitCode;

use bench::idle::IdleWorld;

#[path = "../live_alloc.rs"]
mod live_alloc;
use live_alloc::{CLASSES, Heap, heap};

/// What dropping something freed, by block size class (`before` − `after`), for classes
/// holding at least 0.1 % of the freed bytes.
fn print_classes(before: &Heap, after: &Heap, n: usize) {
    let total = before.bytes.saturating_sub(after.bytes).max(1);
    for k in 0..CLASSES {
        let bytes = before.class_bytes[k].saturating_sub(after.class_bytes[k]);
        let blocks = before.class_blocks[k].saturating_sub(after.class_blocks[k]);
        if bytes * 1000 < total {
            continue;
        }
        let lo = if k == 0 { 0 } else { (1usize << (k - 1)) + 1 };
        println!(
            "    blocks of {lo}..={} B: {blocks} blocks, {bytes} B = {:.1} B per connection",
            1usize << k,
            per(bytes, n)
        );
    }
}

/// Resident set size in bytes from /proc/self/statm (pages × 4096), if readable.
fn rss_bytes() -> Option<u64> {
    let s = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = s.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn per(bytes: usize, n: usize) -> f64 {
    bytes as f64 / n.max(1) as f64
}

fn main() -> ExitCode {
    let n: usize = match std::env::args().nth(1) {
        None => 100_000,
        Some(a) => match bench::parse_bytes(&a).and_then(|v| usize::try_from(v).ok()) {
            Some(v) if v > 0 => v,
            _ => {
                eprintln!("usage: idle_conns [CONNECTIONS]");
                return ExitCode::from(2);
            }
        },
    };
    match run(n) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("idle_conns: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(n: usize) -> Result<(), bench::bulk::BulkError> {
    // Baseline: two empty stacks (listeners open) with the same limits.
    let h0 = heap();
    let empty = IdleWorld::new(n)?;
    let h_empty_world = heap();
    let (empty_client, empty_server) = (empty.client, empty.server);
    let h1 = heap();
    drop(empty_client);
    let h2 = heap();
    drop(empty_server);
    let empty_client_bytes = h1.bytes - h2.bytes;
    let empty_server_bytes = h2.bytes - heap().bytes;
    let _ = (h0, h_empty_world);

    let rss0 = rss_bytes();
    let mut world = IdleWorld::new(n)?;
    let established = world.connect_all(n, 2_000_000_000)?;
    let rss1 = rss_bytes();
    let IdleWorld {
        client,
        server,
        client_socks,
        server_socks,
        ..
    } = world;
    drop(client_socks);
    drop(server_socks);
    let a = heap();
    drop(client);
    let b = heap();
    drop(server);
    let c = heap();
    let client_bytes = a.bytes - b.bytes;
    let server_bytes = b.bytes - c.bytes;
    let client_blocks = a.blocks - b.blocks;
    let server_blocks = b.blocks - c.blocks;
    let client_conn = client_bytes.saturating_sub(empty_client_bytes);
    let server_conn = server_bytes.saturating_sub(empty_server_bytes);
    let tcb = core::mem::size_of::<tcp::Connection>();

    println!("connections={n} established={established}");
    println!(
        "empty stack heap: client={empty_client_bytes} B server={empty_server_bytes} B \
         (64 KiB TCP scratch, tables)"
    );
    for (side, total, conn, blocks, before, after) in [
        ("client", client_bytes, client_conn, client_blocks, &a, &b),
        ("server", server_bytes, server_conn, server_blocks, &b, &c),
    ] {
        let per_conn = per(conn, n);
        println!(
            "{side}: stack heap {total} B in {blocks} blocks; per idle connection {per_conn:.1} B \
             = engine (boxed tcp::Connection) {tcb} B + table overhead {:.1} B \
             ({:.2} heap blocks per connection)",
            per_conn - tcb as f64,
            per(blocks, n),
        );
        println!(
            "  by block size (what dropping the {side} stack freed; the per-connection class is \
             the boxed TCB, the single huge blocks are the stack's socket-slot array and its \
             4-tuple hash table, each with power-of-two capacity):"
        );
        print_classes(before, after, n);
    }
    if let (Some(r0), Some(r1)) = (rss0, rss1) {
        println!(
            "rss cross-check: both stacks grew RSS by {} B = {:.1} B per connection pair \
             ({:.1} B per endpoint; includes malloc block overhead and page rounding)",
            r1.saturating_sub(r0),
            r1.saturating_sub(r0) as f64 / n as f64,
            r1.saturating_sub(r0) as f64 / (2 * n) as f64
        );
    }
    Ok(())
}
