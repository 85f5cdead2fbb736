//! Helpers for tests that run rsstack against real Linux peers (dev-only, never published).
//!
//! Everything a test creates is owned by a guard that undoes it on `Drop`, so a failing or
//! panicking test still leaves the machine as it found it:
//!
//! - [`Netns`]: a network namespace with a unique name (`rsst-<tag>-<pid>-<n>`), deleted on
//!   drop after every process still inside it has been killed;
//! - [`Veth`] and [`Tap`]: links inside those namespaces, deleted on drop;
//! - [`Proc`]: a child process in its own process group, sent SIGTERM and then SIGKILL after a
//!   grace period, and reaped, on drop; its stdout is read by a thread so a test can wait for a
//!   line with a timeout ([`Proc::wait_for_line`]);
//! - [`TempDir`]: a scratch directory, removed on drop.
//!
//! Every external command runs bounded in time ([`run`], [`Netns::run`]): past its timeout the
//! whole process group is killed and the call returns [`Error::Timeout`].
//!
//! [`frames`] builds the malformed frames of the bad-input tests with the `wire` crate and
//! writes them to a pcap file for `tcpreplay`.

use std::fmt;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

mod netns;
mod process;

pub mod frames;
pub mod tools;

pub use netns::{LOSS_SEEN_TAG, LossCounts, Netns, Tap, Veth};
pub use process::{CmdOutput, Proc, run, run_ok};

/// What went wrong in a helper: always says which command or file, and why.
#[derive(Debug)]
pub enum Error {
    /// A program could not be started (not installed, not executable).
    Spawn { command: String, source: io::Error },
    /// A command ran past its time limit and was killed.
    Timeout {
        command: String,
        limit: Duration,
        output: String,
    },
    /// A command exited unsuccessfully.
    Failed {
        command: String,
        status: String,
        output: String,
    },
    /// A child's stdout ended, or the wait ran out, before the expected line appeared.
    NoLine {
        command: String,
        wanted: String,
        seen: String,
    },
    /// File-system error on a test file.
    Io { what: String, source: io::Error },
    /// Anything else a helper or a test checks, with its explanation.
    Check(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Spawn { command, source } => write!(f, "cannot start `{command}`: {source}"),
            Error::Timeout {
                command,
                limit,
                output,
            } => write!(
                f,
                "`{command}` still running after {limit:?}, killed; output:\n{output}"
            ),
            Error::Failed {
                command,
                status,
                output,
            } => write!(f, "`{command}` failed ({status}); output:\n{output}"),
            Error::NoLine {
                command,
                wanted,
                seen,
            } => write!(
                f,
                "`{command}` printed no line containing {wanted:?}; it printed:\n{seen}"
            ),
            Error::Io { what, source } => write!(f, "{what}: {source}"),
            Error::Check(msg) => f.write_str(msg),
        }
    }
}

impl std::error::Error for Error {}

/// Result of the helpers.
pub type Result<T> = std::result::Result<T, Error>;

/// Shorthand for a failed check with a message.
pub fn check(cond: bool, msg: impl FnOnce() -> String) -> Result<()> {
    if cond {
        Ok(())
    } else {
        Err(Error::Check(msg()))
    }
}

/// True when the test may proceed: the effective user is root. Without root it returns false
/// (the test then does nothing) unless `RSSTACK_REQUIRE_ROOT_TESTS` is set — CI sets it, so
/// there a missing privilege is a failure, not a silent skip. Same semantics as the platform
/// crate's kernel tests.
pub fn require_root(test: &str) -> bool {
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

/// True when `program` is installed, so a part of `test` that needs it may run. When it is
/// missing the part is skipped with a message saying so, unless `RSSTACK_REQUIRE_ROOT_TESTS`
/// is set (CI, `scripts/test.sh` as root, which installs every tool): there a missing tool
/// panics, so a check never passes by not running.
pub fn want_program(test: &str, program: &str) -> bool {
    if have_program(program) {
        return true;
    }
    if std::env::var_os("RSSTACK_REQUIRE_ROOT_TESTS").is_some() {
        panic!(
            "{test} needs {program}, which is not installed, and RSSTACK_REQUIRE_ROOT_TESTS is \
             set (scripts/test.sh installs it)"
        );
    }
    eprintln!(
        "{test}: {program} is not installed, its check skipped (set RSSTACK_REQUIRE_ROOT_TESTS=1 \
         to make this an error)"
    );
    false
}

/// A name unique in this machine for this process's lifetime: `<prefix>-<pid>-<n>`.
pub fn unique_name(prefix: &str) -> String {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// A scratch directory under the system temporary directory, removed with its contents on
/// drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `$TMPDIR/rsst-<tag>-<pid>-<n>`.
    pub fn new(tag: &str) -> Result<TempDir> {
        let path = std::env::temp_dir().join(unique_name(&format!("rsst-{tag}")));
        std::fs::create_dir_all(&path).map_err(|source| Error::Io {
            what: format!("create {}", path.display()),
            source,
        })?;
        Ok(TempDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A path inside the directory.
    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Writes `len_bytes` of pseudo-random bytes (xorshift64*, from `seed`) to `path`: contents
/// that no compression or zero-page shortcut can fake, reproducible from the seed.
pub fn write_random_file(path: &Path, len_bytes: u64, seed: u64) -> Result<()> {
    let io_err = |source| Error::Io {
        what: format!("write {}", path.display()),
        source,
    };
    let file = std::fs::File::create(path).map_err(io_err)?;
    let mut out = io::BufWriter::with_capacity(1 << 20, file);
    let mut state = seed | 1;
    let mut block = vec![0u8; 1 << 16];
    let mut left = len_bytes;
    while left > 0 {
        for chunk in block.chunks_exact_mut(8) {
            state ^= state >> 12;
            state ^= state << 25;
            state ^= state >> 27;
            chunk.copy_from_slice(&state.wrapping_mul(0x2545_f491_4f6c_dd1d).to_le_bytes());
        }
        let n = usize::try_from(left.min(block.len() as u64)).unwrap_or(block.len());
        out.write_all(&block[..n]).map_err(io_err)?;
        left -= n as u64;
    }
    out.flush().map_err(io_err)
}

/// The SHA-256 of a file as lowercase hex, computed by `sha256sum` (bounded to 120 s).
pub fn sha256_file(path: &Path) -> Result<String> {
    let out = run_ok(
        std::process::Command::new("sha256sum").arg(path),
        Duration::from_secs(120),
    )?;
    out.stdout
        .split_whitespace()
        .next()
        .filter(|h| h.len() == 64 && h.bytes().all(|b| b.is_ascii_hexdigit()))
        .map(str::to_owned)
        .ok_or_else(|| Error::Check(format!("sha256sum printed {:?}", out.stdout)))
}

/// True when `program` is found on `PATH` (the interop tests need Linux tools that
/// `scripts/test.sh` installs).
pub fn have_program(program: &str) -> bool {
    std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|dir| {
            let p = dir.join(program);
            p.is_file()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_file_has_requested_length_and_is_reproducible_from_its_seed() {
        let dir = TempDir::new("unit").unwrap();
        let (a, b, c) = (dir.join("a"), dir.join("b"), dir.join("c"));
        write_random_file(&a, 100_003, 7).unwrap();
        write_random_file(&b, 100_003, 7).unwrap();
        write_random_file(&c, 100_003, 8).unwrap();
        assert_eq!(std::fs::metadata(&a).unwrap().len(), 100_003);
        assert_eq!(sha256_file(&a).unwrap(), sha256_file(&b).unwrap());
        assert_ne!(sha256_file(&a).unwrap(), sha256_file(&c).unwrap());
    }

    #[test]
    fn sha256_of_known_content_matches_the_published_digest() {
        let dir = TempDir::new("unit").unwrap();
        let p = dir.join("abc");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            sha256_file(&p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn temp_dir_is_removed_on_drop() {
        let dir = TempDir::new("unit").unwrap();
        let path = dir.path().to_owned();
        std::fs::write(dir.join("f"), b"x").unwrap();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn unique_names_differ_within_a_process() {
        assert_ne!(unique_name("x"), unique_name("x"));
    }
}
