//! `ptecheck exporter`: ptecheck's reference emitter behind the exporter protocol, so the harness's
//! exporter machinery and its checks are tested without Python. It emits under the rules it is
//! told (`--rules`), and a seeded emitter fault (`--fault`) makes it break the rules it announces
//! while announcing them, for the structure invariants to catch; `--chaos` makes the process
//! misbehave.
//! May not touch: the runtime (an exporter emits; it runs nothing but the eager interpreter).

use super::protocol::{ControlFlow, ExportStage, Exported, Hello, PROTOCOL, ROLE, Reply, Request, Rules};
use crate::child::{Chaos, serve_lines};
use crate::emit::{BlobDedup, EmitOptions, ShareScope, emit};
use crate::ir::eval::run_method;
use crate::ir::{OpKind, saved};
use crate::oracle::values::{decode, encode_all};
use crate::program::Instruction;
use std::collections::BTreeMap;
use std::io::{BufRead, Write};
use strum::IntoEnumIterator;

/// A seeded emitter fault: the stand-in announces its rules and breaks them so.
#[derive(Clone, Copy, Debug, PartialEq, Eq, strum::EnumIter, strum::IntoStaticStr)]
#[strum(serialize_all = "kebab-case")]
pub enum EmitterFault {
    /// Shares a delegate across control-flow bodies while announcing the body scope.
    ShareAcrossBodies,
    /// Deduplicates blobs by lowered module instead of by bytes.
    DedupByModule,
}

impl EmitterFault {
    /// The fault's name (`share-across-bodies`, `dedup-by-module`).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The fault named `s`, or why not, naming every fault.
    pub fn parse(s: &str) -> Result<EmitterFault, String> {
        EmitterFault::iter().find(|f| f.name() == s).ok_or_else(|| {
            let names: Vec<&str> = EmitterFault::iter().map(EmitterFault::name).collect();
            format!("unknown emitter fault `{s}`; faults: {}", names.join(", "))
        })
    }
}

/// The rules presets `--rules` names.
pub const RULES: [(&str, Rules); 3] =
    [("executorch-1.5.1", Rules::EXECUTORCH_1_5_1), ("opt-in", Rules::OPT_IN), ("opt-in-body", Rules::OPT_IN_BODY)];

/// The rules preset named `s`, or why not.
pub fn parse_rules(s: &str) -> Result<Rules, String> {
    RULES.iter().find(|(n, _)| *n == s).map(|(_, r)| *r).ok_or_else(|| {
        let names: Vec<&str> = RULES.iter().map(|(n, _)| *n).collect();
        format!("unknown rules `{s}`; rules: {}", names.join(", "))
    })
}

/// What the stand-in announces under `rules`: every operator, control-flow operator and backend
/// ptecheck's emitter handles (`scratch` only when the rules emit scratch).
pub fn hello(rules: Rules) -> Hello {
    let backends = crate::backends::default_backends()
        .iter()
        .map(|b| b.id().to_string())
        .filter(|id| rules.scratch || id != crate::backends::graph::Flavor::Scratch.id())
        .collect();
    Hello {
        protocol: PROTOCOL,
        role: ROLE.into(),
        name: "ptecheck-reference-emitter".into(),
        executorch: None,
        torch: None,
        rules,
        control_flow: ControlFlow::iter().collect(),
        backends,
        multimethod: vec![crate::backends::multifn::ID.into()],
        operators: OpKind::iter().map(|k| k.name().to_string()).collect(),
        dynamic_shapes: true,
    }
}

/// The emitter options that follow `rules`, as `fault` breaks them: sharing across control-flow
/// bodies shares every opted-in module's calls across the method (under rules that share none,
/// or only within a body); deduplicating by module stores equal blobs of two modules twice. A
/// fault the rules already allow breaks nothing and is refused.
pub fn emit_options(rules: Rules, fault: Option<EmitterFault>) -> Result<EmitOptions, String> {
    let mut opts = EmitOptions::following(rules);
    match fault {
        Some(EmitterFault::ShareAcrossBodies) => {
            if rules.sharing == crate::emit::Sharing::OptIn && rules.sharing_scope == ShareScope::Method {
                return Err("share-across-bodies breaks nothing under rules that share across the method".into());
            }
            opts.share = true;
            opts.scope = ShareScope::Method;
        }
        Some(EmitterFault::DedupByModule) => {
            if rules.blob_dedup == BlobDedup::Module {
                return Err("dedup-by-module breaks nothing under rules that dedup by module".into());
            }
            opts.dedup = BlobDedup::Module;
        }
        None => {}
    }
    Ok(opts)
}

fn failed(stage: ExportStage, message: impl Into<String>) -> Reply {
    Reply::Failed { stage, message: message.into() }
}

/// Exports one request with `opts`.
pub fn answer(req: &Request, opts: &EmitOptions) -> Reply {
    let program = match saved::load(&req.program) {
        Ok(p) => p,
        Err(e) => return failed(ExportStage::Build, e.to_string()),
    };
    let mut eager = BTreeMap::new();
    for m in &program.methods {
        let given = req.inputs.get(&m.name).map_or(&[][..], Vec::as_slice);
        let Some(inputs) = given.iter().map(decode).collect::<Option<Vec<_>>>() else {
            return failed(ExportStage::Request, format!("{}: an input the IR has no value of", m.name));
        };
        match run_method(&program, &m.name, &inputs) {
            Ok(run) => eager.insert(m.name.clone(), encode_all(&run.outputs)),
            Err(e) => return failed(ExportStage::Eager, format!("{}: {e}", m.name)),
        };
    }
    let emitted = match emit(&program, opts) {
        Ok(e) => e,
        Err(e) => return failed(ExportStage::Emit, e.to_string()),
    };
    // The emitter writes every call site, in pre-order: site k is the k-th DelegateCall.
    let delegates = emitted
        .program
        .plans()
        .iter()
        .map(|plan| {
            let sites = plan
                .chain_list()
                .iter()
                .flat_map(|c| c.instruction_list())
                .filter_map(|i| match i {
                    Instruction::DelegateCall(d) => Some(usize::try_from(d.delegate_index).ok()),
                    _ => None,
                })
                .collect();
            (plan.name_str().to_string(), sites)
        })
        .collect();
    match emitted.to_bytes() {
        Ok(pte) => Reply::Exported(Box::new(Exported { pte, ptd: None, eager, delegates, seconds: BTreeMap::new() })),
        Err(e) => failed(ExportStage::Emit, e.to_string()),
    }
}

/// Serves the protocol on `input`/`output` until `input` closes.
pub fn serve(
    input: impl BufRead,
    output: impl Write,
    rules: Rules,
    fault: Option<EmitterFault>,
    chaos: Option<Chaos>,
) -> std::io::Result<()> {
    if chaos == Some(Chaos::ExitBeforeHello) {
        eprintln!("chaos: exiting before the hello");
        std::process::exit(3);
    }
    let opts = emit_options(rules, fault).map_err(std::io::Error::other)?;
    let refuse = |why: &str| super::protocol::error_line(None, ExportStage::Request, why);
    let mut answer_line = |line: &str| {
        let (id, reply) = match Request::parse(line) {
            Ok(req) => (Some(req.id), answer(&req, &opts)),
            Err(e) => (e.id, failed(ExportStage::Request, e.why)),
        };
        reply.to_line(id).unwrap_or_else(|e| super::protocol::error_line(id, ExportStage::Eager, &e.to_string()))
    };
    serve_lines(input, output, &super::protocol::hello_line(&hello(rules)), chaos, &refuse, &mut answer_line)
}
