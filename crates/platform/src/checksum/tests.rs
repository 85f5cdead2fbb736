use super::*;

/// The RFC 1071 reference: big-endian 16-bit words one at a time, an odd last byte padded
/// with a zero byte after it (§4.1), folded with end-around carries.
fn reference(data: &[u8]) -> u16 {
    let mut acc: u64 = data
        .chunks(2)
        .map(|w| u64::from(u16::from_be_bytes([w[0], *w.get(1).unwrap_or(&0)])))
        .sum();
    while acc >> 16 != 0 {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

/// `n` pseudo-random bytes (xorshift), the same on every run.
fn random_bytes(n: usize, mut x: u64) -> Vec<u8> {
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// The data the kernels are checked on: random bytes, and the constant bytes that push the
/// lanes hardest (0x00 flips to the most negative word, 0xff to the most positive), that
/// make every word's top bit set (0x80) and that fold to 0xffff (0xff).
fn patterns(n: usize) -> Vec<(&'static str, Vec<u8>)> {
    vec![
        ("random", random_bytes(n, 0x9e37_79b9_7f4a_7c15)),
        ("0xff", vec![0xff; n]),
        ("0x80", vec![0x80; n]),
        ("0x00", vec![0x00; n]),
    ]
}

/// The longest length checked one by one, and past it the lengths at the chunk boundaries.
const EVERY_LEN_MAX: usize = 300;
const LONG_LENS: [usize; 12] = [
    2_240,
    65_535,
    65_536,
    65_537,
    65_536 + 31,
    65_536 + 32,
    65_536 + 255,
    65_536 + 256,
    2 * 65_536 - 1,
    2 * 65_536 + 170,
    3 * 65_536 + 77,
    20_000 * 128 + 3 * 32 + 30,
];

#[test]
fn fold_swap_is_the_end_around_carry_fold_swapped() {
    let slow = |mut acc: u64| {
        while acc >> 16 != 0 {
            acc = (acc & 0xffff) + (acc >> 16);
        }
        u16::from_be(acc as u16)
    };
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut cases = vec![0, 1, 0xffff, 0x1_0000, 0xffff_ffff, 0x1_0000_0000, u64::MAX];
    for _ in 0..10_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        cases.extend([x, x >> 20, x >> 40, x & 0xffff_0000_ffff]);
    }
    for acc in cases {
        assert_eq!(fold_swap(acc), slow(acc), "{acc:#x}");
    }
}

#[test]
fn the_sum_kernel_equals_the_reference_for_every_length_and_both_alignments() {
    let Some(kernel) = sum_kernel() else {
        eprintln!("no AVX2 on this CPU: the kernel is never used here");
        return;
    };
    for (name, data) in patterns(2_240 + 1) {
        for start in [0usize, 1] {
            for len in (0..=EVERY_LEN_MAX).chain([1_447, 1_448, 1_460, 2_000, 2_239]) {
                let d = &data[start..start + len];
                assert_eq!(kernel(d), reference(d), "{name}: {len} bytes from {start}");
            }
        }
    }
}

#[test]
fn the_sum_kernel_equals_the_reference_across_the_lane_reductions() {
    let Some(kernel) = sum_kernel() else {
        eprintln!("no AVX2 on this CPU: the kernel is never used here");
        return;
    };
    let longest = *LONG_LENS.iter().max().expect("lengths");
    for (name, data) in patterns(longest + 1) {
        for start in [0usize, 1] {
            for len in LONG_LENS {
                let d = &data[start..start + len];
                assert_eq!(kernel(d), reference(d), "{name}: {len} bytes from {start}");
            }
        }
    }
}

/// Copies `len` bytes from `src_start` of `data` by `kernel` into a destination at
/// `dst_start` of a buffer with guard bytes on both sides, and checks the sum, the copy and
/// the guards.
fn check_copy(kernel: CopySumFn, data: &[u8], src_start: usize, dst_start: usize, len: usize) {
    const GUARD: usize = 40;
    let s = &data[src_start..src_start + len];
    let mut buf = vec![0x5au8; dst_start + len + GUARD];
    let got = kernel(&mut buf[dst_start..dst_start + len], s);
    assert_eq!(
        got,
        reference(s),
        "{len} bytes from {src_start} to {dst_start}"
    );
    assert!(
        buf[dst_start..dst_start + len] == *s,
        "{len} bytes: the copy"
    );
    assert!(
        buf[..dst_start]
            .iter()
            .chain(&buf[dst_start + len..])
            .all(|&b| b == 0x5a),
        "{len} bytes from {src_start} to {dst_start}: wrote outside the destination"
    );
}

#[test]
fn the_copy_kernel_copies_and_sums_as_the_reference_for_every_length_and_both_alignments() {
    let Some(kernel) = copy_sum_kernel() else {
        eprintln!("no AVX2 on this CPU: the kernel is never used here");
        return;
    };
    for (name, data) in patterns(2_240 + 1) {
        for (src_start, dst_start) in [(0, 0), (1, 0), (0, 1), (1, 1)] {
            for len in 0..=EVERY_LEN_MAX {
                check_copy(kernel, &data, src_start, dst_start, len);
            }
        }
        if name == "random" {
            for len in EVERY_LEN_MAX..=2_240 {
                check_copy(kernel, &data, 1, 0, len);
            }
        }
    }
}

#[test]
fn the_copy_kernel_copies_and_sums_as_the_reference_across_the_lane_reductions() {
    let Some(kernel) = copy_sum_kernel() else {
        eprintln!("no AVX2 on this CPU: the kernel is never used here");
        return;
    };
    let longest = *LONG_LENS.iter().max().expect("lengths");
    for (_, data) in patterns(longest + 1) {
        for len in LONG_LENS {
            check_copy(kernel, &data, 1, 0, len);
        }
    }
}

/// The kernel's safe entry checks the lengths itself (on a CPU without AVX2 there is no
/// kernel, and the test checks the resolved entry instead).
#[test]
#[should_panic(expected = "lengths differ")]
fn the_copy_kernel_refuses_unequal_lengths() {
    let src = [7u8; 64];
    match copy_sum_kernel() {
        Some(kernel) => kernel(&mut [0u8; 32], &src),
        None => copy_and_sum_or(&mut [0u8; 32], &src, |d, s| {
            d.copy_from_slice(s);
            reference(s)
        }),
    };
}

#[test]
#[should_panic(expected = "lengths differ")]
fn copy_and_sum_or_refuses_unequal_lengths() {
    copy_and_sum_or(&mut [0u8; 3], &[1u8; 4], |d, s| {
        d.copy_from_slice(s);
        reference(s)
    });
}

/// Through the resolved pointers (the kernel here, or the portable function on a CPU
/// without AVX2), every length 0..=300 and a few long ones sum as the reference.
#[test]
fn the_resolved_functions_sum_and_copy_as_the_reference() {
    let data = random_bytes(4_001, 0x1234_5678_9abc_def0);
    let copy_then_sum: CopySumFn = |d, s| {
        d.copy_from_slice(s);
        reference(s)
    };
    for len in (0..=EVERY_LEN_MAX).chain([1_448, 4_000]) {
        let s = &data[1..1 + len];
        assert_eq!(sum_or(s, reference), reference(s), "{len} bytes");
        let mut d = vec![0u8; len];
        assert_eq!(
            copy_and_sum_or(&mut d, s, copy_then_sum),
            reference(s),
            "{len} bytes"
        );
        assert_eq!(d, s);
    }
}

/// With the kernel forced off (what a CPU without AVX2 resolves to), the caller's portable
/// function is what runs, with the caller's arguments; with it on, the kernel.
#[test]
fn without_avx2_the_callers_portable_function_runs() {
    let marker: SumFn = |d| 0xa000 | d.len() as u16;
    assert_eq!(choose_sum(false)(&[1, 2, 3], marker), 0xa003);
    let copy_marker: CopySumFn = |d, s| {
        d.copy_from_slice(s);
        0xb000 | s.len() as u16
    };
    let mut d = [0u8; 5];
    assert_eq!(choose_copy_sum(false)(&mut d, &[9; 5], copy_marker), 0xb005);
    assert_eq!(d, [9; 5]);
    if sum_kernel().is_some() {
        let s = [0x12u8, 0x34, 0x56];
        assert_eq!(choose_sum(true)(&s, marker), reference(&s));
        assert_eq!(
            choose_copy_sum(true)(&mut d[..3], &s, copy_marker),
            reference(&s)
        );
    }
}

proptest::proptest! {
    /// Random bytes, lengths and start offsets: both kernels equal the reference (and the
    /// copy is exact).
    #[test]
    fn the_kernels_equal_the_reference(
        data in proptest::collection::vec(proptest::num::u8::ANY, 0..3000),
        start in 0usize..64,
    ) {
        let start = start.min(data.len());
        let d = &data[start..];
        if let Some(kernel) = sum_kernel() {
            proptest::prop_assert_eq!(kernel(d), reference(d));
        }
        if let Some(kernel) = copy_sum_kernel() {
            let mut out = vec![0u8; d.len()];
            proptest::prop_assert_eq!(kernel(&mut out, d), reference(d));
            proptest::prop_assert_eq!(&out[..], d);
        }
    }
}
