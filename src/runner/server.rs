//! `ptecheck runner`: the runner protocol served from the reference runtime, so the harness's
//! real-runtime machinery is tested without Python. `fault` plants a seeded bug in the runtime
//! (a discrepancy the differential campaigns must find); `chaos` makes the process misbehave
//! on purpose (crash, hang, garbage, no hello) to test the harness's handling of broken runners.
//! May not touch: the IR, emission, the oracle (it serves the reference runtime as it is).

use super::protocol::{Hello, MAX_LINE, PROTOCOL, Reply, Request, Stage, error_line, hello_line, read_line_bounded};
use crate::fault::Fault;
use crate::format;
use crate::runtime::{HostValue, Runtime, RuntimeError, Session};
use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::path::PathBuf;

/// A way for the server to misbehave (harness tests only).
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
    /// Report every `load_method` failure with this code (a runtime whose init errors carry
    /// other codes than ExecuTorch's).
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

/// What this runner announces.
pub fn hello(rt: &Runtime) -> Hello {
    Hello {
        protocol: PROTOCOL,
        name: "ptecheck-reference".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        backends: rt.registry.ids(),
        operators: crate::runtime::kernels::KERNELS.iter().map(|k| k.name.to_string()).collect(),
    }
}

/// Programs read by path, the last few kept.
struct Files(VecDeque<(PathBuf, Vec<u8>)>);

impl Files {
    fn get(&mut self, p: &PathBuf) -> std::io::Result<&[u8]> {
        if let Some(i) = self.0.iter().position(|(q, _)| q == p) {
            let e = self.0.remove(i).unwrap_or_default();
            self.0.push_back(e);
        } else {
            let bytes = std::fs::read(p)?;
            if self.0.len() == 8 {
                self.0.pop_front();
            }
            self.0.push_back((p.clone(), bytes));
        }
        Ok(self.0.back().map(|(_, b)| b.as_slice()).unwrap_or_default())
    }
}

fn error(stage: Stage, message: String, code: Option<u32>) -> Reply {
    Reply::Error { message, stage, code }
}

fn code_of(e: &RuntimeError) -> Option<u32> {
    Some(e.code() as u32)
}

/// Runs one request on `rt`.
fn answer(rt: &Runtime, files: &mut Files, req: &Request) -> Reply {
    let bytes = match files.get(&req.pte) {
        Ok(b) => b.to_vec(),
        Err(e) => return error(Stage::LoadProgram, format!("cannot read {}: {e}", req.pte.display()), Some(0x22)),
    };
    let loaded = match format::load(&bytes) {
        Ok(l) => l,
        Err(e) => return error(Stage::LoadProgram, e.to_string(), Some(0x23)),
    };
    let ptd_bytes = match req.ptd.as_ref().map(std::fs::read).transpose() {
        Ok(b) => b,
        Err(e) => return error(Stage::LoadProgram, format!("cannot read the .ptd: {e}"), Some(0x22)),
    };
    let ptd = match ptd_bytes.as_deref().map(format::load_ptd).transpose() {
        Ok(p) => p,
        Err(e) => return error(Stage::LoadProgram, format!(".ptd: {e}"), Some(0x24)),
    };
    let session = Session::new(&loaded, rt).with_external(ptd.as_ref());
    let mut m = match session.load(&req.method) {
        Ok(m) => m,
        Err(e) => return error(Stage::LoadMethod, e.to_string(), code_of(&e)),
    };
    for (i, v) in req.inputs.iter().enumerate() {
        if let Err(e) = m.set_input(i, v) {
            return error(Stage::SetInputs, e.to_string(), code_of(&e));
        }
    }
    if req.inputs.len() != m.num_inputs() {
        return error(
            Stage::SetInputs,
            format!("{} inputs given, the method takes {}", req.inputs.len(), m.num_inputs()),
            Some(0x12),
        );
    }
    if let Err(e) = m.execute() {
        return error(Stage::Execute, e.to_string(), code_of(&e));
    }
    match m.outputs() {
        Ok(o) if o.iter().all(|v| !matches!(v, HostValue::None)) => Reply::Outputs(o),
        Ok(_) => error(Stage::ReadOutputs, "an output has no host form".into(), None),
        Err(e) => error(Stage::ReadOutputs, e.to_string(), code_of(&e)),
    }
}

/// Serves the protocol on `input`/`output` until `input` closes.
pub fn serve(
    input: impl BufRead,
    mut output: impl Write,
    fault: Option<Fault>,
    chaos: Option<Chaos>,
) -> std::io::Result<()> {
    if chaos == Some(Chaos::ExitBeforeHello) {
        eprintln!("chaos: exiting before the hello");
        std::process::exit(3);
    }
    let mut rt = crate::backends::default_runtime();
    rt.fault = fault;
    writeln!(output, "{}", hello_line(&hello(&rt)))?;
    output.flush()?;
    let mut files = Files(VecDeque::new());
    let mut n = 0u64;
    let (mut input, mut buf) = (input, Vec::new());
    // Lines are read within MAX_LINE bytes; a longer one, or one that is not UTF-8, is
    // answered as a bad request and the next line is served.
    while let Some(too_long) = read_line_bounded(&mut input, MAX_LINE, &mut buf)? {
        let refused = match std::str::from_utf8(&buf) {
            _ if too_long => Some(format!("a request line longer than {MAX_LINE} bytes")),
            Err(e) => Some(format!("a request line that is not UTF-8: {e}")),
            // Blank as the ExecuTorch runner's `bytes.strip()` sees it: ASCII white space only.
            Ok(line) if line.bytes().all(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)) => continue,
            Ok(_) => None,
        };
        if let Some(why) = refused {
            writeln!(output, "{}", error_line(None, &why, Stage::Request, None))?;
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
        let mut reply = match Request::parse(&line) {
            Ok(req) => (Some(req.id), answer(&rt, &mut files, &req)),
            Err(e) => (e.id, error(Stage::Request, e.to_string(), None)),
        };
        if let (Some(Chaos::InitCode(c)), Reply::Error { stage: Stage::LoadMethod, code, .. }) = (chaos, &mut reply.1) {
            *code = Some(c);
        }
        // Outputs the corpus encoding does not hold (a float16 tensor, …) are a `read_outputs`
        // error naming the output, as ExecuTorch's runner answers them.
        let line = reply.1.to_line(reply.0).unwrap_or_else(|e| {
            error_line(reply.0, &format!("{e} (not in the corpus encoding)"), Stage::ReadOutputs, None)
        });
        writeln!(output, "{line}")?;
        output.flush()?;
    }
    Ok(())
}
