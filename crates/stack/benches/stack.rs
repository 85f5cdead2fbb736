//! Per-packet costs of the receive path: a UDP datagram to a bound socket, an echo request
//! answered, a TCP data segment on an established connection.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};
use stack::RxMeta;

use criterion::{Criterion, black_box, criterion_group, criterion_main};
use stack::{InterfaceConfig, Ipv4Cidr, Stack, StackConfig};
use wire::EthernetAddress;

const IP_A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const IP_B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

fn pair() -> (Stack, Stack) {
    let a = Stack::new(StackConfig::new(InterfaceConfig::new(
        EthernetAddress([2, 0, 0, 0, 0, 0xa]),
        Ipv4Cidr::new(IP_A, 24),
    )));
    let b = Stack::new(StackConfig::new(InterfaceConfig::new(
        EthernetAddress([2, 0, 0, 0, 0, 0xb]),
        Ipv4Cidr::new(IP_B, 24),
    )));
    (a, b)
}

fn exchange(a: &mut Stack, b: &mut Stack, now: u64) {
    loop {
        let mut moved = false;
        while let Some(f) = a.poll_transmit(now) {
            b.receive(now, &f, &RxMeta::NONE);
            moved = true;
        }
        while let Some(f) = b.poll_transmit(now) {
            a.receive(now, &f, &RxMeta::NONE);
            moved = true;
        }
        if !moved {
            return;
        }
    }
}

/// One frame A sends after resolution, produced by `send`.
fn one_frame(a: &mut Stack, b: &mut Stack, send: impl FnOnce(&mut Stack)) -> Vec<u8> {
    a.send_ping(0, IpAddr::V4(IP_B), 0, 0, b"").expect("ping");
    exchange(a, b, 0);
    send(a);
    a.poll_transmit(0).expect("frame")
}

fn bench(c: &mut Criterion) {
    let (mut a, mut b) = pair();
    let srv = b
        .udp_bind(SocketAddr::new(IpAddr::V4(IP_B), 9))
        .expect("bind");
    let cli = a
        .udp_bind(SocketAddr::new(IpAddr::V4(IP_A), 0))
        .expect("bind");
    let frame = one_frame(&mut a, &mut b, |a| {
        a.udp_send_to(0, cli, SocketAddr::new(IpAddr::V4(IP_B), 9), &[0u8; 64])
            .expect("send")
    });
    c.bench_function("udp_rx_64b_to_socket", |bch| {
        bch.iter(|| {
            b.receive(1, black_box(&frame), &RxMeta::NONE);
            black_box(b.udp_recv_from(srv).ok());
        })
    });

    let (mut a, mut b) = pair();
    let ping = one_frame(&mut a, &mut b, |a| {
        a.send_ping(0, IpAddr::V4(IP_B), 1, 1, &[0u8; 56])
            .expect("ping")
    });
    c.bench_function("icmp_echo_request_answered", |bch| {
        bch.iter(|| {
            b.receive(1, black_box(&ping), &RxMeta::NONE);
            black_box(b.poll_transmit(1));
        })
    });

    let (mut a, mut b) = pair();
    let l = b
        .tcp_listen(SocketAddr::new(IpAddr::V4(IP_B), 80), 4)
        .expect("listen");
    let conn = a
        .tcp_connect(0, SocketAddr::new(IpAddr::V4(IP_B), 80), 0)
        .expect("connect");
    exchange(&mut a, &mut b, 0);
    let (srv, _) = b.tcp_accept(l).expect("accept");
    let mut buf = vec![0u8; 2048];
    let data = vec![7u8; 1448];
    let mut now = 1_000;
    c.bench_function("tcp_1448b_segment_a_to_b", |bch| {
        bch.iter(|| {
            now += 1_000;
            let _ = a.tcp_send(conn, &data);
            while let Some(f) = a.poll_transmit(now) {
                b.receive(now, &f, &RxMeta::NONE);
            }
            while b.tcp_recv(srv, &mut buf).is_ok() {}
            while let Some(f) = b.poll_transmit(now) {
                a.receive(now, &f, &RxMeta::NONE);
            }
        })
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
