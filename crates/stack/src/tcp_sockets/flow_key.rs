//! A connection's addresses and the keys the TCP part finds it by: [`FourTuple`], the
//! connection-table key [`FlowKey`] with its tuple packed into 38 bytes, and the hashes — the
//! stack's keyed software hash and the RSS flow hash of a tuple with no carried hash.

use core::net::{IpAddr, Ipv4Addr, SocketAddr};

use crate::config::StackConfig;

/// A connection's addresses, as seen from this host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct FourTuple {
    pub local: SocketAddr,
    pub remote: SocketAddr,
}

/// The connection-table key: the 4-tuple plus its two hashes.
///
/// Invariants: `hash` and `table_hash` are functions of `tuple` alone (for a given stack), so
/// equal tuples always carry equal hashes. `hash` is the flow hash RETA buckets are taken
/// from: the RSS Toeplitz hash of the *incoming* direction under the configured key, or the
/// software hash when no RSS key is configured. `table_hash` indexes the connection table and
/// the TIME-WAIT index: `hash` itself where a peer cannot aim tuples at one bucket with it (no
/// RSS key, so `hash` is the keyed software hash; or a key the driver declared secret,
/// [`crate::RssConfig::key_is_secret`]: hash once), else the keyed software hash.
///
/// 48 bytes, the tuple packed ([`PackedTuple`]). A connection's socket slot does not hold it
/// whole: the tuple's [`TupleHead`] (all of an IPv4 tuple) sits in the slot's first line,
/// where the connection table compares it, and the rest ([`KeyRest`]) in its second
/// (`ConnSock::key` puts them back together).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FlowKey {
    pub(crate) hash: u32,
    pub(crate) table_hash: u32,
    packed: PackedTuple,
}

impl FlowKey {
    /// The key of `tuple` with its two hashes (see the type's invariants).
    #[inline(always)]
    pub(crate) fn new(hash: u32, table_hash: u32, tuple: &FourTuple) -> FlowKey {
        FlowKey {
            hash,
            table_hash,
            packed: PackedTuple::pack(tuple),
        }
    }

    /// The key from its two parts ([`FlowKey::split`]).
    #[inline(always)]
    pub(crate) fn join(head: TupleHead, rest: KeyRest) -> FlowKey {
        FlowKey {
            hash: rest.hash,
            table_hash: rest.table_hash,
            packed: PackedTuple {
                head,
                local_tail: rest.local_tail,
                remote_tail: rest.remote_tail,
            },
        }
    }

    /// The part of the key a lookup compares first (all of an IPv4 tuple) and the rest.
    #[inline(always)]
    pub(crate) fn split(&self) -> (TupleHead, KeyRest) {
        (
            self.packed.head,
            KeyRest {
                hash: self.hash,
                table_hash: self.table_hash,
                local_tail: self.packed.local_tail,
                remote_tail: self.packed.remote_tail,
            },
        )
    }

    /// The connection's addresses.
    #[inline(always)]
    pub(crate) fn tuple(&self) -> FourTuple {
        self.packed.unpack()
    }

    /// The local address (without unpacking the whole tuple: the transmit path's).
    #[inline(always)]
    pub(crate) fn local_ip(&self) -> IpAddr {
        self.packed
            .head
            .ip(self.packed.head.local_ip4, &self.packed.local_tail, 1)
    }

    /// The remote address.
    #[inline(always)]
    pub(crate) fn remote_ip(&self) -> IpAddr {
        self.packed
            .head
            .ip(self.packed.head.remote_ip4, &self.packed.remote_tail, 2)
    }

    /// True when this is the key of `other`'s 4-tuple.
    #[inline(always)]
    pub(crate) fn same_tuple(&self, other: &FlowKey) -> bool {
        self.packed == other.packed
    }

    /// True when `head` and the tails of `rest` are this key's tuple. Reads `rest` only for
    /// a tuple with an IPv6 address: an IPv4 tuple is all in its head, so a connection's
    /// lookup stays in its slot's first line.
    #[inline(always)]
    pub(crate) fn same_tuple_parts(&self, head: &TupleHead, rest: &KeyRest) -> bool {
        self.packed.head == *head
            && (head.v6 == 0
                || (self.packed.local_tail == rest.local_tail
                    && self.packed.remote_tail == rest.remote_tail))
    }
}

/// The part of a 4-tuple compared first, 14 bytes: the ports, the first four bytes of each
/// address (all of an IPv4 one) and which addresses are IPv6 (bit 0: local, bit 1: remote).
/// Equal heads with `v6 == 0` are equal IPv4 tuples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct TupleHead {
    local_port: u16,
    remote_port: u16,
    local_ip4: [u8; 4],
    remote_ip4: [u8; 4],
    v6: u8,
}

impl TupleHead {
    /// The address whose first four bytes are `first` and the rest `tail`, of the family
    /// `v6`'s bit `bit` names.
    #[inline(always)]
    fn ip(&self, first: [u8; 4], tail: &[u8; 12], bit: u8) -> IpAddr {
        if self.v6 & bit != 0 {
            let mut b = [0u8; 16];
            b[..4].copy_from_slice(&first);
            b[4..].copy_from_slice(tail);
            IpAddr::V6(b.into())
        } else {
            IpAddr::V4(first.into())
        }
    }

    /// True when neither address is IPv6 (the head is then the whole tuple).
    #[inline(always)]
    pub(crate) fn is_v4(&self) -> bool {
        self.v6 == 0
    }

    /// The addresses' first four bytes as IPv4 addresses (local, remote): the addresses
    /// themselves when [`TupleHead::is_v4`].
    #[inline(always)]
    pub(crate) fn ips4(&self) -> (Ipv4Addr, Ipv4Addr) {
        (self.local_ip4.into(), self.remote_ip4.into())
    }
}

/// What a [`FlowKey`] holds besides its [`TupleHead`]: the two hashes and the last twelve
/// bytes of each IPv6 address (zero for IPv4), 32 bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub(crate) struct KeyRest {
    hash: u32,
    table_hash: u32,
    local_tail: [u8; 12],
    remote_tail: [u8; 12],
}

impl KeyRest {
    /// The key's connection-table hash ([`FlowKey::table_hash`]).
    #[inline(always)]
    pub(crate) fn table_hash(&self) -> u32 {
        self.table_hash
    }
}

/// A 4-tuple in 38 bytes (a [`FourTuple`] is 64: two `SocketAddr`s, room for IPv6 flow
/// information and scope): its [`TupleHead`], then the last twelve bytes of each address
/// (zero for IPv4). IPv6 flow information and scope are not kept: the table matches
/// segments, whose tuples carry neither.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PackedTuple {
    head: TupleHead,
    local_tail: [u8; 12],
    remote_tail: [u8; 12],
}

impl PackedTuple {
    #[inline(always)]
    pub(super) fn pack(t: &FourTuple) -> PackedTuple {
        let (local_ip, l6) = ip_bytes(t.local.ip());
        let (remote_ip, r6) = ip_bytes(t.remote.ip());
        let (l4, lt) = split16(local_ip);
        let (r4, rt) = split16(remote_ip);
        PackedTuple {
            head: TupleHead {
                local_port: t.local.port(),
                remote_port: t.remote.port(),
                local_ip4: l4,
                remote_ip4: r4,
                v6: u8::from(l6) | (u8::from(r6) << 1),
            },
            local_tail: lt,
            remote_tail: rt,
        }
    }

    #[inline(always)]
    pub(super) fn unpack(&self) -> FourTuple {
        let h = &self.head;
        FourTuple {
            local: SocketAddr::new(h.ip(h.local_ip4, &self.local_tail, 1), h.local_port),
            remote: SocketAddr::new(h.ip(h.remote_ip4, &self.remote_tail, 2), h.remote_port),
        }
    }
}

/// An address's 16 bytes as its first four and the other twelve.
#[inline(always)]
fn split16(b: [u8; 16]) -> ([u8; 4], [u8; 12]) {
    let [a0, a1, a2, a3, t @ ..] = b;
    ([a0, a1, a2, a3], t)
}

#[inline(always)]
fn ip_bytes(a: IpAddr) -> ([u8; 16], bool) {
    match a {
        IpAddr::V4(ip) => {
            let o = ip.octets();
            (
                [o[0], o[1], o[2], o[3], 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0],
                false,
            )
        }
        IpAddr::V6(ip) => (ip.octets(), true),
    }
}

/// Software flow hash (FNV-1a over the incoming direction's tuple, seeded with a per-stack
/// secret so remote peers cannot aim tuples at one bucket), used when the stack has no RSS key
/// and so cannot reproduce the NIC's hash.
///
/// Always inlined (into `flow_key`, itself always inlined): the IPv4 case is a few dozen
/// instructions, and LLVM's heuristics drop it out of line when the per-segment receive
/// function grows (seen: out of line, ~57 instructions per segment in callgrind bulk).
#[inline(always)]
pub(crate) fn software_hash(seed: u32, t: &FourTuple) -> u32 {
    let h: u32 = 0x811c_9dc5 ^ seed;
    if let (SocketAddr::V4(r), SocketAddr::V4(l)) = (t.remote, t.local) {
        // The same bytes in the same order as `software_hash_any`, a word at a time: the
        // per-segment case, unrolled (callgrind bulk: -56k Ir, ~8 per segment).
        let h = fnv_word(h, u32::from(*r.ip()));
        let h = fnv_word(h, u32::from(*l.ip()));
        return fnv_word(h, (u32::from(r.port()) << 16) | u32::from(l.port()));
    }
    software_hash_any(h, t)
}

/// FNV-1a over the big-endian bytes of `w`.
#[inline(always)]
fn fnv_word(mut h: u32, w: u32) -> u32 {
    for b in w.to_be_bytes() {
        h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
    }
    h
}

/// [`software_hash`] for any tuple, from the offset basis `h` already seeded.
#[inline(never)]
fn software_hash_any(mut h: u32, t: &FourTuple) -> u32 {
    let mut eat = |bytes: &[u8]| {
        for &b in bytes {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    };
    for a in [t.remote, t.local] {
        match a.ip() {
            IpAddr::V4(ip) => eat(&ip.octets()),
            IpAddr::V6(ip) => eat(&ip.octets()),
        }
    }
    eat(&t.remote.port().to_be_bytes());
    eat(&t.local.port().to_be_bytes());
    h
}

/// The flow hash of `tuple` with no carried hash (as [`TcpTable::flow_key`] computes it):
/// the Toeplitz hash of its incoming direction under the configured RSS key, else (no key,
/// or a mixed-family tuple, which no NIC hashes) the software hash.
#[inline(never)]
pub(crate) fn rss_flow_hash(cfg: &StackConfig, seed: u32, tuple: &FourTuple) -> u32 {
    let Some(rss) = &cfg.rss else {
        return software_hash(seed, tuple);
    };
    let ports = Some(rss::PortPair {
        src: tuple.remote.port(),
        dst: tuple.local.port(),
    });
    let input = match (tuple.remote.ip(), tuple.local.ip()) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => rss::HashInput::V4 { src, dst, ports },
        (IpAddr::V6(src), IpAddr::V6(dst)) => rss::HashInput::V6 { src, dst, ports },
        _ => return software_hash(seed, tuple),
    };
    rss.hasher.hash(&input)
}

pub(crate) fn endpoint_bytes(a: IpAddr) -> ([u8; 16], usize) {
    let mut b = [0u8; 16];
    match a {
        IpAddr::V4(ip) => {
            b[..4].copy_from_slice(&ip.octets());
            (b, 4)
        }
        IpAddr::V6(ip) => (ip.octets(), 16),
    }
}
