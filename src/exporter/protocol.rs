//! Messages of the exporter protocol (docs/exporter-protocol.md, version 1): the hello with the
//! rules the exporter's emitter follows, export requests carrying a saved program and its
//! inputs, and replies carrying the `.pte`, the eager outputs and each call site's delegate.
//! May not touch: processes (`child` owns them), emission, execution.

use crate::child::{Classed, Garbage};
pub use crate::emit::{Rules, Sharing};
use crate::runtime::HostValue;
use crate::runtime::io::{IoError, ioerr, list_from_raw, list_to_json};
use crate::runtime::json_text::{self, Scalar};
use base64::Engine as _;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use std::collections::BTreeMap;
use thiserror::Error;

/// The protocol version this harness speaks.
pub const PROTOCOL: u64 = 1;

/// The role an exporter's hello names.
pub const ROLE: &str = "exporter";

/// A control-flow operator an exporter can export.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
pub enum ControlFlow {
    /// `torch.cond`.
    Cond,
    /// `map`.
    Map,
    /// `scan`.
    Scan,
    /// `while_loop`.
    While,
}

/// What an exporter announces before any request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// Protocol version.
    pub protocol: u64,
    /// Must be `exporter`.
    pub role: String,
    /// What it wraps.
    pub name: String,
    /// The ExecuTorch version it wraps (`None`: none).
    #[serde(default)]
    pub executorch: Option<String>,
    /// The torch version it wraps (`None`: none).
    #[serde(default)]
    pub torch: Option<String>,
    /// The rules its emitter follows.
    pub rules: Rules,
    /// Control-flow operators it can export.
    #[serde(default)]
    pub control_flow: Vec<ControlFlow>,
    /// Backend ids it can lower to.
    #[serde(default)]
    pub backends: Vec<String>,
    /// Backend ids lowered for all methods at once (`preprocess_multimethod`).
    #[serde(default)]
    pub multimethod: Vec<String>,
    /// IR operators (`OpKind` names) it can build.
    #[serde(default)]
    pub operators: Vec<String>,
    /// Whether it exports inputs marked dynamic.
    #[serde(default)]
    pub dynamic_shapes: bool,
}

/// Parses a hello line: protocol 1, role `exporter`.
pub fn parse_hello(line: &str) -> Result<Hello, Garbage> {
    let [hello] =
        json_text::members(line, ["hello"]).map_err(|e| Garbage(format!("not JSON ({e})")))?.unwrap_or_default();
    let h = hello.ok_or_else(|| Garbage("no `hello` member".into()))?;
    let hello: Hello = serde_json::from_str(h.get()).map_err(|e| Garbage(format!("hello: {e}")))?;
    if hello.protocol != PROTOCOL {
        return Err(Garbage(format!("protocol {} (this harness speaks {PROTOCOL})", hello.protocol)));
    }
    if hello.role != ROLE {
        return Err(Garbage(format!("role `{}`, not `{ROLE}`", hello.role)));
    }
    Ok(hello)
}

/// The hello line.
pub fn hello_line(h: &Hello) -> String {
    json!({ "hello": h }).to_string()
}

/// A stage an export failed at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, strum::EnumIter)]
#[serde(rename_all = "snake_case")]
pub enum ExportStage {
    /// The request itself.
    Request,
    /// Rebuilding the saved program in the exporter's framework.
    Build,
    /// Tracing or exporting it.
    Export,
    /// Lowering a module to its backend.
    Lower,
    /// Emitting or serialising the program.
    Emit,
    /// Running the un-lowered program.
    Eager,
}

impl ExportStage {
    /// The snake_case name.
    pub fn name(self) -> &'static str {
        match self {
            ExportStage::Request => "request",
            ExportStage::Build => "build",
            ExportStage::Export => "export",
            ExportStage::Lower => "lower",
            ExportStage::Emit => "emit",
            ExportStage::Eager => "eager",
        }
    }
}

/// One request: export `program` (saved-program JSON, compact) and run it eagerly on `inputs`.
#[derive(Clone, Debug, PartialEq)]
pub struct Request {
    /// Chosen by the harness, echoed in the reply.
    pub id: u64,
    /// The saved program, as `ir::saved` writes it.
    pub program: String,
    /// Each method's inputs.
    pub inputs: BTreeMap<String, Vec<HostValue>>,
}

impl Request {
    /// The request's JSON line. Refuses, with its path, a program that is not JSON and an input
    /// the corpus encoding does not hold.
    pub fn to_line(&self) -> Result<String, IoError> {
        let program: Value = serde_json::from_str(&self.program)
            .map_err(|_| ioerr("$.program", crate::runtime::io::IoFault::Not("JSON")))?;
        let inputs = self
            .inputs
            .iter()
            .map(|(m, v)| Ok((m.clone(), Value::Array(list_to_json(v, &format!("$.inputs.{m}"))?))))
            .collect::<Result<serde_json::Map<String, Value>, IoError>>()?;
        Ok(json!({"id": self.id, "op": "export", "program": program, "inputs": inputs}).to_string())
    }

    /// Parses a request line (the server side).
    pub fn parse(line: &str) -> Result<Request, RequestError> {
        let refused = |id: Option<u64>, why: String| RequestError { id, why };
        let members = json_text::members(line, ["id", "op", "program", "inputs"])
            .map_err(|e| refused(None, format!("not JSON: {e}")))?;
        let [id, op, program, inputs] = members.unwrap_or_default();
        let id = id.map(Scalar::of).and_then(|i| i.as_u64()).ok_or(refused(None, "missing `id`".into()))?;
        let bad = |why: &str| refused(Some(id), why.to_string());
        if op.is_some_and(|o| Scalar::of(o).as_str() != Some("export")) {
            return Err(bad("unsupported `op`"));
        }
        let program = program.ok_or_else(|| bad("missing `program`"))?.get().to_string();
        let inputs: BTreeMap<String, &RawValue> = match inputs {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|_| bad("`inputs` is not an object"))?,
            None => BTreeMap::new(),
        };
        let inputs = inputs
            .into_iter()
            .map(|(m, raw)| list_from_raw(raw, &format!("$.inputs.{m}")).map(|v| (m, v)))
            .collect::<Result<_, _>>()
            .map_err(|e| refused(Some(id), e.to_string()))?;
        Ok(Request { id, program, inputs })
    }
}

/// A request line the server refuses, with the request's id when it could be read.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
#[error("{why}")]
pub struct RequestError {
    /// The request's id (`None` when the line is not JSON or has none).
    pub id: Option<u64>,
    /// What is wrong.
    pub why: String,
}

/// What an exporter made of a program.
#[derive(Clone, Debug, PartialEq)]
pub struct Exported {
    /// The `.pte` bytes.
    pub pte: Vec<u8>,
    /// The `.ptd` bytes, if there is one.
    pub ptd: Option<Vec<u8>>,
    /// Each method's outputs on the request's inputs, computed by the exporter's framework on the
    /// un-lowered program.
    pub eager: BTreeMap<String, Vec<HostValue>>,
    /// Each method's call sites in pre-order: the delegate index of the `DelegateCall` emitted for
    /// the site, or `None` when the site was not emitted.
    pub delegates: BTreeMap<String, Vec<Option<usize>>>,
    /// Seconds per stage, when the exporter says.
    pub seconds: BTreeMap<String, f64>,
}

/// An exporter's answer to one request.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// The program was exported.
    Exported(Box<Exported>),
    /// It failed at a stage.
    Failed {
        /// Where.
        stage: ExportStage,
        /// Why.
        message: String,
    },
}

/// `exported` or `failed`.
impl Classed for Reply {
    fn class(&self) -> &'static str {
        match self {
            Reply::Exported(_) => "exported",
            Reply::Failed { .. } => "failed",
        }
    }
}

fn b64() -> base64::engine::GeneralPurpose {
    base64::engine::general_purpose::STANDARD
}

impl Reply {
    /// The reply line for request `id`. Values the corpus encoding does not hold are refused with
    /// their path.
    pub fn to_line(&self, id: Option<u64>) -> Result<String, IoError> {
        Ok(match self {
            Reply::Exported(e) => {
                let eager = e
                    .eager
                    .iter()
                    .map(|(m, v)| Ok((m.clone(), Value::Array(list_to_json(v, &format!("$.eager.{m}"))?))))
                    .collect::<Result<serde_json::Map<String, Value>, IoError>>()?;
                json!({
                    "id": id,
                    "pte": b64().encode(&e.pte),
                    "ptd": e.ptd.as_ref().map(|p| b64().encode(p)),
                    "eager": eager,
                    "delegates": e.delegates,
                    "seconds": e.seconds,
                })
                .to_string()
            }
            Reply::Failed { stage, message } => error_line(id, *stage, message),
        })
    }

    /// Parses a reply line: `(id, reply)`. Anything else than one well-formed reply is garbage.
    pub fn parse(line: &str) -> Result<(u64, Reply), Garbage> {
        let keys = ["id", "pte", "ptd", "eager", "delegates", "seconds", "stage", "error"];
        let members = json_text::members(line, keys).map_err(|e| Garbage(format!("not JSON ({e})")))?;
        let [id, pte, ptd, eager, delegates, seconds, stage, error] = members.unwrap_or_default();
        let id = id.map(Scalar::of).and_then(|i| i.as_u64()).ok_or_else(|| Garbage("no integer `id`".into()))?;
        if pte.is_some() && error.is_some() {
            return Err(Garbage("both `pte` and `error`".into()));
        }
        let Some(pte) = pte else {
            let message = error.map(Scalar::of);
            let message =
                message.as_ref().and_then(Scalar::as_str).ok_or_else(|| Garbage("neither `pte` nor `error`".into()))?;
            let stage: ExportStage = stage
                .ok_or_else(|| Garbage("`error` without `stage`".into()))
                .and_then(|s| serde_json::from_str(s.get()).map_err(|e| Garbage(format!("`stage`: {e}"))))?;
            return Ok((id, Reply::Failed { stage, message: message.to_string() }));
        };
        let bytes = |raw: &RawValue, what: &str| {
            let s = Scalar::of(raw);
            let text = s.as_str().ok_or_else(|| Garbage(format!("`{what}` is not a string")))?;
            b64().decode(text).map_err(|e| Garbage(format!("`{what}` is not base64: {e}")))
        };
        let pte = bytes(pte, "pte")?;
        let ptd = match ptd.filter(|p| !json_text::is_null(p)) {
            None => None,
            Some(p) => Some(bytes(p, "ptd")?),
        };
        let eager: BTreeMap<String, &RawValue> = match eager {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|e| Garbage(format!("`eager`: {e}")))?,
            None => return Err(Garbage("`pte` without `eager`".into())),
        };
        let eager = eager
            .into_iter()
            .map(|(m, raw)| list_from_raw(raw, &format!("$.eager.{m}")).map(|v| (m, v)))
            .collect::<Result<BTreeMap<_, _>, _>>()
            .map_err(|e| Garbage(e.to_string()))?;
        let delegates: BTreeMap<String, Vec<Option<usize>>> = match delegates {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|e| Garbage(format!("`delegates`: {e}")))?,
            None => return Err(Garbage("`pte` without `delegates`".into())),
        };
        let seconds: BTreeMap<String, f64> = match seconds.filter(|s| !json_text::is_null(s)) {
            Some(raw) => serde_json::from_str(raw.get()).map_err(|e| Garbage(format!("`seconds`: {e}")))?,
            None => BTreeMap::new(),
        };
        Ok((id, Reply::Exported(Box::new(Exported { pte, ptd, eager, delegates, seconds }))))
    }
}

/// The line of a failure reply to request `id`.
pub fn error_line(id: Option<u64>, stage: ExportStage, message: &str) -> String {
    json!({"id": id, "stage": stage, "error": message}).to_string()
}
