//! Helpers for tests that need root: network namespaces that clean up after themselves.
#![allow(dead_code)]

use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

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
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}
