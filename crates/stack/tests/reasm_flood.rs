//! Reassembly under a fragment flood (issue 20, finding 3): incomplete first fragments from
//! an attacker cannot starve another source's fragmented datagrams, one source is capped by
//! its own bound, and the memory held never exceeds the global bound.
mod common;

use common::*;
use core::net::{IpAddr, Ipv4Addr};
use stack::{RxMeta, StackConfig};

const ATTACKER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 66);

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

/// Sends one UDP datagram of `len` bytes from A to B's port 9 with A's frames captured.
fn captured_fragments(p: &mut Pair, len: usize) -> Vec<Vec<u8>> {
    let cli = p.a.udp_bind(v4(IP_A, 0)).expect("bind");
    p.capture_a = true;
    p.a.udp_send_to(p.now, cli, v4(IP_B, 9), &payload(len))
        .expect("send");
    p.exchange();
    p.capture_a = false;
    std::mem::take(&mut p.captured_a)
}

/// An incomplete first fragment (MF set, never completed) from `src` with ident `ident`.
fn bogus_first_fragment(template: &[u8], src: Ipv4Addr, ident: u16) -> Vec<u8> {
    let mut f = template.to_vec();
    let mut ip = wire::Ipv4Packet::new_checked(&mut f[ETH..]).expect("ipv4");
    assert!(ip.more_frags() && ip.frag_offset_bytes() == 0);
    ip.set_src_addr(src);
    ip.set_ident(ident);
    ip.fill_checksum();
    f
}

/// Floods B with `n` incomplete first fragments, one attacker address per `per_source`
/// frames, checking the memory bound after every frame.
fn flood(p: &mut Pair, template: &[u8], n: usize, per_source: usize) {
    let mem_max = p.b.config().limits.reasm_mem_max;
    for i in 0..n {
        let src = if per_source >= n {
            ATTACKER
        } else {
            Ipv4Addr::new(
                10,
                1,
                (i / per_source / 250) as u8,
                (i / per_source % 250) as u8 + 1,
            )
        };
        let f = bogus_first_fragment(template, src, i as u16);
        p.b.receive(p.now, &f, &RxMeta::NONE);
        assert!(p.b.reassembly_bytes_held() <= mem_max, "frame {i}");
    }
}

fn setup(cb: StackConfig) -> (Pair, stack::SocketHandle, Vec<u8>) {
    let mut p = Pair::with(config_a(), cb);
    let srv = p.b.udp_bind(v4(IP_B, 9)).expect("bind");
    resolve(&mut p);
    // A first fragment of a 2,000-byte datagram: 1,480 bytes, MF set.
    let template = captured_fragments(&mut p, 2000).swap_remove(0);
    let _ = p.b.udp_recv_from(srv);
    (p, srv, template)
}

/// Delivers a fresh 4,000-byte datagram from A to B fragment by fragment, checking the
/// memory bound after each, and returns what B's socket received.
fn legit_datagram(p: &mut Pair, srv: stack::SocketHandle) -> Vec<u8> {
    let frags = captured_fragments(p, 4000);
    assert_eq!(frags.len(), 3);
    for f in &frags {
        p.b.receive(p.now, f, &RxMeta::NONE);
        assert!(p.b.reassembly_bytes_held() <= p.b.config().limits.reasm_mem_max);
    }
    p.b.udp_recv_from(srv).expect("legitimate datagram").payload
}

#[test]
fn legit_datagram_reassembles_after_64_incomplete_first_fragments() {
    let (mut p, srv, template) = setup(config_b());
    flood(&mut p, &template, 64, usize::MAX);
    assert_eq!(legit_datagram(&mut p, srv), payload(4000));
}

#[test]
fn legit_datagram_reassembles_after_1000_incomplete_first_fragments_from_one_source() {
    let (mut p, srv, template) = setup(config_b());
    flood(&mut p, &template, 1000, usize::MAX);
    let before = p.b.counters().rx_reassembled;
    assert_eq!(legit_datagram(&mut p, srv), payload(4000));
    assert_eq!(p.b.counters().rx_reassembled, before + 1);
    // One source never reaches the global bounds: nobody else's datagram was evicted.
    assert_eq!(p.b.counters().rx_reasm_evicted_memory, 0);
    assert_eq!(p.b.counters().rx_reasm_evicted_table, 0);
    assert_eq!(p.b.counters().rx_drop_reasm_table_full, 0);
}

#[test]
fn one_source_flood_is_capped_by_the_per_source_bound() {
    let (mut p, _srv, template) = setup(config_b());
    flood(&mut p, &template, 1000, usize::MAX);
    let l = &p.b.config().limits;
    let held = p.b.reassembly_in_progress_from(IpAddr::V4(ATTACKER));
    // Each held first fragment is charged at least its 1,480 bytes plus the entry overhead.
    let cap = l.reasm_source_mem_max / (1480 + stack::reasm::ENTRY_OVERHEAD_BYTES);
    assert!(held > 0 && held <= cap, "held {held}, cap {cap}");
    assert_eq!(p.b.reassembly_in_progress(), held);
    // Every frame past the cap evicted the attacker's own oldest, counted as such.
    assert_eq!(p.b.counters().rx_reasm_evicted_source, (1000 - held) as u64);
}

#[test]
fn legit_datagram_interleaved_with_one_source_flood_is_delivered() {
    let (mut p, srv, template) = setup(config_b());
    let frags = captured_fragments(&mut p, 4000);
    for (k, f) in frags.iter().enumerate() {
        for i in 0..500u16 {
            let bogus = bogus_first_fragment(&template, ATTACKER, (k as u16) * 500 + i);
            p.b.receive(p.now, &bogus, &RxMeta::NONE);
        }
        p.b.receive(p.now, f, &RxMeta::NONE);
    }
    assert_eq!(
        p.b.udp_recv_from(srv).expect("delivered").payload,
        payload(4000)
    );
}

#[test]
fn many_source_flood_never_holds_more_than_the_memory_bound() {
    let mut cb = config_b();
    cb.limits.reasm_mem_max = 64 << 10;
    cb.limits.reasm_source_mem_max = 16 << 10;
    let (mut p, srv, template) = setup(cb);
    // 100 sources x 10 frames: 1,000 first fragments, ~1.8 MB offered against 64 KiB.
    flood(&mut p, &template, 1000, 10);
    assert!(p.b.counters().rx_reasm_evicted_memory > 0);
    // The legitimate datagram evicts the oldest and is delivered at once.
    assert_eq!(legit_datagram(&mut p, srv), payload(4000));
}

#[test]
fn full_table_evicts_the_oldest_instead_of_refusing() {
    let mut cb = config_b();
    cb.limits.reasm_datagrams_max = 8;
    let (mut p, srv, template) = setup(cb);
    flood(&mut p, &template, 100, 1);
    assert_eq!(p.b.reassembly_in_progress(), 8);
    assert_eq!(p.b.counters().rx_reasm_evicted_table, 92);
    assert_eq!(legit_datagram(&mut p, srv), payload(4000));
    assert_eq!(p.b.counters().rx_reasm_evicted_table, 93);
    assert_eq!(p.b.counters().rx_drop_reasm_table_full, 0);
}

#[test]
fn legit_v6_datagram_reassembles_after_1000_incomplete_first_fragments_from_one_source() {
    let mut p = Pair::new();
    let srv = p.b.udp_bind(v6(IP6_B, 9)).expect("bind");
    resolve(&mut p);
    let send = |p: &mut Pair, len: usize| {
        let cli = p.a.udp_bind(v6(IP6_A, 0)).expect("bind");
        p.capture_a = true;
        p.a.udp_send_to(p.now, cli, v6(IP6_B, 9), &payload(len))
            .expect("send");
        p.exchange();
        p.capture_a = false;
        std::mem::take(&mut p.captured_a)
    };
    let template = send(&mut p, 3000).swap_remove(0);
    let attacker: core::net::Ipv6Addr = "fd00::66".parse().expect("addr");
    let mem_max = p.b.config().limits.reasm_mem_max;
    for i in 0..1000u32 {
        let mut f = template.clone();
        wire::Ipv6Packet::new_checked(&mut f[ETH..])
            .expect("ipv6")
            .set_src_addr(attacker);
        // The fragment header follows the fixed header: its identification at +4.
        f[ETH + 44..ETH + 48].copy_from_slice(&i.to_be_bytes());
        p.b.receive(p.now, &f, &RxMeta::NONE);
        assert!(p.b.reassembly_bytes_held() <= mem_max, "frame {i}");
    }
    assert!(p.b.counters().rx_reasm_evicted_source > 0);
    let cap = p.b.config().limits.reasm_source_mem_max / stack::reasm::ENTRY_OVERHEAD_BYTES;
    assert!(p.b.reassembly_in_progress_from(IpAddr::V6(attacker)) <= cap);
    for f in &send(&mut p, 3000) {
        p.b.receive(p.now, f, &RxMeta::NONE);
    }
    assert_eq!(
        p.b.udp_recv_from(srv).expect("delivered").payload,
        payload(3000)
    );
}
