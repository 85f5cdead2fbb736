//! Network namespaces, veth pairs and TAP devices owned by one test.

use std::process::Command;
use std::time::Duration;

use crate::process::{CmdOutput, Proc, run, run_ok};
use crate::{Result, check, unique_name};

/// Time limit for one `ip`/`sysctl`/`ethtool`/`iptables` configuration command.
const CONFIG_LIMIT: Duration = Duration::from_secs(30);

/// Runs `ip ARGS` (bounded), failing on a non-zero exit.
fn ip(args: &[&str]) -> Result<CmdOutput> {
    run_ok(Command::new("ip").args(args), CONFIG_LIMIT)
}

/// The comment that tags the rule counting the packets the loss rules judge.
pub const LOSS_SEEN_TAG: &str = "rsstack-loss-seen";

/// The comment that tags the drop rule for packets of [`LOSS_DATA_BYTES_MIN`] bytes or more
/// entering the namespace (those that carry data to it).
const LOSS_DATA_IN_TAG: &str = "rsstack-loss-data-in";

/// Packets this long or longer count as carrying data (a bare TCP/IPv6 ACK with options is
/// well under it).
const LOSS_DATA_BYTES_MIN: u32 = 200;

/// Packets the random-loss rules of one namespace judged and dropped.
#[derive(Debug, Clone, Default)]
pub struct LossCounts {
    pub seen: u64,
    pub dropped: u64,
    /// Of `dropped`: packets of 200 bytes or more entering the namespace, i.e. data sent to
    /// it (a sender that lost one of them must have sent something again).
    pub dropped_data_in: u64,
    /// `iptables -L -n -v -x` and the same of `ip6tables`.
    pub listing: String,
}

/// A network namespace owned by one test, named `rsst-<tag>-<pid>-<n>` so tests in parallel
/// (threads or processes) never share one. On drop, every process still inside is killed and
/// the namespace is deleted, which deletes the links in it.
#[derive(Debug)]
pub struct Netns {
    name: String,
}

impl Netns {
    /// Creates the namespace with its loopback up. `tag` should be short: interface-free, but
    /// it shows in `ip netns list` when a test is stuck.
    pub fn create(tag: &str) -> Result<Netns> {
        let name = unique_name(&format!("rsst-{tag}"));
        ip(&["netns", "add", &name])?;
        let ns = Netns { name };
        ns.run_ok("ip", &["link", "set", "lo", "up"])?;
        Ok(ns)
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// A command that runs `program` inside the namespace (`ip netns exec NAME program`).
    pub fn command(&self, program: &str) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name, program]);
        c
    }

    /// Runs `program ARGS` inside the namespace, bounded by 30 s; a non-zero exit is an error.
    pub fn run_ok(&self, program: &str, args: &[&str]) -> Result<CmdOutput> {
        run_ok(self.command(program).args(args), CONFIG_LIMIT)
    }

    /// Runs `program ARGS` inside the namespace, bounded by `limit`; returns whatever it
    /// printed and its status.
    pub fn run(&self, program: &str, args: &[&str], limit: Duration) -> Result<CmdOutput> {
        run(self.command(program).args(args), limit)
    }

    /// Starts `program ARGS` inside the namespace as a guarded child.
    pub fn spawn(&self, program: &str, args: &[&str]) -> Result<Proc> {
        Proc::spawn(self.command(program).args(args))
    }

    /// Sets a sysctl inside the namespace (`net.*` keys are per namespace).
    pub fn sysctl(&self, key: &str, value: &str) -> Result<()> {
        self.run_ok("sysctl", &["-q", "-w", &format!("{key}={value}")])
            .map(drop)
    }

    /// Drops each packet entering or leaving this namespace's kernel with probability
    /// `probability` (iptables and ip6tables `statistic` match on INPUT and OUTPUT). Before
    /// each drop rule a rule tagged [`LOSS_SEEN_TAG`] counts every packet the drop rule
    /// judges. On INPUT the drop is two rules by length (under 200 bytes, and 200 or more,
    /// tagged so [`LossCounts::dropped_data_in`] can count it), each with `probability`:
    /// every packet still meets exactly one. The rules live in the namespace and vanish
    /// with it.
    pub fn add_random_loss(&self, probability: f64) -> Result<()> {
        let p = format!("{probability}");
        let count: [&str; 4] = ["-m", "comment", "--comment", LOSS_SEEN_TAG];
        let drop: [&str; 8] = [
            "-m",
            "statistic",
            "--mode",
            "random",
            "--probability",
            &p,
            "-j",
            "DROP",
        ];
        let small = format!("0:{}", LOSS_DATA_BYTES_MIN - 1);
        let large = format!("{}:65535", LOSS_DATA_BYTES_MIN);
        let by_length = |range: &'static str, len: &str| -> Vec<String> {
            let mut r: Vec<String> =
                vec!["-m".into(), "length".into(), "--length".into(), len.into()];
            if !range.is_empty() {
                r.extend(["-m", "comment", "--comment", range].map(String::from));
            }
            r.extend(drop.iter().map(|a| a.to_string()));
            r
        };
        let input_drops = [by_length("", &small), by_length(LOSS_DATA_IN_TAG, &large)];
        for tool in ["iptables", "ip6tables"] {
            for chain in ["INPUT", "OUTPUT"] {
                let mut rules: Vec<Vec<String>> =
                    vec![count.iter().map(|a| a.to_string()).collect()];
                if chain == "INPUT" {
                    rules.extend(input_drops.iter().cloned());
                } else {
                    rules.push(drop.iter().map(|a| a.to_string()).collect());
                }
                for rule in &rules {
                    let mut args = vec!["-w", "-A", chain];
                    args.extend(rule.iter().map(String::as_str));
                    self.run_ok(tool, &args)?;
                }
            }
        }
        Ok(())
    }

    /// What the loss rules of [`Netns::add_random_loss`] saw and dropped so far (INPUT +
    /// OUTPUT, IPv4 + IPv6), with the rule listings for a failure message.
    pub fn random_loss_counts(&self) -> Result<LossCounts> {
        let mut counts = LossCounts::default();
        for tool in ["iptables", "ip6tables"] {
            let out = self.run_ok(tool, &["-w", "-L", "-n", "-v", "-x"])?;
            let packets = |tag: &str| {
                out.stdout
                    .lines()
                    .filter(|l| l.contains(tag))
                    .filter_map(|l| l.split_whitespace().next()?.parse::<u64>().ok())
                    .sum::<u64>()
            };
            counts.seen += packets(LOSS_SEEN_TAG);
            counts.dropped += packets("statistic mode random");
            counts.dropped_data_in += packets(LOSS_DATA_IN_TAG);
            counts.listing.push_str(&out.stdout);
        }
        Ok(counts)
    }

    /// Packets the loss rules dropped so far (INPUT + OUTPUT, IPv4 + IPv6).
    pub fn random_loss_drops(&self) -> Result<u64> {
        Ok(self.random_loss_counts()?.dropped)
    }

    /// Fails unless the loss rules dropped at least one packet: a loss run in which nothing
    /// was lost proves nothing. The error names the packets seen and lists the rules.
    pub fn expect_random_loss_dropped(&self) -> Result<()> {
        let c = self.random_loss_counts()?;
        eprintln!(
            "{}: loss rules saw {} packets, dropped {}",
            self.name, c.seen, c.dropped
        );
        check(c.dropped > 0, || {
            format!(
                "the loss rules dropped nothing of the {} packets they saw:\n{}",
                c.seen, c.listing
            )
        })
    }

    /// Turns TSO, GSO and checksum offload (tx and rx) off on `dev`.
    pub fn offloads_off(&self, dev: &str) -> Result<()> {
        self.run_ok(
            "ethtool",
            &[
                "-K", dev, "tso", "off", "gso", "off", "tx", "off", "rx", "off",
            ],
        )
        .map(drop)
    }

    /// The MAC address of `dev` in this namespace.
    pub fn mac_of(&self, dev: &str) -> Result<String> {
        let out = self.run_ok("cat", &[&format!("/sys/class/net/{dev}/address")])?;
        Ok(out.stdout.trim().to_owned())
    }

    /// Adds `addr` (`A.B.C.D/P` or `X::Y/P`) to `dev`; IPv6 addresses skip duplicate address
    /// detection so they are usable at once.
    pub fn add_addr(&self, dev: &str, addr: &str) -> Result<()> {
        let mut args = vec!["addr", "add", addr, "dev", dev];
        if addr.contains(':') {
            args.push("nodad");
        }
        self.run_ok("ip", &args).map(drop)
    }

    /// Brings `dev` up.
    pub fn link_up(&self, dev: &str) -> Result<()> {
        self.run_ok("ip", &["link", "set", dev, "up"]).map(drop)
    }

    /// Kills (SIGKILL) every process still in the namespace; only processes a test started
    /// can be there, since the namespace's name is unique to this test process.
    fn kill_remaining(&self) {
        let Ok(out) = run(
            Command::new("ip").args(["netns", "pids", &self.name]),
            CONFIG_LIMIT,
        ) else {
            return;
        };
        for pid in out.stdout.split_whitespace() {
            if pid.bytes().all(|b| b.is_ascii_digit()) {
                let _ = run(Command::new("kill").args(["-s", "KILL", pid]), CONFIG_LIMIT);
            }
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        self.kill_remaining();
        let _ = run(
            Command::new("ip").args(["netns", "del", &self.name]),
            CONFIG_LIMIT,
        );
    }
}

/// A veth pair with one end in each of two namespaces, deleted (both ends) on drop. Names are
/// per namespace, so fixed names like `veth0` do not collide between tests.
#[derive(Debug)]
pub struct Veth {
    ns_a: String,
    dev_a: String,
}

impl Veth {
    /// Creates `dev_a` in `a` peered with `dev_b` in `b`, both still down.
    pub fn create(a: &Netns, dev_a: &str, b: &Netns, dev_b: &str) -> Result<Veth> {
        ip(&[
            "link", "add", dev_a, "netns", &a.name, "type", "veth", "peer", "name", dev_b, "netns",
            &b.name,
        ])?;
        Ok(Veth {
            ns_a: a.name.clone(),
            dev_a: dev_a.to_owned(),
        })
    }
}

impl Drop for Veth {
    fn drop(&mut self) {
        let _ = run(
            Command::new("ip").args(["-n", &self.ns_a, "link", "del", &self.dev_a]),
            CONFIG_LIMIT,
        );
    }
}

/// A multi-queue TAP device inside a namespace, deleted on drop. The kernel side of it is a
/// normal interface of the namespace; a user-space program attaches with `TUNSETIFF`.
#[derive(Debug)]
pub struct Tap {
    ns: String,
    dev: String,
}

impl Tap {
    /// `ip -n NS tuntap add dev NAME mode tap multi_queue`.
    pub fn create(ns: &Netns, dev: &str) -> Result<Tap> {
        ip(&[
            "-n",
            &ns.name,
            "tuntap",
            "add",
            "dev",
            dev,
            "mode",
            "tap",
            "multi_queue",
        ])?;
        Ok(Tap {
            ns: ns.name.clone(),
            dev: dev.to_owned(),
        })
    }

    pub fn name(&self) -> &str {
        &self.dev
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        let _ = run(
            Command::new("ip").args(["-n", &self.ns, "link", "del", &self.dev]),
            CONFIG_LIMIT,
        );
    }
}
