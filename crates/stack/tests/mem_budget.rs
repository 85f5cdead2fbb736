//! The stack-wide TCP buffer budget (`Limits::tcp_mem_*_bytes`, `stack::tcp_mem`): peers that
//! never read drive the server through normal → pressure → high, each state doing what it
//! promises (send buffers shrink, new buffers are small, connections and writes are
//! refused), and the memory comes back, with the normal state, when they leave.
mod common;

use common::*;
use stack::{MemState, SocketError, SocketHandle, StackConfig};
use tcp::State;

const KIB: usize = 1024;
const SEND_BUFFER_BYTES: u32 = 64 * 1024;
const PRESSURE_BUFFER_BYTES: u32 = 16 * 1024;

/// A (the server) with a 64 KiB send buffer and a budget of 96/160/256 KiB; B (the clients)
/// with 8 KiB receive buffers, never reading.
fn pair() -> Pair {
    let mut a: StackConfig = config_a();
    a.tcp.send_buffer_bytes = SEND_BUFFER_BYTES;
    a.limits.tcp_mem_low_bytes = 96 * KIB;
    a.limits.tcp_mem_pressure_bytes = 160 * KIB;
    a.limits.tcp_mem_high_bytes = 256 * KIB;
    a.limits.tcp_mem_pressure_buffer_bytes = PRESSURE_BUFFER_BYTES;
    let mut b = config_b();
    b.tcp.recv_buffer_bytes = 8192;
    Pair::with(a, b)
}

/// Opens one client from B to A's listener `l`; when A accepts it, A writes until it would
/// block. Returns (client, server) or `None` when A never accepted.
fn zero_window_client(p: &mut Pair, l: SocketHandle) -> Option<(SocketHandle, SocketHandle)> {
    let c = p.b.tcp_connect(p.now, v4(IP_A, 80), 0).expect("connect");
    p.advance(10 * MS);
    let Ok((s, _)) = p.a.tcp_accept(l) else {
        let _ = p.b.tcp_abort(c);
        p.b.close(p.now, c).expect("close");
        return None;
    };
    let chunk = [0x5a; 4096];
    while p.a.tcp_send(s, &chunk).is_ok_and(|n| n > 0) {}
    p.advance(MS);
    Some((c, s))
}

#[test]
fn zero_window_peers_drive_normal_pressure_high_and_leaving_returns_to_normal() {
    let mut p = pair();
    let l = p.a.tcp_listen(v4(IP_A, 80), 64).expect("listen");
    let mut conns = Vec::new();
    // Two connections fill their 64 KiB each: 128 KiB, below the pressure mark.
    for _ in 0..2 {
        conns.push(zero_window_client(&mut p, l).expect("admitted"));
    }
    assert_eq!(p.a.tcp_mem_state(), MemState::Normal);
    assert_eq!(p.a.tcp_mem_bytes(), 2 * SEND_BUFFER_BYTES as usize);

    // The third crosses 160 KiB while it fills: pressure. Its send buffer is shrunk to what
    // it held, so it stops growing before its 64 KiB.
    conns.push(zero_window_client(&mut p, l).expect("admitted"));
    assert_eq!(p.a.tcp_mem_state(), MemState::Pressure);
    let k = p.a.counters();
    assert_eq!(k.tcp_mem_pressure_entered, 1);
    assert!(k.tcp_mem_send_buffers_shrunk >= 1);
    let third = conns[2].1;
    assert!(p.a.tcp_send_buffer_bytes(third).unwrap() < SEND_BUFFER_BYTES);
    assert!(p.a.tcp_mem_bytes() < 256 * KIB);

    // Connections opened under pressure get 16 KiB buffers; they bring the sum to the high
    // mark, after which passive opens are refused.
    let mut refused = 0;
    for _ in 0..16 {
        match zero_window_client(&mut p, l) {
            Some((c, s)) => {
                assert_eq!(p.a.tcp_send_buffer_bytes(s).unwrap(), PRESSURE_BUFFER_BYTES);
                conns.push((c, s));
            }
            None => refused += 1,
        }
        if p.a.tcp_mem_state() == MemState::High && refused > 0 {
            break;
        }
    }
    assert_eq!(p.a.tcp_mem_state(), MemState::High);
    let k = p.a.counters();
    assert_eq!(k.tcp_mem_high_entered, 1);
    assert!(
        refused >= 1 && k.tcp_mem_refused_conn >= 1,
        "{refused} {k:?}"
    );
    // Bounded: the last admission may overshoot the mark by one pressure-sized buffer.
    assert!(p.a.tcp_mem_bytes() <= 256 * KIB + PRESSURE_BUFFER_BYTES as usize);
    // Active opens fail too, with their own error.
    assert_eq!(
        p.a.tcp_connect(p.now, v4(IP_B, 9), 0),
        Err(SocketError::NoBufferSpace)
    );

    // The peers leave (RST); the server closes its handles: every byte of ring storage comes
    // back, the state returns to normal, and a new connection gets its full buffer.
    for &(c, s) in &conns {
        p.b.tcp_abort(c).expect("abort");
        p.advance(MS);
        p.b.close(p.now, c).expect("close client");
        p.a.close(p.now, s).expect("close server");
    }
    p.advance(S);
    assert_eq!(p.a.tcp_connection_count(), 0);
    assert_eq!(p.a.tcp_mem_bytes(), 0);
    assert_eq!(p.a.tcp_mem_state(), MemState::Normal);
    assert_eq!(p.a.counters().tcp_mem_normal_entered, 1);
    let (_, s) = zero_window_client(&mut p, l).expect("admitted again");
    assert_eq!(p.a.tcp_send_buffer_bytes(s).unwrap(), SEND_BUFFER_BYTES);
    assert_eq!(p.a.tcp_mem_bytes(), SEND_BUFFER_BYTES as usize);
}

#[test]
fn in_the_high_state_a_write_that_would_allocate_would_block_but_the_minimum_is_kept() {
    // Pressure at 16 KiB, high at 20 KiB: the first connection's ring reaches 16 KiB with
    // 12 KiB of it still held (what the peer acknowledged is gone from the ring) and is
    // shrunk to 12 KiB on entering pressure; the second (a 16 KiB buffer, opened under
    // pressure) reaches the high mark as its ring grows to 8 KiB.
    let mut a: StackConfig = config_a();
    a.tcp.send_buffer_bytes = SEND_BUFFER_BYTES;
    a.limits.tcp_mem_low_bytes = 8 * KIB;
    a.limits.tcp_mem_pressure_bytes = 16 * KIB;
    a.limits.tcp_mem_high_bytes = 20 * KIB;
    a.limits.tcp_mem_pressure_buffer_bytes = PRESSURE_BUFFER_BYTES;
    let mut b = config_b();
    b.tcp.recv_buffer_bytes = 8192;
    let mut p = Pair::with(a, b);
    let l = p.a.tcp_listen(v4(IP_A, 80), 8).expect("listen");
    let (_, s1) = zero_window_client(&mut p, l).expect("first");
    assert_eq!(p.a.tcp_mem_state(), MemState::Pressure);
    assert_eq!(p.a.tcp_mem_bytes(), 12 * KIB);
    assert_eq!(p.a.tcp_send_buffer_bytes(s1).unwrap(), 12 * KIB as u32);
    p.b.tcp_connect(p.now, v4(IP_A, 80), 0).expect("connect");
    p.advance(10 * MS);
    let (s2, _) =
        p.a.tcp_accept(l)
            .expect("second admitted below the high mark");
    assert_eq!(
        p.a.tcp_send_buffer_bytes(s2).unwrap(),
        PRESSURE_BUFFER_BYTES
    );
    // Nothing leaves (A holds no ACK from B for s2 yet: no time passes), so the ring holds
    // what the application queued.
    let chunk = [7u8; 1024];
    let mut queued = 0;
    loop {
        match p.a.tcp_send(s2, &chunk) {
            Ok(n) => queued += n,
            Err(SocketError::WouldBlock) => break,
            Err(e) => panic!("{e:?}"),
        }
    }
    assert_eq!(p.a.tcp_mem_state(), MemState::High);
    // Past the 4 KiB minimum the ring grew to 8 KiB (the high mark), filled it, and the next
    // write, which would allocate, was refused though the buffer has room.
    assert_eq!(queued, 8 * KIB);
    assert_eq!(p.a.counters().tcp_mem_refused_write, 1);
    assert!(p.a.tcp_send_queue_bytes(s2).unwrap() < PRESSURE_BUFFER_BYTES as usize);
    assert_eq!(p.a.tcp_state(s2), Some(State::Established));
    // Once data is acknowledged, the storage it frees takes writes again, still at high.
    p.advance(10 * MS);
    assert!(p.a.tcp_send(s2, &chunk).is_ok_and(|n| n > 0));
}

#[test]
fn an_emptied_socket_table_gives_its_slots_back_and_stale_handles_stay_invalid() {
    let mut p = pair();
    let handles: Vec<SocketHandle> = (0..200)
        .map(|i| p.a.udp_bind(v4(IP_A, 1000 + i)).expect("bind"))
        .collect();
    // Closing all but the first, the last slot last: the table is compacted to one slot.
    for &h in &handles[1..] {
        p.a.close(p.now, h).expect("close");
    }
    for &h in &handles[1..] {
        assert_eq!(p.a.close(p.now, h), Err(SocketError::InvalidHandle));
    }
    // The indexes are handed out again, never with a generation a stale handle carries.
    let again: Vec<SocketHandle> = (0..199)
        .map(|i| p.a.udp_bind(v4(IP_A, 2000 + i)).expect("bind again"))
        .collect();
    for h in &again {
        assert!(
            !handles.contains(h),
            "{h:?} names a socket a stale handle named"
        );
    }
    for &h in &handles[1..] {
        assert_eq!(p.a.close(p.now, h), Err(SocketError::InvalidHandle));
    }
    assert!(p.a.close(p.now, handles[0]).is_ok());
}

/// Pressure shrinks a connection's send buffer, which gives it a configuration copy of its
/// own (issue 17 item 2: connections share one); back to normal, its buffer gets its size
/// back and it shares the listener's configuration again, so pressure leaves no copy behind.
#[test]
fn leaving_pressure_shares_the_restored_configuration_again() {
    let mut p = pair();
    let l = p.a.tcp_listen(v4(IP_A, 80), 64).expect("listen");
    let mut conns = Vec::new();
    for _ in 0..3 {
        conns.push(zero_window_client(&mut p, l).expect("admitted"));
    }
    assert_eq!(p.a.tcp_mem_state(), MemState::Pressure);
    let (third_c, third_s) = conns[2];
    assert!(p.a.tcp_send_buffer_bytes(third_s).unwrap() < SEND_BUFFER_BYTES);
    assert!(p.a.tcp_configs_held().0 >= 2, "shrunk ones hold copies");
    // Two clients leave: the sum falls below the low mark, the state returns to normal.
    for &(c, s) in &conns[..2] {
        p.b.tcp_abort(c).expect("abort");
        p.advance(MS);
        p.b.close(p.now, c).expect("close client");
        p.a.close(p.now, s).expect("close server");
    }
    p.advance(S);
    assert_eq!(p.a.tcp_mem_state(), MemState::Normal);
    assert_eq!(
        p.a.tcp_send_buffer_bytes(third_s).unwrap(),
        SEND_BUFFER_BYTES
    );
    assert_eq!(p.a.tcp_configs_held().0, 1, "shared again");
    assert_eq!(p.b.tcp_state(third_c), Some(State::Established));
}
