//! `ptecheck runner`: the runner protocol served from the reference runtime, so the harness's
//! real-runtime machinery is tested without Python. `fault` plants a seeded bug in the runtime
//! (a discrepancy the differential campaigns must find); `chaos` makes the process misbehave
//! on purpose (crash, hang, garbage, no hello) to test the harness's handling of broken runners.
//! May not touch: the IR, emission, the oracle (it serves the reference runtime as it is).

use super::protocol::{Hello, PROTOCOL, Reply, Request, Stage, error_line, hello_line};
use crate::child::serve_lines;
pub use crate::child::{Chaos, ChaosError};
use crate::fault::Fault;
use crate::format;
use crate::runtime::{HostValue, Runtime, RuntimeError, Session};
use std::collections::VecDeque;
use std::io::{BufRead, Write};
use std::path::PathBuf;

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
    output: impl Write,
    fault: Option<Fault>,
    chaos: Option<Chaos>,
) -> std::io::Result<()> {
    if chaos == Some(Chaos::ExitBeforeHello) {
        eprintln!("chaos: exiting before the hello");
        std::process::exit(3);
    }
    let mut rt = crate::backends::default_runtime();
    rt.fault = fault;
    let mut files = Files(VecDeque::new());
    let refuse = |why: &str| error_line(None, why, Stage::Request, None);
    let mut answer_line = |line: &str| {
        let mut reply = match Request::parse(line) {
            Ok(req) => (Some(req.id), answer(&rt, &mut files, &req)),
            Err(e) => (e.id, error(Stage::Request, e.to_string(), None)),
        };
        if let (Some(Chaos::InitCode(c)), Reply::Error { stage: Stage::LoadMethod, code, .. }) = (chaos, &mut reply.1) {
            *code = Some(c);
        }
        // Outputs the corpus encoding does not hold (a float16 tensor, …) are a `read_outputs`
        // error naming the output, as ExecuTorch's runner answers them.
        reply.1.to_line(reply.0).unwrap_or_else(|e| {
            error_line(reply.0, &format!("{e} (not in the corpus encoding)"), Stage::ReadOutputs, None)
        })
    };
    serve_lines(input, output, &hello_line(&hello(&rt)), chaos, &refuse, &mut answer_line)
}
