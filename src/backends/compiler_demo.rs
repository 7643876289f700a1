//! Runtime side of ExecuTorch's `BackendWithCompilerDemo` test backend, so the real `demo_*`
//! corpus files run. Blob (DB1): ASCII `<N>version:<V>#` then N entries
//! `op:demo::<target>, numel:<K>, dtype:<dtype><debug_handle><H>#`. Semantics are our choice
//! P13: the entries form a chain over the DelegateCall's inputs, in float32, with real
//! sin / mm / add / linear (not the upstream toy series), and each `numel` is checked.
//! May not touch: the IR and the emitter (it has a runtime side only), the loader.

use crate::program::CompileSpec;
use crate::runtime::frame::{OpError, OpResult, Spend};
use crate::runtime::kernels::{broadcast_index, broadcast_shape};
use crate::runtime::value::checked_numel;
use crate::runtime::{Backend, BackendHandle, DelegateArgs, ErrorCode, InitContext};

/// Registry id.
pub const ID: &str = "BackendWithCompilerDemo";

/// One operation of the blob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DemoOp {
    /// `aten.sin.default`: 1 operand.
    Sin,
    /// `aten.mm.default`: 2 operands.
    Mm,
    /// `aten.add.Tensor`: 2 operands.
    Add,
    /// `aten.linear.default`: 3 operands (input, weight, bias).
    Linear,
}

impl DemoOp {
    fn operands(self) -> usize {
        match self {
            DemoOp::Sin => 1,
            DemoOp::Mm | DemoOp::Add => 2,
            DemoOp::Linear => 3,
        }
    }
}

/// One parsed entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DemoEntry {
    /// The operation.
    pub op: DemoOp,
    /// Expected element count of its result.
    pub numel: usize,
}

fn invalid(detail: impl Into<String>) -> OpError {
    OpError::new(ErrorCode::InvalidProgram, detail)
}

/// Parses a demo blob (DB1); version must be 0 (DB2).
pub fn parse(blob: &[u8]) -> OpResult<Vec<DemoEntry>> {
    let text =
        std::str::from_utf8(blob).map_err(|e| invalid(format!("blob is not UTF-8 at byte {}", e.valid_up_to())))?;
    let mut parts = text.split('#');
    let head = parts.next().unwrap_or("");
    let (n, version) =
        head.split_once("version:").ok_or_else(|| invalid(format!("blob header `{head}` lacks `version:`")))?;
    let n: usize = n.parse().map_err(|_| invalid(format!("blob entry count `{n}` is not a number")))?;
    if version != "0" {
        return Err(OpError::new(
            ErrorCode::DelegateInvalidCompatibility,
            format!("blob version {version} (only 0 is supported)"),
        ));
    }
    let mut out = Vec::new();
    for (i, entry) in parts.filter(|p| !p.is_empty()).enumerate() {
        let body = entry.split("<debug_handle>").next().unwrap_or("");
        let mut target = None;
        let mut numel = None;
        for field in body.split(", ") {
            if let Some(t) = field.strip_prefix("op:demo::") {
                target = Some(t);
            } else if let Some(k) = field.strip_prefix("numel:") {
                numel = k.parse::<usize>().ok();
            } else if let Some(d) = field.strip_prefix("dtype:")
                && d != "torch.float32"
            {
                return Err(OpError::new(
                    ErrorCode::NotSupported,
                    format!("entry {i}: dtype {d} (only torch.float32)"),
                ));
            }
        }
        let op = match target {
            Some("aten.sin.default") => DemoOp::Sin,
            Some("aten.mm.default") => DemoOp::Mm,
            Some("aten.add.Tensor") => DemoOp::Add,
            Some("aten.linear.default") => DemoOp::Linear,
            other => return Err(invalid(format!("entry {i}: unsupported op {other:?}"))),
        };
        let numel = numel.ok_or_else(|| invalid(format!("entry {i}: missing numel")))?;
        out.push(DemoEntry { op, numel });
    }
    if out.len() != n {
        return Err(invalid(format!("blob declares {n} entries but holds {}", out.len())));
    }
    Ok(out)
}

type T = (Vec<usize>, Vec<f32>);

/// The elements a result of `shape` holds, refused before anything that size is allocated
/// when their bytes exceed `limit` or (for an entry's result) they are not its `numel`.
fn sized(shape: &[usize], numel: Option<usize>, limit: usize, i: usize) -> OpResult<usize> {
    let n = checked_numel(shape);
    if let Some(numel) = numel
        && n != Some(numel)
    {
        return Err(invalid(format!("entry {i} produces shape {shape:?}, blob says numel {numel}")));
    }
    match n {
        Some(n) if n.checked_mul(4).is_some_and(|b| b <= limit) => Ok(n),
        _ => Err(OpError::new(
            ErrorCode::MemoryAllocationFailed,
            format!("entry {i}: a result of shape {shape:?} exceeds the {limit}-byte memory limit"),
        )),
    }
}

fn matmul(a: &T, b: &T, b_transposed: bool, bound: impl Fn(&[usize]) -> OpResult<usize>) -> OpResult<T> {
    let (sa, sb) = (&a.0, &b.0);
    if sa.len() != 2 || sb.len() != 2 {
        return Err(invalid(format!("matmul of {sa:?} and {sb:?}")));
    }
    let (n, k) = (sa[0], sa[1]);
    let (k2, m) = if b_transposed { (sb[1], sb[0]) } else { (sb[0], sb[1]) };
    if k != k2 {
        return Err(invalid(format!("matmul inner dims of {sa:?} and {sb:?}")));
    }
    let mut r = vec![0f32; bound(&[n, m])?];
    for i in 0..n {
        for j in 0..m {
            let mut acc = 0f32;
            for p in 0..k {
                let w = if b_transposed { b.1[j * k + p] } else { b.1[p * m + j] };
                acc += a.1[i * k + p] * w;
            }
            r[i * m + j] = acc;
        }
    }
    Ok((vec![n, m], r))
}

fn add(a: &T, b: &T, bound: impl Fn(&[usize]) -> OpResult<usize>) -> OpResult<T> {
    let shape = broadcast_shape(&a.0, &b.0)?;
    bound(&shape)?;
    let (ma, mb) = (broadcast_index(&shape, &a.0), broadcast_index(&shape, &b.0));
    Ok((shape, ma.iter().zip(&mb).map(|(x, y)| a.1[*x] + b.1[*y]).collect()))
}

/// Runs the chain of entries on `inputs` (P13); no result may take more than `limit` bytes,
/// and each entry's work (its result's elements, a product's multiply-adds) is passed to
/// `spend` before it is done.
pub fn run(entries: &[DemoEntry], inputs: &[T], limit: usize, spend: Spend<'_>) -> OpResult<T> {
    let mut next = 0usize;
    let mut prev: Option<T> = None;
    for (i, e) in entries.iter().enumerate() {
        let mut ops: Vec<T> = prev.take().into_iter().collect();
        while ops.len() < e.op.operands() {
            ops.push(
                inputs
                    .get(next)
                    .cloned()
                    .ok_or_else(|| invalid(format!("entry {i} needs more inputs than the call passes")))?,
            );
            next += 1;
        }
        // Every result is checked against the entry's numel (and the limit) before it is made.
        let bound = |shape: &[usize]| sized(shape, Some(e.numel), limit, i);
        let within = |shape: &[usize]| sized(shape, None, limit, i);
        let products = match (e.op, &ops[..]) {
            // n x k x m: the first operand's elements times the second's over k.
            (DemoOp::Mm | DemoOp::Linear, [a, b, ..]) => match a.0.get(1) {
                Some(&k) if k > 0 => (a.1.len() as u64).saturating_mul((b.1.len() / k) as u64),
                _ => 0,
            },
            _ => 0,
        };
        // Its result (the entry's numel, checked before it is made) and a product's
        // multiply-adds; the call's inputs were spent as the backend read them.
        spend((e.numel as u64).saturating_add(products), &format_args!("entry {i}"))?;
        let r = match e.op {
            DemoOp::Sin => (ops[0].0.clone(), ops[0].1.iter().map(|v| v.sin()).collect()),
            DemoOp::Mm => matmul(&ops[0], &ops[1], false, bound)?,
            DemoOp::Add => add(&ops[0], &ops[1], bound)?,
            DemoOp::Linear => add(&matmul(&ops[0], &ops[1], true, within)?, &ops[2], bound)?,
        };
        if r.1.len() != e.numel {
            return Err(invalid(format!("entry {i} produced {} elements, blob says numel {}", r.1.len(), e.numel)));
        }
        prev = Some(r);
    }
    prev.ok_or_else(|| invalid("blob has no entries"))
}

/// The backend.
#[derive(Debug, Default)]
pub struct CompilerDemoBackend;

impl Backend for CompilerDemoBackend {
    fn id(&self) -> &str {
        ID
    }

    fn init(&self, _ctx: &InitContext<'_>, processed: &[u8], _specs: &[CompileSpec]) -> Result<BackendHandle, OpError> {
        let entries = parse(processed)?;
        Ok(BackendHandle { bytes: entries.len() * std::mem::size_of::<DemoEntry>(), state: Box::new(entries) })
    }

    fn execute(&self, handle: &mut BackendHandle, args: &mut DelegateArgs<'_, '_>) -> Result<(), OpError> {
        let entries = handle
            .state
            .downcast_ref::<Vec<DemoEntry>>()
            .ok_or_else(|| OpError::new(ErrorCode::DelegateInvalidHandle, "not a demo handle"))?;
        let (out, ins) = args.args.split_last().ok_or_else(|| invalid("DelegateCall has no arguments"))?;
        let mut inputs = Vec::with_capacity(ins.len());
        for &v in ins {
            let x = args.frame.read_f64(v)?;
            inputs.push((args.frame.sizes(v)?, x.iter().map(|f| *f as f32).collect::<Vec<f32>>()));
        }
        let frame = &*args.frame;
        let (shape, values) = run(entries, &inputs, frame.memory_limit, &|work, what| frame.spend(work, what))?;
        args.frame.resize(*out, &shape)?;
        args.frame.write_f64(*out, &values.iter().map(|v| *v as f64).collect::<Vec<_>>())
    }
}
