//! The forwarding information base: routes (a prefix and what to do with it) interned to
//! next-hop ids, and the two longest-prefix-match tables ([`Lpm4`], [`Lpm6`]) that map
//! addresses to those ids.
use core::fmt;
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use core::str::FromStr;
use std::collections::BTreeMap;

use crate::LpmError;
use crate::lpm4::{self, Lpm4};
use crate::lpm6::{self, Lpm6};

/// An IP prefix: an address and how many of its leading bits are fixed.
///
/// Invariant (kept by [`Prefix::new`] and parsing): `len` ≤ 32 for IPv4, ≤ 128 for IPv6, and
/// the address bits past `len` are zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Prefix {
    addr: IpAddr,
    len: u8,
}

/// Why a prefix or route did not parse or could not be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RouteError {
    /// Not `ADDR/LEN` with a valid address and a length within the family's width.
    BadPrefix,
    /// A gateway of the other family than the prefix.
    FamilyMismatch,
    /// More distinct next hops than a table entry can name.
    TooManyNextHops,
    /// A next hop on a port the forwarder does not have.
    BadPort,
    /// A gateway no connected route reaches.
    GatewayNotConnected,
    /// The table refused it (bounded memory, see [`LpmError`]).
    Table(LpmError),
}

impl fmt::Display for RouteError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RouteError::BadPrefix => f.write_str("bad prefix (ADDR/LEN)"),
            RouteError::FamilyMismatch => f.write_str("gateway and prefix of different families"),
            RouteError::TooManyNextHops => f.write_str("too many distinct next hops"),
            RouteError::BadPort => f.write_str("no such port"),
            RouteError::GatewayNotConnected => f.write_str("gateway not on a connected prefix"),
            RouteError::Table(e) => write!(f, "{e}"),
        }
    }
}

impl core::error::Error for RouteError {}

impl From<LpmError> for RouteError {
    fn from(e: LpmError) -> Self {
        RouteError::Table(e)
    }
}

impl Prefix {
    /// `addr/len` with the host bits cleared; `None` when `len` exceeds the family's width.
    pub fn new(addr: IpAddr, len: u8) -> Option<Prefix> {
        let addr = match addr {
            IpAddr::V4(a) if len <= 32 => {
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & lpm4::mask4(len)))
            }
            IpAddr::V6(a) if len <= 128 => {
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & lpm6::mask6(len)))
            }
            _ => return None,
        };
        Some(Prefix { addr, len })
    }

    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// Leading bits fixed.
    pub fn len(&self) -> u8 {
        self.len
    }

    /// True for `/0`.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True when `addr` lies inside the prefix (false across families).
    pub fn contains(&self, addr: IpAddr) -> bool {
        match (self.addr, addr) {
            (IpAddr::V4(p), IpAddr::V4(a)) => u32::from(a) & lpm4::mask4(self.len) == u32::from(p),
            (IpAddr::V6(p), IpAddr::V6(a)) => {
                u128::from(a) & lpm6::mask6(self.len) == u128::from(p)
            }
            _ => false,
        }
    }
}

impl fmt::Display for Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.len)
    }
}

impl FromStr for Prefix {
    type Err = RouteError;

    /// `10.0.0.0/8`, `2001:db8::/32`; a bare address is a host prefix (/32 or /128).
    fn from_str(s: &str) -> Result<Prefix, RouteError> {
        let (a, l) = match s.split_once('/') {
            Some((a, l)) => (a, Some(l)),
            None => (s, None),
        };
        let addr: IpAddr = a.parse().map_err(|_| RouteError::BadPrefix)?;
        let width = if addr.is_ipv4() { 32 } else { 128 };
        let len = match l {
            Some(l) => l.parse::<u8>().map_err(|_| RouteError::BadPrefix)?,
            None => width,
        };
        Prefix::new(addr, len).ok_or(RouteError::BadPrefix)
    }
}

/// What a route does with a matching packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NextHop {
    /// The router's own address (or a directed broadcast): deliver to the local stack.
    Local,
    /// On the link of `port`: the destination itself is the neighbour to resolve.
    Connected { port: u16 },
    /// Through the router `gateway` on the link of `port`.
    Gateway { port: u16, gateway: IpAddr },
}

/// A route: a prefix and its next hop.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Route {
    pub prefix: Prefix,
    pub next_hop: NextHop,
}

/// Bounds of a [`Fib`]'s lookup structures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FibLimits {
    /// /24s that may hold routes longer than /24 (512 bytes each).
    pub lpm4_tbl8_groups_max: usize,
    /// Nodes of the IPv6 trie (24 bytes each, plus up to 128 bytes of leaves).
    pub lpm6_nodes_max: usize,
}

impl Default for FibLimits {
    /// 4,096 long-route /24s (2 MiB) and 65,536 IPv6 nodes (at most 9.5 MiB).
    fn default() -> Self {
        FibLimits {
            lpm4_tbl8_groups_max: 4096,
            lpm6_nodes_max: 65_536,
        }
    }
}

/// Routes for both families, looked up by longest prefix. Next hops are interned: each
/// distinct [`NextHop`] gets one id, freed when its last route goes.
#[derive(Debug)]
pub struct Fib {
    v4: Lpm4,
    v6: Lpm6,
    /// Id → next hop and how many routes use it. Invariant: `ids[hop]` names this slot.
    hops: Vec<Option<(NextHop, u32)>>,
    ids: BTreeMap<NextHop, u16>,
}

impl Fib {
    pub fn new(limits: FibLimits) -> Fib {
        Fib {
            v4: Lpm4::new(limits.lpm4_tbl8_groups_max),
            v6: Lpm6::new(limits.lpm6_nodes_max),
            hops: Vec::new(),
            ids: BTreeMap::new(),
        }
    }

    /// The IPv4 table (for its figures).
    pub fn lpm4(&self) -> &Lpm4 {
        &self.v4
    }

    /// The IPv6 table (for its figures).
    pub fn lpm6(&self) -> &Lpm6 {
        &self.v6
    }

    /// Bytes of both lookup structures.
    pub fn memory_bytes(&self) -> usize {
        self.v4.memory_bytes() + self.v6.memory_bytes()
    }

    /// Number of routes.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The next hop for `dst` by longest prefix.
    #[inline]
    pub fn lookup_v4(&self, dst: Ipv4Addr) -> Option<NextHop> {
        let id = self.v4.lookup(u32::from(dst))?;
        self.hop(id)
    }

    /// The next hop for `dst` by longest prefix.
    #[inline]
    pub fn lookup_v6(&self, dst: Ipv6Addr) -> Option<NextHop> {
        let id = self.v6.lookup(u128::from(dst))?;
        self.hop(id)
    }

    /// The next hop for `dst` by longest prefix, either family.
    pub fn lookup(&self, dst: IpAddr) -> Option<NextHop> {
        match dst {
            IpAddr::V4(a) => self.lookup_v4(a),
            IpAddr::V6(a) => self.lookup_v6(a),
        }
    }

    #[inline]
    fn hop(&self, id: u16) -> Option<NextHop> {
        self.hops
            .get(usize::from(id))
            .copied()
            .flatten()
            .map(|(h, _)| h)
    }

    /// The next hop of the exact route `prefix`, if present.
    pub fn get(&self, prefix: Prefix) -> Option<NextHop> {
        let id = match prefix.addr {
            IpAddr::V4(a) => self.v4.get(u32::from(a), prefix.len),
            IpAddr::V6(a) => self.v6.get(u128::from(a), prefix.len),
        }?;
        self.hop(id)
    }

    /// Adds or replaces a route; returns the next hop it replaced. Unchanged on error.
    pub fn insert(&mut self, route: Route) -> Result<Option<NextHop>, RouteError> {
        if let NextHop::Gateway { gateway, .. } = route.next_hop
            && gateway.is_ipv4() != route.prefix.addr.is_ipv4()
        {
            return Err(RouteError::FamilyMismatch);
        }
        let id = self.intern(route.next_hop)?;
        let replaced = match route.prefix.addr {
            IpAddr::V4(a) => self.v4.insert(u32::from(a), route.prefix.len, id),
            IpAddr::V6(a) => self.v6.insert(u128::from(a), route.prefix.len, id),
        };
        match replaced {
            Ok(old) => Ok(old.and_then(|old| {
                let hop = self.hop(old);
                self.release(old);
                hop
            })),
            Err(e) => {
                self.release(id);
                Err(e.into())
            }
        }
    }

    /// Removes the route for exactly `prefix`; returns its next hop.
    pub fn remove(&mut self, prefix: Prefix) -> Option<NextHop> {
        let id = match prefix.addr {
            IpAddr::V4(a) => self.v4.remove(u32::from(a), prefix.len),
            IpAddr::V6(a) => self.v6.remove(u128::from(a), prefix.len),
        }?;
        let hop = self.hop(id);
        self.release(id);
        hop
    }

    /// Every route, IPv4 first, shortest prefixes first within a family.
    pub fn routes(&self) -> Vec<Route> {
        let v4 = self.v4.routes().filter_map(|(p, len, id)| {
            Some(Route {
                prefix: Prefix::new(IpAddr::V4(Ipv4Addr::from(p)), len)?,
                next_hop: self.hop(id)?,
            })
        });
        let v6 = self.v6.routes().filter_map(|(p, len, id)| {
            Some(Route {
                prefix: Prefix::new(IpAddr::V6(Ipv6Addr::from(p)), len)?,
                next_hop: self.hop(id)?,
            })
        });
        v4.chain(v6).collect()
    }

    /// The id of `hop`, taking a reference on it (a new id when first seen).
    fn intern(&mut self, hop: NextHop) -> Result<u16, RouteError> {
        if let Some(&id) = self.ids.get(&hop) {
            if let Some(Some((_, refs))) = self.hops.get_mut(usize::from(id)) {
                *refs += 1;
            }
            return Ok(id);
        }
        let id = match self.hops.iter().position(Option::is_none) {
            Some(i) => i,
            None => {
                self.hops.push(None);
                self.hops.len() - 1
            }
        };
        let id16 = u16::try_from(id)
            .ok()
            .filter(|&i| i <= lpm4::NEXT_HOP_ID_MAX)
            .ok_or(RouteError::TooManyNextHops)?;
        self.hops[id] = Some((hop, 1));
        self.ids.insert(hop, id16);
        Ok(id16)
    }

    /// Drops one reference on `id`; frees it with its last.
    fn release(&mut self, id: u16) {
        let Some(slot) = self.hops.get_mut(usize::from(id)) else {
            return;
        };
        if let Some((hop, refs)) = slot {
            *refs -= 1;
            if *refs == 0 {
                self.ids.remove(hop);
                *slot = None;
            }
        }
    }
}
