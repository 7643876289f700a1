//! Messages of the runner protocol (docs/runner-protocol.md, version 1): the hello, requests,
//! replies, with values in the corpus encoding (`runtime::io`).
//! May not touch: processes (`client` and `server` own them), execution.

use crate::runtime::HostValue;
use crate::runtime::io::{IoError, IoFault, ioerr, list_from_raw, list_to_json};
use crate::runtime::json_text::{self, Scalar};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;

pub use crate::child::{Garbage, MAX_LINE};
use std::path::PathBuf;
use thiserror::Error;

/// The protocol version this harness speaks.
pub const PROTOCOL: u64 = 1;

/// What a runner announces about itself before any request.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol version.
    pub protocol: u64,
    /// What it wraps.
    pub name: String,
    /// Its version.
    pub version: String,
    /// Backend ids its `init` can succeed for.
    #[serde(default)]
    pub backends: Vec<String>,
    /// Kernels it has, as `name.overload`.
    #[serde(default)]
    pub operators: Vec<String>,
}

/// A stage a request failed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stage {
    /// The request itself was malformed.
    Request,
    /// Loading the program.
    LoadProgram,
    /// Loading (initialising) the method.
    LoadMethod,
    /// Setting the inputs.
    SetInputs,
    /// Executing.
    Execute,
    /// Reading the outputs.
    ReadOutputs,
}

/// One request: run `method` of the program at `pte` on `inputs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Chosen by the harness, echoed in the reply.
    pub id: u64,
    /// Absolute path of the program.
    pub pte: PathBuf,
    /// Method name.
    pub method: String,
    /// Inputs.
    pub inputs: Vec<HostValue>,
    /// External data file.
    pub ptd: Option<PathBuf>,
}

impl Request {
    /// The request's JSON line (without the newline). Refuses, with its path, an input the
    /// corpus encoding does not hold and a path that is not UTF-8 (the line carries text).
    pub fn to_line(&self) -> Result<String, IoError> {
        let text =
            |p: &PathBuf, at: &str| p.to_str().map(str::to_string).ok_or_else(|| ioerr(at, IoFault::Not("UTF-8")));
        Ok(json!({
            "id": self.id,
            "op": "run",
            "pte": text(&self.pte, "$.pte")?,
            "method": self.method,
            "inputs": list_to_json(&self.inputs, "$.inputs")?,
            "ptd": self.ptd.as_ref().map(|p| text(p, "$.ptd")).transpose()?,
        })
        .to_string())
    }

    /// Parses a request line (the server side), keeping nothing of it but the request.
    pub fn parse(line: &str) -> Result<Request, RequestError> {
        let refused = |id: Option<u64>, fault: RequestFault| RequestError { id, fault };
        let members = json_text::members(line, ["id", "op", "pte", "method", "inputs", "ptd"])
            .map_err(|e| refused(None, RequestFault::NotJson(e.to_string())))?;
        let [id, op, pte, method, inputs, ptd] = members.unwrap_or_default();
        let id = id.map(Scalar::of).and_then(|i| i.as_u64()).ok_or(refused(None, RequestFault::NoId))?;
        let bad = |fault: RequestFault| refused(Some(id), fault);
        if op.is_some_and(|o| Scalar::of(o).as_str() != Some("run")) {
            return Err(bad(RequestFault::UnsupportedOp));
        }
        let text = |m: Option<&RawValue>, name: &'static str| {
            m.map(Scalar::of)
                .and_then(|s| s.as_str().map(str::to_string))
                .ok_or_else(|| bad(RequestFault::Missing(name)))
        };
        let (pte, method) = (text(pte, "pte")?, text(method, "method")?);
        let inputs = match inputs {
            Some(raw) => list_from_raw(raw, "$.inputs"),
            None => Err(ioerr("$.inputs", IoFault::Not("an array"))),
        }
        .map_err(|e| bad(RequestFault::Inputs(e)))?;
        let ptd = match ptd.filter(|p| !json_text::is_null(p)) {
            None => None,
            Some(p) => Some(PathBuf::from(Scalar::of(p).as_str().ok_or_else(|| bad(RequestFault::NotAString("ptd")))?)),
        };
        Ok(Request { id, pte: PathBuf::from(pte), method, inputs, ptd })
    }
}

/// A request line the server refuses, with the request's id when it could be read.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{fault}")]
pub struct RequestError {
    /// The request's id (`None` when the line is not JSON or has none).
    pub id: Option<u64>,
    /// What is wrong.
    pub fault: RequestFault,
}

/// What is wrong with a request line.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RequestFault {
    /// The line is not JSON.
    #[error("not JSON: {0}")]
    NotJson(String),
    /// No integer `id`.
    #[error("missing `id`")]
    NoId,
    /// An `op` other than `run`.
    #[error("unsupported `op`")]
    UnsupportedOp,
    /// A required member is absent.
    #[error("missing `{0}`")]
    Missing(&'static str),
    /// A member that must be a string is something else.
    #[error("`{0}` is not a string")]
    NotAString(&'static str),
    /// The inputs do not decode.
    #[error("{0}")]
    Inputs(crate::runtime::io::IoError),
}

/// A runner's answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// The method's outputs.
    Outputs(Vec<HostValue>),
    /// A typed failure.
    Error {
        /// Message.
        message: String,
        /// Where it failed.
        stage: Stage,
        /// ExecuTorch error code, when known.
        code: Option<u32>,
    },
}

/// `ok` or `error`.
impl crate::child::Classed for Reply {
    fn class(&self) -> &'static str {
        match self {
            Reply::Outputs(_) => "ok",
            Reply::Error { .. } => "error",
        }
    }
}

impl Reply {
    /// The reply line for request `id`. Outputs the corpus encoding does not hold are refused
    /// with their path (`$.outputs[i]`), never written short.
    pub fn to_line(&self, id: Option<u64>) -> Result<String, IoError> {
        Ok(match self {
            Reply::Outputs(o) => json!({"id": id, "outputs": list_to_json(o, "$.outputs")?}).to_string(),
            Reply::Error { message, stage, code } => error_line(id, message, *stage, *code),
        })
    }

    /// Parses a reply line: `(id, reply)`, keeping nothing of the line but the reply (a
    /// runner's line of up to [`MAX_LINE`] bytes costs about what its values decode to).
    pub fn parse(line: &str) -> Result<(u64, Reply), Garbage> {
        let members = json_text::members(line, ["id", "outputs", "error", "stage", "code"])
            .map_err(|e| Garbage(format!("not JSON ({e})")))?;
        let [id, outputs, error, stage, code] = members.unwrap_or_default();
        let id = id.map(Scalar::of).and_then(|i| i.as_u64()).ok_or_else(|| Garbage("no integer `id`".into()))?;
        if outputs.is_some() && error.is_some() {
            return Err(Garbage("both `outputs` and `error`".into()));
        }
        if let Some(outs) = outputs {
            if !outs.get().starts_with('[') {
                return Err(Garbage("`outputs` is not an array".into()));
            }
            let outs = list_from_raw(outs, "$.outputs").map_err(|e| Garbage(e.to_string()))?;
            return Ok((id, Reply::Outputs(outs)));
        }
        let message = error.map(Scalar::of);
        let message =
            message.as_ref().and_then(Scalar::as_str).ok_or_else(|| Garbage("neither `outputs` nor `error`".into()))?;
        let stage: Stage = stage
            .ok_or_else(|| Garbage("`error` without `stage`".into()))
            .and_then(|s| serde_json::from_str(s.get()).map_err(|e| Garbage(format!("`stage`: {e}"))))?;
        // Absent or null: no code; anything else must be a u32 (never dropped silently).
        let code = match code.filter(|c| !json_text::is_null(c)) {
            None => None,
            Some(c) => Some(
                Scalar::of(c)
                    .as_u64()
                    .and_then(|c| u32::try_from(c).ok())
                    .ok_or_else(|| Garbage(format!("`code` {:.64} is not an error code (a u32)", c.get())))?,
            ),
        };
        Ok((id, Reply::Error { message: message.to_string(), stage, code }))
    }
}

/// The line of an error reply to request `id`.
pub fn error_line(id: Option<u64>, message: &str, stage: Stage, code: Option<u32>) -> String {
    json!({"id": id, "error": message, "stage": stage, "code": code}).to_string()
}

/// Parses a hello line.
pub fn parse_hello(line: &str) -> Result<Hello, Garbage> {
    let [hello] =
        json_text::members(line, ["hello"]).map_err(|e| Garbage(format!("not JSON ({e})")))?.unwrap_or_default();
    let h = hello.ok_or_else(|| Garbage("no `hello` member".into()))?;
    let hello: Hello = serde_json::from_str(h.get()).map_err(|e| Garbage(format!("hello: {e}")))?;
    if hello.protocol != PROTOCOL {
        return Err(Garbage(format!("protocol {} (this harness speaks {PROTOCOL})", hello.protocol)));
    }
    Ok(hello)
}

/// The hello line.
pub fn hello_line(h: &Hello) -> String {
    json!({ "hello": h }).to_string()
}
