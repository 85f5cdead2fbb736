//! `rsstack rfc2544`: RFC 2544 throughput and latency through a device under test.
//!
//! For each frame size (64, 128, 256, 512, 1024, 1280, 1518, and 9018 with `--jumbo`): a
//! calibration trial at the generator's full speed gives the highest rate it can offer
//! (`offered_max_fps`); then a binary search over `(0, offered_max]` for the highest offered
//! rate a whole trial (`--trial-secs`) passes with no loss (or at most `--loss-pct`), until
//! the bracket is narrower than `--resolution-pct` of the maximum (RFC 2544 §26.1); then one
//! more trial at that rate measures latency (every frame is timed, RFC 2544 §26.2 asks for at
//! least one tagged frame). When the calibration trial itself is loss-free the result is
//! flagged `generator_limited`: the DUT was not the bottleneck.
//!
//! Ports: `--tx-port`/`--rx-port` AF_PACKET interfaces (the generator resolves `--gateway`
//! by ARP unless `--dut-mac` is given; the receiver answers ARP for `--dst-ip` and the
//! generator side for `--src-ip`), or `--io mem`: an in-process forwarder. Output: a table
//! (frame size, zero-loss frames/s, % of the offered maximum, Mb/s, latency), `--json FILE`
//! and `--svg FILE`, a bar chart shaped like seed 004's Figures 11–12 (`--compare FILE.json`
//! adds earlier runs as further series, side by side).

use core::net::Ipv4Addr;
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use clap::{Args, ValueEnum};
use serde_json::{Value, json};
use wire::EthernetAddress;

use super::CliError;
use super::rfc2544_plot::{Series, svg};
use super::rfc2544_trial::{
    Addrs, PacketPort, Port, ReceiverHandle, TrialResult, arp_frame, build_frame, run_trial,
};

/// RFC 2544 §9.1's Ethernet frame sizes.
pub const FRAME_SIZES: [usize; 7] = [64, 128, 256, 512, 1024, 1280, 1518];
/// The jumbo size `--jumbo` adds.
pub const JUMBO_BYTES: usize = 9018;

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TesterIo {
    #[value(name = "af_packet")]
    AfPacket,
    Mem,
}

#[derive(Debug, Args)]
pub struct Rfc2544Args {
    /// Where the generator and the receiver run.
    #[arg(
        long,
        value_enum,
        default_value = "af_packet",
        value_name = "af_packet|mem"
    )]
    io: TesterIo,
    /// The generator's interface (af_packet).
    #[arg(long, value_name = "IF")]
    tx_port: Option<String>,
    /// The receiver's interface (af_packet).
    #[arg(long, value_name = "IF")]
    rx_port: Option<String>,
    /// Source address of the test frames (the generator answers ARP for it).
    #[arg(long, default_value = "10.80.1.2", value_name = "ADDR")]
    src_ip: Ipv4Addr,
    /// Destination address (the receiver answers ARP for it).
    #[arg(long, default_value = "10.80.2.2", value_name = "ADDR")]
    dst_ip: Ipv4Addr,
    /// The DUT's address on the generator's link, resolved by ARP for its MAC.
    #[arg(long, default_value = "10.80.1.1", value_name = "ADDR")]
    gateway: Ipv4Addr,
    /// The DUT's MAC on the generator's link (skips the ARP resolution).
    #[arg(long, value_name = "MAC")]
    dut_mac: Option<String>,
    /// Frame sizes in bytes, FCS included (default: RFC 2544's seven): 64 to 9018.
    #[arg(long, value_delimiter = ',', value_name = "BYTES",
          value_parser = clap::value_parser!(u16).range(64..=9018))]
    sizes: Vec<u16>,
    /// Add the 9018-byte jumbo frame.
    #[arg(long)]
    jumbo: bool,
    /// Seconds each trial offers traffic: 0.1 to 600.
    #[arg(long, default_value_t = 1.0, value_name = "SECS")]
    trial_secs: f64,
    /// The search stops when its bracket is narrower than this % of the maximum: 0.1 to 50.
    #[arg(long, default_value_t = 1.0, value_name = "PCT")]
    resolution_pct: f64,
    /// Instead of the search: one trial per frame size at this offered rate, frames/s (1 to
    /// 100000000); the table shows the rate achieved when the trial lost nothing, else 0.
    #[arg(long, value_name = "FPS")]
    rate_fps: Option<f64>,
    /// Loss a trial may show and still pass, % of the frames sent (RFC 2544: 0).
    #[arg(long, default_value_t = 0.0, value_name = "PCT")]
    loss_pct: f64,
    /// The series' name in the table, the JSON and the plot.
    #[arg(long, default_value = "rsstack", value_name = "NAME")]
    label: String,
    /// Write the results as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Write a bar chart (SVG) to FILE.
    #[arg(long, value_name = "FILE")]
    svg: Option<PathBuf>,
    /// Earlier runs (their --json files) to show beside this one in the table and the plot.
    #[arg(long, value_name = "FILE.json")]
    compare: Vec<PathBuf>,
}

/// One frame size's outcome.
#[derive(Debug, Clone, Default)]
pub struct SizeResult {
    pub size_bytes: usize,
    pub offered_max_fps: f64,
    pub zero_loss_fps: f64,
    pub generator_limited: bool,
    pub trials: u32,
    pub latency: TrialResult,
}

impl SizeResult {
    pub fn pct_of_offered(&self) -> f64 {
        100.0 * self.zero_loss_fps / self.offered_max_fps.max(1.0)
    }
    /// Layer-2 throughput in Mb/s, FCS included (RFC 2544's frame size).
    pub fn mbps(&self) -> f64 {
        self.zero_loss_fps * self.size_bytes as f64 * 8.0 / 1e6
    }
}

fn usage(msg: impl Into<String>) -> CliError {
    CliError::Usage(msg.into())
}

fn parse_mac(text: &str) -> Result<EthernetAddress, CliError> {
    let bad = || {
        usage(format!(
            "--dut-mac '{text}': expected six hex bytes like 02:00:00:00:00:01"
        ))
    };
    let mut out = [0u8; 6];
    let mut parts = text.split(':');
    for b in &mut out {
        let p = parts.next().ok_or_else(bad)?;
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    if parts.next().is_some() {
        return Err(bad());
    }
    Ok(EthernetAddress(out))
}

fn read_mac(iface: &str) -> Result<EthernetAddress, CliError> {
    let path = format!("/sys/class/net/{iface}/address");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| usage(format!("interface {iface}: cannot read its MAC ({e})")))?;
    parse_mac(text.trim())
}

/// Checks the arguments that clap cannot.
fn check(args: &Rfc2544Args) -> Result<(), CliError> {
    if !(0.1..=600.0).contains(&args.trial_secs) {
        return Err(usage("--trial-secs must be 0.1 to 600"));
    }
    if !(0.1..=50.0).contains(&args.resolution_pct) {
        return Err(usage("--resolution-pct must be 0.1 to 50"));
    }
    if !(0.0..=50.0).contains(&args.loss_pct) {
        return Err(usage("--loss-pct must be 0 to 50"));
    }
    if args.rate_fps.is_some_and(|r| !(1.0..=1e8).contains(&r)) {
        return Err(usage("--rate-fps must be 1 to 100000000"));
    }
    if args.io == TesterIo::AfPacket && (args.tx_port.is_none() || args.rx_port.is_none()) {
        return Err(usage("--io af_packet needs --tx-port and --rx-port"));
    }
    Ok(())
}

/// Reads a `--json` file of an earlier run as a plot/table series.
fn load_series(path: &PathBuf) -> Result<Series, CliError> {
    let shown = path.display();
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("--compare {shown}: cannot read it: {e}")))?;
    let v: Value = serde_json::from_str(&text)
        .map_err(|e| usage(format!("--compare {shown}: not JSON: {e}")))?;
    let label = v["label"].as_str().unwrap_or("?").to_string();
    let mut points = Vec::new();
    for r in v["results"].as_array().into_iter().flatten() {
        let (Some(size), Some(fps), Some(max)) = (
            r["frame_bytes"].as_u64(),
            r["zero_loss_fps"].as_f64(),
            r["offered_max_fps"].as_f64(),
        ) else {
            return Err(usage(format!(
                "--compare {shown}: not an rsstack rfc2544 result"
            )));
        };
        points.push((size as usize, fps, max));
    }
    Ok(Series { label, points })
}

pub fn run(args: Rfc2544Args, out: &mut impl Write) -> Result<(), CliError> {
    check(&args)?;
    let earlier: Vec<Series> = args
        .compare
        .iter()
        .map(load_series)
        .collect::<Result<_, _>>()?;
    let mut sizes: Vec<usize> = if args.sizes.is_empty() {
        FRAME_SIZES.to_vec()
    } else {
        args.sizes.iter().map(|&s| usize::from(s)).collect()
    };
    if args.jumbo {
        sizes.push(JUMBO_BYTES);
    }
    let epoch = Instant::now();
    let handle = ReceiverHandle::new();
    let mut threads = Vec::new();
    let mut mem_dut = None;
    let (mut tx, addrs): (Box<dyn Port>, Addrs) = match args.io {
        TesterIo::AfPacket => {
            let (txi, rxi) = (args.tx_port.as_deref(), args.rx_port.as_deref());
            let (txi, rxi) = (txi.unwrap_or_default(), rxi.unwrap_or_default());
            let open = |i: &str, g: bool| {
                PacketPort::open(i, g).map_err(|e| usage(format!("af_packet {i}: {e}")))
            };
            let (tx_mac, rx_mac) = (read_mac(txi)?, read_mac(rxi)?);
            let gen_port = open(txi, true)?;
            let ports: Vec<(Box<dyn Port>, EthernetAddress, Ipv4Addr)> = vec![
                (Box::new(open(txi, false)?), tx_mac, args.src_ip),
                (Box::new(open(rxi, false)?), rx_mac, args.dst_ip),
            ];
            let rcv = handle.receiver(ports, epoch);
            threads.push(std::thread::spawn(move || rcv.run()));
            let mut gen_port: Box<dyn Port> = Box::new(gen_port);
            let dut_mac = match &args.dut_mac {
                Some(m) => parse_mac(m)?,
                None => resolve(&mut *gen_port, &handle, tx_mac, args.src_ip, args.gateway)?,
            };
            let addrs = Addrs {
                src_mac: tx_mac,
                dut_mac,
                src_ip: args.src_ip,
                dst_ip: args.dst_ip,
            };
            (gen_port, addrs)
        }
        TesterIo::Mem => {
            use super::rfc2544_mem as m;
            let (tx, rx, dut) = m::start(args.src_ip, args.dst_ip, handle.stop.clone())
                .map_err(CliError::Failed)?;
            mem_dut = Some(dut);
            let rcv = handle.receiver(vec![(Box::new(rx), m::RX_MAC, args.dst_ip)], epoch);
            threads.push(std::thread::spawn(move || rcv.run()));
            let addrs = Addrs {
                src_mac: m::GEN_MAC,
                dut_mac: m::DUT_MAC0,
                src_ip: args.src_ip,
                dst_ip: args.dst_ip,
            };
            (Box::new(tx) as Box<dyn Port>, addrs)
        }
    };
    let trial = Duration::from_secs_f64(args.trial_secs);
    let drain = Duration::from_millis(300);
    let mut trial_id: u16 = 0;
    let mut results = Vec::new();
    for &size in &sizes {
        let mut frame = build_frame(&addrs, size);
        let mut one = |rate: Option<f64>, id: &mut u16| {
            *id = id.wrapping_add(1) % 60_000;
            run_trial(
                &mut *tx, &mut frame, rate, trial, drain, *id, &handle, epoch,
            )
        };
        let passes = |r: &TrialResult| {
            r.sent > 0 && (r.lost() as f64) <= r.sent as f64 * args.loss_pct / 100.0
        };
        if let Some(rate) = args.rate_fps {
            let r = one(Some(rate), &mut trial_id);
            eprintln!(
                "{size:>5} B: {rate:>10.0} fps offered ({:.0} achieved): lost {} of {}",
                r.offered_fps(),
                r.lost(),
                r.sent
            );
            results.push(SizeResult {
                size_bytes: size,
                offered_max_fps: r.offered_fps(),
                zero_loss_fps: if passes(&r) { r.offered_fps() } else { 0.0 },
                generator_limited: false,
                trials: 1,
                latency: r,
            });
            continue;
        }
        let cal = one(None, &mut trial_id);
        let max = cal.offered_fps();
        let mut res = SizeResult {
            size_bytes: size,
            offered_max_fps: max,
            trials: 1,
            ..SizeResult::default()
        };
        eprintln!(
            "{size:>5} B: generator max {max:.0} fps, {} of {} received",
            cal.received, cal.sent
        );
        if passes(&cal) {
            res.zero_loss_fps = max;
            res.generator_limited = true;
            res.latency = cal;
        } else {
            let (mut lo, mut hi) = (0.0f64, max);
            let mut best: Option<TrialResult> = None;
            while hi - lo > max * args.resolution_pct / 100.0 {
                let mid = (lo + hi) / 2.0;
                let r = one(Some(mid), &mut trial_id);
                res.trials += 1;
                eprintln!(
                    "{size:>5} B: {mid:>10.0} fps offered ({:.0} achieved): lost {} of {}",
                    r.offered_fps(),
                    r.lost(),
                    r.sent
                );
                if passes(&r) {
                    lo = mid;
                    best = Some(r);
                } else {
                    hi = mid;
                }
            }
            res.zero_loss_fps = lo;
            if lo > 0.0 {
                // Latency at the throughput rate (RFC 2544 §26.2).
                let r = one(Some(lo), &mut trial_id);
                res.trials += 1;
                res.latency = if r.received > 0 { r } else { best.unwrap_or(r) };
            }
        }
        results.push(res);
    }
    handle
        .stop
        .store(true, std::sync::atomic::Ordering::Release);
    for t in threads {
        let _ = t.join();
    }
    if let Some(d) = mem_dut {
        let _ = d.join();
    }
    write_table(out, &args.label, &results, &earlier)?;
    let doc = to_json(&args, &results);
    if let Some(p) = &args.json {
        std::fs::write(
            p,
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n",
        )
        .map_err(|e| CliError::Failed(format!("--json {}: {e}", p.display())))?;
    }
    if let Some(p) = &args.svg {
        let mut all = earlier;
        all.push(Series {
            label: args.label.clone(),
            points: results
                .iter()
                .map(|r| (r.size_bytes, r.zero_loss_fps, r.offered_max_fps))
                .collect(),
        });
        std::fs::write(p, svg(&all))
            .map_err(|e| CliError::Failed(format!("--svg {}: {e}", p.display())))?;
    }
    Ok(())
}

/// The DUT's MAC: ARP requests for `gateway` every 100 ms, up to 3 s.
fn resolve(
    port: &mut dyn Port,
    handle: &ReceiverHandle,
    mac: EthernetAddress,
    ip: Ipv4Addr,
    gateway: Ipv4Addr,
) -> Result<EthernetAddress, CliError> {
    let req = arp_frame(mac, ip, gateway, None);
    for _ in 0..30 {
        let _ = port.send(&req);
        port.flush();
        std::thread::sleep(Duration::from_millis(100));
        if let Ok(l) = handle.learnt.lock()
            && let Some(&(_, m)) = l.iter().find(|(a, _)| *a == gateway)
        {
            return Ok(m);
        }
    }
    Err(CliError::Failed(format!(
        "no ARP reply from the DUT at {gateway} (give --dut-mac to skip resolution)"
    )))
}

fn write_table(
    out: &mut impl Write,
    label: &str,
    results: &[SizeResult],
    earlier: &[Series],
) -> Result<(), CliError> {
    write!(out, "{:>6}", "frame")?;
    for s in earlier {
        write!(out, " | {:>12} {:>6}", format!("{} fps", s.label), "%")?;
    }
    writeln!(
        out,
        " | {:>12} {:>6} {:>9} {:>8} {:>8} {:>8}  limited",
        format!("{label} fps"),
        "%",
        "Mb/s",
        "lat_avg",
        "lat_p99",
        "lat_max"
    )?;
    for r in results {
        write!(out, "{:>6}", r.size_bytes)?;
        for s in earlier {
            match s.points.iter().find(|p| p.0 == r.size_bytes) {
                Some(&(_, fps, max)) => {
                    write!(out, " | {fps:>12.0} {:>6.1}", 100.0 * fps / max.max(1.0))?
                }
                None => write!(out, " | {:>12} {:>6}", "-", "-")?,
            }
        }
        writeln!(
            out,
            " | {:>12.0} {:>6.1} {:>9.1} {:>6.0}us {:>6}us {:>6}us  {}",
            r.zero_loss_fps,
            r.pct_of_offered(),
            r.mbps(),
            r.latency.latency_us_avg,
            r.latency.latency_us_p99,
            r.latency.latency_us_max,
            if r.generator_limited {
                "generator"
            } else {
                "dut"
            }
        )?;
    }
    Ok(())
}

fn to_json(args: &Rfc2544Args, results: &[SizeResult]) -> Value {
    json!({
        "format": "rsstack-rfc2544/1",
        "label": args.label,
        "io": format!("{:?}", args.io),
        "trial_secs": args.trial_secs,
        "resolution_pct": args.resolution_pct,
        "loss_pct": args.loss_pct,
        "results": results.iter().map(|r| json!({
            "frame_bytes": r.size_bytes,
            "offered_max_fps": r.offered_max_fps,
            "zero_loss_fps": r.zero_loss_fps,
            "pct_of_offered_max": r.pct_of_offered(),
            "mbps": r.mbps(),
            "generator_limited": r.generator_limited,
            "trials": r.trials,
            "latency_us_avg": r.latency.latency_us_avg,
            "latency_us_p50": r.latency.latency_us_p50,
            "latency_us_p99": r.latency.latency_us_p99,
            "latency_us_max": r.latency.latency_us_max,
            "latency_frames": r.latency.received,
            "latency_trial_send_refused": r.latency.send_refused,
        })).collect::<Vec<_>>(),
    })
}
