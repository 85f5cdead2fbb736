//! The per-event checker of the two-host workloads (`bulk`, `bulk-both`, `rr`, `many`,
//! `handoff`): after every event, each application's violation (a wrong byte, a reset, an
//! early end) and each stack's table bounds (sockets, TIME-WAIT records, reassembly); after
//! every `walk_every_events`-th event, every connection's TCB invariants
//! (`Stack::tcp_invariant_violation`).
//!
//! The TCB invariants cost a walk over every socket: the soak walks after every
//! [`super::INVARIANT_WALK_EVERY_EVENTS`]th event (a broken invariant that lasts — the kind
//! that stalls a connection — is still caught within that many events; a walk after every
//! event tripled the soak's time). The checker only reads: the trace is the same whatever
//! the interval.

use core::cell::Cell;

use stack::Stack;

use super::{Client, Server};
use crate::net::ShardedHost;
use crate::{HostId, World};

/// The checker of one run: the two hosts and how often to walk the TCBs.
pub(super) struct Checker {
    client: HostId,
    server: HostId,
    /// Walk the TCBs after event `k` when `k % walk_every_events == 0` (counting from 0).
    walk_every_events: u64,
    /// Events checked so far.
    checks: Cell<u64>,
}

impl Checker {
    pub(super) fn new(client: HostId, server: HostId, walk_every_events: u64) -> Self {
        Checker {
            client,
            server,
            walk_every_events: walk_every_events.max(1),
            checks: Cell::new(0),
        }
    }

    /// Checks the world after one event; `Err` names the first violation.
    pub(super) fn check(&self, w: &World) -> Result<(), String> {
        let walk_tcbs = self.checks.get() % self.walk_every_events == 0;
        self.checks.set(self.checks.get() + 1);
        for (id, stack, violation) in host_views(w, self.client, self.server)? {
            if let Some(v) = violation {
                return Err(v.clone());
            }
            let limits = &stack.config().limits;
            // TIME-WAIT records hold no socket slot; they have their own bound.
            let tw = stack.tcp_time_wait_count();
            if stack.tcp_connection_count() - tw > limits.sockets_max {
                return Err(format!(
                    "{id}: {} connections exceed the socket cap",
                    stack.tcp_connection_count() - tw
                ));
            }
            if tw > limits.tcp_time_wait_max {
                return Err(format!("{id}: {tw} TIME-WAIT records exceed their cap"));
            }
            if stack.reassembly_in_progress() > limits.reasm_datagrams_max {
                return Err(format!("{id}: reassembly table over its cap"));
            }
            if let Some((tuple, v)) = walk_tcbs.then(|| stack.tcp_invariant_violation()).flatten() {
                return Err(format!(
                    "{id}: connection {tuple:?} breaks a TCB invariant: {v}"
                ));
            }
        }
        Ok(())
    }
}

/// One shard as the checker sees it: its host, its stack, its application's violation.
type ShardView<'a> = (HostId, &'a Stack, Option<&'a String>);

/// Every shard's stack and application violation of the client and the server hosts, in
/// order (client shards first). An iterator, not a collection: the checker runs after every
/// event and allocates nothing.
fn host_views(
    w: &World,
    client: HostId,
    server: HostId,
) -> Result<impl Iterator<Item = ShardView<'_>>, String> {
    let c = w
        .host::<ShardedHost<Client>>(client)
        .ok_or("client host missing")?;
    let s = w
        .host::<ShardedHost<Server>>(server)
        .ok_or("server host missing")?;
    let clients = c
        .shards()
        .iter()
        .map(move |sh| (client, sh.stack(), sh.app().violation.as_ref()));
    let servers = s
        .shards()
        .iter()
        .map(move |sh| (server, sh.stack(), sh.app().violation.as_ref()));
    Ok(clients.chain(servers))
}
