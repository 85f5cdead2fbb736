//! Flow steering where the software RETA runs: wildcard rules (`ethtool -N`) and ATR on a
//! host whose shards forward frames among themselves (live ports: the kernel's spread does
//! not follow our RETA, so each shard decides who owns what it polled).
//!
//! Order, per polled frame (the NIC model's, [`rss::Steering`]): an ATR entry (the reply of
//! a connection a shard of this host opened) → the first matching rule (`queue N` or `drop`)
//! → the software RETA.
//!
//! ATR (the 82599 Flow Director's Application Targeted Routing) here: when a shard transmits
//! a TCP SYN without ACK (an active open), it records the reply direction's 5-tuple as its own
//! and tells every other shard ([`crate::Msg::Steer`]) before the SYN leaves (the runtime
//! sends messages before frames), so the SYN-ACK reaches the opener wherever the kernel
//! delivers it, and whatever a rule says about its ports. Source ports chosen for RSS already
//! come home by the RETA; ATR is what brings home the others (a port the application chose)
//! and those a rule would send elsewhere.
//!
//! The ATR table is bounded: [`ATR_SLOTS`] slots indexed by the reply's RSS hash, one entry
//! each; a new entry replaces the slot's old one (counted), as a hardware signature table
//! does. Entries are compared on the whole 5-tuple, never on the hash alone, so a collision
//! never sends a frame to a shard that does not know its connection.

use rss::{FiveTuple, FlowFields, IpPair, PROTO_TCP, RuleAction, RuleSet, Steering};
use wire::{Ipv4Packet, Ipv6Packet};

/// Slots of each shard's ATR table (a power of two).
pub const ATR_SLOTS: usize = 2048;

/// What the software steering counted on one shard.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SteerCounters {
    /// Frames a `drop` rule dropped here.
    pub rule_drops: u64,
    /// Active opens this shard recorded (its own and those other shards told it).
    pub atr_learned: u64,
    /// Of `atr_learned`, entries that replaced another flow's in their slot.
    pub atr_replaced: u64,
    /// Polled frames an ATR entry steered (to this shard or another).
    pub atr_hits: u64,
    /// Entries dropped because their RETA bucket moved to another shard.
    pub atr_forgotten: u64,
}

#[derive(Debug, Clone, Copy)]
struct AtrEntry {
    hash: u32,
    reply: FiveTuple,
    shard: u16,
}

/// One shard's rules and ATR table. See the module docs.
#[derive(Debug, Clone)]
pub struct SwSteer {
    rules: RuleSet,
    /// Frames each rule matched, in the rules' order. Invariant: as long as `rules`.
    rule_hits: Vec<u64>,
    /// `ATR_SLOTS` slots when ATR is on, else empty.
    atr: Vec<Option<AtrEntry>>,
    atr_entries: usize,
    pub(crate) counters: SteerCounters,
}

/// An ATR entry another shard learnt, to be recorded here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtrLearn {
    /// The reply direction's 5-tuple (peer → us).
    pub reply: FiveTuple,
    /// Its RSS hash.
    pub hash: u32,
    /// The shard that opened the connection.
    pub shard: u16,
}

impl SwSteer {
    /// Steering by `rules`, with an ATR table when `atr`.
    pub fn new(rules: RuleSet, atr: bool) -> Self {
        SwSteer {
            rule_hits: vec![0; rules.len()],
            rules,
            atr: if atr {
                vec![None; ATR_SLOTS]
            } else {
                Vec::new()
            },
            atr_entries: 0,
            counters: SteerCounters::default(),
        }
    }

    /// Whether ATR is on.
    pub fn atr(&self) -> bool {
        !self.atr.is_empty()
    }

    /// The rules, in order.
    pub fn rules(&self) -> &RuleSet {
        &self.rules
    }

    /// Frames each rule matched on this shard, in the rules' order.
    pub fn rule_hits(&self) -> &[u64] {
        &self.rule_hits
    }

    /// The counters.
    pub fn counters(&self) -> SteerCounters {
        self.counters
    }

    /// Where a polled frame goes: `Some(shard)` decided by ATR or a rule, `None` for the
    /// software RETA; `Err(())` when a rule drops it.
    #[allow(clippy::result_unit_err)]
    pub fn decide(&mut self, frame: &[u8], hash: Option<u32>) -> Result<Option<u16>, ()> {
        let atr_slot = hash.and_then(|h| self.atr_slot_for(h));
        if atr_slot.is_none() && self.rules.is_empty() {
            return Ok(None);
        }
        let Ok(Some(fields)) = FlowFields::from_frame(frame) else {
            return Ok(None);
        };
        if let Some(e) = atr_slot.and_then(|i| self.atr.get(i).copied().flatten()) {
            if fields.five_tuple() == Some(e.reply) {
                self.counters.atr_hits += 1;
                return Ok(Some(e.shard));
            }
        }
        let Some((i, action)) = self.rules.first_match(&fields) else {
            return Ok(None);
        };
        if let Some(n) = self.rule_hits.get_mut(i) {
            *n += 1;
        }
        match action {
            RuleAction::Queue(q) => Ok(Some(q)),
            RuleAction::Drop => {
                self.counters.rule_drops += 1;
                Err(())
            }
        }
    }

    /// The slot holding an entry with `hash`, if any.
    fn atr_slot_for(&self, hash: u32) -> Option<usize> {
        if self.atr_entries == 0 {
            return None;
        }
        let i = hash as usize & (ATR_SLOTS - 1);
        self.atr
            .get(i)
            .and_then(|s| s.as_ref())
            .filter(|e| e.hash == hash)
            .map(|_| i)
    }

    /// Forgets the entries whose hash falls in RETA entry `bucket` of a table of
    /// `reta_entries` (a power of two): the bucket moved, and the RETA names its owner.
    pub fn forget_bucket(&mut self, reta_entries: usize, bucket: u16) {
        let mask = reta_entries.wrapping_sub(1);
        for slot in &mut self.atr {
            if slot.is_some_and(|e| e.hash as usize & mask == usize::from(bucket)) {
                *slot = None;
                self.atr_entries -= 1;
                self.counters.atr_forgotten += 1;
            }
        }
    }

    /// A transmitted frame: when it is an active open (TCP SYN without ACK), the entry for
    /// its reply direction, owned by `shard`, hashed with `steering`'s hasher and hash types
    /// (the ones the receive side uses). Records it here too.
    pub fn learn_tx(&mut self, frame: &[u8], shard: u16, steering: &Steering) -> Option<AtrLearn> {
        if !self.atr() {
            return None;
        }
        let reply = active_open_reply(frame)?;
        let (_, input) = reply.hash_input(steering.hash_types)?;
        let learn = AtrLearn {
            reply: reply.five_tuple()?,
            hash: steering.hasher.hash(&input),
            shard,
        };
        self.record(learn);
        Some(learn)
    }

    /// Records an entry (learnt here or told by another shard).
    pub fn record(&mut self, l: AtrLearn) {
        let i = l.hash as usize & (ATR_SLOTS - 1);
        let Some(slot) = self.atr.get_mut(i) else {
            return;
        };
        match slot {
            Some(old) if old.reply != l.reply => self.counters.atr_replaced += 1,
            Some(_) => {}
            None => self.atr_entries += 1,
        }
        *slot = Some(AtrEntry {
            hash: l.hash,
            reply: l.reply,
            shard: l.shard,
        });
        self.counters.atr_learned += 1;
    }
}

/// The reply direction's flow fields when `frame` is a TCP SYN without ACK.
fn active_open_reply(frame: &[u8]) -> Option<FlowFields> {
    let walk = rss::EthernetWalk::parse(frame).ok()??;
    let l3 = frame.get(walk.l3_offset..)?;
    let (fields, l4) = match walk.ethertype {
        0x0800 => {
            let ip = Ipv4Packet::new_checked(l3).ok()?;
            (FlowFields::from_ipv4(&ip).ok()?, ip.header_len())
        }
        0x86dd => {
            let ip = Ipv6Packet::new_checked(l3).ok()?;
            // Only a TCP header right after the fixed header: an active open we build has
            // no extension headers.
            if ip.next_header().0 != PROTO_TCP {
                return None;
            }
            (FlowFields::from_ipv6(&ip).ok()?, 40)
        }
        _ => return None,
    };
    if fields.protocol != PROTO_TCP || fields.is_fragment {
        return None;
    }
    // TCP flags: byte 13 of the header; SYN 0x02, ACK 0x10.
    let flags = *l3.get(l4 + 13)?;
    if flags & 0x12 != 0x02 {
        return None;
    }
    let ports = fields.ports?;
    Some(FlowFields {
        addrs: match fields.addrs {
            IpPair::V4(s, d) => IpPair::V4(d, s),
            IpPair::V6(s, d) => IpPair::V6(d, s),
        },
        protocol: fields.protocol,
        ports: Some(rss::PortPair {
            src: ports.dst,
            dst: ports.src,
        }),
        is_fragment: false,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{IpAddr, Ipv4Addr};

    /// An Ethernet/IPv4/TCP frame `src:sport → dst:dport` with `flags` and no payload
    /// (checksums zero: steering does not verify them).
    fn tcp4(src: [u8; 4], sport: u16, dst: [u8; 4], dport: u16, flags: u8) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20];
        f[12..14].copy_from_slice(&[0x08, 0x00]);
        let ip = &mut f[14..34];
        ip[0] = 0x45;
        ip[2..4].copy_from_slice(&40u16.to_be_bytes());
        ip[8] = 64;
        ip[9] = PROTO_TCP;
        ip[12..16].copy_from_slice(&src);
        ip[16..20].copy_from_slice(&dst);
        let tcp = &mut f[34..54];
        tcp[0..2].copy_from_slice(&sport.to_be_bytes());
        tcp[2..4].copy_from_slice(&dport.to_be_bytes());
        tcp[12] = 5 << 4;
        tcp[13] = flags;
        f
    }

    const SYN: u8 = 0x02;
    const SYN_ACK: u8 = 0x12;
    const ACK: u8 = 0x10;

    fn hash_of(frame: &[u8], steering: &Steering) -> u32 {
        let fields = FlowFields::from_frame(frame).expect("ok").expect("ip");
        let (_, input) = fields.hash_input(steering.hash_types).expect("hashed");
        steering.hasher.hash(&input)
    }

    #[test]
    fn an_active_open_claims_its_replies_and_only_those() {
        let steering = Steering::default();
        let mut s = SwSteer::new(RuleSet::default(), true);
        let syn = tcp4([10, 0, 0, 2], 40_000, [10, 0, 0, 1], 80, SYN);
        let l = s
            .learn_tx(&syn, 3, &steering)
            .expect("a SYN is an active open");
        assert_eq!(l.shard, 3);
        assert_eq!(l.reply.src, IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)));
        assert_eq!((l.reply.src_port, l.reply.dst_port), (80, 40_000));
        // A SYN-ACK (passive open) or a plain segment claims nothing.
        let synack = tcp4([10, 0, 0, 2], 80, [10, 0, 0, 1], 40_001, SYN_ACK);
        assert_eq!(s.learn_tx(&synack, 3, &steering), None);
        assert_eq!(
            s.learn_tx(&tcp4([10, 0, 0, 2], 1, [10, 0, 0, 1], 2, ACK), 3, &steering),
            None
        );
        // The reply is steered to the opener, with its hash; another flow is not.
        let reply = tcp4([10, 0, 0, 1], 80, [10, 0, 0, 2], 40_000, SYN_ACK);
        assert_eq!(l.hash, hash_of(&reply, &steering));
        assert_eq!(s.decide(&reply, Some(l.hash)), Ok(Some(3)));
        let other = tcp4([10, 0, 0, 1], 80, [10, 0, 0, 2], 40_002, ACK);
        let h = hash_of(&other, &steering);
        assert_eq!(s.decide(&other, Some(h)), Ok(None));
        // A frame carrying the entry's hash but another 5-tuple is not steered by it.
        assert_eq!(s.decide(&other, Some(l.hash)), Ok(None));
        assert_eq!(s.counters().atr_hits, 1);
    }

    #[test]
    fn a_new_entry_replaces_its_slot_and_counts_it() {
        let mut s = SwSteer::new(RuleSet::default(), true);
        let tuple = |p| FiveTuple {
            protocol: PROTO_TCP,
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            src_port: 80,
            dst_port: p,
        };
        let hash = 0x1234_0007;
        s.record(AtrLearn {
            reply: tuple(1),
            hash,
            shard: 0,
        });
        s.record(AtrLearn {
            reply: tuple(1),
            hash,
            shard: 1,
        });
        assert_eq!(s.counters().atr_replaced, 0, "the same flow re-pointed");
        // Same slot (low bits), another flow: replaces it.
        s.record(AtrLearn {
            reply: tuple(2),
            hash: hash + ATR_SLOTS as u32,
            shard: 1,
        });
        assert_eq!(
            (s.counters().atr_learned, s.counters().atr_replaced),
            (3, 1)
        );
    }

    #[test]
    fn a_moved_bucket_forgets_its_entries_only() {
        let mut s = SwSteer::new(RuleSet::default(), true);
        let tuple = FiveTuple {
            protocol: PROTO_TCP,
            src: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 1)),
            dst: IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)),
            src_port: 80,
            dst_port: 1,
        };
        // Buckets of a 128-entry RETA: hash & 127.
        s.record(AtrLearn {
            reply: tuple,
            hash: 0x0500 + 5,
            shard: 1,
        });
        s.record(AtrLearn {
            reply: FiveTuple {
                dst_port: 2,
                ..tuple
            },
            hash: 0x0600 + 6,
            shard: 1,
        });
        s.forget_bucket(128, 5);
        assert_eq!(s.counters().atr_forgotten, 1);
        assert_eq!(s.atr_slot_for(0x0505), None);
        assert!(s.atr_slot_for(0x0606).is_some());
    }

    #[test]
    fn rules_apply_without_atr_and_a_drop_is_counted() {
        let rules = RuleSet::new(vec![
            "proto tcp dst-port 22 drop".parse().expect("rule"),
            "proto tcp dst-port 80 queue 1".parse().expect("rule"),
        ])
        .expect("bounded");
        let mut s = SwSteer::new(rules, false);
        assert!(!s.atr());
        let f = |dport| tcp4([10, 0, 0, 9], 5000, [10, 0, 0, 2], dport, ACK);
        assert_eq!(s.decide(&f(22), Some(1)), Err(()));
        assert_eq!(s.decide(&f(80), Some(1)), Ok(Some(1)));
        assert_eq!(s.decide(&f(81), Some(1)), Ok(None));
        assert_eq!(s.rule_hits(), &[1, 1]);
        assert_eq!(s.counters().rule_drops, 1);
        // Without ATR a SYN learns nothing.
        let syn = tcp4([10, 0, 0, 2], 40_000, [10, 0, 0, 1], 80, SYN);
        assert_eq!(s.learn_tx(&syn, 0, &Steering::default()), None);
    }
}
