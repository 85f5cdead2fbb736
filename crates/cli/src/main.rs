//! `rsstack`: the command-line front end of the rsstack user-space TCP/IP stack.
//!
//! Every subcommand validates its arguments up front, each number against its real limit
//! (named in the message), and refuses sizes that would exhaust memory before allocating.
//! Bad input (an unparsable address, a key that is not 40 bytes of hex, zero queues, 1000
//! queues for a 128-entry table, an unreadable capture…) and an environment that cannot run
//! the command (a missing interface, no permission) print exactly one sentence on stderr and
//! exit with status 2; a run that started and failed exits with status 1; `--help` and
//! `--version` print to stdout and exit 0.
#![deny(unsafe_code)]

mod cmd;
mod endpoint;

use std::io::Write;
use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// A user-space TCP/IP stack that spreads network work over per-core shards with
/// Receive-Side Scaling.
#[derive(Debug, Parser)]
#[command(name = "rsstack", version, about, propagate_version = true)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// The embedded default: an HTTP/1.1 server on S shards and a load client over an
    /// in-memory wire, on real threads (no root, no network).
    Demo(cmd::demo::DemoArgs),
    /// Receive-Side Scaling: Toeplitz hash, indirection table, spread of flows over queues.
    #[command(subcommand)]
    Rss(cmd::rss::RssCommand),
    /// The deterministic network simulator: soak tests of the real stack over many seeds.
    #[command(subcommand)]
    Sim(cmd::sim::SimCommand),
    /// Run packetdrill scripts against the stack: one line per script and a summary.
    Conformance(cmd::conformance::ConformanceArgs),
    /// Serve echo, discard or HTTP/1.1 on a live interface (TAP, AF_PACKET, AF_XDP) or a
    /// pcap replay.
    Serve(cmd::serve::ServeArgs),
    /// Bulk TCP transfer in the manner of NTttcp: a receiver and a sender with a report.
    #[command(subcommand)]
    Ttcp(cmd::ttcp::TtcpCommand),
    /// Fetch one URL with HTTP/1.1 GET from a live interface.
    Get(cmd::get::GetArgs),
    /// The machine's topology (nodes, cores, SMT siblings, caches, distances), an interface's
    /// locality and the placement plan of a policy.
    Topo(cmd::topo::TopoArgs),
    /// Tune the Linux kernel's own stack for a placement policy: channels, RETA, moderation,
    /// GRO/LRO, IRQ affinity, RPS/XPS, irqbalance. Prints a script; --apply (root) applies it
    /// and saves the previous settings for --revert.
    Tune(cmd::tune::TuneArgs),
    /// An IPv4/IPv6 router between live ports (TAP, AF_PACKET, AF_XDP) or two in-process
    /// hosts (mem): longest-prefix match, TTL, ICMP errors, ARP/ND and ping for itself.
    Forward(cmd::forward::ForwardArgs),
    /// RFC 2544 throughput (binary search for the zero-loss rate) and latency by frame size
    /// through a device under test, on AF_PACKET ports or in process; table, JSON, SVG.
    Rfc2544(cmd::rfc2544::Rfc2544Args),
}

/// Exit status for invalid command-line input (as clap and sysexits' EX_USAGE-style tools use).
const EXIT_USAGE: u8 = 2;

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            use clap::error::ErrorKind;
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp
                    | ErrorKind::DisplayVersion
                    | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
            ) {
                // Help goes to stdout (stderr for the "missing subcommand" form, as clap does).
                let _ = err.print();
                let code = if err.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
                    EXIT_USAGE
                } else {
                    0
                };
                return ExitCode::from(code);
            }
            return usage_error(&first_line(&err.to_string()));
        }
    };
    let mut out = std::io::stdout().lock();
    let result = match cli.command {
        Command::Demo(args) => cmd::demo::run(args, &mut out),
        Command::Rss(cmd) => cmd::rss::run(cmd, &mut out),
        Command::Sim(cmd) => cmd::sim::run_command(cmd, &mut out),
        Command::Conformance(args) => cmd::conformance::run(args, &mut out),
        Command::Serve(args) => cmd::serve::run(args, &mut out),
        Command::Ttcp(cmd) => cmd::ttcp::run(cmd, &mut out),
        Command::Get(args) => cmd::get::run(args, &mut out),
        Command::Topo(args) => cmd::topo::run(args, &mut out),
        Command::Tune(args) => cmd::tune::run(args, &mut out),
        Command::Forward(args) => cmd::forward::run(args, &mut out),
        Command::Rfc2544(args) => cmd::rfc2544::run(args, &mut out),
    };
    match result {
        Ok(()) => {
            let _ = out.flush();
            ExitCode::SUCCESS
        }
        Err(cmd::CliError::Usage(msg)) => usage_error(&msg),
        Err(cmd::CliError::Failed(msg)) => {
            let _ = out.flush();
            eprintln!("rsstack: {msg}");
            ExitCode::FAILURE
        }
        Err(cmd::CliError::Io(err)) if err.kind() == std::io::ErrorKind::BrokenPipe => {
            ExitCode::SUCCESS
        }
        Err(cmd::CliError::Io(err)) => {
            eprintln!("rsstack: {err}");
            ExitCode::FAILURE
        }
    }
}

/// Prints one line on stderr and returns exit status 2.
fn usage_error(msg: &str) -> ExitCode {
    eprintln!("rsstack: {msg}");
    ExitCode::from(EXIT_USAGE)
}

/// clap renders errors over several lines (message, usage, hint); we keep the message only.
fn first_line(text: &str) -> String {
    let line = text
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("invalid arguments");
    line.trim_start_matches("error: ").to_string()
}
