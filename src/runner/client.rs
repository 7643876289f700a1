//! The harness side of a runner: a long-lived child process, its hello, pipelined requests
//! under a per-request deadline, and every way it can go wrong recorded as an [`Outcome`] of
//! the request that caused it. A runner that exits, dies by a signal, hangs or replies garbage
//! is killed if need be and restarted; the requests it had not answered are sent to the new
//! process (the one that ended it is reported, not re-sent).
//! May not touch: the runtime, the backends, the oracle (it knows only the protocol and its child).

use super::protocol::{Garbage, Hello, MAX_LINE, Reply, Request, parse_hello, read_line_bounded};
use crate::runtime::io::IoError;
use serde::Serialize;
use std::collections::VecDeque;
use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;
/// Stderr lines kept for reports.
pub const STDERR_TAIL: usize = 20;
/// Bytes of one stderr line read (the rest of a longer line is dropped).
const STDERR_LINE: usize = 4096;

/// How to run a runner.
#[derive(Clone, Debug)]
pub struct RunnerConfig {
    /// Shell command (`sh -c`).
    pub command: String,
    /// Time allowed for the hello.
    pub start_timeout: Duration,
    /// Time allowed for each reply.
    pub request_timeout: Duration,
    /// Requests written ahead of their replies.
    pub window: usize,
}

impl RunnerConfig {
    /// A configuration with the default timeouts (60 s hello, 10 s per request) and window 8.
    pub fn new(command: impl Into<String>) -> Self {
        RunnerConfig {
            command: command.into(),
            start_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            window: 8,
        }
    }
}

/// What happened to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// The runner replied.
    Reply(Reply),
    /// The runner exited before replying.
    Exited {
        /// Exit status.
        status: Option<i32>,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// The runner died of a signal before replying.
    Signalled {
        /// Signal number.
        signal: i32,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// No reply before the deadline (the runner was killed).
    Hung {
        /// How long the harness waited.
        waited_ms: u64,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// A line that is not the expected reply (the runner was killed).
    Garbage {
        /// The line (at most 200 characters).
        line: String,
        /// What is wrong with it.
        why: String,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// The runner could not be (re)started.
    NoRunner {
        /// Why.
        why: String,
    },
    /// The request's line is longer than the protocol's [`MAX_LINE`]: it was not sent (the
    /// runner would refuse it unread), and the runner goes on with the next.
    TooLong {
        /// The line's length in bytes.
        bytes: usize,
    },
    /// The request cannot be written in the protocol (an input the corpus encoding does not
    /// hold, a path that is not UTF-8): it was not sent, and the runner goes on with the next.
    Unencodable(IoError),
}

impl Outcome {
    /// The outcome's class: `ok`, `error`, `exited`, `signalled`, `hung`, `garbage`, `no_runner`.
    pub fn class(&self) -> &'static str {
        match self {
            Outcome::Reply(Reply::Outputs(_)) => "ok",
            Outcome::Reply(Reply::Error { .. }) => "error",
            Outcome::Exited { .. } => "exited",
            Outcome::Signalled { .. } => "signalled",
            Outcome::Hung { .. } => "hung",
            Outcome::Garbage { .. } => "garbage",
            Outcome::NoRunner { .. } => "no_runner",
            Outcome::TooLong { .. } => "too_long",
            Outcome::Unencodable(_) => "unencodable",
        }
    }

    /// Whether the runner process ended on this request.
    pub fn ended_process(&self) -> bool {
        !matches!(self, Outcome::Reply(_)) && !self.unsent()
    }

    /// Whether the request was not sent (too long, or not writable in the protocol).
    pub fn unsent(&self) -> bool {
        matches!(self, Outcome::TooLong { .. } | Outcome::Unencodable(_))
    }
}

/// Why a runner could not start.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum StartError {
    /// The command could not be spawned.
    #[error("cannot start `{command}`: {why}")]
    Spawn {
        /// The command.
        command: String,
        /// The OS error.
        why: String,
    },
    /// It ended, or wrote something else, or nothing in time, before its hello.
    #[error("runner `{command}` gave no hello: {why}{}", tail(stderr))]
    NoHello {
        /// The command.
        command: String,
        /// What happened.
        why: String,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
}

fn tail(stderr: &[String]) -> String {
    if stderr.is_empty() { String::new() } else { format!(" (stderr: {})", stderr.join(" | ")) }
}

/// Counts over a runner's life.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RunnerStats {
    /// Requests answered or ended.
    pub requests: u64,
    /// Processes started (the first included).
    pub starts: u64,
    /// Requests that ended a process, by class.
    pub ended: std::collections::BTreeMap<String, u64>,
}

enum Line {
    Text(String),
    TooLong,
    /// A line that is not UTF-8 (shown replaced), and why.
    NotUtf8(String, String),
}

struct Proc {
    child: Child,
    /// Request lines, written to the child's stdin by a thread of their own: the harness never
    /// blocks on a child that stopped reading (every wait is a `recv_timeout`).
    stdin: Sender<String>,
    lines: Receiver<Line>,
    stderr: Arc<Mutex<VecDeque<String>>>,
}

impl Proc {
    /// Starts `command`.
    fn spawn(command: &str) -> Result<Proc, StartError> {
        use std::os::unix::process::CommandExt;
        // Its own process group: killing the runner kills everything `sh -c` started.
        let mut child = Command::new("sh")
            .arg("-c")
            .arg(command)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| StartError::Spawn { command: command.into(), why: e.to_string() })?;
        let spawn_err = |what: &str| StartError::Spawn { command: command.into(), why: format!("no {what} pipe") };
        let stdin_pipe = child.stdin.take().ok_or_else(|| spawn_err("stdin"))?;
        let stdout = child.stdout.take().ok_or_else(|| spawn_err("stdout"))?;
        let stderr_pipe = child.stderr.take().ok_or_else(|| spawn_err("stderr"))?;
        let (stdin, requests) = channel::<String>();
        std::thread::spawn(move || {
            let mut pipe: ChildStdin = stdin_pipe;
            for line in requests {
                if pipe.write_all(line.as_bytes()).and_then(|()| pipe.flush()).is_err() {
                    // The process is gone; its end is read from stdout.
                    break;
                }
            }
        });
        // One line waits unread at most (writes never block the harness, so replies are read
        // as they are awaited): a runner that writes more than asked blocks on its own stdout
        // instead of filling the harness's memory.
        let (tx, lines) = sync_channel(1);
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut buf = Vec::new();
            while let Ok(Some(too_long)) = read_line_bounded(&mut r, MAX_LINE, &mut buf) {
                // The protocol's lines are UTF-8: one that is not is never read as if it were.
                let line = match std::str::from_utf8(&buf) {
                    _ if too_long => Line::TooLong,
                    Ok(text) => Line::Text(text.trim_end_matches('\r').to_string()),
                    Err(e) => Line::NotUtf8(String::from_utf8_lossy(&buf).into_owned(), e.to_string()),
                };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let keep = stderr.clone();
        std::thread::spawn(move || {
            // Lines of any length and any bytes: each kept as its first characters, so the
            // reader never stops (a child blocked on a full stderr pipe would look hung).
            let mut r = BufReader::new(stderr_pipe);
            let mut buf = Vec::new();
            while let Ok(Some(_)) = read_line_bounded(&mut r, STDERR_LINE, &mut buf) {
                let mut q = keep.lock().unwrap_or_else(|p| p.into_inner());
                if q.len() == STDERR_TAIL {
                    q.pop_front();
                }
                q.push_back(String::from_utf8_lossy(&buf).chars().take(500).collect());
            }
        });
        Ok(Proc { child, stdin, lines, stderr })
    }

    fn stderr_tail(&self) -> Vec<String> {
        // Give the stderr reader a moment to catch the last words of a dying process.
        std::thread::sleep(Duration::from_millis(20));
        self.stderr.lock().unwrap_or_else(|p| p.into_inner()).iter().cloned().collect()
    }

    /// Kills the runner's whole process group (the shell and whatever it started), then reaps
    /// the shell.
    fn kill(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill")
            .args(["-KILL", "--", &group])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// The outcome of a process whose stdout closed.
    fn ended(&mut self) -> Outcome {
        let stderr = self.stderr_tail();
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            match self.child.try_wait() {
                Ok(Some(status)) => {
                    use std::os::unix::process::ExitStatusExt;
                    return match (status.signal(), status.code()) {
                        (Some(signal), _) => Outcome::Signalled { signal, stderr },
                        // `sh -c` reports a child killed by signal N as status 128 + N.
                        (None, Some(c)) if (129..=128 + 64).contains(&c) => {
                            Outcome::Signalled { signal: c - 128, stderr }
                        }
                        (None, code) => Outcome::Exited { status: code, stderr },
                    };
                }
                Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(5)),
                _ => {
                    // Closed its stdout but lives on: kill it.
                    self.kill();
                    return Outcome::Exited { status: None, stderr };
                }
            }
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A runner: its configuration, its current process and its hello.
pub struct Runner {
    cfg: RunnerConfig,
    proc: Option<Proc>,
    hello: Hello,
    next_id: u64,
    stats: RunnerStats,
}

fn short(line: &str) -> String {
    line.chars().take(200).collect()
}

impl Runner {
    fn start_proc(cfg: &RunnerConfig) -> Result<(Proc, Hello), StartError> {
        let mut p = Proc::spawn(&cfg.command)?;
        let no_hello =
            |why: String, p: &Proc| StartError::NoHello { command: cfg.command.clone(), why, stderr: p.stderr_tail() };
        match p.lines.recv_timeout(cfg.start_timeout) {
            Ok(Line::Text(l)) => match parse_hello(&l) {
                Ok(h) => Ok((p, h)),
                Err(Garbage(why)) => {
                    p.kill();
                    Err(no_hello(format!("first line is not a hello ({why}): {}", short(&l)), &p))
                }
            },
            Ok(Line::TooLong) => {
                p.kill();
                Err(no_hello("first line is over-long".into(), &p))
            }
            Ok(Line::NotUtf8(l, why)) => {
                p.kill();
                Err(no_hello(format!("first line is not UTF-8 ({why}): {}", short(&l)), &p))
            }
            Err(RecvTimeoutError::Timeout) => {
                p.kill();
                Err(no_hello(format!("nothing within {:?}", cfg.start_timeout), &p))
            }
            Err(RecvTimeoutError::Disconnected) => {
                let why = match p.ended() {
                    Outcome::Exited { status, .. } => format!("exited with status {status:?}"),
                    Outcome::Signalled { signal, .. } => format!("killed by signal {signal}"),
                    other => other.class().to_string(),
                };
                Err(no_hello(why, &p))
            }
        }
    }

    /// Starts the runner and reads its hello.
    pub fn start(cfg: RunnerConfig) -> Result<Runner, StartError> {
        let (p, hello) = Self::start_proc(&cfg)?;
        Ok(Runner { cfg, proc: Some(p), hello, next_id: 0, stats: RunnerStats { starts: 1, ..Default::default() } })
    }

    /// What the runner announced.
    pub fn hello(&self) -> &Hello {
        &self.hello
    }

    /// Counts so far.
    pub fn stats(&self) -> &RunnerStats {
        &self.stats
    }

    /// A fresh request id.
    pub fn next_id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    fn ensure(&mut self) -> Result<(), String> {
        if self.proc.is_none() {
            let (p, h) = Self::start_proc(&self.cfg).map_err(|e| e.to_string())?;
            self.stats.starts += 1;
            self.hello = h;
            self.proc = Some(p);
        }
        Ok(())
    }

    /// Runs `requests` in order (pipelined) and returns one outcome per request.
    pub fn run(&mut self, requests: &[Request]) -> Vec<Outcome> {
        let n = requests.len();
        // Each line is made once; one that cannot be written or is too long to send is answered
        // now, without a runner (none is started or restarted for it), and its place in the
        // window is skipped when writing.
        let made: Vec<Result<String, IoError>> = requests.iter().map(Request::to_line).collect();
        let mut out: Vec<Option<Outcome>> = made
            .iter()
            .map(|l| match l {
                Err(e) => Some(Outcome::Unencodable(e.clone())),
                Ok(l) => (l.len() > MAX_LINE).then_some(Outcome::TooLong { bytes: l.len() }),
            })
            .collect();
        let lines: Vec<String> = made.into_iter().map(Result::unwrap_or_default).collect();
        let (mut sent, mut done) = (0usize, 0usize);
        while done < n {
            if out[done].is_some() {
                done += 1;
                self.stats.requests += 1;
                continue;
            }
            if let Err(why) = self.ensure() {
                for o in out.iter_mut().skip(done) {
                    o.get_or_insert_with(|| Outcome::NoRunner { why: why.clone() });
                }
                break;
            }
            let Some(p) = self.proc.as_mut() else { break };
            sent = sent.max(done);
            while sent < n && sent < done + self.cfg.window.max(1) {
                if out[sent].is_some() {
                    sent += 1;
                    continue;
                }
                let mut line = String::with_capacity(lines[sent].len() + 1);
                line.push_str(&lines[sent]);
                line.push('\n');
                if p.stdin.send(line).is_err() {
                    // The writer stopped: the process is gone; its end is read below.
                    break;
                }
                sent += 1;
            }
            let expected = requests[done].id;
            let outcome = match p.lines.recv_timeout(self.cfg.request_timeout) {
                Ok(Line::Text(l)) => match Reply::parse(&l) {
                    Ok((id, reply)) if id == expected => Outcome::Reply(reply),
                    Ok((id, _)) => Outcome::Garbage {
                        line: short(&l),
                        why: format!("reply to request {id}, expected {expected}"),
                        stderr: p.stderr_tail(),
                    },
                    Err(Garbage(why)) => Outcome::Garbage { line: short(&l), why, stderr: p.stderr_tail() },
                },
                Ok(Line::TooLong) => Outcome::Garbage {
                    line: String::new(),
                    why: format!("a line longer than {MAX_LINE} bytes"),
                    stderr: p.stderr_tail(),
                },
                Ok(Line::NotUtf8(l, why)) => {
                    Outcome::Garbage { line: short(&l), why: format!("not UTF-8 ({why})"), stderr: p.stderr_tail() }
                }
                Err(RecvTimeoutError::Timeout) => {
                    let stderr = p.stderr_tail();
                    p.kill();
                    Outcome::Hung { waited_ms: self.cfg.request_timeout.as_millis() as u64, stderr }
                }
                Err(RecvTimeoutError::Disconnected) => p.ended(),
            };
            if outcome.ended_process() {
                // Kill what is left and restart for the requests after this one.
                if let Some(mut p) = self.proc.take() {
                    p.kill();
                }
                *self.stats.ended.entry(outcome.class().to_string()).or_default() += 1;
                sent = done + 1;
            }
            out[done] = Some(outcome);
            done += 1;
            self.stats.requests += 1;
        }
        out.into_iter().map(|o| o.unwrap_or(Outcome::NoRunner { why: "not run".into() })).collect()
    }
}
