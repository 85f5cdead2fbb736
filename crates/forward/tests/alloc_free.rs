//! Zero allocations per packet in steady state: forwarding, local delivery, drops and ICMP
//! errors built in place, counted by a counting global allocator (a binary of its own).
mod common;

use core::net::Ipv4Addr;

use common::*;
use forward::Verdict;
use platform::alloc_count::CountingAlloc;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc::new();

#[test]
fn bursts_allocate_nothing_per_packet() {
    let (mut f, mut n) = router();
    let templates = [
        udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 64, 18, false),
        udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            Ipv4Addr::new(192, 168, 1, 1),
            64,
            18,
            false,
        ),
        udp_v6(PORT0_MAC, v6("fd00:1::10"), v6("fd00:2::20"), 64, 10),
        udp_v4(PORT0_MAC, HOST_A_V4, HOST_B_V4, 1, 18, false),
        udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            Ipv4Addr::new(172, 16, 0, 1),
            64,
            18,
            false,
        ),
        udp_v4(PORT0_MAC, HOST_A_V4, PORT0_V4, 64, 18, false),
        udp_v4(
            PORT0_MAC,
            HOST_A_V4,
            Ipv4Addr::new(10, 0, 2, 99),
            64,
            18,
            false,
        ),
    ];
    let mut frames: Vec<Vec<u8>> = (0..forward::BURST_MAX)
        .map(|_| dup(&templates[0]))
        .collect();
    let mut verdicts = [Verdict::Local; forward::BURST_MAX];
    let mut run = |f: &mut forward::Forwarder, n: &mut forward::NeighbourTable, round: u64| {
        for (i, fr) in frames.iter_mut().enumerate() {
            let t = &templates[i % templates.len()];
            fr.clear();
            fr.extend_from_slice(t);
        }
        f.process_burst(round * 1_000_000_000, 0, &mut frames, &mut verdicts, n);
    };
    // Warm-up: the neighbour table records its one request.
    run(&mut f, &mut n, 0);
    let before = ALLOC.allocations();
    for round in 1..=100 {
        run(&mut f, &mut n, round);
    }
    let allocations = ALLOC.allocations() - before;
    let c = f.counters();
    assert!(
        c.forwarded >= 100 * 20 && c.icmp_time_exceeded_sent > 0,
        "{c:?}"
    );
    assert_eq!(allocations, 0, "allocations over 6,400 frames");
}
