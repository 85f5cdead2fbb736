//! The set-up every interop test shares: a Linux peer in a throwaway network namespace, the
//! `rsstack` binary attached to it over TAP, AF_PACKET or AF_XDP, and the tools' checks.
//!
//! Layouts (addresses are the same in every test: each test has its own namespaces):
//!
//! - TAP: one namespace. The test creates the multi-queue TAP device there, gives its kernel
//!   side 10.77.0.1/24 and fd00:77::1/64, and runs `rsstack --tap tap0` inside; the kernel of
//!   the namespace is the peer.
//! - AF_PACKET / AF_XDP: two namespaces joined by a veth pair. The peer's end (`veth0`) has the
//!   kernel addresses; rsstack runs in the other namespace on `veth1`, which has no address
//!   and IPv6 disabled, so that kernel stays silent.
//!
//! rsstack is 10.77.0.2/24 and fd00:77::2/64 with MAC 02:72:73:00:00:02.
//!
//! Tests in one binary take [`serial`] first: each runs rsstack's shards and a Linux peer on
//! a 2-core budget, and two at once would measure each other.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use testnet::{Netns, Proc, Result, Tap, Veth, check, have_program};

/// The binary under test; `RSSTACK_BIN` overrides it (to run the interop tests against
/// another build, e.g. a release binary).
pub fn rsstack_bin() -> String {
    std::env::var("RSSTACK_BIN").unwrap_or_else(|_| env!("CARGO_BIN_EXE_rsstack").to_owned())
}
pub const PEER_V4: &str = "10.77.0.1";
pub const DUT_V4: &str = "10.77.0.2";
pub const PEER_V6: &str = "fd00:77::1";
pub const DUT_V6: &str = "fd00:77::2";
pub const DUT_MAC: &str = "02:72:73:00:00:02";

/// How long rsstack may take to print its `listening` line.
pub const READY_LIMIT: Duration = Duration::from_secs(30);
/// How long rsstack may take to print its summary and exit after SIGTERM.
pub const STOP_GRACE: Duration = Duration::from_secs(15);

/// Serialises the tests of one test binary (see the module doc). A test that failed while
/// holding it does not stop the others.
pub fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Fails, naming the missing tools, unless every one of `tools` is installed
/// (`scripts/test.sh` installs them).
pub fn need_tools(tools: &[&str]) -> Result<()> {
    let missing: Vec<&str> = tools.iter().copied().filter(|t| !have_program(t)).collect();
    check(missing.is_empty(), || {
        format!("missing tools {missing:?}: run scripts/test.sh's system packages step")
    })
}

/// How rsstack reaches the peer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    Tap,
    /// `--io af_packet` with its default ring.
    AfPacket,
    /// `--io af_packet --af-packet-ring v3`: TPACKET_V3 blocks (not the default ring).
    AfPacketV3,
    AfXdp,
}

impl Backend {
    /// The words rsstack's `listening` line names this port with, e.g. `af_packet veth1
    /// tpacket_v2`.
    pub fn listening_words(self) -> String {
        match self {
            Backend::Tap => "tap tap0".into(),
            Backend::AfPacket => format!(
                "af_packet veth1 {}",
                runtime::host::AF_PACKET_RING_DEFAULT.name()
            ),
            Backend::AfPacketV3 => "af_packet veth1 tpacket_v3".into(),
            Backend::AfXdp => "af_xdp veth1".into(),
        }
    }
}

/// Offload settings of the Linux peer's interface.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offloads {
    /// As the kernel creates the device (veth: TSO, GSO, tx/rx checksum offload on).
    Default,
    /// `ethtool -K DEV tso off gso off tx off rx off`.
    Off,
}

/// A Linux peer and the place rsstack runs, with everything removed on drop.
pub struct Topology {
    pub backend: Backend,
    /// Dropped first: links, then namespaces (fields drop in declaration order).
    _veth: Option<Veth>,
    _tap: Option<Tap>,
    /// The namespace whose kernel is the peer.
    pub peer: Netns,
    /// Where rsstack runs (`None`: in `peer`, for TAP).
    dut: Option<Netns>,
    /// The peer's interface toward rsstack.
    pub peer_dev: &'static str,
}

impl Topology {
    pub fn new(backend: Backend, offloads: Offloads) -> Result<Topology> {
        let peer = Netns::create("peer")?;
        match backend {
            Backend::Tap => {
                let tap = Tap::create(&peer, "tap0")?;
                peer.add_addr("tap0", &format!("{PEER_V4}/24"))?;
                peer.add_addr("tap0", &format!("{PEER_V6}/64"))?;
                peer.link_up("tap0")?;
                if offloads == Offloads::Off {
                    peer.offloads_off("tap0")?;
                }
                Ok(Topology {
                    backend,
                    _veth: None,
                    _tap: Some(tap),
                    peer,
                    dut: None,
                    peer_dev: "tap0",
                })
            }
            Backend::AfPacket | Backend::AfPacketV3 | Backend::AfXdp => {
                let dut = Netns::create("dut")?;
                let veth = Veth::create(&peer, "veth0", &dut, "veth1")?;
                dut.sysctl("net.ipv6.conf.all.disable_ipv6", "1")?;
                dut.sysctl("net.ipv6.conf.default.disable_ipv6", "1")?;
                dut.sysctl("net.ipv6.conf.veth1.disable_ipv6", "1")?;
                dut.link_up("veth1")?;
                peer.add_addr("veth0", &format!("{PEER_V4}/24"))?;
                peer.add_addr("veth0", &format!("{PEER_V6}/64"))?;
                if offloads == Offloads::Off {
                    peer.offloads_off("veth0")?;
                }
                peer.link_up("veth0")?;
                Ok(Topology {
                    backend,
                    _veth: Some(veth),
                    _tap: None,
                    peer,
                    dut: Some(dut),
                    peer_dev: "veth0",
                })
            }
        }
    }

    /// The namespace rsstack runs in.
    pub fn dut(&self) -> &Netns {
        self.dut.as_ref().unwrap_or(&self.peer)
    }

    /// The I/O and address options for this layout.
    pub fn io_args(&self) -> Vec<String> {
        let mut a: Vec<String> = match self.backend {
            Backend::Tap => vec!["--tap".into(), "tap0".into()],
            Backend::AfPacket => vec![
                "--iface".into(),
                "veth1".into(),
                "--io".into(),
                "af_packet".into(),
            ],
            Backend::AfPacketV3 => vec![
                "--iface".into(),
                "veth1".into(),
                "--io".into(),
                "af_packet".into(),
                "--af-packet-ring".into(),
                "v3".into(),
            ],
            Backend::AfXdp => vec![
                "--iface".into(),
                "veth1".into(),
                "--io".into(),
                "af_xdp".into(),
            ],
        };
        for x in [
            "--ip",
            &format!("{DUT_V4}/24"),
            "--ip",
            &format!("{DUT_V6}/64"),
            "--mac",
            DUT_MAC,
        ] {
            a.push(x.to_owned());
        }
        a
    }

    /// Starts `rsstack ARGS <io args>` in the rsstack namespace and waits for its `listening`
    /// line.
    pub fn serve(&self, args: &[&str]) -> Result<Rsstack> {
        let mut p = self.spawn_rsstack(args)?;
        p.wait_for_line("listening", READY_LIMIT)?;
        Ok(Rsstack(p))
    }

    /// Starts `rsstack ARGS <io args>` in the rsstack namespace.
    pub fn spawn_rsstack(&self, args: &[&str]) -> Result<Proc> {
        let io = self.io_args();
        let mut all: Vec<&str> = args.to_vec();
        all.extend(io.iter().map(String::as_str));
        self.dut().spawn(&rsstack_bin(), &all)
    }

    /// Runs `rsstack ARGS <io args>` to completion in the rsstack namespace, bounded by
    /// `limit`; a non-zero exit is an error.
    pub fn run_rsstack(&self, args: &[&str], limit: Duration) -> Result<testnet::CmdOutput> {
        let p = self.spawn_rsstack(args)?;
        let out = p.wait(limit)?;
        check(out.status.success(), || {
            format!(
                "rsstack {args:?} ended with {}:\n{}",
                out.status_text(),
                out.combined()
            )
        })?;
        Ok(out)
    }

    /// Runs a Linux tool in the peer namespace, bounded by `limit`; non-zero exit is an error.
    pub fn peer_run(&self, program: &str, args: &[&str], limit: Duration) -> Result<String> {
        let out = self.peer.run(program, args, limit)?;
        check(out.status.success(), || {
            format!(
                "{program} {args:?} ended with {}:\n{}",
                out.status_text(),
                out.combined()
            )
        })?;
        Ok(out.stdout)
    }
}

/// A running `rsstack serve`: stopped with SIGTERM by [`Rsstack::stop`], which checks the
/// clean exit and returns the summary; killed if the test ends early.
pub struct Rsstack(pub Proc);

impl Rsstack {
    /// SIGTERM, then checks: exit status 0, no panic; returns everything it printed.
    pub fn stop(self) -> Result<String> {
        let out = self.0.stop(STOP_GRACE);
        let all = out.combined();
        check(out.status.success(), || {
            format!(
                "rsstack ended with {} at SIGTERM:\n{all}",
                out.status_text()
            )
        })?;
        check(!all.contains("panicked"), || {
            format!("rsstack panicked:\n{all}")
        })?;
        Ok(all)
    }

    /// Fails if rsstack is no longer running (it crashed under the test's traffic).
    pub fn still_running(&mut self) -> Result<()> {
        check(!self.0.has_exited(), || {
            "rsstack exited during the test".into()
        })
    }
}

/// The files of an HTTP test, named by size.
pub const FILE_SIZES: [(&str, u64); 5] = [
    ("1k.bin", 1 << 10),
    ("64k.bin", 64 << 10),
    ("1m.bin", 1 << 20),
    ("10m.bin", 10 << 20),
    ("100m.bin", 100 << 20),
];

/// Writes the files of [`FILE_SIZES`] (those up to `max_bytes`) and an `index.html` into
/// `dir`.
pub fn write_site(dir: &Path, max_bytes: u64) -> Result<Vec<(String, PathBuf)>> {
    let mut files = Vec::new();
    for (i, (name, len)) in FILE_SIZES.iter().enumerate() {
        if *len > max_bytes {
            continue;
        }
        let p = dir.join(name);
        testnet::write_random_file(&p, *len, 0x5eed + i as u64)?;
        files.push(((*name).to_owned(), p));
    }
    std::fs::write(
        dir.join("index.html"),
        "<!doctype html><title>rsstack</title><p>hello from rsstack</p>\n",
    )
    .map_err(|source| testnet::Error::Io {
        what: "write index.html".into(),
        source,
    })?;
    Ok(files)
}

/// `curl` from the peer: fetches `url` into `out`, returns (HTTP status, Content-Type).
pub fn curl(topo: &Topology, url: &str, out: &Path, limit: Duration) -> Result<(u16, String)> {
    let max_time = limit.as_secs().saturating_sub(5).max(5).to_string();
    let stdout = topo.peer_run(
        "curl",
        &[
            "-sS",
            "--max-time",
            &max_time,
            "-o",
            &out.to_string_lossy(),
            "-w",
            "%{http_code} %{content_type}",
            url,
        ],
        limit,
    )?;
    let (code, ctype) = stdout.trim().split_once(' ').unwrap_or((stdout.trim(), ""));
    let code = code
        .parse()
        .map_err(|_| testnet::Error::Check(format!("curl printed {stdout:?}")))?;
    Ok((code, ctype.to_owned()))
}

/// The counters in rsstack's summary (see `testnet::tools::numbers`).
pub fn counters(summary: &str) -> std::collections::BTreeMap<String, f64> {
    testnet::tools::numbers(summary)
}

/// A Python program for `python3 -c`: opens `count` connections from `src` to `dst:80` without blocking (fewer if the process
/// may not hold that many descriptors), sends nothing, prints `opened N`, then holds them
/// for `hold_s` seconds.
pub const IDLE_FLOOD: &str = r#"
import errno, resource, socket, sys, time
src, dst, count, hold_s = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
want = count + 100 if hard == resource.RLIM_INFINITY else min(count + 100, hard)
resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
socks = []
for _ in range(min(count, want - 100)):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setblocking(False)
    s.bind((src, 0))
    try:
        s.connect((dst, 80))
    except BlockingIOError:
        pass
    except OSError as e:
        if e.errno != errno.EINPROGRESS:
            s.close()
            continue
    socks.append(s)
print("opened", len(socks), flush=True)
time.sleep(hold_s)
"#;
