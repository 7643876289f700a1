//! The harness side of a peer process (a runner, an exporter): a long-lived child speaking JSON
//! Lines, its hello, pipelined requests under a per-request deadline, and every way it can go
//! wrong recorded as an [`Outcome`] of the request that caused it. A child that exits, dies by a
//! signal, hangs or replies garbage is killed if need be and restarted; the requests it had not
//! answered are sent to the new process (the one that ended it is reported, not re-sent). The
//! messages are a [`Protocol`]'s.
//! May not touch: what the messages mean (the protocol's module owns them).

use serde::Serialize;
use std::collections::VecDeque;
use std::io::{BufRead, Read};
use std::io::{BufReader, Write};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel, sync_channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use thiserror::Error;
/// A protocol a child speaks: how its lines are read and written.
pub trait Protocol {
    /// What the child is called in messages (`runner`, `exporter`).
    const ROLE: &'static str;
    /// What the child announces before any request.
    type Hello: Clone;
    /// One request.
    type Request;
    /// One reply.
    type Reply: Clone + std::fmt::Debug + PartialEq + Classed;
    /// Why a request cannot be written in the protocol.
    type Unwritable: Clone + std::fmt::Debug + PartialEq + std::fmt::Display;
    /// Reads the hello line.
    fn parse_hello(line: &str) -> Result<Self::Hello, Garbage>;
    /// The request's line (without the newline).
    fn request_line(r: &Self::Request) -> Result<String, Self::Unwritable>;
    /// The request's id.
    fn request_id(r: &Self::Request) -> u64;
    /// Reads a reply line: its id and the reply.
    fn parse_reply(line: &str) -> Result<(u64, Self::Reply), Garbage>;
}

/// Declares a protocol over `child`: a unit type with the role, message types and readers of a
/// protocol whose requests have `to_line` and `id`, and whose replies have `parse`.
macro_rules! protocol {
    ($(#[$doc:meta])* $name:ident: $role:literal, $hello:ty, $request:ty, $reply:ty, $unwritable:ty, $parse_hello:path) => {
        $(#[$doc])*
        pub struct $name;

        impl $crate::child::Protocol for $name {
            const ROLE: &'static str = $role;
            type Hello = $hello;
            type Request = $request;
            type Reply = $reply;
            type Unwritable = $unwritable;

            fn parse_hello(line: &str) -> Result<$hello, $crate::child::Garbage> {
                $parse_hello(line)
            }

            fn request_line(r: &$request) -> Result<String, $unwritable> {
                r.to_line()
            }

            fn request_id(r: &$request) -> u64 {
                r.id
            }

            fn parse_reply(line: &str) -> Result<(u64, $reply), $crate::child::Garbage> {
                <$reply>::parse(line)
            }
        }
    };
}
pub(crate) use protocol;

/// A message with a one-word class for reports (`ok`, `error`, …).
pub trait Classed {
    /// The class.
    fn class(&self) -> &'static str;
}

/// A reply no process gives (the outcome of a child that ended before its hello).
#[derive(Clone, Debug, PartialEq)]
enum Never {}

impl Classed for Never {
    fn class(&self) -> &'static str {
        match *self {}
    }
}

/// A line that is not a well-formed message of the protocol.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Garbage(pub String);

/// Longest line either side reads: a reply longer than this is garbage, a request longer than
/// this is refused.
pub const MAX_LINE: usize = 64 << 20;

/// Stderr lines kept for reports.
pub const STDERR_TAIL: usize = 20;
/// Bytes of one stderr line read (the rest of a longer line is dropped).
const STDERR_LINE: usize = 4096;

/// How to run a child.
#[derive(Clone, Debug)]
pub struct ChildConfig {
    /// Shell command (`sh -c`).
    pub command: String,
    /// Time allowed for the hello.
    pub start_timeout: Duration,
    /// Time allowed for each reply.
    pub request_timeout: Duration,
    /// Requests written ahead of their replies.
    pub window: usize,
}

impl ChildConfig {
    /// A configuration with the default timeouts (60 s hello, 10 s per request) and window 8.
    pub fn new(command: impl Into<String>) -> Self {
        ChildConfig {
            command: command.into(),
            start_timeout: Duration::from_secs(60),
            request_timeout: Duration::from_secs(10),
            window: 8,
        }
    }
}

/// What happened to one request (`R`: the protocol's reply; `U`: why a request cannot be
/// written).
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<R, U> {
    /// The child replied.
    Reply(R),
    /// The child exited before replying.
    Exited {
        /// Exit status.
        status: Option<i32>,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// The child died of a signal before replying.
    Signalled {
        /// Signal number.
        signal: i32,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// No reply before the deadline (the child was killed).
    Hung {
        /// How long the harness waited.
        waited_ms: u64,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// A line that is not the expected reply (the child was killed).
    Garbage {
        /// The line (at most 200 characters).
        line: String,
        /// What is wrong with it.
        why: String,
        /// Last stderr lines.
        stderr: Vec<String>,
    },
    /// The child could not be (re)started.
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
    Unencodable(U),
}

impl<R: Classed, U> Outcome<R, U> {
    /// The outcome's class: the reply's own (`ok`, `error`, …), or `exited`, `signalled`,
    /// `hung`, `garbage`, `no_runner`, `too_long`, `unencodable`.
    pub fn class(&self) -> &'static str {
        match self {
            Outcome::Reply(r) => r.class(),
            Outcome::Exited { .. } => "exited",
            Outcome::Signalled { .. } => "signalled",
            Outcome::Hung { .. } => "hung",
            Outcome::Garbage { .. } => "garbage",
            Outcome::NoRunner { .. } => "no_runner",
            Outcome::TooLong { .. } => "too_long",
            Outcome::Unencodable(_) => "unencodable",
        }
    }
}

impl<R, U> Outcome<R, U> {
    /// Whether the child process ended on this request.
    pub fn ended_process(&self) -> bool {
        !matches!(self, Outcome::Reply(_)) && !self.unsent()
    }

    /// Whether the request was not sent (too long, or not writable in the protocol).
    pub fn unsent(&self) -> bool {
        matches!(self, Outcome::TooLong { .. } | Outcome::Unencodable(_))
    }
}

/// Why a child could not start.
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
    #[error("{role} `{command}` gave no hello: {why}{}", tail(stderr))]
    NoHello {
        /// What the child is (`runner`, `exporter`).
        role: &'static str,
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

/// Counts over a child's life.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ChildStats {
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
        // Its own process group: killing the child kills everything `sh -c` started.
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
        // as they are awaited): a child that writes more than asked blocks on its own stdout
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

    /// Kills the child's whole process group (the shell and whatever it started), then reaps
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
    fn ended<R, U>(&mut self) -> Outcome<R, U> {
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

/// A child: its configuration, its current process and its hello.
pub struct Client<P: Protocol> {
    cfg: ChildConfig,
    proc: Option<Proc>,
    hello: P::Hello,
    next_id: u64,
    stats: ChildStats,
}

fn short(line: &str) -> String {
    line.chars().take(200).collect()
}

impl<P: Protocol> Client<P> {
    fn start_proc(cfg: &ChildConfig) -> Result<(Proc, P::Hello), StartError> {
        let mut p = Proc::spawn(&cfg.command)?;
        let no_hello = |why: String, p: &Proc| StartError::NoHello {
            role: P::ROLE,
            command: cfg.command.clone(),
            why,
            stderr: p.stderr_tail(),
        };
        match p.lines.recv_timeout(cfg.start_timeout) {
            Ok(Line::Text(l)) => match P::parse_hello(&l) {
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
                let why = match p.ended::<Never, ()>() {
                    Outcome::Exited { status, .. } => format!("exited with status {status:?}"),
                    Outcome::Signalled { signal, .. } => format!("killed by signal {signal}"),
                    other => other.class().to_string(),
                };
                Err(no_hello(why, &p))
            }
        }
    }

    /// Starts the child and reads its hello.
    pub fn start(cfg: ChildConfig) -> Result<Self, StartError> {
        let (p, hello) = Self::start_proc(&cfg)?;
        Ok(Client { cfg, proc: Some(p), hello, next_id: 0, stats: ChildStats { starts: 1, ..Default::default() } })
    }

    /// What the child announced.
    pub fn hello(&self) -> &P::Hello {
        &self.hello
    }

    /// Counts so far.
    pub fn stats(&self) -> &ChildStats {
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
    pub fn run(&mut self, requests: &[P::Request]) -> Vec<Outcome<P::Reply, P::Unwritable>> {
        let n = requests.len();
        // Each line is made once; one that cannot be written or is too long to send is answered
        // now, without a child (none is started or restarted for it), and its place in the
        // window is skipped when writing.
        let made: Vec<Result<String, P::Unwritable>> = requests.iter().map(P::request_line).collect();
        let mut out: Vec<Option<Outcome<P::Reply, P::Unwritable>>> = made
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
            let expected = P::request_id(&requests[done]);
            let outcome = match p.lines.recv_timeout(self.cfg.request_timeout) {
                Ok(Line::Text(l)) => match P::parse_reply(&l) {
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

/// A way for a server (`ptecheck runner`, `ptecheck exporter`) to misbehave (harness tests only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Chaos {
    /// Exit with status 3 before the hello.
    ExitBeforeHello,
    /// Abort (SIGABRT) on the n-th request (1-based).
    CrashOn(u64),
    /// Exit with status 7 on the n-th request, without a reply.
    ExitOn(u64),
    /// Never answer the n-th request.
    HangOn(u64),
    /// Answer the n-th request with a line that is not JSON.
    GarbageOn(u64),
    /// (Runners) report every `load_method` failure with this code (a runtime whose init
    /// errors carry other codes than ExecuTorch's).
    InitCode(u32),
}

impl Chaos {
    /// Parses `exit-before-hello`, `crash-on:N`, `exit-on:N`, `hang-on:N`, `garbage-on:N`,
    /// `init-code:N`.
    pub fn parse(s: &str) -> Result<Chaos, ChaosError> {
        let n = |v: &str| v.parse::<u64>().map_err(|_| ChaosError::BadRequestNumber(s.to_string()));
        match s.split_once(':') {
            None if s == "exit-before-hello" => Ok(Chaos::ExitBeforeHello),
            Some(("crash-on", v)) => Ok(Chaos::CrashOn(n(v)?)),
            Some(("exit-on", v)) => Ok(Chaos::ExitOn(n(v)?)),
            Some(("hang-on", v)) => Ok(Chaos::HangOn(n(v)?)),
            Some(("garbage-on", v)) => Ok(Chaos::GarbageOn(n(v)?)),
            Some(("init-code", v)) => {
                v.parse::<u32>().map(Chaos::InitCode).map_err(|_| ChaosError::BadCode(s.to_string()))
            }
            _ => Err(ChaosError::Unknown(s.to_string())),
        }
    }
}

/// A `--chaos` value that does not parse.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChaosError {
    /// A request number that is not one.
    #[error("bad request number in `{0}`")]
    BadRequestNumber(String),
    /// An error code that is not one.
    #[error("bad error code in `{0}`")]
    BadCode(String),
    /// No such chaos.
    #[error("unknown chaos `{0}` (exit-before-hello, crash-on:N, exit-on:N, hang-on:N, garbage-on:N, init-code:N)")]
    Unknown(String),
}

/// Serves a protocol on `input`/`output` until `input` closes: writes `hello`, then answers each
/// request line with `answer`'s line. A line longer than [`MAX_LINE`] or not UTF-8 gets
/// `refuse`'s line and the next is served; a blank line is skipped. `chaos` misbehaves on
/// purpose.
pub fn serve_lines(
    input: impl BufRead,
    mut output: impl Write,
    hello: &str,
    chaos: Option<Chaos>,
    refuse: &dyn Fn(&str) -> String,
    answer: &mut dyn FnMut(&str) -> String,
) -> std::io::Result<()> {
    writeln!(output, "{hello}")?;
    output.flush()?;
    let mut n = 0u64;
    let (mut input, mut buf) = (input, Vec::new());
    while let Some(too_long) = read_line_bounded(&mut input, MAX_LINE, &mut buf)? {
        let refused = match std::str::from_utf8(&buf) {
            _ if too_long => Some(format!("a request line longer than {MAX_LINE} bytes")),
            Err(e) => Some(format!("a request line that is not UTF-8: {e}")),
            // Blank as the ExecuTorch runner's `bytes.strip()` sees it: ASCII white space only.
            Ok(line) if line.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) => continue,
            Ok(_) => None,
        };
        if let Some(why) = refused {
            writeln!(output, "{}", refuse(&why))?;
            output.flush()?;
            continue;
        }
        let line = String::from_utf8_lossy(&buf).into_owned();
        n += 1;
        match chaos {
            Some(Chaos::CrashOn(k)) if k == n => {
                eprintln!("chaos: aborting on request {n}");
                std::process::abort();
            }
            Some(Chaos::ExitOn(k)) if k == n => {
                eprintln!("chaos: exiting with status 7 on request {n}");
                std::process::exit(7);
            }
            Some(Chaos::HangOn(k)) if k == n => loop {
                std::thread::sleep(std::time::Duration::from_secs(3600));
            },
            Some(Chaos::GarbageOn(k)) if k == n => {
                writeln!(output, "chaos: this is not a reply")?;
                output.flush()?;
                continue;
            }
            _ => {}
        }
        writeln!(output, "{}", answer(&line))?;
        output.flush()?;
    }
    Ok(())
}

/// Reads one line of at most `max` bytes (newline excluded) into `buf`, which is emptied
/// first; the rest of a longer line is read and dropped a chunk at a time, so memory stays
/// bounded by `max` whatever the child writes. `Ok(None)` at end of input, else whether the
/// line was longer than `max`.
pub fn read_line_bounded(r: &mut impl BufRead, max: usize, buf: &mut Vec<u8>) -> std::io::Result<Option<bool>> {
    buf.clear();
    if (&mut *r).take(max as u64 + 1).read_until(b'\n', buf)? == 0 {
        return Ok(None);
    }
    if buf.ends_with(b"\n") {
        buf.pop();
        return Ok(Some(false));
    }
    if buf.len() <= max {
        // The last line, without a newline.
        return Ok(Some(false));
    }
    loop {
        let (done, used) = {
            let chunk = r.fill_buf()?;
            match chunk.iter().position(|b| *b == b'\n') {
                Some(i) => (true, i + 1),
                None => (chunk.is_empty(), chunk.len()),
            }
        };
        r.consume(used);
        if done {
            return Ok(Some(true));
        }
    }
}
