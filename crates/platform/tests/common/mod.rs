//! Helpers for tests that need root: network namespaces that clean up after themselves.
#![allow(dead_code)]

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// True when the test may proceed. Without root it returns false (the test then passes
/// vacuously) unless `RSSTACK_REQUIRE_ROOT_TESTS` is set — CI sets it, so there the root tests
/// always run and a missing privilege is a failure, not a silent skip.
pub fn require_root(test: &str) -> bool {
    // SAFETY-free check: /proc/self/status is readable by anyone.
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let is_root = status
        .lines()
        .find(|l| l.starts_with("Uid:"))
        .and_then(|l| l.split_whitespace().nth(2))
        .is_some_and(|euid| euid == "0");
    if is_root {
        return true;
    }
    if std::env::var_os("RSSTACK_REQUIRE_ROOT_TESTS").is_some() {
        panic!("{test} needs root and RSSTACK_REQUIRE_ROOT_TESTS is set");
    }
    eprintln!("{test}: not root, not run (set RSSTACK_REQUIRE_ROOT_TESTS=1 to make this an error)");
    false
}

/// Runs a command and panics with its output if it fails.
pub fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace owned by one test; deleted (with every interface in it) on drop.
pub struct Netns {
    name: String,
}

impl Netns {
    pub fn create(tag: &str) -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "rsst-{tag}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.exec("ip", &["link", "set", "lo", "up"]);
        ns
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Runs a command inside the namespace.
    pub fn exec(&self, program: &str, args: &[&str]) -> String {
        let mut full = vec!["netns", "exec", self.name.as_str(), program];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// Starts a command inside the namespace without waiting for it, so the test can keep
    /// draining its rings while the command sends. Finish it with [`Background::finish`].
    pub fn spawn(&self, program: &str, args: &[&str]) -> Background {
        let child = Command::new("ip")
            .args(["netns", "exec", self.name.as_str(), program])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {program} in {}: {e}", self.name));
        Background {
            what: format!("{program} {args:?}"),
            child: Some(child),
        }
    }
}

/// A command started by [`Netns::spawn`]; killed on drop if the test ends first.
pub struct Background {
    what: String,
    child: Option<Child>,
}

impl Background {
    /// Waits at most `timeout` for the command and panics unless it exited successfully.
    pub fn finish(mut self, timeout: Duration) {
        let mut child = self.child.take().expect("finished once");
        let deadline = Instant::now() + timeout;
        loop {
            match child.try_wait().expect("wait for a background command") {
                Some(status) => {
                    let mut err = String::new();
                    if let Some(mut e) = child.stderr.take() {
                        let _ = e.read_to_string(&mut err);
                    }
                    assert!(status.success(), "{} failed ({status}): {err}", self.what);
                    return;
                }
                None if Instant::now() >= deadline => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("{} did not finish within {timeout:?}", self.what);
                }
                None => std::thread::sleep(Duration::from_millis(10)),
            }
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// The IPv4 addresses of one kernel test: the kernel's address in the namespace, and the
/// address and MAC "behind" the device under test, which the test answers for.
#[derive(Debug, Clone, Copy)]
pub struct Addrs {
    pub kernel_ip: [u8; 4],
    pub our_ip: [u8; 4],
    pub our_mac: [u8; 6],
}

impl Addrs {
    /// The kernel's ARP request for our address.
    pub fn is_arp_request_for_us(&self, f: &[u8]) -> bool {
        f.len() >= 42
            && f[12..14] == [0x08, 0x06]
            && f[20..22] == [0, 1]
            && f[38..42] == self.our_ip
    }

    /// An IPv4/UDP datagram to our MAC and address.
    pub fn is_datagram_to_us(&self, f: &[u8]) -> bool {
        f.len() >= 42
            && f[0..6] == self.our_mac
            && f[12..14] == [0x08, 0x00]
            && f[23] == 17
            && f[30..34] == self.our_ip
    }

    /// Our ARP reply to the kernel at `kernel_mac`.
    pub fn arp_reply(&self, kernel_mac: &[u8]) -> Vec<u8> {
        let mut reply = Vec::with_capacity(42);
        reply.extend_from_slice(kernel_mac);
        reply.extend_from_slice(&self.our_mac);
        reply.extend_from_slice(&[0x08, 0x06, 0x00, 0x01, 0x08, 0x00, 6, 4, 0x00, 0x02]);
        reply.extend_from_slice(&self.our_mac);
        reply.extend_from_slice(&self.our_ip);
        reply.extend_from_slice(kernel_mac);
        reply.extend_from_slice(&self.kernel_ip);
        reply
    }
}

/// Deletes a link (for a veth, both ends) however the test ends.
pub struct LinkGuard(pub String);

impl Drop for LinkGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["link", "del", &self.0]).status();
    }
}

/// A veth pair: `near` in the root namespace (no addresses, IPv6 off), the far end in `ns`
/// with the kernel's address. Field order: the pair goes before the namespace (dropped first).
pub struct Veth {
    _guard: LinkGuard,
    pub ns: Netns,
    pub near: String,
}

impl Veth {
    /// A pair with `queues` RX and TX queues a side; the far end gets `kernel_cidr` (e.g.
    /// `10.233.0.1/24`). Names fit IFNAMSIZ: `rs<pid><tag><n>` stays within 15 bytes for a
    /// tag of up to 4 characters.
    pub fn create(tag: &str, queues: u32, kernel_cidr: &str) -> Veth {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        assert!(
            tag.len() <= 4,
            "veth tag {tag:?} too long for an interface name"
        );
        let ns = Netns::create(tag);
        let near = format!(
            "rs{}{tag}{}",
            std::process::id() % 100_000,
            NEXT.fetch_add(1, Ordering::Relaxed) % 100
        );
        let far = format!("{near}k");
        let q = queues.to_string();
        let side = |name: &str| [name, "numtxqueues", &q, "numrxqueues", &q].map(str::to_owned);
        let mut args: Vec<String> = ["link", "add"].map(str::to_owned).to_vec();
        args.extend(side(&near));
        args.extend(["type", "veth", "peer", "name"].map(str::to_owned));
        args.extend(side(&far));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run("ip", &args);
        let guard = LinkGuard(near.clone());
        run("ip", &["link", "set", &far, "netns", ns.name()]);
        run(
            "sysctl",
            &["-qw", &format!("net.ipv6.conf.{near}.disable_ipv6=1")],
        );
        run("ip", &["link", "set", &near, "up"]);
        ns.exec("sysctl", &["-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
        ns.exec("ip", &["addr", "add", kernel_cidr, "dev", &far]);
        ns.exec("ip", &["link", "set", &far, "up"]);
        Veth {
            _guard: guard,
            ns,
            near,
        }
    }
}
