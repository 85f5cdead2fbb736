//! `%{ … }%` blocks: at the block's time, the executor takes a `tcp_info` snapshot of the
//! socket under test from the stack ([`stack::Stack::tcp_info`]) and evaluates the block's
//! Python with [`crate::pycode`], binding each `tcpi_*` name to its field in Linux's units.
//!
//! The socket under test is packetdrill's: the one the latest `socket()` or `accept()`
//! returned. A field the stack does not provide, or does not track on this connection, makes
//! the block [`CodeError::Unsupported`] and the script a skip with that reason; a false
//! assertion fails the script at the block's line.

use super::*;
use crate::pycode::{self, CodeError, Lookup, Names};

/// What the `tcpi_*` names read: a connection's snapshot, a listener (only `tcpi_state`), or
/// nothing (no socket under test, or it was closed).
pub(super) enum InfoSource {
    Conn(tcp::TcpInfo),
    Listener,
    None(&'static str),
}

/// The value of `tcpi_<field>` in `i`: `Ok(None)` for a field tracked only on some
/// connections and not on this one, `Err(())` for a field the stack does not provide.
fn field(i: &tcp::TcpInfo, field: &str) -> Result<Option<i64>, ()> {
    let v = |x: u32| Some(i64::from(x));
    let b = |x: u8| Some(i64::from(x));
    let o = |x: Option<u32>| x.map(i64::from);
    let w = |x: u64| Some(i64::try_from(x).unwrap_or(i64::MAX));
    Ok(match field {
        "state" => b(i.state),
        "ca_state" => b(i.ca_state),
        "retransmits" => b(i.retransmits),
        "probes" => b(i.probes),
        "backoff" => b(i.backoff),
        "options" => b(i.options),
        "snd_wscale" => b(i.snd_wscale),
        "rcv_wscale" => b(i.rcv_wscale),
        "rto" => v(i.rto_us),
        "ato" => v(i.ato_us),
        "snd_mss" => v(i.snd_mss),
        "rcv_mss" => v(i.rcv_mss),
        "unacked" => v(i.unacked),
        "sacked" => o(i.sacked),
        "lost" => o(i.lost),
        "retrans" => o(i.retrans),
        "fackets" => v(i.fackets),
        "last_data_sent" => v(i.last_data_sent_ms),
        "rtt" => v(i.rtt_us),
        "rttvar" => v(i.rttvar_us),
        "snd_ssthresh" => v(i.snd_ssthresh),
        "snd_cwnd" => v(i.snd_cwnd),
        "advmss" => v(i.advmss),
        "total_retrans" => v(i.total_retrans),
        "bytes_acked" => w(i.bytes_acked),
        "bytes_received" => w(i.bytes_received),
        "bytes_sent" => w(i.bytes_sent),
        "bytes_retrans" => w(i.bytes_retrans),
        "segs_out" => v(i.segs_out),
        "segs_in" => v(i.segs_in),
        "notsent_bytes" => v(i.notsent_bytes),
        "min_rtt" => o(i.min_rtt_us),
        "snd_wnd" => v(i.snd_wnd),
        "rcv_wnd" => v(i.rcv_wnd),
        "dsack_dups" => v(i.dsack_dups),
        "reordering" => v(i.reordering),
        "reord_seen" => v(i.reord_seen),
        "delivered" => v(i.delivered),
        "delivered_ce" => v(i.delivered_ce),
        "data_segs_in" => v(i.data_segs_in),
        "data_segs_out" => v(i.data_segs_out),
        "last_data_recv" => v(i.last_data_recv_ms),
        "busy_time" => w(i.busy_time_us),
        "rwnd_limited" => w(i.rwnd_limited_us),
        "sndbuf_limited" => w(i.sndbuf_limited_us),
        _ => return Err(()),
    })
}

impl Names for InfoSource {
    fn lookup(&self, name: &str) -> Lookup {
        let Some(f) = name.strip_prefix("tcpi_") else {
            return Lookup::NotMine;
        };
        match self {
            InfoSource::None(why) => Lookup::Unavailable(format!("{name}: {why}")),
            InfoSource::Listener if f == "state" => Lookup::Value(10),
            InfoSource::Listener => Lookup::Unavailable(format!(
                "{name} of a listening socket is not provided by the stack"
            )),
            InfoSource::Conn(i) => match field(i, f) {
                Ok(Some(v)) => Lookup::Value(v),
                Ok(None) => Lookup::Unavailable(format!(
                    "tcp_info field {name} is not tracked on this connection (needs SACK)"
                )),
                Err(()) => Lookup::Unavailable(format!(
                    "tcp_info field {name} is not provided by the stack"
                )),
            },
        }
    }
}

impl Exec {
    /// The `tcp_info` of the socket under test now.
    pub(super) fn info_source(&self) -> InfoSource {
        let Some(fd) = self.under_test.and_then(|n| self.fds.get(&n)) else {
            return InfoSource::None("no open socket under test");
        };
        match fd.kind {
            FdKind::Fresh => InfoSource::None("the socket under test is not connected"),
            FdKind::Listener(_) => InfoSource::Listener,
            FdKind::Conn(h) => match self.stack.tcp_info(self.now_ns, h) {
                Ok(i) => InfoSource::Conn(i),
                Err(_) => InfoSource::None("the socket under test has no connection"),
            },
        }
    }

    /// A `%{ }%` block at its time: evaluated against the socket under test's `tcp_info`.
    pub(super) fn code(
        &mut self,
        event: &Event,
        code: &str,
        window: Option<Window>,
    ) -> Result<(), Stop> {
        let at = self.act_at(event, window)?;
        let info = self.info_source();
        let (counts, result) = pycode::run_block(code, &mut self.env, &info);
        self.assertions_checked += counts.checked;
        self.assertions_passed += counts.passed;
        match result {
            Ok(()) => {}
            Err(CodeError::Failed { assertion, message }) => {
                self.assertions_failed += 1;
                return fail(
                    event.pos,
                    format!("%{{ }}% `{assertion}` failed: {message}"),
                );
            }
            Err(CodeError::Unsupported(why)) => {
                self.assertions_skipped +=
                    pycode::assertions_in_block(code).saturating_sub(counts.checked);
                return skip(format!("%{{ }}% block not evaluated: {why}"));
            }
        }
        self.cursor.advance(&event.time, at);
        Ok(())
    }
}
