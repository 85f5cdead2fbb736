//! Prints the size of the TCP engine's per-connection state (issue 3, memory (a)).

use bench::tcb::{self, Group};

fn main() {
    println!("size_of (bytes):");
    for p in tcb::sizes() {
        println!("  {:>6}  {}", p.bytes, p.name);
    }
    println!();
    println!("fields touched by every segment of an established bulk connection:");
    for f in tcb::touched_fields() {
        println!("  {:>6}  {:?}: {}", f.bytes, f.group, f.name);
    }
    println!();
    let mut total = 0;
    for g in [
        Group::Hot,
        Group::Timestamps,
        Group::Timers,
        Group::ColdTouched,
    ] {
        let b = tcb::touched_bytes(g);
        total += b;
        println!("  {:>6}  {:?} group, touched fields", b, g);
    }
    println!(
        "  {:>6}  touched per segment in all (field sizes, no padding; ≥ {} cache lines if \
         packed, goal ≤ 256 B)",
        total,
        tcb::cache_lines(total)
    );
    let whole = core::mem::size_of::<tcp::Connection>();
    println!(
        "  {:>6}  whole tcp::Connection ({} cache lines)",
        whole,
        tcb::cache_lines(whole)
    );
    let (hot_bytes, hot_lines) = tcb::hot_span();
    println!(
        "  {:>6}  hot parts ({}) in the real layout: {} cache lines",
        hot_bytes,
        tcb::HOT_PARTS.join(", "),
        hot_lines
    );
    println!();
    println!("layout (offset, size, part; repr(C): declaration order):");
    for (name, offset, size) in tcp::Connection::layout() {
        println!("  {offset:>6}  {size:>6}  {name}");
    }
}
