use super::*;

fn small() -> XdpConfig {
    XdpConfig {
        frame_count: 64,
        rx_frames: 32,
        rx_ring_entries: 64,
        tx_ring_entries: 64,
        fill_ring_entries: 64,
        completion_ring_entries: 64,
        ..XdpConfig::default()
    }
}

#[test]
fn uapi_structs_have_the_kernel_layout() {
    assert_eq!(core::mem::size_of::<XdpUmemReg>(), 32);
    assert_eq!(core::mem::size_of::<SockaddrXdp>(), 16);
    assert_eq!(core::mem::size_of::<XdpMmapOffsets>(), 128);
    assert_eq!(core::mem::size_of::<XdpStatistics>(), 48);
    assert_eq!(core::mem::offset_of!(XdpMmapOffsets, fill), 64);
}

#[test]
fn ring_arithmetic_wraps_around_u32() {
    assert_eq!(ring_ready(5, 3, 8), Some(2));
    assert_eq!(ring_ready(2, u32::MAX - 1, 8), Some(4));
    assert_eq!(ring_free(2, u32::MAX - 1, 8), Some(4));
    assert_eq!(ring_free(u32::MAX, u32::MAX, 8), Some(8));
    assert_eq!(ring_free(7, u32::MAX, 8), Some(0));
    // Producer behind consumer, or more than a ring apart: corrupt.
    assert_eq!(ring_ready(3, 5, 8), None);
    assert_eq!(ring_free(20, 3, 8), None);
}

#[test]
fn slots_wrap_with_the_index() {
    // A ring over a plain anonymous mapping: indices 0 and entries name the same slot.
    let ring = Ring {
        map: Mapping::anonymous(4096).expect("mmap"),
        producer_off: 0,
        consumer_off: 4,
        flags_off: 8,
        desc_off: 64,
        entries: 4,
        slot_bytes: XDP_DESC_BYTES,
        cursor: 0,
    };
    assert!(ring.write_desc(u32::MAX, 0x1000, 60));
    assert_eq!(ring.slot(u32::MAX), ring.slot(3));
    assert_eq!(ring.read_desc(3), Some((0x1000, 60)));
    assert_eq!(ring.slot(4), ring.slot(0));
    assert_eq!(ring.slot(0), 64);
}

#[test]
fn descriptors_outside_the_umem_or_across_frames_are_refused() {
    let (fs, n) = (2048, 4);
    assert_eq!(
        frame_span(2048 + 256, 100, fs, n),
        Some(FrameSpan {
            frame: 1,
            offset: 256,
            len: 100
        })
    );
    assert_eq!(frame_span(3 * 2048, 2048, fs, n).map(|s| s.frame), Some(3));
    assert_eq!(frame_span(4 * 2048, 1, fs, n), None, "past the end");
    assert_eq!(
        frame_span(2048 + 256, 1793, fs, n),
        None,
        "into the next frame"
    );
    assert_eq!(frame_span(u64::MAX, u32::MAX, fs, n), None, "no overflow");
}

#[test]
fn config_validation_rejects_each_broken_invariant() {
    let page = 4096;
    assert_eq!(small().validate(page), Ok(64 * 2048));
    assert_eq!(XdpConfig::default().validate(page), Ok(4096 * 2048));
    let cases = [
        (
            XdpConfig {
                frame_size_bytes: 1024,
                ..small()
            },
            XdpConfigError::FrameSize,
        ),
        (
            XdpConfig {
                frame_size_bytes: 3000,
                ..small()
            },
            XdpConfigError::FrameSize,
        ),
        (
            XdpConfig {
                frame_size_bytes: 8192,
                ..small()
            },
            XdpConfigError::FrameSize,
        ),
        (
            XdpConfig {
                frame_count: 1,
                rx_frames: 1,
                ..small()
            },
            XdpConfigError::FrameCount,
        ),
        (
            XdpConfig {
                rx_ring_entries: 100,
                ..small()
            },
            XdpConfigError::RingEntries,
        ),
        (
            XdpConfig {
                tx_ring_entries: 0,
                ..small()
            },
            XdpConfigError::RingEntries,
        ),
        (
            XdpConfig {
                completion_ring_entries: 1 << 21,
                ..small()
            },
            XdpConfigError::RingEntries,
        ),
        (
            XdpConfig {
                rx_frames: 0,
                ..small()
            },
            XdpConfigError::RxFrames,
        ),
        (
            XdpConfig {
                rx_frames: 64,
                ..small()
            },
            XdpConfigError::RxFrames,
        ),
        (
            XdpConfig {
                frame_count: 256,
                rx_frames: 65,
                ..small()
            },
            XdpConfigError::RxFrames,
        ),
    ];
    for (cfg, expected) in cases {
        assert_eq!(cfg.validate(page), Err(expected), "{cfg:?}");
    }
}

#[test]
fn bad_config_is_rejected_before_any_system_call() {
    let cfg = XdpConfig {
        frame_size_bytes: 1000,
        ..small()
    };
    let err = XdpSocket::open_ifindex(1, 0, &cfg).expect_err("invalid config");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
}

/// A ring over anonymous memory laid out like the kernel's (indices on their own cache
/// lines, then the slots), both indices and our cursor starting at `start`.
fn fake_ring(entries: u32, slot_bytes: usize, start: u32) -> Ring {
    let off = XdpRingOffset {
        producer: 0,
        consumer: 64,
        flags: 128,
        desc: 192,
    };
    let len = 192 + entries as usize * slot_bytes;
    let word = |v: u64| v as usize;
    let ring = Ring {
        map: Mapping::anonymous(len).expect("mmap"),
        producer_off: word(off.producer),
        consumer_off: word(off.consumer),
        flags_off: word(off.flags),
        desc_off: word(off.desc),
        entries,
        slot_bytes,
        cursor: start,
    };
    ring.store(ring.producer_off, start);
    ring.store(ring.consumer_off, start);
    ring
}

/// A socket whose "kernel" is the test: rings and UMEM over anonymous memory, the fd
/// /dev/null (never used: need_wakeup is on and the fake rings never ask for a wake-up).
fn fake_socket(config: &XdpConfig) -> XdpSocket {
    fake_socket_at(config, 0)
}

fn fake_socket_at(config: &XdpConfig, start: u32) -> XdpSocket {
    let len = config.validate(4096).expect("valid config");
    let fd: OwnedFd = std::fs::File::open("/dev/null")
        .expect("open /dev/null")
        .into();
    let umem = Umem {
        map: Mapping::anonymous(len).expect("mmap"),
        frame_size: config.frame_size_bytes,
        state: vec![FrameState::User; config.frame_count as usize],
    };
    let rings = [
        fake_ring(config.rx_ring_entries, XDP_DESC_BYTES, start),
        fake_ring(config.tx_ring_entries, XDP_DESC_BYTES, start),
        fake_ring(config.fill_ring_entries, UMEM_ADDR_BYTES, start),
        fake_ring(config.completion_ring_entries, UMEM_ADDR_BYTES, start),
    ];
    XdpSocket::assemble(rings, fd, umem, config, false, (0, 0))
}

fn tiny() -> XdpConfig {
    XdpConfig {
        frame_count: 8,
        rx_frames: 4,
        rx_ring_entries: 8,
        tx_ring_entries: 8,
        fill_ring_entries: 4,
        completion_ring_entries: 8,
        need_wakeup: true,
        ..XdpConfig::default()
    }
}

/// The kernel consumes everything in a ring we produce (FILL, TX): returns the raw slots.
fn kernel_consume(ring: &Ring) -> Vec<(u64, u32)> {
    let prod = ring.producer();
    let mut cons = ring.consumer();
    let mut out = Vec::new();
    while cons != prod {
        let s = ring.slot(cons);
        let addr = ring.map.read_u64(s).expect("slot");
        let len = if ring.slot_bytes == XDP_DESC_BYTES {
            ring.map.read_u32(s + 8).expect("slot")
        } else {
            0
        };
        out.push((addr, len));
        cons = cons.wrapping_add(1);
    }
    ring.store(ring.consumer_off, cons);
    out
}

/// The kernel produces `entries` into a ring we consume (RX, COMPLETION).
fn kernel_produce(ring: &Ring, entries: &[(u64, u32)]) {
    let mut prod = ring.producer();
    for &(addr, len) in entries {
        let s = ring.slot(prod);
        assert!(ring.map.write_u64(s, addr));
        if ring.slot_bytes == XDP_DESC_BYTES {
            assert!(ring.map.write_u32(s + 8, len));
        }
        prod = prod.wrapping_add(1);
    }
    ring.store(ring.producer_off, prod);
}

#[test]
fn hostile_rx_descriptors_are_counted_never_trusted() {
    let mut sock = fake_socket(&tiny());
    let lent = kernel_consume(&sock.fill);
    assert_eq!(lent, vec![(0, 0), (2048, 0), (4096, 0), (6144, 0)]);
    assert_eq!(sock.frame_states(), (4, 4, 0));
    // "Receive" 8 bytes into frame 1 behind the copy-mode headroom.
    assert!(sock.umem.map.write_u64(2048 + 256, 0x1122_3344_5566_7788));
    kernel_produce(
        &sock.rx,
        &[
            (2048 + 256, 8),        // valid
            (8 * 2048, 60),         // past the UMEM
            (4 * 2048, 60),         // frame 4 was never lent to FILL
            (3 * 2048 + 2000, 100), // runs into the next frame
            (2048 + 256, 8),        // frame 1 again: already handed back to us
        ],
    );
    let mut seen = Vec::new();
    let handed = sock.recv_batch(16, |f| seen.push(f.to_vec()));
    assert_eq!(handed, 1);
    assert_eq!(seen, vec![0x1122_3344_5566_7788u64.to_ne_bytes().to_vec()]);
    let c = sock.counters();
    assert_eq!((c.rx_frames, c.rx_invalid_desc), (1, 4), "{c:?}");
    assert_eq!(
        c.fill_ring_empty, 1,
        "the kernel had taken all four FILL entries"
    );
    // Frame 1 went back to FILL; every frame still has exactly one owner.
    assert_eq!(kernel_consume(&sock.fill), vec![(2048, 0)]);
    assert_eq!(sock.frame_states(), (4, 4, 0));
    // A producer index more than a ring ahead of us: nothing is read.
    sock.rx
        .store(sock.rx.producer_off, sock.rx.cursor.wrapping_add(100));
    assert_eq!(sock.recv_batch(16, |_| panic!("nothing to hand")), 0);
    assert_eq!(sock.counters().ring_index_invalid, 1);
}

#[test]
fn hostile_completions_are_counted_never_trusted() {
    let mut sock = fake_socket(&tiny());
    assert_eq!(
        sock.send_batch(&[&b"first"[..], &b"second"[..]])
            .expect("queue"),
        2
    );
    let sent = kernel_consume(&sock.tx);
    assert_eq!(
        sent,
        vec![(4 * 2048, 5), (5 * 2048, 6)],
        "TX budget frames 4 and 5"
    );
    assert_eq!(sock.frame_states(), (2, 4, 2));
    kernel_produce(
        &sock.completion,
        &[
            (4 * 2048, 0),  // valid
            (4 * 2048, 0),  // duplicate
            (99 * 2048, 0), // outside the UMEM
            (0, 0),         // frame 0 is lent to FILL, not TX
        ],
    );
    assert_eq!(sock.poll_tx().expect("no kick needed"), 1);
    let c = sock.counters();
    assert_eq!((c.tx_completed, c.completion_invalid_addr), (1, 3), "{c:?}");
    assert_eq!(sock.tx_in_flight(), 1);
    kernel_produce(&sock.completion, &[(5 * 2048, 0)]);
    assert_eq!(sock.poll_tx().expect("no kick needed"), 1);
    assert_eq!(sock.frame_states(), (4, 4, 0));
}

#[test]
fn send_batch_stops_at_the_transmit_budget_and_refuses_bad_lengths() {
    let mut sock = fake_socket(&tiny());
    let frames = vec![vec![0xabu8; 60]; 10];
    // Budget: 8 frames − 4 lent to FILL.
    assert_eq!(sock.send_batch(&frames).expect("queue"), 4);
    assert_eq!(sock.counters().tx_drop_no_frame, 1);
    assert_eq!(sock.tx_frames_available(), 0);
    let err = sock.send(&frames[0]).expect_err("no frame left");
    assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    let err = sock
        .send_batch(&[vec![1u8; 10], vec![0u8; 2049]])
        .expect_err("too long");
    assert_eq!(err.kind(), io::ErrorKind::InvalidInput);
    assert_eq!(
        sock.send(&[]).expect_err("empty").kind(),
        io::ErrorKind::InvalidInput
    );
    assert_eq!(
        sock.counters().tx_frames,
        4,
        "nothing queued by refused calls"
    );
    // The kernel sends and completes them: the budget is back.
    let sent = kernel_consume(&sock.tx);
    assert!(sent.iter().all(|&(_, len)| len == 60));
    kernel_produce(&sock.completion, &sent);
    sock.poll_tx().expect("no kick needed");
    assert_eq!(sock.tx_frames_available(), 4);
}

#[test]
fn receive_and_transmit_keep_working_across_the_u32_index_wrap() {
    let mut sock = fake_socket_at(&tiny(), u32::MAX - 5);
    for round in 0..6u64 {
        // Receive: the kernel fills every lent frame and hands them all back.
        let lent = kernel_consume(&sock.fill);
        assert_eq!(
            lent.len(),
            4,
            "round {round}: FILL holds the four receive frames"
        );
        let rx: Vec<(u64, u32)> = lent.iter().map(|&(a, _)| (a + 256, 64)).collect();
        kernel_produce(&sock.rx, &rx);
        assert_eq!(sock.recv_batch(16, |f| assert_eq!(f.len(), 64)), 4);
        // Transmit: two frames out, completed.
        assert_eq!(sock.send_batch(&[[round as u8; 60]; 2]).expect("queue"), 2);
        let sent = kernel_consume(&sock.tx);
        kernel_produce(&sock.completion, &sent);
        assert_eq!(sock.poll_tx().expect("no kick needed"), 2);
    }
    assert!(
        sock.rx.cursor < 100,
        "the indices wrapped: {}",
        sock.rx.cursor
    );
    let c = sock.counters();
    assert_eq!((c.rx_frames, c.tx_completed), (24, 12), "{c:?}");
    assert_eq!(
        (
            c.rx_invalid_desc,
            c.completion_invalid_addr,
            c.ring_index_invalid
        ),
        (0, 0, 0)
    );
    assert_eq!(sock.frame_states(), (4, 4, 0));
}

#[test]
fn sockets_and_ports_can_move_to_shard_threads() {
    fn is_send<T: Send>() {}
    is_send::<XdpSocket>();
    is_send::<XdpPort>();
    is_send::<XdpAttachment>();
}

fn test_umem(frames: u32) -> Umem {
    Umem {
        map: Mapping::anonymous(frames as usize * 2048).expect("mmap"),
        frame_size: 2048,
        state: vec![FrameState::User; frames as usize],
    }
}

#[test]
fn umem_bytes_are_lent_only_while_the_frame_is_ours() {
    let mut umem = test_umem(2);
    assert!(umem.write(1, b"hello"));
    let span = umem.span(2048, 5).expect("in bounds");
    assert_eq!(umem.read(span), Some(&b"hello"[..]));
    assert!(umem.transition(1, FrameState::User, FrameState::Fill));
    assert_eq!(umem.read(span), None, "lent to the kernel");
    assert!(!umem.write(1, b"x"));
    assert!(
        !umem.transition(1, FrameState::Tx, FrameState::User),
        "wrong source state"
    );
    assert!(
        !umem.transition(7, FrameState::User, FrameState::Fill),
        "no such frame"
    );
    assert!(!umem.write(0, &[0u8; 2049]), "longer than a frame");
}
