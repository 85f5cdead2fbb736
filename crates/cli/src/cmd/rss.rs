//! `rsstack rss …`: compute Toeplitz hashes, show how flows spread over queues, print a RETA.

use core::net::IpAddr;
use std::io::Write;

use clap::{Args, Subcommand, ValueEnum};
use rss::{HashInput, HashType, PortPair, RETA_SIZE_MAX, Reta, RssHasher, RssKey, SymmetricMode};

use super::CliError;
use crate::endpoint::{Endpoint, parse_endpoint};

/// Most flows `rss spread` hashes: the loop stays bounded (about 20 s at 50 M flows/s) and
/// every count still fits the report's shares exactly.
pub const SPREAD_FLOWS_MAX: u64 = 1_000_000_000;

#[derive(Debug, Subcommand)]
pub enum RssCommand {
    /// Hash one flow as a NIC would and show the RETA slot and queue it lands on.
    Hash(HashArgs),
    /// Hash N random TCP/IPv4 flows and show how evenly they spread over the queues.
    Spread(SpreadArgs),
    /// Print the indirection table laid out as `ethtool -x` does.
    Reta(RetaArgs),
}

/// How the hash key is chosen; shared by `hash` and `spread`.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// The 40-byte Toeplitz key as 80 hex digits (':' separators allowed).
    /// Default: the Microsoft verification key 6d5a56da…
    #[arg(long, value_name = "HEX")]
    key: Option<String>,
    /// Hash both directions of a flow alike: `key` repeats the key's first 16 bits (0x6d5a for
    /// the default key; at most 65,536 distinct hashes), `xor` XOR-folds the input under the
    /// key as given (DPDK's symmetric Toeplitz).
    #[arg(long, value_enum, num_args = 0..=1, default_missing_value = "key", value_name = "HOW")]
    symmetric: Option<SymmetricArg>,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SymmetricArg {
    /// The 16-bit-periodic key 0x6d5a6d5a…
    Key,
    /// XOR-fold source and destination before hashing.
    Xor,
}

/// RETA shape; shared by all three subcommands.
#[derive(Debug, Args)]
pub struct RetaShape {
    /// Entries in the indirection table: a power of two from 1 to 2048.
    #[arg(long, default_value_t = 128, value_name = "N")]
    reta_size: usize,
    /// Receive queues the table spreads over (filled round-robin, as `ethtool -X equal N`):
    /// 1 to --reta-size, since each queue needs at least one entry.
    #[arg(long, default_value_t = 8, value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=RETA_SIZE_MAX as i64))]
    queues: u16,
}

#[derive(Debug, Args)]
pub struct HashArgs {
    #[arg(long, value_parser = parse_endpoint, value_name = "IP[:PORT]",
          help = "Source as IP, IPv4:PORT or [IPv6]:PORT")]
    src: Endpoint,
    #[arg(long, value_parser = parse_endpoint, value_name = "IP[:PORT]",
          help = "Destination as IP, IPv4:PORT or [IPv6]:PORT")]
    dst: Endpoint,
    #[command(flatten)]
    key: KeyArgs,
    #[command(flatten)]
    reta: RetaShape,
}

#[derive(Debug, Args)]
pub struct SpreadArgs {
    /// Number of random TCP/IPv4 flows to hash: 1 to 1,000,000,000 (about 20 s of hashing).
    #[arg(long, default_value_t = 100_000, value_name = "N",
          value_parser = clap::value_parser!(u64).range(1..=SPREAD_FLOWS_MAX))]
    flows: u64,
    /// Seed of the flow generator: the same seed gives the same flows.
    #[arg(long, default_value_t = 1, value_name = "S")]
    seed: u64,
    #[command(flatten)]
    key: KeyArgs,
    #[command(flatten)]
    reta: RetaShape,
}

#[derive(Debug, Args)]
pub struct RetaArgs {
    /// Relative weights of the queues (`ethtool -X weight W0 W1 …`); their count sets the
    /// number of queues. Without weights, entries go round-robin over --queues.
    #[arg(long, num_args = 1.., value_name = "W")]
    weights: Vec<u32>,
    #[command(flatten)]
    reta: RetaShape,
}

pub fn run(cmd: RssCommand, out: &mut impl Write) -> Result<(), CliError> {
    match cmd {
        RssCommand::Hash(args) => hash(args, out),
        RssCommand::Spread(args) => spread(args, out),
        RssCommand::Reta(args) => reta(args, out),
    }
}

fn usage(msg: impl std::fmt::Display) -> CliError {
    CliError::Usage(msg.to_string())
}

/// `--rss-key HEX` of the live commands and `demo`: a key in `ethtool -x` form (80 hex
/// digits, `:` between bytes allowed). A bad key is a usage error (clap exits with 2).
pub fn parse_rss_key(text: &str) -> Result<RssKey, String> {
    RssKey::from_hex(text).map_err(|e| e.to_string())
}

fn build_hasher(args: &KeyArgs) -> Result<RssHasher, CliError> {
    let key = match &args.key {
        Some(hex) => RssKey::from_hex(hex).map_err(|e| usage(format!("--key: {e}")))?,
        None => RssKey::default(),
    };
    let mode = match args.symmetric {
        None => SymmetricMode::None,
        Some(SymmetricArg::Key) => SymmetricMode::RepeatedKey,
        Some(SymmetricArg::Xor) => SymmetricMode::XorFold,
    };
    let hasher = RssHasher::new(&key, mode);
    if hasher.is_degenerate() {
        return Err(usage(
            "--symmetric xor with a 16-bit-periodic --key hashes every flow alike; use a non-periodic key",
        ));
    }
    Ok(hasher)
}

fn mode_name(mode: SymmetricMode) -> &'static str {
    match mode {
        SymmetricMode::None => "off",
        SymmetricMode::RepeatedKey => "repeated-key",
        SymmetricMode::XorFold => "xor-fold",
    }
}

/// Refuses more queues than table entries: the queues past the table's size would get no
/// entry, hence no flow.
fn check_queues(shape: &RetaShape) -> Result<(), CliError> {
    if usize::from(shape.queues) > shape.reta_size {
        return Err(usage(format!(
            "--queues {} exceeds --reta-size {}: a table of {} entries reaches at most {} \
             queues (raise --reta-size, up to {RETA_SIZE_MAX})",
            shape.queues, shape.reta_size, shape.reta_size, shape.reta_size
        )));
    }
    Ok(())
}

fn build_reta(shape: &RetaShape) -> Result<Reta, CliError> {
    let mut reta = Reta::new(shape.reta_size).map_err(|e| usage(format!("--reta-size: {e}")))?;
    check_queues(shape)?;
    reta.fill_equal(shape.queues)
        .map_err(|e| usage(format!("--queues: {e}")))?;
    Ok(reta)
}

fn hash(args: HashArgs, out: &mut impl Write) -> Result<(), CliError> {
    let hasher = build_hasher(&args.key)?;
    let reta = build_reta(&args.reta)?;
    let (src, dst) = (args.src, args.dst);
    let ports = match (src.port, dst.port) {
        (Some(s), Some(d)) => Some(PortPair { src: s, dst: d }),
        (None, None) => None,
        _ => {
            return Err(usage(
                "give a port on both --src and --dst (4-tuple hash) or on neither (address-only hash)",
            ));
        }
    };
    let (input, hash_type) = match (src.addr, dst.addr) {
        (IpAddr::V4(src), IpAddr::V4(dst)) => (
            HashInput::V4 { src, dst, ports },
            if ports.is_some() {
                HashType::TcpIpv4
            } else {
                HashType::Ipv4
            },
        ),
        (IpAddr::V6(src), IpAddr::V6(dst)) => (
            HashInput::V6 { src, dst, ports },
            if ports.is_some() {
                HashType::TcpIpv6
            } else {
                HashType::Ipv6
            },
        ),
        _ => return Err(usage("--src and --dst must both be IPv4 or both be IPv6")),
    };
    let hashed = match hasher.mode() {
        SymmetricMode::XorFold => input.xor_folded(),
        SymmetricMode::None | SymmetricMode::RepeatedKey => input,
    };
    let (bytes, len) = hashed.to_bytes();
    let hash = hasher.hash(&input);
    writeln!(out, "hash_type: {hash_type}")?;
    writeln!(out, "key: {}", hasher.key())?;
    writeln!(out, "symmetric: {}", mode_name(hasher.mode()))?;
    writeln!(out, "input: {}", hex(bytes.get(..len).unwrap_or(&bytes)))?;
    writeln!(out, "hash: 0x{hash:08x}")?;
    writeln!(out, "reta_size: {}", reta.len())?;
    writeln!(out, "reta_index: {}", reta.index_for_hash(hash))?;
    writeln!(out, "queue: {}", reta.queue_for_hash(hash))?;
    Ok(())
}

fn spread(args: SpreadArgs, out: &mut impl Write) -> Result<(), CliError> {
    if args.flows == 0 || args.flows > SPREAD_FLOWS_MAX {
        return Err(usage(format!("--flows must be 1..={SPREAD_FLOWS_MAX}")));
    }
    let hasher = build_hasher(&args.key)?;
    let reta = build_reta(&args.reta)?;
    let mut counts = vec![0u64; usize::from(args.reta.queues)];
    let mut rng = SplitMix64(args.seed);
    for _ in 0..args.flows {
        let a = rng.next();
        let b = rng.next();
        let src = core::net::Ipv4Addr::from((a >> 32) as u32);
        let dst = core::net::Ipv4Addr::from(a as u32);
        let ports = Some(PortPair {
            src: (b >> 16) as u16,
            dst: b as u16,
        });
        let queue = reta.queue_for_hash(hasher.hash(&HashInput::V4 { src, dst, ports }));
        if let Some(c) = counts.get_mut(usize::from(queue)) {
            *c += 1;
        }
    }
    let max = counts.iter().copied().max().unwrap_or(0);
    let mean = args.flows as f64 / counts.len() as f64;
    writeln!(out, "flows: {}", args.flows)?;
    writeln!(out, "queues: {}", counts.len())?;
    writeln!(out, "reta_size: {}", reta.len())?;
    writeln!(out, "symmetric: {}", mode_name(hasher.mode()))?;
    for (q, c) in counts.iter().enumerate() {
        let share = 100.0 * *c as f64 / args.flows as f64;
        writeln!(out, "queue {q}: {c} flows ({share:.2}%)")?;
    }
    writeln!(out, "imbalance_max_over_mean: {:.4}", max as f64 / mean)?;
    Ok(())
}

fn reta(args: RetaArgs, out: &mut impl Write) -> Result<(), CliError> {
    let mut reta =
        Reta::new(args.reta.reta_size).map_err(|e| usage(format!("--reta-size: {e}")))?;
    let rings = if args.weights.is_empty() {
        check_queues(&args.reta)?;
        reta.fill_equal(args.reta.queues)
            .map_err(|e| usage(format!("--queues: {e}")))?;
        usize::from(args.reta.queues)
    } else {
        reta.fill_weights(&args.weights)
            .map_err(|e| usage(format!("--weights: {e}")))?;
        args.weights.len()
    };
    // Laid out as ethtool's `-x` prints it: eight entries a row, each row led by its first index.
    writeln!(
        out,
        "RX flow hash indirection table for rsstack with {rings} RX ring(s):"
    )?;
    let entries = reta.entries();
    for (row_start, row) in entries.chunks(8).enumerate() {
        write!(out, "{:5}: ", row_start * 8)?;
        for q in row {
            write!(out, " {q:5}")?;
        }
        writeln!(out)?;
    }
    writeln!(out, "RSS hash key:")?;
    let key = RssKey::default();
    let bytes: Vec<String> = key.as_bytes().iter().map(|b| format!("{b:02x}")).collect();
    writeln!(out, "{}", bytes.join(":"))?;
    writeln!(out, "RSS hash function:")?;
    writeln!(out, "    toeplitz: on")?;
    writeln!(out, "    xor: off")?;
    writeln!(out, "    crc32: off")?;
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// SplitMix64 (Steele, Lea, Flood 2014): a tiny, well-mixed generator; enough to draw flows.
struct SplitMix64(u64);

impl SplitMix64 {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}
