//! One connection's state asked for all at once (issue 17: memory-level parallelism inside
//! one frame or one application call).
//!
//! With many connections, a connection's state is cold when a segment or an application
//! call reaches it: the socket slot, the TCB's lines (a request/response exchange touches 11
//! of its 12), the timer-wheel node, and the ring storage the data is copied to or from.
//! Touched in program order, over the ~3,000 instructions one end spends on an exchange,
//! these misses are paid one after another: the CPU's out-of-order window cannot reach the
//! next one while it waits for the last. The receive look-ahead
//! (`stack::rx_lookahead`) overlaps them across the frames of a burst; with one frame in
//! flight there is nothing to run ahead of. Here, as soon as a path knows which connection
//! it works on (TCP input right after the lookup found the slot, `tcp_send` and
//! `tcp_recv` from the handle, the timers before a due connection runs), every line it will
//! touch is asked for at once (the TCB's lines, 12 today, the node, the table entry, two
//! per ring), so the
//! misses overlap each other instead:
//!
//! - every line of the TCB (the pointer is in the slot's first line, which the caller has
//!   just read or is about to);
//! - the connection's timer-wheel node (indexed by the slot: no dependency);
//! - the connection-table entry its segments are looked up at (the hash is in the slot's
//!   second line): after a send, the answer's lookup finds it cached;
//! - the line each ring's next write stores to and the one after it (`tcp::Connection::
//!   ring_tail_addrs`: the ring headers are in the TCB, so these wait for that line, and are
//!   issued last, once the independent requests are out). The send ring's tail is where the
//!   application's next `send` copies to; the receive ring's where the next in-order text
//!   lands and the next `recv` reads.
//!
//! The slot last asked for is remembered (`TcpTable::warm_slot`): the calls that follow on
//! the same connection (the reads and the answer after a segment, the input after a send)
//! find its state cached and ask for nothing, so at one connection the cost is a compare per
//! call. Hints only (`platform::prefetch`, which never faults): nothing here changes what the
//! stack computes (`crates/stack/tests/tcp_prefetch.rs` runs the same traffic with and
//! without and compares everything observable); `Stack::set_tcp_prefetch(false)` turns it
//! off for those comparisons and for the benchmark's side-by-side figures.

use platform::prefetch::{CACHE_LINE_BYTES, prefetch_line};

use crate::socket::SocketHandle;
use crate::sockets::{Socket, Sockets};
use crate::stack::Stack;
use crate::tcp_input::TcpCx;
use crate::tcp_sockets::{TcpState, TcpTable};

/// Cache lines of a TCB (`tcp::Connection`, 64-byte aligned), all asked for.
const TCB_LINES: usize = core::mem::size_of::<tcp::Connection>().div_ceil(CACHE_LINE_BYTES);

impl Stack {
    /// Whether TCP input, `tcp_send`, `tcp_recv` and the timers ask for a connection's state
    /// all at once when they first reach it (on by default). What the stack computes is the
    /// same either way (hints only); off is the reference tests and benchmarks compare with.
    #[doc(hidden)]
    pub fn set_tcp_prefetch(&mut self, on: bool) {
        let cx = self.tcp_cx();
        cx.tcp.prefetch = on;
        cx.tcp.warm_slot = usize::MAX;
    }
}

impl TcpCx<'_> {
    /// Asks for connection `i`'s state (module docs), unless it was the last one asked for
    /// or prefetching is off. Nothing for a slot that holds no connection.
    #[inline(always)]
    pub(crate) fn prefetch_conn(&mut self, i: usize) {
        if self.tcp.warm_slot == i || !self.tcp.prefetch {
            return;
        }
        self.tcp.warm_slot = i;
        prefetch_conn_state(self.tcp, self.sockets, i);
    }

    /// [`TcpCx::prefetch_conn`] for the slot `h` names (its generation is not checked: a
    /// stale handle costs a wasted hint, and the call itself then reports the error).
    #[inline(always)]
    pub(crate) fn prefetch_handle(&mut self, h: SocketHandle) {
        self.prefetch_conn(h.index as usize);
    }

    /// The timers' form: asks for the state of `i`, the connection the timers run after the
    /// current one, while the current one runs (`warm_slot` is left alone: the connection
    /// the timers run next is not the one an application call reaches next).
    #[inline(always)]
    pub(crate) fn prefetch_next_due(&self, i: Option<usize>) {
        if let Some(i) = i
            && self.tcp.prefetch
        {
            prefetch_conn_state(self.tcp, self.sockets, i);
        }
    }
}

/// The requests themselves (module docs): out of line, so the paths that call
/// [`TcpCx::prefetch_conn`] grow by a compare and a call only.
#[inline(never)]
fn prefetch_conn_state(tcp: &TcpTable, sockets: &Sockets, i: usize) {
    let Some(Socket::Tcp(TcpState::Conn(c))) = sockets.get(i) else {
        return;
    };
    let tcb: *const u8 = (&*c.conn as *const tcp::Connection).cast();
    // A constant count: unrolled into the prefetch instructions alone.
    for k in 0..TCB_LINES {
        prefetch_line(tcb.wrapping_add(k * CACHE_LINE_BYTES));
    }
    tcp.timers.prefetch_node(i);
    // The table entry a segment for it will be looked up at (the hash is in the slot's
    // second line): after a send, the answer's lookup finds it cached.
    tcp.conns.prefetch_home(c.table_hash());
    // Last: these read the ring headers, a TCB line just asked for.
    for a in c.conn.ring_tail_addrs() {
        prefetch_line(a);
        prefetch_line(a.wrapping_add(CACHE_LINE_BYTES - 1));
    }
}
