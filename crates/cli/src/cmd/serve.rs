//! `rsstack serve echo|discard|http`: a server on a live host (TAP, AF_PACKET, AF_XDP or a
//! pcap replay). Prints one `listening on …` line once every shard's listener exists, runs
//! until SIGINT/SIGTERM (or `--duration`), then prints a summary of `key: value` lines.
//! With `--offload` an offload engine runs beside the shards on a thread of its own (seed
//! 002; `runtime::offload_live`) and the summary ends with its `offload.*` lines.

use std::io::Write;
use std::path::PathBuf;
use std::sync::Arc;

use apps::discard::DiscardServer;
use apps::echo::EchoServer;
use apps::http::{FileSet, HttpServer};
use apps::http_timeouts::HttpTimeouts;
use clap::{Args, ValueEnum};

use super::CliError;
use super::demo_offload::{OffloadArgs, OffloadSummary};
use super::live::{IoArgs, write_host_summary};

/// The application to serve.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ServeApp {
    /// RFC 862: every byte received is sent back (default port 7).
    Echo,
    /// RFC 863: every byte received is thrown away (default port 9).
    Discard,
    /// HTTP/1.1 static files (default port 80).
    Http,
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// What to serve.
    #[arg(value_enum)]
    app: ServeApp,
    /// HTTP: serve every regular file under DIR (URL path = `/` + relative path; `/` serves
    /// index.html). Default: a built-in 1 KiB index.html.
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// TCP port, 1..=65535 (default: echo 7, discard 9, http 80).
    #[arg(long, value_name = "P", value_parser = clap::value_parser!(u16).range(1..))]
    port: Option<u16>,
    /// HTTP: seconds a client has to send a whole request head (nginx
    /// `client_header_timeout`); 0 turns it off. Default 60.
    #[arg(long, value_name = "S")]
    header_timeout: Option<u64>,
    /// HTTP: seconds a kept-alive connection may sit idle (nginx `keepalive_timeout`); 0
    /// turns it off. Default 75.
    #[arg(long, value_name = "S")]
    keepalive_timeout: Option<u64>,
    /// HTTP: seconds without send progress (the client reads nothing) before the
    /// connection is reset (nginx `send_timeout`); 0 turns it off. Default 60.
    #[arg(long, value_name = "S")]
    send_timeout: Option<u64>,
    #[command(flatten)]
    io: IoArgs,
    #[command(flatten)]
    offload: OffloadArgs,
}

/// The HTTP timeouts the options ask for (seconds; 0 = off; absent = nginx's default).
/// Usage error when given for another application or too large to count in nanoseconds.
fn http_timeouts(args: &ServeArgs) -> Result<HttpTimeouts, CliError> {
    let given = [
        ("--header-timeout", args.header_timeout),
        ("--keepalive-timeout", args.keepalive_timeout),
        ("--send-timeout", args.send_timeout),
    ];
    if let Some((name, _)) = given.iter().find(|(_, v)| v.is_some())
        && args.app != ServeApp::Http
    {
        return Err(CliError::Usage(format!(
            "{name} applies to `serve http` only"
        )));
    }
    let to_ns = |name: &str, v: Option<u64>, default: Option<u64>| match v {
        None => Ok(default),
        Some(0) => Ok(None),
        Some(s) if s <= MAX_TIMEOUT_S => Ok(Some(s * 1_000_000_000)),
        Some(_) => Err(CliError::Usage(format!(
            "{name} must be 0..={MAX_TIMEOUT_S} seconds"
        ))),
    };
    let d = HttpTimeouts::default();
    Ok(HttpTimeouts {
        header_ns: to_ns(given[0].0, given[0].1, d.header_ns)?,
        keepalive_ns: to_ns(given[1].0, given[1].1, d.keepalive_ns)?,
        send_ns: to_ns(given[2].0, given[2].1, d.send_ns)?,
    })
}

/// The largest timeout the options take: a year.
const MAX_TIMEOUT_S: u64 = 365 * 24 * 3600;

pub fn run(args: ServeArgs, out: &mut impl Write) -> Result<(), CliError> {
    let mut live = args.io.resolve()?;
    if args.offload.enabled() {
        if live.host.rebalance.is_some() {
            return Err(CliError::Usage(
                "--offload and --rebalance do not go together".into(),
            ));
        }
        if !matches!(
            live.live.io,
            runtime::LiveIo::Tap { .. } | runtime::LiveIo::AfPacket { .. }
        ) {
            return Err(CliError::Usage(
                "--offload needs --tap or --iface with --io af_packet".into(),
            ));
        }
    }
    if let (Some(c), Some(cores)) = (args.offload.engine_core, &live.host.cores) {
        if cores.contains(&c) {
            return Err(CliError::Usage(format!(
                "--engine-core {c} is also a shard's core: the engine runs on a core of its own"
            )));
        }
    }
    live.host.offload = args.offload.settings(None)?;
    let offload_args = &args.offload;
    let port = args.port.unwrap_or(match args.app {
        ServeApp::Echo => 7,
        ServeApp::Discard => 9,
        ServeApp::Http => 80,
    });
    if port == 0 {
        return Err(CliError::Usage("--port must be 1..=65535".into()));
    }
    if args.dir.is_some() && args.app != ServeApp::Http {
        return Err(CliError::Usage("--dir applies to `serve http` only".into()));
    }
    let timeouts = http_timeouts(&args)?;
    let line = live.listening_line(port);
    let ready = |out: &mut dyn Write| -> std::io::Result<()> {
        writeln!(out, "{line}")?;
        out.flush()
    };
    match args.app {
        ServeApp::Echo => {
            let r = live.run(move |_| EchoServer::new(port), false, || ready(&mut *out))?;
            let (mut acc, mut closed, mut bytes) = (0, 0, 0);
            for s in &r.host.shards {
                let st = s.app.stats();
                acc += st.connections_accepted;
                closed += st.connections_closed;
                bytes += st.bytes_echoed;
            }
            writeln!(out, "connections: {acc}")?;
            writeln!(out, "connections_closed: {closed}")?;
            writeln!(out, "bytes: {bytes}")?;
            write_host_summary(out, &r)?;
            if let Some(o) = OffloadSummary::of_live(&r, offload_args) {
                o.write_lines(out)?;
            }
        }
        ServeApp::Discard => {
            let r = live.run(
                move |_| DiscardServer::new(port),
                false,
                || ready(&mut *out),
            )?;
            let (mut acc, mut closed, mut bytes) = (0, 0, 0);
            for s in &r.host.shards {
                let st = s.app.stats();
                acc += st.connections_accepted;
                closed += st.connections_closed;
                bytes += st.bytes_received;
            }
            writeln!(out, "connections: {acc}")?;
            writeln!(out, "connections_closed: {closed}")?;
            writeln!(out, "bytes: {bytes}")?;
            write_host_summary(out, &r)?;
            if let Some(o) = OffloadSummary::of_live(&r, offload_args) {
                o.write_lines(out)?;
            }
        }
        ServeApp::Http => {
            let files = match &args.dir {
                Some(d) => FileSet::from_dir(d)
                    .map_err(|e| CliError::Usage(format!("--dir {}: {e}", d.display())))?,
                None => FileSet::demo(1024),
            };
            let files = Arc::new(files);
            let r = live.run(
                move |_| HttpServer::new(port, files.clone()).with_timeouts(timeouts),
                false,
                || ready(&mut *out),
            )?;
            let (mut acc, mut reqs, mut errs, mut bytes) = (0, 0, 0, 0);
            let (mut t_header, mut t_keepalive, mut t_send) = (0, 0, 0);
            for s in &r.host.shards {
                let st = s.app.stats();
                acc += st.connections_accepted;
                reqs += st.requests;
                errs += st.responses_error;
                bytes += st.body_bytes_sent;
                t_header += st.timeouts_header;
                t_keepalive += st.timeouts_keepalive;
                t_send += st.timeouts_send;
            }
            writeln!(out, "connections: {acc}")?;
            writeln!(out, "requests: {reqs}")?;
            writeln!(out, "responses_error: {errs}")?;
            writeln!(out, "bytes: {bytes}")?;
            writeln!(out, "timeouts_header: {t_header}")?;
            writeln!(out, "timeouts_keepalive: {t_keepalive}")?;
            writeln!(out, "timeouts_send: {t_send}")?;
            write_host_summary(out, &r)?;
            if let Some(o) = OffloadSummary::of_live(&r, offload_args) {
                o.write_lines(out)?;
            }
        }
    }
    Ok(())
}
