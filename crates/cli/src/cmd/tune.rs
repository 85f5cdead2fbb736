//! `rsstack tune`: the seeds' tuning for the Linux kernel's own stack on one interface.
//!
//! Without `--apply` it prints the steps of [`topo::tune`] as a shell script. With `--apply`
//! (root, this machine) it runs each step with [`std::process::Command`] or a file write (no
//! shell); just before each step it reads the setting the step changes and adds the action
//! that restores it to the revert file, written again before the step runs, so the file always
//! undoes everything applied so far. A step whose setting cannot be read is not applied (it
//! could not be undone) and is reported as unsupported. `--revert FILE` runs the file's
//! actions in reverse order.
//!
//! # The revert file
//!
//! One JSON object:
//!
//! ```text
//! {"format": "rsstack-tune-revert/1", "iface": "veth0", "policy": "closest",
//!  "steps": [{"name": "gro", "was": "off", "restore": {"run": ["ethtool", "-K", "veth0", "gro", "off"]}},
//!            {"name": "rps rx-0", "was": "0", "restore": {"write": "/sys/class/net/veth0/queues/rx-0/rps_cpus", "value": "0"}},
//!            {"name": "irqbalance", "was": "inactive", "restore": null}]}
//! ```
//!
//! `steps` are in the order they were applied; `restore` is the command (`run`: program and
//! arguments) or file write (`write`, `value`) that puts the setting back, or `null` when
//! nothing need be done. `--revert` accepts only `ethtool` and `systemctl` commands and writes
//! under `/proc/irq/` and `/sys/class/net/`.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;

use clap::Args;
use serde_json::{Value, json};
use topo::{
    Action, ChannelStyle, Interface, Moderation, Plan, PlanError, Policy, Profile, Reading, Saved,
    Topology, TuneOptions, Tuning,
};

use super::CliError;

/// The revert file's `format` value.
const REVERT_FORMAT: &str = "rsstack-tune-revert/1";

#[derive(Debug, Args)]
pub struct TuneArgs {
    /// The network interface to tune (not with --revert: the file names it).
    #[arg(value_name = "IFACE", required_unless_present = "revert")]
    iface: Option<String>,
    /// Placement policy: closest, closest-static, numa, numa-static, conservative, cache or
    /// spread (as `rsstack topo`).
    #[arg(long, value_name = "P", default_value = "closest", value_parser = parse_profile)]
    policy: Profile,
    /// Receive queues (channels) to use. Default: the interface's current count, reduced to
    /// what the policy can place.
    #[arg(long, value_name = "N")]
    queues: Option<usize>,
    /// Interrupt moderation: `adaptive`, or a fixed interval in microseconds.
    #[arg(long, value_name = "adaptive|USECS", default_value = "adaptive", value_parser = parse_moderation)]
    moderation: Moderation,
    /// Turn LRO (seed 004's RSC) on instead of off: host-terminated TCP only, never on a
    /// router or bridge.
    #[arg(long)]
    lro: bool,
    /// Read the topology under DIR instead of / (a recorded machine: prints its plan; the
    /// script's paths are that machine's live ones).
    #[arg(long, value_name = "DIR", default_value = "/")]
    sysfs_root: PathBuf,
    /// Apply the steps to this machine (root): save the previous settings, run each step, and
    /// report it as applied, unsupported, skipped or failed.
    #[arg(long, conflicts_with = "revert")]
    apply: bool,
    /// With --apply: where to save the previous settings. Default:
    /// `rsstack-tune-IFACE.revert.json` in the current directory. Must not exist yet.
    #[arg(long, value_name = "FILE", requires = "apply")]
    save: Option<PathBuf>,
    /// Restore the settings saved by an earlier --apply (root).
    #[arg(long, value_name = "FILE")]
    revert: Option<PathBuf>,
}

fn parse_profile(text: &str) -> Result<Profile, String> {
    text.parse()
}

fn parse_moderation(text: &str) -> Result<Moderation, String> {
    if text == "adaptive" {
        return Ok(Moderation::Adaptive);
    }
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse::<u32>().map(Moderation::FixedUs).map_err(|_| {
            format!(
                "{text} microseconds exceeds {}, the largest interval the kernel takes",
                u32::MAX
            )
        });
    }
    Err(format!(
        "'{text}' is neither `adaptive` nor a number of microseconds"
    ))
}

fn usage(msg: impl std::fmt::Display) -> CliError {
    CliError::Usage(msg.to_string())
}

pub fn run(args: TuneArgs, out: &mut impl Write) -> Result<(), CliError> {
    if let Some(file) = &args.revert {
        return revert(file, out);
    }
    let Some(iface) = args.iface.as_deref() else {
        return Err(usage("an interface is required"));
    };
    if args.queues == Some(0) {
        return Err(usage("--queues must be at least 1"));
    }
    if !args.sysfs_root.is_dir() {
        return Err(usage(format!(
            "--sysfs-root: {}: no such directory",
            args.sysfs_root.display()
        )));
    }
    let live = args.sysfs_root == Path::new("/");
    if args.apply && !live {
        return Err(usage(
            "--apply tunes this machine: it cannot be used with --sysfs-root",
        ));
    }
    let topo = Topology::discover(&args.sysfs_root).map_err(|e| match e {
        topo::TopoError::NotSysfs { .. } => usage(format!("--sysfs-root: {e}")),
        other => CliError::Failed(other.to_string()),
    })?;
    let mut nic = Interface::discover(&args.sysfs_root, iface).map_err(|e| match e {
        topo::TopoError::NoInterface { .. } => usage(format!("{iface}: {e}")),
        other => CliError::Failed(other.to_string()),
    })?;
    // The device's channel style and maximum, when it is this machine's.
    let channels = if live {
        read_command(&["ethtool", "-l", iface])
            .ok()
            .and_then(|t| parse_channels(&t))
    } else {
        None
    };
    if let (Some(n), Some(ch)) = (args.queues, &channels) {
        if n > ch.max as usize {
            return Err(usage(format!(
                "--queues {n}: {iface} has at most {} channel(s)",
                ch.max
            )));
        }
    }
    let policy = Policy::new(args.policy);
    let plan = plan_for(&topo, &mut nic, args.queues, &policy)?;
    let opts = TuneOptions {
        channel_style: channels.as_ref().map(|c| c.style),
        moderation: args.moderation,
        lro: args.lro,
    };
    let tuning = topo::tune(&topo, &nic, &plan, &opts);
    if !args.apply {
        write!(out, "{}", tuning.script())?;
        return Ok(());
    }
    if !is_root() {
        return Err(CliError::Failed(
            "--apply changes device settings and needs root (run it as root, or run the printed script with sudo)"
                .into(),
        ));
    }
    let save = args
        .save
        .unwrap_or_else(|| PathBuf::from(format!("rsstack-tune-{iface}.revert.json")));
    if save.exists() {
        return Err(usage(format!(
            "--save {}: already exists (revert it first, or choose another file)",
            save.display()
        )));
    }
    apply(&tuning, &save, out)
}

/// The plan for `queues` (or the current queue count, reduced until the policy can place it),
/// made for the interface as it will be once its channels are set: `nic`'s queue counts are
/// set to the plan's.
fn plan_for(
    topo: &Topology,
    nic: &mut Interface,
    queues: Option<usize>,
    policy: &Policy,
) -> Result<Plan, CliError> {
    let wanted = queues.unwrap_or(nic.rx_queues.max(1));
    let attempt = |nic: &mut Interface, n: usize| {
        nic.rx_queues = n;
        nic.tx_queues = n;
        topo::plan(topo, Some(nic), n, policy)
    };
    match attempt(nic, wanted) {
        Err(PlanError::TooFewCpus { offered, .. }) if queues.is_none() => {
            let fit = if policy.profile == Profile::Spread {
                offered / 2
            } else {
                offered
            }
            .max(1);
            let mut plan = attempt(nic, fit).map_err(usage)?;
            plan.notes.insert(
                0,
                format!("{wanted} queue(s) reduced to {fit}: the policy offers {offered} CPUs"),
            );
            Ok(plan)
        }
        Err(e) => Err(usage(format!("--queues {wanted}: {e}"))),
        Ok(plan) => Ok(plan),
    }
}

/// Whether the effective user is root (`Uid:` of `/proc/self/status`, third field).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .is_some_and(|euid| euid == "0")
}

/// What became of one step.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Outcome {
    Applied,
    /// The device, driver or kernel lacks the setting: the tool's or the kernel's words.
    Unsupported(String),
    /// Nothing to do (a service already stopped, nothing saved to restore).
    Skipped(String),
    Failed(String),
}

impl Outcome {
    fn word(&self) -> &'static str {
        match self {
            Outcome::Applied => "applied",
            Outcome::Unsupported(_) => "unsupported",
            Outcome::Skipped(_) => "skipped",
            Outcome::Failed(_) => "failed",
        }
    }
}

/// Words of tools and kernels that mean "this device or system has no such setting".
const UNSUPPORTED_WORDS: [&str; 5] = [
    "not supported",
    "Could not change any device features",
    "has not been booted with systemd",
    "Failed to connect to bus",
    "Unit irqbalance.service not loaded",
];

fn classify(message: &str) -> Outcome {
    let line = message
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ");
    if UNSUPPORTED_WORDS.iter().any(|w| message.contains(w)) {
        Outcome::Unsupported(line)
    } else {
        Outcome::Failed(if line.is_empty() {
            "no message".into()
        } else {
            line
        })
    }
}

/// Runs `args` (no shell) and returns its stdout, or the reason it failed.
fn read_command(args: &[&str]) -> Result<String, Outcome> {
    let output = Command::new(args[0]).args(&args[1..]).output();
    match output {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Outcome::Unsupported(format!(
            "{} is not installed",
            args[0]
        ))),
        Err(e) => Err(Outcome::Failed(format!("cannot run {}: {e}", args[0]))),
        Ok(o) if o.status.success() => Ok(String::from_utf8_lossy(&o.stdout).into_owned()),
        Ok(o) => Err(classify(&format!(
            "{}{}",
            String::from_utf8_lossy(&o.stderr),
            String::from_utf8_lossy(&o.stdout)
        ))),
    }
}

/// Performs one action.
fn perform(action: &Action) -> Outcome {
    match action {
        Action::Run(args) => {
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            match read_command(&argv) {
                Ok(_) => Outcome::Applied,
                Err(o) => o,
            }
        }
        Action::Write { path, value } => match std::fs::write(path, value) {
            Ok(()) => Outcome::Applied,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Outcome::Unsupported(format!("{path}: no such file"))
            }
            // EIO: a kernel-managed IRQ refuses a new affinity; EOPNOTSUPP.
            Err(e) if matches!(e.raw_os_error(), Some(5 | 95)) => {
                Outcome::Unsupported(format!("{path}: {e}"))
            }
            Err(e) => Outcome::Failed(format!("{path}: {e}")),
        },
    }
}

/// Performs each failed action once more, after all the others; returns the indices retried.
///
/// One step can need a later one done first, in either direction: the kernel refuses fewer
/// channels than a configured indirection table uses, and a table over more queues than there
/// are channels. Apply sets channels before the table and revert restores them after it, so
/// one of the two fails when the count shrinks or grows; a second pass settles both orders.
fn retry_failed(
    outcomes: &mut [Outcome],
    performed: &[Option<&Action>],
    mut perform: impl FnMut(&Action) -> Outcome,
) -> Vec<usize> {
    let mut retried = Vec::new();
    for (i, outcome) in outcomes.iter_mut().enumerate() {
        if let (Outcome::Failed(_), Some(action)) = (&outcome, performed[i]) {
            *outcome = perform(action);
            retried.push(i);
        }
    }
    retried
}

/// Reads the setting `reading` names on `iface`: the saved value and a short text of it.
fn read_setting(iface: &str, reading: &Reading) -> Result<(Saved, String), Outcome> {
    let bad = |what: &str, text: &str| {
        Outcome::Failed(format!(
            "cannot parse {what}: {}",
            text.lines().next().unwrap_or("")
        ))
    };
    match reading {
        Reading::Channels => {
            let text = read_command(&["ethtool", "-l", iface])?;
            let ch = parse_channels(&text).ok_or_else(|| bad("ethtool -l", &text))?;
            Ok((ch.saved, ch.summary))
        }
        Reading::Reta => {
            let text = read_command(&["ethtool", "-x", iface])?;
            let table = parse_reta(&text);
            if table.is_empty() {
                return Err(bad("ethtool -x", &text));
            }
            let summary = format!("{} entries", table.len());
            Ok((Saved::Reta(table), summary))
        }
        Reading::Coalesce => {
            let text = read_command(&["ethtool", "-c", iface])?;
            let saved = parse_coalesce(&text);
            // The restore command's settings say what was read: `adaptive-rx on rx-usecs 3`.
            let summary = match topo::restore(iface, reading, &saved) {
                Some(Action::Run(args)) => args[3..].join(" "),
                _ => "no adaptive or usecs settings".into(),
            };
            Ok((saved, summary))
        }
        Reading::Feature { long, .. } => {
            let text = read_command(&["ethtool", "-k", iface])?;
            let on = parse_feature(&text, long)
                .ok_or_else(|| Outcome::Unsupported(format!("ethtool -k lists no {long}")))?;
            Ok((Saved::Feature(on), if on { "on" } else { "off" }.into()))
        }
        Reading::File(path) => match std::fs::read_to_string(path) {
            Ok(v) => Ok((Saved::File(v.trim().to_string()), v.trim().to_string())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Err(Outcome::Unsupported(format!("{path}: no such file")))
            }
            Err(e) => Err(Outcome::Failed(format!("{path}: {e}"))),
        },
        Reading::Service(name) => {
            let out = Command::new("systemctl").args(["is-active", name]).output();
            match out {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(Outcome::Skipped(
                    "no systemctl: no irqbalance service".into(),
                )),
                Err(e) => Err(Outcome::Failed(format!("systemctl: {e}"))),
                Ok(o) => {
                    let state = String::from_utf8_lossy(&o.stdout).trim().to_string();
                    if state.is_empty() {
                        // Not booted with systemd: no service of that name to stop.
                        return Err(Outcome::Skipped(format!(
                            "systemd not running: {}",
                            String::from_utf8_lossy(&o.stderr).trim()
                        )));
                    }
                    Ok((Saved::Service(state == "active"), state))
                }
            }
        }
    }
}

fn action_json(action: &Action) -> Value {
    match action {
        Action::Run(args) => json!({ "run": args }),
        Action::Write { path, value } => json!({ "write": path, "value": value }),
    }
}

fn action_from_json(v: &Value) -> Result<Option<Action>, String> {
    if v.is_null() {
        return Ok(None);
    }
    if let Some(run) = v.get("run") {
        let args: Vec<String> = run
            .as_array()
            .ok_or("`run` is not a list")?
            .iter()
            .map(|a| {
                a.as_str()
                    .map(str::to_string)
                    .ok_or("`run` holds a non-string")
            })
            .collect::<Result<_, _>>()?;
        match args.first().map(String::as_str) {
            Some("ethtool" | "systemctl") => return Ok(Some(Action::Run(args))),
            other => return Err(format!("`run` of {other:?}: only ethtool and systemctl")),
        }
    }
    let (Some(path), Some(value)) = (
        v.get("write").and_then(Value::as_str),
        v.get("value").and_then(Value::as_str),
    ) else {
        return Err("a restore is neither `run` nor `write` with `value`".into());
    };
    if !(path.starts_with("/proc/irq/") || path.starts_with("/sys/class/net/"))
        || path.contains("..")
    {
        return Err(format!(
            "`write` to {path}: only /proc/irq/ and /sys/class/net/"
        ));
    }
    Ok(Some(Action::Write {
        path: path.into(),
        value: value.into(),
    }))
}

fn write_revert_file(path: &Path, tuning: &Tuning, saved: &[Value]) -> std::io::Result<()> {
    let doc = json!({
        "format": REVERT_FORMAT,
        "iface": tuning.iface,
        "policy": tuning.policy,
        "steps": saved,
    });
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    std::fs::write(&tmp, format!("{doc:#}\n"))?;
    std::fs::rename(&tmp, path)
}

fn report_line(
    out: &mut impl Write,
    i: usize,
    name: &str,
    outcome: &Outcome,
    detail: &str,
) -> std::io::Result<()> {
    let detail = match outcome {
        Outcome::Applied => detail.to_string(),
        Outcome::Unsupported(m) | Outcome::Skipped(m) | Outcome::Failed(m) => m.clone(),
    };
    writeln!(out, "{i:>3} {name:<18} {:<12} {detail}", outcome.word())
}

#[derive(Default)]
struct Tally {
    applied: usize,
    unsupported: usize,
    skipped: usize,
    failed: usize,
}

impl Tally {
    fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Applied => self.applied += 1,
            Outcome::Unsupported(_) => self.unsupported += 1,
            Outcome::Skipped(_) => self.skipped += 1,
            Outcome::Failed(_) => self.failed += 1,
        }
    }

    fn line(&self) -> String {
        format!(
            "{} applied, {} unsupported, {} skipped, {} failed",
            self.applied, self.unsupported, self.skipped, self.failed
        )
    }
}

fn apply(tuning: &Tuning, save: &Path, out: &mut impl Write) -> Result<(), CliError> {
    writeln!(
        out,
        "tuning {} (policy {}): {} step(s); previous settings saved in {}",
        tuning.iface,
        tuning.policy,
        tuning.steps.len(),
        save.display()
    )?;
    let mut saved = Vec::new();
    write_revert_file(save, tuning, &saved)
        .map_err(|e| CliError::Failed(format!("{}: {e}", save.display())))?;
    let mut outcomes = Vec::new();
    let mut performed = Vec::new();
    for (i, step) in tuning.steps.iter().enumerate() {
        let mut done = None;
        let outcome = match read_setting(&tuning.iface, &step.reading) {
            Err(Outcome::Failed(m)) => Outcome::Failed(format!("cannot read the setting: {m}")),
            Err(Outcome::Unsupported(m)) => {
                Outcome::Unsupported(format!("cannot read the setting: {m}"))
            }
            Err(other) => other,
            Ok((Saved::Service(false), was)) => Outcome::Skipped(format!("irqbalance is {was}")),
            Ok((value, was)) => {
                let restore = topo::restore(&tuning.iface, &step.reading, &value);
                saved.push(json!({
                    "name": step.name,
                    "was": was,
                    "restore": restore.as_ref().map_or(Value::Null, action_json),
                }));
                write_revert_file(save, tuning, &saved)
                    .map_err(|e| CliError::Failed(format!("{}: {e}", save.display())))?;
                done = Some(&step.action);
                perform(&step.action)
            }
        };
        report_line(out, i + 1, &step.name, &outcome, &step.action.shell())?;
        outcomes.push(outcome);
        performed.push(done);
    }
    for i in retry_failed(&mut outcomes, &performed, perform) {
        let step = &tuning.steps[i];
        report_line(
            out,
            i + 1,
            &format!("{} (again)", step.name),
            &outcomes[i],
            &step.action.shell(),
        )?;
    }
    let mut tally = Tally::default();
    outcomes.iter().for_each(|o| tally.add(o));
    writeln!(out, "{}", tally.line())?;
    writeln!(out, "undo with: rsstack tune --revert {}", save.display())?;
    if tally.failed > 0 {
        return Err(CliError::Failed(format!(
            "{} step(s) failed on {}",
            tally.failed, tuning.iface
        )));
    }
    Ok(())
}

fn revert(file: &Path, out: &mut impl Write) -> Result<(), CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| usage(format!("--revert {}: {e}", file.display())))?;
    let bad = |why: &str| usage(format!("--revert {}: {why}", file.display()));
    let doc: Value = serde_json::from_str(&text).map_err(|e| bad(&e.to_string()))?;
    if doc.get("format").and_then(Value::as_str) != Some(REVERT_FORMAT) {
        return Err(bad(&format!("not a {REVERT_FORMAT} file")));
    }
    let iface = doc.get("iface").and_then(Value::as_str).unwrap_or("?");
    let steps = doc
        .get("steps")
        .and_then(Value::as_array)
        .ok_or_else(|| bad("no `steps` list"))?;
    let mut actions = Vec::new();
    for s in steps {
        let name = s.get("name").and_then(Value::as_str).unwrap_or("?");
        let action = action_from_json(s.get("restore").unwrap_or(&Value::Null))
            .map_err(|e| bad(&format!("step {name}: {e}")))?;
        actions.push((name.to_string(), action));
    }
    if !is_root() {
        return Err(CliError::Failed(
            "--revert changes device settings and needs root".into(),
        ));
    }
    writeln!(
        out,
        "reverting {iface}: {} saved step(s) from {}, last first",
        actions.len(),
        file.display()
    )?;
    let last_first: Vec<_> = actions.iter().rev().collect();
    let mut outcomes = Vec::new();
    for (i, (name, action)) in last_first.iter().enumerate() {
        let outcome = match action {
            None => Outcome::Skipped("nothing to restore".into()),
            Some(a) => perform(a),
        };
        let detail = action.as_ref().map(Action::shell).unwrap_or_default();
        report_line(out, i + 1, name, &outcome, &detail)?;
        outcomes.push(outcome);
    }
    let performed: Vec<Option<&Action>> = last_first.iter().map(|(_, a)| a.as_ref()).collect();
    for i in retry_failed(&mut outcomes, &performed, perform) {
        let (name, action) = last_first[i];
        let detail = action.as_ref().map(Action::shell).unwrap_or_default();
        report_line(
            out,
            i + 1,
            &format!("{name} (again)"),
            &outcomes[i],
            &detail,
        )?;
    }
    let mut tally = Tally::default();
    outcomes.iter().for_each(|o| tally.add(o));
    writeln!(out, "{}", tally.line())?;
    if tally.failed > 0 {
        return Err(CliError::Failed(format!(
            "{} step(s) could not be restored on {iface}",
            tally.failed
        )));
    }
    Ok(())
}

/// `ethtool -l`: the device's channel style, its maximum for that style, and the current
/// counts to save.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Channels {
    style: ChannelStyle,
    max: u32,
    saved: Saved,
    summary: String,
}

/// Parses `ethtool -l`: "Pre-set maximums:" then "Current hardware settings:", each with
/// `RX:`, `TX:`, `Other:`, `Combined:` lines holding a number or `n/a`. Only the counts whose
/// maximum is non-zero are saved (restoring a count the device cannot have would fail).
fn parse_channels(text: &str) -> Option<Channels> {
    let mut max = [None::<u32>; 3];
    let mut cur = [None::<u32>; 3];
    let mut section = 0;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("Pre-set maximums") {
            section = 1;
            continue;
        }
        if line.starts_with("Current hardware settings") {
            section = 2;
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let idx = match key.trim() {
            "Combined" => 0,
            "RX" => 1,
            "TX" => 2,
            _ => continue,
        };
        let value = value.trim().parse::<u32>().ok();
        match section {
            1 => max[idx] = value,
            2 => cur[idx] = value,
            _ => {}
        }
    }
    if section != 2 {
        return None;
    }
    let keep = |i: usize| cur[i].filter(|_| max[i].is_some_and(|m| m > 0));
    let (combined, rx, tx) = (keep(0), keep(1), keep(2));
    let (style, max_n) = match (max[0], max[1]) {
        (Some(m), _) if m > 0 => (ChannelStyle::Combined, m),
        (_, Some(m)) if m > 0 => (ChannelStyle::RxTx, m.min(max[2].unwrap_or(m))),
        _ => return None,
    };
    let mut parts = Vec::new();
    for (n, v) in [("combined", combined), ("rx", rx), ("tx", tx)] {
        if let Some(v) = v {
            parts.push(format!("{n} {v}"));
        }
    }
    Some(Channels {
        style,
        max: max_n,
        saved: Saved::Channels { combined, rx, tx },
        summary: parts.join(" "),
    })
}

/// Parses `ethtool -x`: the indirection table's rows (`    8:      0     1 …`), up to the hash
/// key. Empty when the device has no table.
fn parse_reta(text: &str) -> Vec<u32> {
    let mut table = Vec::new();
    for line in text.lines() {
        if line.contains("hash key") || line.contains("hash function") {
            break;
        }
        let Some((index, entries)) = line.trim().split_once(':') else {
            continue;
        };
        if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        let row: Option<Vec<u32>> = entries.split_whitespace().map(|e| e.parse().ok()).collect();
        if let Some(row) = row {
            table.extend(row);
        }
    }
    table
}

/// Parses `ethtool -c`: `Adaptive RX: on  TX: off`, `rx-usecs: 3`, `tx-usecs: n/a`.
fn parse_coalesce(text: &str) -> Saved {
    let mut adaptive_rx = None;
    let mut adaptive_tx = None;
    let mut rx_usecs = None;
    let mut tx_usecs = None;
    let on_off = |w: &str| match w {
        "on" => Some(true),
        "off" => Some(false),
        _ => None,
    };
    for line in text.lines() {
        let line = line.trim();
        if let Some(rest) = line.strip_prefix("Adaptive RX:") {
            let mut words = rest.split_whitespace();
            adaptive_rx = words.next().and_then(on_off);
            if words.next() == Some("TX:") {
                adaptive_tx = words.next().and_then(on_off);
            }
        } else if let Some(v) = line.strip_prefix("rx-usecs:") {
            rx_usecs = v.trim().parse().ok();
        } else if let Some(v) = line.strip_prefix("tx-usecs:") {
            tx_usecs = v.trim().parse().ok();
        }
    }
    Saved::Coalesce {
        adaptive_rx,
        adaptive_tx,
        rx_usecs,
        tx_usecs,
    }
}

/// Parses one feature of `ethtool -k` (`generic-receive-offload: on` or `… off [fixed]`).
fn parse_feature(text: &str, long: &str) -> Option<bool> {
    text.lines().find_map(|line| {
        let (name, value) = line.trim().split_once(':')?;
        if name != long {
            return None;
        }
        match value.split_whitespace().next()? {
            "on" => Some(true),
            "off" => Some(false),
            _ => None,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const VETH_L: &str = "Channel parameters for va:\nPre-set maximums:\nRX:\t\t2\nTX:\t\t2\n\
        Other:\t\tn/a\nCombined:\tn/a\nCurrent hardware settings:\nRX:\t\t1\nTX:\t\t2\n\
        Other:\t\tn/a\nCombined:\tn/a\n";
    const IGB_L: &str = "Channel parameters for eth0:\nPre-set maximums:\nRX:\t\t0\nTX:\t\t0\n\
        Other:\t\t1\nCombined:\t8\nCurrent hardware settings:\nRX:\t\t0\nTX:\t\t0\n\
        Other:\t\t1\nCombined:\t4\n";

    #[test]
    fn ethtool_l_gives_style_maximum_and_only_counts_the_device_has() {
        let veth = parse_channels(VETH_L).unwrap();
        assert_eq!(veth.style, ChannelStyle::RxTx);
        assert_eq!(veth.max, 2);
        assert_eq!(
            veth.saved,
            Saved::Channels {
                combined: None,
                rx: Some(1),
                tx: Some(2)
            }
        );
        let igb = parse_channels(IGB_L).unwrap();
        assert_eq!(igb.style, ChannelStyle::Combined);
        assert_eq!(igb.max, 8);
        assert_eq!(
            igb.saved,
            Saved::Channels {
                combined: Some(4),
                rx: None,
                tx: None
            }
        );
        assert_eq!(parse_channels("garbage"), None);
    }

    #[test]
    fn ethtool_x_table_rows_are_read_up_to_the_hash_key() {
        let text = "RX flow hash indirection table for eth0 with 2 RX ring(s):\n\
            \x20   0:      0     1     0     1     0     1     0     1\n\
            \x20   8:      1     1     1     1     0     0     0     0\n\
            RSS hash key:\n56:12:aa\nRSS hash function:\n    toeplitz: on\n";
        let t = parse_reta(text);
        assert_eq!(t.len(), 16);
        assert_eq!(&t[8..12], &[1, 1, 1, 1]);
        assert!(parse_reta("Cannot get RX ring count: Operation not supported").is_empty());
    }

    #[test]
    fn ethtool_c_and_k_values_are_parsed() {
        let c = "Coalesce parameters for eth0:\nAdaptive RX: off  TX: on\nstats-block-usecs: 0\n\
                 rx-usecs: 3\nrx-frames: 0\ntx-usecs: n/a\n";
        assert_eq!(
            parse_coalesce(c),
            Saved::Coalesce {
                adaptive_rx: Some(false),
                adaptive_tx: Some(true),
                rx_usecs: Some(3),
                tx_usecs: None
            }
        );
        let k = "Features for va:\ngeneric-receive-offload: off\nlarge-receive-offload: off [fixed]\n\
                 rx-gro-hw: off [fixed]\n";
        assert_eq!(parse_feature(k, "generic-receive-offload"), Some(false));
        assert_eq!(parse_feature(k, "large-receive-offload"), Some(false));
        assert_eq!(parse_feature(k, "rx-gro-list"), None);
    }

    #[test]
    fn tool_errors_that_mean_no_such_setting_are_unsupported() {
        assert!(matches!(
            classify("netlink error: Operation not supported\n"),
            Outcome::Unsupported(_)
        ));
        assert!(matches!(
            classify("Could not change any device features\n"),
            Outcome::Unsupported(_)
        ));
        assert_eq!(
            classify("netlink error: Invalid argument\n"),
            Outcome::Failed("netlink error: Invalid argument".into())
        );
    }

    #[test]
    fn failed_steps_are_retried_once_after_the_others() {
        // The first action fails until the second has run (a RETA needing more channels).
        let reta = Action::Run(vec!["ethtool".into(), "-X".into()]);
        let channels = Action::Run(vec!["ethtool".into(), "-L".into()]);
        let mut channels_set = false;
        let mut perform = |a: &Action| {
            if *a == channels {
                channels_set = true;
                Outcome::Applied
            } else if channels_set {
                Outcome::Applied
            } else {
                Outcome::Failed("Invalid argument".into())
            }
        };
        let mut outcomes: Vec<Outcome> = [&reta, &channels].iter().map(|a| perform(a)).collect();
        assert_eq!(outcomes[0], Outcome::Failed("Invalid argument".into()));
        let skipped = Outcome::Skipped("nothing to restore".into());
        outcomes.push(skipped.clone());
        let retried = retry_failed(
            &mut outcomes,
            &[Some(&reta), Some(&channels), None],
            perform,
        );
        assert_eq!(retried, vec![0]);
        assert_eq!(outcomes, vec![Outcome::Applied, Outcome::Applied, skipped]);
    }

    #[test]
    fn revert_actions_are_limited_to_tuning_commands_and_files() {
        let ok = json!({"run": ["ethtool", "-K", "v", "gro", "off"]});
        assert!(action_from_json(&ok).unwrap().is_some());
        assert_eq!(action_from_json(&Value::Null), Ok(None));
        let w = json!({"write": "/sys/class/net/v/queues/rx-0/rps_cpus", "value": "0"});
        assert!(action_from_json(&w).unwrap().is_some());
        assert!(action_from_json(&json!({"run": ["rm", "-rf", "/"]})).is_err());
        assert!(action_from_json(&json!({"write": "/etc/passwd", "value": "x"})).is_err());
        assert!(
            action_from_json(&json!({"write": "/sys/class/net/../../etc/x", "value": "x"}))
                .is_err()
        );
    }

    #[test]
    fn restoring_what_was_read_round_trips_through_the_revert_json() {
        let saved = parse_channels(VETH_L).unwrap().saved;
        let action = topo::restore("va", &Reading::Channels, &saved).unwrap();
        assert_eq!(action.shell(), "ethtool -L va rx 1 tx 2");
        assert_eq!(
            action_from_json(&action_json(&action)).unwrap(),
            Some(action)
        );
    }
}
