use super::*;

/// FNV-1a byte by byte over remote IP, local IP, remote port, local port: the definition
/// the word-at-a-time IPv4 path must reproduce.
fn reference_hash(seed: u32, t: &FourTuple) -> u32 {
    let mut bytes = Vec::new();
    for a in [t.remote, t.local] {
        match a.ip() {
            IpAddr::V4(ip) => bytes.extend_from_slice(&ip.octets()),
            IpAddr::V6(ip) => bytes.extend_from_slice(&ip.octets()),
        }
    }
    bytes.extend_from_slice(&t.remote.port().to_be_bytes());
    bytes.extend_from_slice(&t.local.port().to_be_bytes());
    bytes.iter().fold(0x811c_9dc5 ^ seed, |h, &b| {
        (h ^ u32::from(b)).wrapping_mul(0x0100_0193)
    })
}

#[test]
fn packed_tuple_round_trips_and_tells_families_apart() {
    let tuples = [
        ("10.0.0.1:80", "192.168.7.200:54321"),
        ("0.0.0.0:0", "255.255.255.255:65535"),
        ("[fe80::1]:443", "[2001:db8::42]:1024"),
        ("[a00:1::]:80", "[c0a8:7c8::]:54321"),
        ("10.0.0.1:80", "[2001:db8::42]:1024"),
        ("[2001:db8::42]:1024", "10.0.0.1:80"),
    ];
    let packed: Vec<PackedTuple> = tuples
        .iter()
        .map(|(local, remote)| {
            let t = FourTuple {
                local: local.parse().unwrap(),
                remote: remote.parse().unwrap(),
            };
            let p = PackedTuple::pack(&t);
            assert_eq!(p.unpack(), t);
            p
        })
        .collect();
    // IPv4 10.0.0.1 and the IPv6 address with the same leading bytes differ.
    for (i, a) in packed.iter().enumerate() {
        for (j, b) in packed.iter().enumerate() {
            assert_eq!(a == b, i == j, "{:?} vs {:?}", tuples[i], tuples[j]);
        }
    }
    assert_eq!(core::mem::size_of::<FlowKey>(), 48);
}

#[test]
fn software_hash_matches_the_bytewise_definition() {
    let tuples = [
        ("10.0.0.1:80", "192.168.7.200:54321"),
        ("0.0.0.0:0", "255.255.255.255:65535"),
        ("[fe80::1]:443", "[2001:db8::42]:1024"),
        ("10.0.0.1:80", "[2001:db8::42]:1024"),
    ];
    for seed in [0, 1, 0xdead_beef] {
        for (local, remote) in tuples {
            let t = FourTuple {
                local: local.parse().unwrap(),
                remote: remote.parse().unwrap(),
            };
            assert_eq!(software_hash(seed, &t), reference_hash(seed, &t), "{t:?}");
        }
    }
}
