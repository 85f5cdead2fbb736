//! A live host over a real TAP (root): `run_host` serves HTTP to the kernel's TCP in a
//! throwaway network namespace.

#[path = "../../platform/tests/common/mod.rs"]
mod common;

use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use apps::http::{FileSet, HttpServer};
use common::{Netns, require_root};
use runtime::{HostConfig, HostLimits, LiveConfig, LiveIo, run_host};
use stack::{InterfaceConfig, Ipv4Cidr};
use wire::EthernetAddress;

/// Deletes the persistent TAP wherever it is (in the namespace once moved there, else here).
struct TapGuard {
    name: String,
    ns: String,
}

impl Drop for TapGuard {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["-n", &self.ns, "link", "del", &self.name])
            .status();
        let _ = Command::new("ip")
            .args(["link", "del", &self.name])
            .status();
    }
}

#[test]
fn a_live_host_on_a_tap_serves_http_to_the_kernel_in_a_namespace() {
    if !require_root("a_live_host_on_a_tap_serves_http_to_the_kernel_in_a_namespace") {
        return;
    }
    let ns = Netns::create("live");
    let name = format!("rsl{}", std::process::id() % 100_000);
    // Pre-created and persistent, as the interop tests do: rsstack attaches, never deletes.
    common::run(
        "ip",
        &["tuntap", "add", "dev", &name, "mode", "tap", "multi_queue"],
    );
    let _guard = TapGuard {
        name: name.clone(),
        ns: ns.name().to_string(),
    };
    let iface = InterfaceConfig::new(
        EthernetAddress([0x02, 0, 0, 0, 0x4c, 0x01]),
        Ipv4Cidr::new([10, 78, 0, 2].into(), 24),
    );
    let mut cfg = HostConfig::new(iface, 2);
    cfg.queues = 1;
    let live = LiveConfig {
        io: LiveIo::Tap {
            name: name.clone(),
            queues: 1,
        },
        capture: None,
    };
    let stop = Arc::new(AtomicBool::new(false));
    let ready = Arc::new(AtomicBool::new(false));
    let limits = HostLimits {
        // A bound in case the test fails before it sets `stop`.
        duration: Some(Duration::from_secs(60)),
        stop_when_done: false,
        monitor_every: Duration::from_millis(5),
    };
    let host = {
        let (stop, ready) = (stop.clone(), ready.clone());
        let files = Arc::new(FileSet::demo(3000));
        std::thread::spawn(move || {
            run_host(
                &cfg,
                &live,
                move |_| HttpServer::new(80, files.clone()),
                limits,
                stop,
                |v| {
                    if v.ready {
                        ready.store(true, Ordering::Release);
                    }
                },
            )
        })
    };
    let start = Instant::now();
    while !ready.load(Ordering::Acquire) && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(ready.load(Ordering::Acquire), "the host started");
    // The TAP's fd stays ours when the interface moves into the namespace.
    common::run("ip", &["link", "set", &name, "netns", ns.name()]);
    ns.exec("sysctl", &["-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
    ns.exec("ip", &["addr", "add", "10.78.0.1/24", "dev", &name]);
    ns.exec("ip", &["link", "set", &name, "up"]);
    let mut codes = Vec::new();
    for _ in 0..6 {
        let out = Command::new("ip")
            .args(["netns", "exec", ns.name(), "curl", "-sS", "--max-time", "5"])
            .args(["-o", "/dev/null", "-w", "%{http_code} %{size_download}"])
            .arg("http://10.78.0.2/index.html")
            .output()
            .expect("run curl");
        codes.push(String::from_utf8_lossy(&out.stdout).into_owned());
    }
    stop.store(true, Ordering::Release);
    let report = host.join().expect("host thread").expect("run_host");
    assert!(
        codes.iter().all(|c| c == "200 3000"),
        "curl results: {codes:?}"
    );
    let requests: u64 = report
        .host
        .shards
        .iter()
        .map(|s| s.app.stats().requests)
        .sum();
    assert_eq!(requests, 6);
    assert_eq!(report.host.drops(), 0);
    // The TAP is still there: rsstack does not delete a device it did not create.
    ns.exec("ip", &["link", "show", &name]);
}
