//! The cost of moving a live connection between two stacks (DESIGN "Handoff protocol"): the
//! shard-side floor of a migration, without threads or rings.
//!
//! A client stack and a server stack exchange data until the server's connection holds
//! `unread_bytes` received and not read and `unsent_bytes` queued and not sent; then the
//! connection moves back and forth between two server stacks of the same address, `moves`
//! times: export on the owner (`Stack::tcp_export`, which flushes owed output and leaves a
//! moved marker), import on the other (`Stack::tcp_import`, taking its own marker's slot on the
//! way back). [`move_loop`] is what callgrind counts (`--toggle-collect`).

use core::net::{IpAddr, SocketAddr};
use std::time::Instant;

use stack::{FourTuple, RxMeta, SocketHandle, Stack};

use crate::bulk::{BulkError, CLIENT_IP, CLIENT_MAC, SERVER_IP, SERVER_MAC, stack_config};

/// Port the server listens on.
pub const MOVE_PORT: u16 = 8081;

/// What to run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MoveOptions {
    pub moves: u32,
    /// Bytes the server has received and not read when the moves start.
    pub unread_bytes: usize,
    /// Bytes the server has queued and not sent when the moves start.
    pub unsent_bytes: usize,
}

/// What a run measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveReport {
    pub moves: u32,
    /// Wall time of the loop alone.
    pub wall_ns: u64,
}

/// The world: the client, the two server stacks, and the connection's current owner.
pub struct MoveWorld {
    client: Stack,
    servers: [Stack; 2],
    owner: usize,
    handle: SocketHandle,
    now: u64,
}

fn exchange(client: &mut Stack, server: &mut Stack, now: u64) {
    loop {
        let mut moved = false;
        while let Some(f) = client.poll_transmit(now) {
            moved = true;
            server.receive(now, &f, &RxMeta::NONE);
            client.recycle(f);
        }
        while let Some(f) = server.poll_transmit(now) {
            moved = true;
            client.receive(now, &f, &RxMeta::NONE);
            server.recycle(f);
        }
        if !moved {
            return;
        }
    }
}

impl MoveWorld {
    /// An established connection with the data `opts` asks for, on server 0.
    pub fn new(opts: &MoveOptions) -> Result<MoveWorld, BulkError> {
        let client_cfg = stack_config(CLIENT_MAC, CLIENT_IP, false);
        let server_cfg = stack_config(SERVER_MAC, SERVER_IP, false);
        let mut client = Stack::new(client_cfg);
        let mut servers = [Stack::new(server_cfg.clone()), Stack::new(server_cfg)];
        let addr = SocketAddr::new(IpAddr::V4(SERVER_IP), MOVE_PORT);
        let listener = servers[0]
            .tcp_listen(addr, 4)
            .map_err(|e| BulkError::Socket("listen", e))?;
        let now = 1_000;
        let c = client
            .tcp_connect(now, addr, 0)
            .map_err(|e| BulkError::Socket("connect", e))?;
        exchange(&mut client, &mut servers[0], now);
        let (handle, _) = servers[0]
            .tcp_accept(listener)
            .map_err(|e| BulkError::Socket("accept", e))?;
        let data = vec![b'm'; opts.unread_bytes.max(opts.unsent_bytes)];
        let mut sent = 0;
        while sent < opts.unread_bytes {
            sent += client
                .tcp_send(c, &data[sent..opts.unread_bytes])
                .map_err(|e| BulkError::Socket("send", e))?;
            exchange(&mut client, &mut servers[0], now);
        }
        // Queued, not sent: the peer's window is closed by the unread bytes or the data waits
        // behind the transmit step the exchange below does not run.
        let _ = servers[0].tcp_send(handle, &data[..opts.unsent_bytes]);
        Ok(MoveWorld {
            client,
            servers,
            owner: 0,
            handle,
            now,
        })
    }
}

/// The measured part: `opts.moves` moves, alternating between the two server stacks. Never
/// inlined: the callgrind script selects exactly this function.
#[inline(never)]
pub fn move_loop(w: &mut MoveWorld, opts: &MoveOptions) -> Result<MoveReport, BulkError> {
    let start = Instant::now();
    for _ in 0..opts.moves {
        w.now += 1_000;
        let (a, b) = w.servers.split_at_mut(1);
        let (from, to) = if w.owner == 0 {
            (&mut a[0], &mut b[0])
        } else {
            (&mut b[0], &mut a[0])
        };
        let (tuple, snapshot): (FourTuple, _) = from
            .tcp_export(w.now, w.handle)
            .map_err(|e| BulkError::Socket("export", e))?;
        // Whatever the export flushed goes to the peer (and its answer back to the old owner,
        // whose marker holds it) before the move completes, as a shard would send it.
        while let Some(f) = from.poll_transmit(w.now) {
            w.client.receive(w.now, &f, &RxMeta::NONE);
            from.recycle(f);
        }
        w.handle = to
            .tcp_import(w.now, tuple, &snapshot)
            .map_err(|e| BulkError::Socket("import", e))?;
        w.owner ^= 1;
    }
    Ok(MoveReport {
        moves: opts.moves,
        wall_ns: u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX),
    })
}

/// Builds the world and runs the loop.
pub fn run(opts: MoveOptions) -> Result<MoveReport, BulkError> {
    let mut w = MoveWorld::new(&opts)?;
    let r = move_loop(&mut w, &opts)?;
    // The connection still works after all those moves: the client's data is all there.
    let mut buf = vec![0u8; opts.unread_bytes + 1];
    let owner = &mut w.servers[w.owner];
    let n = owner.tcp_recv(w.handle, &mut buf).unwrap_or(0);
    if n != opts.unread_bytes {
        return Err(BulkError::Stalled {
            received_bytes: n as u64,
        });
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_connection_survives_a_thousand_moves_with_its_data() {
        let opts = MoveOptions {
            moves: 1_000,
            unread_bytes: 8 * 1024,
            unsent_bytes: 4 * 1024,
        };
        let r = run(opts).expect("moves");
        assert_eq!(r.moves, 1_000);
    }
}
