//! Child processes bounded in time: [`run`] for commands that finish, [`Proc`] for servers and
//! clients a test runs beside others.
//!
//! Every child starts in its own process group (the leader's pid is the group id), so a
//! timeout or a guard's drop signals the whole group — `ip netns exec` execs in place, and the
//! tools it runs (wrk, iperf, python3) stay in the group.

use std::io::{self, BufRead, BufReader, Read};
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, TrySendError};
use std::thread;
use std::time::{Duration, Instant};

use crate::{Error, Result};

/// How often a bounded wait looks at the child.
const POLL_INTERVAL: Duration = Duration::from_millis(5);
/// How long a child has to exit after SIGTERM before it gets SIGKILL when a guard drops.
const DROP_GRACE: Duration = Duration::from_secs(3);
/// How long to wait for a killed child's output pipes to close (a grandchild that left the
/// process group may hold them open).
const PIPE_DRAIN_LIMIT: Duration = Duration::from_secs(2);
/// Output kept of one command's stdout or stderr; the rest is read and discarded (noted).
const OUTPUT_KEPT_BYTES: u64 = 16 << 20;
/// stdout lines of a [`Proc`] kept (queued plus seen); later ones are counted, not kept.
const LINES_KEPT_MAX: usize = 100_000;

/// A finished command: its exit status and everything it printed.
#[derive(Debug, Clone)]
pub struct CmdOutput {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl CmdOutput {
    /// stdout then stderr, for error messages.
    pub fn combined(&self) -> String {
        format!("{}{}", self.stdout, self.stderr)
    }

    /// "exit status 0", "signal 9".
    pub fn status_text(&self) -> String {
        status_text(self.status)
    }
}

fn status_text(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(sig)) => format!("killed by signal {sig}"),
        (None, None) => "unknown status".to_owned(),
    }
}

/// How a command is shown in messages: program and arguments.
pub(crate) fn describe(cmd: &Command) -> String {
    let mut s = cmd.get_program().to_string_lossy().into_owned();
    for a in cmd.get_args() {
        s.push(' ');
        s.push_str(&a.to_string_lossy());
    }
    s
}

/// Sends `signal` ("TERM", "KILL") to the process group `pgid` with kill(1).
fn signal_group(pgid: u32, signal: &str) {
    let _ = Command::new("kill")
        .args(["-s", signal, "--", &format!("-{pgid}")])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Reads a pipe to its end on a thread, keeping the first [`OUTPUT_KEPT_BYTES`]; the text
/// arrives on the returned channel (one message).
fn drain(pipe: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::sync_channel(1);
    thread::spawn(move || {
        let mut buf = Vec::new();
        let mut pipe = pipe.take(OUTPUT_KEPT_BYTES);
        let _ = pipe.read_to_end(&mut buf);
        let discarded = io::copy(&mut pipe.into_inner(), &mut io::sink()).unwrap_or(0);
        let mut text = String::from_utf8_lossy(&buf).into_owned();
        if discarded > 0 {
            text.push_str(&format!("\n[{discarded} more bytes discarded]\n"));
        }
        let _ = tx.send(text);
    });
    rx
}

/// Runs `cmd` to completion, killing its process group after `limit`. A non-zero exit is not
/// an error here (see [`run_ok`]); a timeout is ([`Error::Timeout`], with what it printed).
/// stdin is closed.
pub fn run(cmd: &mut Command, limit: Duration) -> Result<CmdOutput> {
    let command = describe(cmd);
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .map_err(|source| Error::Spawn {
            command: command.clone(),
            source,
        })?;
    let out_rx = child.stdout.take().map(drain);
    let err_rx = child.stderr.take().map(drain);
    let deadline = Instant::now() + limit;
    let mut timed_out = false;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if Instant::now() < deadline => thread::sleep(POLL_INTERVAL),
            Ok(None) => {
                timed_out = true;
                signal_group(child.id(), "KILL");
                match child.wait() {
                    Ok(status) => break status,
                    Err(source) => {
                        return Err(Error::Io {
                            what: format!("wait for `{command}`"),
                            source,
                        });
                    }
                }
            }
            Err(source) => {
                signal_group(child.id(), "KILL");
                let _ = child.wait();
                return Err(Error::Io {
                    what: format!("wait for `{command}`"),
                    source,
                });
            }
        }
    };
    let collect = |rx: Option<Receiver<String>>| {
        rx.and_then(|rx| rx.recv_timeout(PIPE_DRAIN_LIMIT).ok())
            .unwrap_or_default()
    };
    let out = CmdOutput {
        status,
        stdout: collect(out_rx),
        stderr: collect(err_rx),
    };
    if timed_out {
        return Err(Error::Timeout {
            command,
            limit,
            output: out.combined(),
        });
    }
    Ok(out)
}

/// [`run`], and a non-zero exit is [`Error::Failed`].
pub fn run_ok(cmd: &mut Command, limit: Duration) -> Result<CmdOutput> {
    let out = run(cmd, limit)?;
    if out.status.success() {
        Ok(out)
    } else {
        Err(Error::Failed {
            command: describe(cmd),
            status: out.status_text(),
            output: out.combined(),
        })
    }
}

/// A running child process (a server, or a client running beside other work) that is
/// stopped and reaped however the test ends.
///
/// Invariants: the child leads its own process group; the group is signalled only while the
/// leader is not yet reaped (so its pid, and with it the group id, cannot have been reused);
/// stdout lines are kept for [`Proc::wait_for_line`] and the final output, up to
/// `LINES_KEPT_MAX` = 100,000 (later ones are counted; the child never stalls on a full
/// queue).
pub struct Proc {
    child: Child,
    command: String,
    /// stdout lines, as the reader thread sees them (at most [`LINES_KEPT_MAX`] queued).
    lines: Receiver<String>,
    /// The stdout lines received from `lines` so far (at most [`LINES_KEPT_MAX`]).
    seen: Vec<String>,
    /// stdout lines not kept because the queue or `seen` was full.
    lines_dropped: Arc<AtomicU64>,
    stderr: Option<Receiver<String>>,
    reaped: Option<ExitStatus>,
}

impl Proc {
    /// Starts `cmd` with stdout and stderr captured and stdin closed.
    pub fn spawn(cmd: &mut Command) -> Result<Proc> {
        let command = describe(cmd);
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(|source| Error::Spawn {
                command: command.clone(),
                source,
            })?;
        let (tx, lines) = mpsc::sync_channel(LINES_KEPT_MAX);
        let lines_dropped = Arc::new(AtomicU64::new(0));
        if let Some(out) = child.stdout.take() {
            let dropped = Arc::clone(&lines_dropped);
            thread::spawn(move || {
                // Never blocks on a full queue: the child must not stall on its stdout.
                for line in BufReader::new(out).lines() {
                    let Ok(line) = line else { break };
                    match tx.try_send(line) {
                        Ok(()) => {}
                        Err(TrySendError::Full(_)) => {
                            dropped.fetch_add(1, Ordering::Relaxed);
                        }
                        Err(TrySendError::Disconnected(_)) => break,
                    }
                }
            });
        }
        let stderr = child.stderr.take().map(drain);
        Ok(Proc {
            child,
            command,
            lines,
            seen: Vec::new(),
            lines_dropped,
            stderr,
            reaped: None,
        })
    }

    /// The child's pid (also its process group id).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Waits up to `limit` for a stdout line containing `needle` and returns it. Fails when
    /// the child closes stdout (exits) first or the time runs out; the error shows what it
    /// printed.
    pub fn wait_for_line(&mut self, needle: &str, limit: Duration) -> Result<String> {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.keep(line.clone());
                    if hit {
                        return Ok(line);
                    }
                }
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let stderr = self.peek_stderr();
                    return Err(Error::NoLine {
                        command: self.command.clone(),
                        wanted: needle.to_owned(),
                        seen: format!("{}\n[stderr]\n{stderr}", self.seen.join("\n")),
                    });
                }
            }
        }
    }

    /// Whether the child has exited (reaping it if so).
    pub fn has_exited(&mut self) -> bool {
        if self.reaped.is_some() {
            return true;
        }
        if let Ok(Some(status)) = self.child.try_wait() {
            self.reaped = Some(status);
        }
        self.reaped.is_some()
    }

    /// Waits up to `limit` for the child to exit on its own; past it, kills the group and
    /// returns [`Error::Timeout`].
    pub fn wait(mut self, limit: Duration) -> Result<CmdOutput> {
        let deadline = Instant::now() + limit;
        while !self.has_exited() {
            if Instant::now() >= deadline {
                signal_group(self.child.id(), "KILL");
                let out = self.finish();
                return Err(Error::Timeout {
                    command: self.command.clone(),
                    limit,
                    output: out.combined(),
                });
            }
            thread::sleep(POLL_INTERVAL);
        }
        Ok(self.finish())
    }

    /// Sends SIGTERM to the group, waits up to `grace` for the exit, then SIGKILL; returns
    /// the status and everything printed (a server's summary comes at SIGTERM).
    pub fn stop(mut self, grace: Duration) -> CmdOutput {
        self.terminate(grace);
        self.finish()
    }

    fn terminate(&mut self, grace: Duration) {
        if self.has_exited() {
            return;
        }
        signal_group(self.child.id(), "TERM");
        let deadline = Instant::now() + grace;
        while !self.has_exited() {
            if Instant::now() >= deadline {
                signal_group(self.child.id(), "KILL");
                if let Ok(status) = self.child.wait() {
                    self.reaped = Some(status);
                }
                return;
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Collects the remaining output of an exited (reaped) child.
    fn finish(&mut self) -> CmdOutput {
        if self.reaped.is_none() {
            if let Ok(status) = self.child.wait() {
                self.reaped = Some(status);
            }
        }
        let deadline = Instant::now() + PIPE_DRAIN_LIMIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => self.keep(line),
                Err(_) => break,
            }
        }
        let stderr = self
            .stderr
            .take()
            .and_then(|rx| rx.recv_timeout(PIPE_DRAIN_LIMIT).ok())
            .unwrap_or_default();
        let mut stdout = self.seen.join("\n");
        stdout.push('\n');
        let dropped = self.lines_dropped.load(Ordering::Relaxed);
        if dropped > 0 {
            stdout.push_str(&format!("[{dropped} more lines not kept]\n"));
        }
        CmdOutput {
            status: self.reaped.unwrap_or_else(|| ExitStatus::from_raw(-1)),
            stdout,
            stderr,
        }
    }

    /// Keeps a stdout line, or counts it once [`LINES_KEPT_MAX`] are kept.
    fn keep(&mut self, line: String) {
        if self.seen.len() < LINES_KEPT_MAX {
            self.seen.push(line);
        } else {
            self.lines_dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// stderr is only complete at exit; before that nothing of it can be shown without
    /// blocking, so this says so.
    fn peek_stderr(&mut self) -> String {
        if self.has_exited() {
            self.stderr
                .take()
                .and_then(|rx| rx.recv_timeout(PIPE_DRAIN_LIMIT).ok())
                .unwrap_or_default()
        } else {
            "(still running)".to_owned()
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate(DROP_GRACE);
        if self.reaped.is_none() {
            let _ = self.child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Command {
        let mut c = Command::new("sh");
        c.args(["-c", script]);
        c
    }

    #[test]
    fn run_returns_output_and_status() {
        let out = run(
            &mut sh("echo out; echo err >&2; exit 3"),
            Duration::from_secs(10),
        )
        .unwrap();
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.stdout, "out\n");
        assert_eq!(out.stderr, "err\n");
        assert!(matches!(
            run_ok(&mut sh("exit 3"), Duration::from_secs(10)),
            Err(Error::Failed { .. })
        ));
    }

    #[test]
    fn run_kills_a_command_past_its_limit_and_its_children() {
        let started = Instant::now();
        let r = run(
            &mut sh("sleep 30 & echo $!; sleep 30"),
            Duration::from_millis(300),
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        let Err(Error::Timeout { output, .. }) = r else {
            panic!("not a timeout: {r:?}");
        };
        let pid = output.trim();
        assert!(
            !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()),
            "{output:?}"
        );
        // The background sleep was in the group: killed (then reaped by whoever adopted it).
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            if stat.is_empty() || stat.contains(") Z ") {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "background child {pid} survived: {stat}"
            );
            thread::sleep(Duration::from_millis(20));
        }
    }

    #[test]
    fn wait_for_line_finds_a_later_line_and_times_out_on_a_missing_one() {
        let mut p = Proc::spawn(&mut sh(
            "echo starting; sleep 0.1; echo listening on 80; sleep 30",
        ))
        .unwrap();
        let line = p
            .wait_for_line("listening", Duration::from_secs(10))
            .unwrap();
        assert_eq!(line, "listening on 80");
        let r = p.wait_for_line("never", Duration::from_millis(200));
        assert!(matches!(r, Err(Error::NoLine { .. })), "{r:?}");
    }

    #[test]
    fn stop_delivers_sigterm_so_a_trap_can_print_a_summary() {
        let mut p = Proc::spawn(&mut sh(
            "trap 'echo summary: 42; exit 0' TERM; echo listening; while :; do sleep 0.05; done",
        ))
        .unwrap();
        p.wait_for_line("listening", Duration::from_secs(10))
            .unwrap();
        let out = p.stop(Duration::from_secs(5));
        assert!(out.status.success(), "{}", out.status_text());
        assert!(out.stdout.contains("summary: 42"), "{}", out.stdout);
    }

    #[test]
    fn dropping_a_proc_kills_a_child_that_ignores_sigterm() {
        let mut p = Proc::spawn(&mut sh(
            "trap '' TERM; echo up; while :; do sleep 0.05; done",
        ))
        .unwrap();
        p.wait_for_line("up", Duration::from_secs(10)).unwrap();
        let pid = p.id();
        let started = Instant::now();
        drop(p);
        assert!(started.elapsed() < DROP_GRACE + Duration::from_secs(5));
        assert!(!std::path::Path::new(&format!("/proc/{pid}")).exists());
    }

    #[test]
    fn a_chatty_child_never_stalls_and_its_unkept_lines_are_counted() {
        let p = Proc::spawn(&mut sh("seq 1 150000")).unwrap();
        let out = p.wait(Duration::from_secs(20)).unwrap();
        assert!(out.status.success());
        assert!(out.stdout.starts_with("1\n2\n"));
        assert!(
            out.stdout.contains("more lines not kept"),
            "{}",
            &out.stdout[..200]
        );
    }

    #[test]
    fn wait_times_out_a_child_that_does_not_exit() {
        let p = Proc::spawn(&mut sh("sleep 30")).unwrap();
        let r = p.wait(Duration::from_millis(200));
        assert!(matches!(r, Err(Error::Timeout { .. })), "{r:?}");
    }
}
