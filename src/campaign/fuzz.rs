//! Fuzz entry points. Each cargo-fuzz target calls these (for `structured` and `mutate_real`: a
//! preparation half, then `load_pte` under the allocation guard), and
//! `tests/fuzz_replay.rs` runs the same functions over `corpus/<target>/`, so a crash found by
//! the fuzzer is a failing `cargo test` once its input is committed.
//!
//! Contract of every entry: return normally for any input. A panic means a bug: in the loader
//! or runtime (a crash on bad input), or in the emitter (an invariant violated on a valid
//! generated program).

use crate::backends::default_runtime;
use crate::format::{self, LoadedProgram};
use crate::generator::{GenConfig, generate};
use crate::ir::saved;
use crate::oracle::{CheckOptions, check_case};
use crate::program::checked_numel;
use crate::program::{Instruction, Program};
use crate::runtime::{HostTensor, HostValue, Runtime, Session};
use arbitrary::Unstructured;

/// Instruction budget per execute while fuzzing.
pub const FUZZ_INSTRUCTION_BUDGET: u64 = 20_000;

/// Elements of kernel work one fuzzed execution may do (the fuzzers' counterpart of
/// [`crate::runtime::DEFAULT_WORK_BUDGET`]).
pub const FUZZ_WORK_BUDGET: u64 = 1 << 24;

/// What happened to one input: the class `tests/fuzz_replay.rs` records for every committed
/// input and asserts on replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Not a program (a saved-JSON input that does not parse or emit).
    NotAProgram,
    /// Rejected by the loader, with the `FormatError` kind.
    Rejected(&'static str),
    /// Loaded, with no method at all.
    NoMethods,
    /// Loaded; every method was rejected at init (checks, inputs or a backend's init).
    RefusedAtInit,
    /// Loaded; some method passed init, and every such method failed while executing.
    FailedAtExecute,
    /// At least one method ran to completion.
    Ran,
}

impl Outcome {
    /// A stable one-word class (`rejected:Malformed`, `init`, `ran`, ...).
    pub fn class(self) -> String {
        match self {
            Outcome::NotAProgram => "not_a_program".into(),
            Outcome::Rejected(kind) => format!("rejected:{kind}"),
            Outcome::NoMethods => "no_methods".into(),
            Outcome::RefusedAtInit => "init".into(),
            Outcome::FailedAtExecute => "execute".into(),
            Outcome::Ran => "ran".into(),
        }
    }
}

/// The runtime used by the fuzz entries: memory bounded relative to the input size.
pub fn fuzz_runtime(input_len: usize) -> Runtime {
    let mut rt = default_runtime();
    rt.instruction_budget = FUZZ_INSTRUCTION_BUDGET;
    rt.work_budget = FUZZ_WORK_BUDGET;
    // Kernels keep a few f64/usize vectors per element alive: stay well inside the fuzz
    // allocator's bound of 4 x input + 1 MiB.
    rt.memory_limit = (input_len / 16).max(16 * 1024);
    rt
}

/// Initialises and executes every method of `loaded` on zero-filled inputs; the best outcome
/// over the methods.
pub fn run_all(loaded: &LoadedProgram<'_>, rt: &Runtime) -> Outcome {
    let mut best = if loaded.program.plans().is_empty() { Outcome::NoMethods } else { Outcome::RefusedAtInit };
    for name in Session::new(loaded, rt).method_names() {
        let session = Session::new(loaded, rt);
        let Ok(mut m) = session.load(&name) else { continue };
        if Session::execute(&mut m, None).is_ok() {
            best = Outcome::Ran;
        } else if best != Outcome::Ran {
            best = Outcome::FailedAtExecute;
        }
        drop(m);
        let s = session.trace().summary();
        assert_eq!(s.inits, s.destroys, "every initialised handle is destroyed (T2)");
        assert!(s.bad_destroys.is_empty(), "no handle is destroyed twice");
    }
    best
}

/// `load_pte`: raw bytes -> the two FlatBuffers readers agree -> load -> checks -> init and
/// execute every method.
pub fn load_pte(data: &[u8]) -> Outcome {
    if let Err(disagreement) = format::oracle::decoders_agree(data) {
        panic!("{disagreement}");
    }
    match format::load(data) {
        Err(e) => Outcome::Rejected(e.kind()),
        Ok(loaded) => {
            let _ = crate::runtime::check_all_methods(&loaded);
            run_all(&loaded, &fuzz_runtime(data.len()))
        }
    }
}

/// `load_ptd`: raw bytes as a `.ptd` (external data, `run --data`) -> load; a loaded file's
/// entries borrow their bytes from inside the input.
pub fn load_ptd(data: &[u8]) -> Outcome {
    let loaded = match format::load_ptd(data) {
        Err(e) => return Outcome::Rejected(e.kind()),
        Ok(l) => l,
    };
    let within = data.as_ptr_range();
    for (i, e) in loaded.entries.iter().enumerate() {
        let bytes = e.data.as_ptr_range();
        assert!(
            e.data.is_empty() || (within.start <= bytes.start && bytes.end <= within.end),
            "entry {i} ({:?}) holds bytes from outside the input",
            e.key
        );
    }
    Outcome::Ran
}

/// `runner_lines`: raw bytes as what a runner writes on stdout and the harness writes on its
/// stdin, line by line (each at most 64 KiB here, as the protocol bounds each at 64 MiB): every
/// line goes to the harness's reply and hello readers and to the server's request reader. Each
/// refuses with a typed error or parses; what parses, written again and read back, is what was
/// read (the writers and the readers agree). `Ran` when some line parsed.
pub fn runner_lines(data: &[u8]) -> Outcome {
    use crate::runner::{Reply, Request, protocol};
    const MOST_PER_LINE: usize = 64 << 10;
    let mut parsed = false;
    let mut reader = std::io::BufReader::new(data);
    let mut buf = Vec::new();
    while let Ok(Some(too_long)) = crate::child::read_line_bounded(&mut reader, MOST_PER_LINE, &mut buf) {
        let Ok(line) = std::str::from_utf8(&buf) else { continue };
        if too_long {
            continue;
        }
        // What a reader accepts is JSON as a `serde_json::Value` reads it: a member no reader
        // uses is skipped only once the whole line has been read as JSON.
        let is_json = || serde_json::from_str::<serde_json::Value>(line).is_ok();
        // Read back, a value equals what was written (compared as printed, so NaN equals NaN).
        if let Ok((id, reply)) = Reply::parse(line) {
            assert!(is_json(), "a reply that is not JSON was accepted");
            let again = reply.to_line(Some(id)).unwrap_or_else(|e| panic!("a reply read cannot be written: {e}"));
            let Ok(back) = Reply::parse(&again) else { panic!("a reply written again does not parse: {again}") };
            assert_eq!(format!("{back:?}"), format!("{:?}", (id, reply)), "a reply written again reads back otherwise");
            parsed = true;
        }
        if let Ok(hello) = protocol::parse_hello(line) {
            assert!(is_json(), "a hello that is not JSON was accepted");
            let again = protocol::hello_line(&hello);
            assert_eq!(protocol::parse_hello(&again).ok(), Some(hello), "a hello written again reads back otherwise");
            parsed = true;
        }
        if let Ok(request) = Request::parse(line) {
            assert!(is_json(), "a request that is not JSON was accepted");
            let again = request.to_line().unwrap_or_else(|e| panic!("a request read cannot be written: {e}"));
            let Ok(back) = Request::parse(&again) else { panic!("a request written again does not parse: {again}") };
            assert_eq!(format!("{back:?}"), format!("{request:?}"), "a request written again reads back otherwise");
            parsed = true;
        }
    }
    written_values_read_back(data);
    if parsed { Outcome::Ran } else { Outcome::Rejected("Garbage") }
}

/// The generative half of [`runner_lines`]: the same bytes drawn as values (every dtype the
/// schema declares and undeclared ones, any element bytes, shapes their bytes fill or not),
/// requests and replies (any strings), written as protocol lines and read back. What the corpus
/// encoding holds reads back as its canonical form ([`canonical`]); what it does not hold is
/// refused by the writer with its path, never written short.
fn written_values_read_back(data: &[u8]) {
    use crate::runner::{Reply, Request, protocol::Stage};
    use crate::runtime::io;
    let mut u = Unstructured::new(data);
    let n = u.int_in_range(0..=4u8).unwrap_or(0);
    let values: Vec<HostValue> = (0..n).map(|_| arbitrary_value(&mut u)).collect();
    let holds = |v: &HostValue| encoding_holds(v);
    for (i, v) in values.iter().enumerate() {
        match io::to_json(v) {
            Ok(json) => {
                assert!(holds(v), "value {i} is written though the encoding does not hold it: {v:?}");
                let back = io::from_json(&json, "$")
                    .unwrap_or_else(|e| panic!("value {i} written as {json} does not read: {e}"));
                assert_eq!(format!("{back:?}"), format!("{:?}", canonical(v)), "value {i} reads back otherwise");
            }
            Err(fault) => assert!(!holds(v), "value {i} is refused ({fault}) though the encoding holds it: {v:?}"),
        }
    }
    let all_held = values.iter().all(holds);
    let text = |u: &mut Unstructured<'_>| u.arbitrary::<String>().unwrap_or_default();
    let ptd = u.arbitrary::<bool>().unwrap_or(false).then(|| text(&mut u).into());
    let request = Request {
        id: u.arbitrary().unwrap_or(0),
        pte: text(&mut u).into(),
        method: text(&mut u),
        inputs: values.clone(),
        ptd,
    };
    match request.to_line() {
        Ok(line) => {
            assert!(all_held, "a request is written with an input the encoding does not hold");
            let back =
                Request::parse(&line).unwrap_or_else(|e| panic!("a written request does not parse ({e}): {line}"));
            let want = Request { inputs: values.iter().map(canonical).collect(), ..request };
            assert_eq!(format!("{back:?}"), format!("{want:?}"), "a written request reads back otherwise");
        }
        Err(e) => assert!(!all_held, "a request whose inputs the encoding holds is refused: {e}"),
    }
    let id = u.arbitrary::<u64>().unwrap_or(0);
    match Reply::Outputs(values.clone()).to_line(Some(id)) {
        Ok(line) => {
            assert!(all_held, "a reply is written with an output the encoding does not hold");
            let back = Reply::parse(&line).unwrap_or_else(|e| panic!("a written reply does not parse ({e}): {line}"));
            let want = (id, Reply::Outputs(values.iter().map(canonical).collect()));
            assert_eq!(format!("{back:?}"), format!("{want:?}"), "a written reply reads back otherwise");
        }
        Err(e) => assert!(!all_held, "a reply whose outputs the encoding holds is refused: {e}"),
    }
    const STAGES: [Stage; 6] =
        [Stage::Request, Stage::LoadProgram, Stage::LoadMethod, Stage::SetInputs, Stage::Execute, Stage::ReadOutputs];
    let stage = *u.choose(&STAGES).unwrap_or(&Stage::Execute);
    let error = Reply::Error { message: text(&mut u), stage, code: u.arbitrary().unwrap_or(None) };
    let line = error.to_line(Some(id)).unwrap_or_else(|e| panic!("an error reply cannot be written: {e}"));
    assert_eq!(Reply::parse(&line).ok(), Some((id, error)), "a written error reply reads back otherwise");
}

/// A value drawn from `u`: scalars of any bits, or a tensor of any declared or undeclared dtype
/// whose bytes usually fill its shape (rank up to 3, dims up to 4, now and then a first one
/// that overflows the element count; at most 1 KiB of elements, so a value written as JSON
/// stays within the fuzz target's allocation guard).
fn arbitrary_value(u: &mut Unstructured<'_>) -> HostValue {
    use crate::program::ScalarType;
    match u.int_in_range(0..=5u8).unwrap_or(0) {
        0 => HostValue::Int(u.arbitrary().unwrap_or(0)),
        1 => HostValue::Bool(u.arbitrary().unwrap_or(false)),
        2 => HostValue::Double(f64::from_bits(u.arbitrary().unwrap_or(0))),
        3 => HostValue::None,
        _ => {
            let dtype = if u.ratio(3, 4).unwrap_or(true) {
                *u.choose(ScalarType::ALL).unwrap_or(&ScalarType::FLOAT)
            } else {
                ScalarType(u.arbitrary().unwrap_or(0))
            };
            let rank = u.int_in_range(0..=3usize).unwrap_or(0);
            let mut sizes: Vec<usize> = (0..rank).map(|_| u.int_in_range(0..=4usize).unwrap_or(1)).collect();
            if rank > 0 && u.ratio(1, 32).unwrap_or(false) {
                sizes[0] = usize::MAX;
            }
            let fill = checked_numel(&sizes).and_then(|n| n.checked_mul(dtype.element_size().unwrap_or(1)));
            let len = match fill {
                Some(n) if n <= 1 << 10 && u.ratio(7, 8).unwrap_or(true) => n,
                _ => u.int_in_range(0..=64usize).unwrap_or(0),
            };
            let data = (0..len).map(|_| u.arbitrary::<u8>().unwrap_or(0)).collect();
            HostValue::Tensor(HostTensor { dtype, sizes, data })
        }
    }
}

/// Whether the corpus encoding holds `v`: a tensor of one of its dtypes whose bytes fill its
/// shape, or any scalar.
fn encoding_holds(v: &HostValue) -> bool {
    match v {
        HostValue::Tensor(t) => {
            crate::runtime::io::dtype_name(t.dtype).is_some()
                && checked_numel(&t.sizes)
                    .and_then(|n| n.checked_mul(t.dtype.element_size().unwrap_or(1)))
                    .is_some_and(|n| n == t.data.len())
        }
        _ => true,
    }
}

/// What `v` reads back as once written: every NaN the one NaN the writer writes, a bool byte
/// 0 or 1; everything else as it is.
fn canonical(v: &HostValue) -> HostValue {
    use crate::program::ScalarType;
    match v {
        HostValue::Double(d) if d.is_nan() => HostValue::Double(f64::NAN),
        HostValue::Tensor(t) => {
            let data = match t.dtype {
                ScalarType::BOOL => t.data.iter().map(|b| u8::from(*b != 0)).collect(),
                ScalarType::FLOAT => t
                    .data
                    .chunks_exact(4)
                    .flat_map(|c| {
                        let x = f32::from_le_bytes([c[0], c[1], c[2], c[3]]);
                        if x.is_nan() { f32::NAN } else { x }.to_le_bytes()
                    })
                    .collect(),
                ScalarType::DOUBLE => t
                    .data
                    .chunks_exact(8)
                    .flat_map(|c| {
                        let x = f64::from_le_bytes(c.try_into().unwrap_or([0; 8]));
                        if x.is_nan() { f64::NAN } else { x }.to_le_bytes()
                    })
                    .collect(),
                _ => t.data.clone(),
            };
            HostValue::Tensor(HostTensor { data, ..t.clone() })
        }
        other => other.clone(),
    }
}

/// Named data offered to `load_xnnpack` inputs: every named key of the XNNPACK corpus files,
/// so their blobs (the seeds) resolve their weights.
fn xnnpack_named_data() -> &'static [(String, Vec<u8>)] {
    static NAMED: std::sync::OnceLock<Vec<(String, Vec<u8>)>> = std::sync::OnceLock::new();
    NAMED.get_or_init(|| {
        let files: [&[u8]; 5] = [
            include_bytes!("../../corpus/real/xnn_single_partition.pte"),
            include_bytes!("../../corpus/real/xnn_two_partitions_graph_break.pte"),
            include_bytes!("../../corpus/real/xnn_repeated_call_3x.pte"),
            include_bytes!("../../corpus/real/xnn_identical_blobs_dedup.pte"),
            include_bytes!("../../corpus/real/xnn_dynamic_batch.pte"),
        ];
        files
            .iter()
            .filter_map(|f| format::load(f).ok())
            .flat_map(|l| l.named_data_map().into_iter().map(|(k, v)| (k.to_string(), v.to_vec())).collect::<Vec<_>>())
            .collect()
    })
}

/// `load_xnnpack`: raw bytes as an XNNPACK delegate blob -> verified load (named keys resolved
/// against [`xnnpack_named_data`]) -> the interpreter's init checks -> one run with every
/// input at its blob shape (results bounded by the input size).
pub fn load_xnnpack(data: &[u8]) -> Outcome {
    let named: Vec<(&str, &[u8])> = xnnpack_named_data().iter().map(|(k, v)| (k.as_str(), v.as_slice())).collect();
    if let Err(e) = pte::xnnpack::load(data, Some(&named)) {
        return Outcome::Rejected(e.kind());
    }
    // Results: at most 4 x limit elements (16 bytes each, with the copies) in all.
    let limit = (data.len() / 64).max(4096);
    match crate::backends::xnnpack::run_standalone(data, &named, 1.0, limit) {
        Ok(_) => Outcome::Ran,
        Err(e) if e.code == crate::runtime::ErrorCode::NotSupported => Outcome::RefusedAtInit,
        Err(_) => Outcome::FailedAtExecute,
    }
}

/// `structured`: bytes -> generated program -> emit -> write; `check_program` must hold on the
/// unmutated program; then byte and field mutations of the emitted file go through load, checks
/// and execution like `load_pte`.
pub fn structured(data: &[u8]) -> Outcome {
    load_pte(&structured_file(data))
}

/// The generation half of `structured`: checks every invariant on the generated program and
/// returns the mutated file for `load_pte` (the allocation guard applies to that half only).
pub fn structured_file(data: &[u8]) -> Vec<u8> {
    let mut u = Unstructured::new(data);
    let cfg = GenConfig::default().swarm(&mut u);
    let g = generate(&cfg, &mut u, None);
    let report = check_case(&g, &CheckOptions { negative: false, ..CheckOptions::default() });
    assert!(
        report.ok(),
        "invariant violated on a generated program: {:?}\n{}",
        report.failures,
        crate::ir::pretty::program(&g.program)
    );
    // The same options check_case emits with (the swarm config may switch while_loop on).
    let emit_opts =
        crate::emit::EmitOptions { allow_while: true, delegate_segments: !g.run.inline_blobs, ..Default::default() };
    let Ok(emitted) = crate::emit::emit(&g.program, &emit_opts) else { unreachable!("check_case emitted it") };
    let Ok(mut bytes) = emitted.to_bytes() else { unreachable!("check_case wrote it") };
    // Field mutation of the model, then byte mutations of the file.
    let mut program = emitted.program.clone();
    mutate_fields(&mut program, &mut u);
    let refs: Vec<&[u8]> = emitted.segment_data.iter().map(Vec::as_slice).collect();
    if let Ok(b) = format::write(&program, &refs, &Default::default()) {
        bytes = b;
    }
    let flips = u.int_in_range(0..=8u8).unwrap_or(0);
    for _ in 0..flips {
        if bytes.is_empty() {
            break;
        }
        let at = u.choose_index(bytes.len()).unwrap_or(0);
        bytes[at] ^= u.arbitrary::<u8>().unwrap_or(0xff).max(1);
    }
    bytes
}

/// `saved_json`: bytes -> saved-program JSON loader -> emit (and load the result).
pub fn saved_json(data: &[u8]) -> Outcome {
    let Ok(text) = std::str::from_utf8(data) else { return Outcome::NotAProgram };
    let Ok(p) = saved::load(text) else { return Outcome::NotAProgram };
    match crate::emit::emit(&p, &crate::emit::EmitOptions { allow_while: true, ..Default::default() }) {
        Err(_) => Outcome::NotAProgram,
        Ok(e) => match e.to_bytes() {
            Ok(bytes) => load_pte(&bytes),
            Err(_) => Outcome::NotAProgram,
        },
    }
}

/// The real ExecuTorch files `mutate_real` starts from.
pub const REAL_FILES: &[&[u8]] = &[
    include_bytes!("../../corpus/real/cond_cpu.pte"),
    include_bytes!("../../corpus/real/cpu_add_mul.pte"),
    include_bytes!("../../corpus/real/cpu_dynamic_batch.pte"),
    include_bytes!("../../corpus/real/cpu_int_bool_dtypes.pte"),
    include_bytes!("../../corpus/real/cpu_linear_relu.pte"),
    include_bytes!("../../corpus/real/demo_backend_whole_module.pte"),
    include_bytes!("../../corpus/real/demo_repeated_call_3x.pte"),
    include_bytes!("../../corpus/real/legacy_et021_inline_constants.pte"),
    include_bytes!("../../corpus/real/map_cpu.pte"),
    include_bytes!("../../corpus/real/multi_method_cpu_shared_weights.pte"),
    include_bytes!("../../corpus/real/xnn_delegate_inline.pte"),
    include_bytes!("../../corpus/real/xnn_repeated_call_3x.pte"),
];

fn pick_i64(u: &mut Unstructured<'_>) -> i64 {
    match u.int_in_range(0..=5u8).unwrap_or(0) {
        0 => -1,
        1 => 0,
        2 => i64::from(u.int_in_range(0..=64u8).unwrap_or(0)),
        3 => i64::from(i32::MAX),
        4 => i64::from(u.arbitrary::<i32>().unwrap_or(0)),
        _ => i64::MAX,
    }
}

/// One field mutation `mutate_fields` can make, in the order its input byte selects them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldMutation {
    /// `op_index` of a KernelCall or `delegate_index` of a DelegateCall; the index field of
    /// any other instruction (jump destination, move target, freed value).
    InstructionIndex,
    /// One argument of a KernelCall or DelegateCall; the index field of other instructions.
    InstructionArg,
    /// Removes one KernelCall argument (or sets a DelegateCall argument); the index field of
    /// other instructions.
    DropKernelArg,
    /// Same as `InstructionArg` (a second draw weight for it).
    InstructionArgAgain,
    /// The leading size of a tensor (or the first item of an IntList).
    TensorSize,
    /// A tensor's rank, 0 to 20 (sizes all 1).
    TensorRank,
    /// A tensor's planned offset, or its constant buffer index.
    TensorPlacement,
    /// The first segment's offset.
    FirstSegmentOffset,
    /// The last segment's size.
    LastSegmentSize,
    /// The last constant-segment offset.
    LastConstantOffset,
}

impl FieldMutation {
    /// Every mutation, in selection order.
    pub const ALL: [FieldMutation; 10] = [
        FieldMutation::InstructionIndex,
        FieldMutation::InstructionArg,
        FieldMutation::DropKernelArg,
        FieldMutation::InstructionArgAgain,
        FieldMutation::TensorSize,
        FieldMutation::TensorRank,
        FieldMutation::TensorPlacement,
        FieldMutation::FirstSegmentOffset,
        FieldMutation::LastSegmentSize,
        FieldMutation::LastConstantOffset,
    ];
}

/// Applies 1 to 6 [`FieldMutation`]s to a decoded program, each with a boundary value.
pub fn mutate_fields(p: &mut Program, u: &mut Unstructured<'_>) {
    use FieldMutation::*;
    let n = u.int_in_range(1..=6u8).unwrap_or(1);
    for _ in 0..n {
        let what = FieldMutation::ALL[usize::from(u.int_in_range(0..=9u8).unwrap_or(0))];
        let v = pick_i64(u);
        let plans = p.execution_plan.get_or_insert_with(Vec::new);
        let plan_count = plans.len();
        match what {
            FirstSegmentOffset => {
                if let Some(s) = p.segments.as_mut().and_then(|s| s.first_mut()) {
                    s.offset = v as u64;
                }
                continue;
            }
            LastSegmentSize => {
                if let Some(s) = p.segments.as_mut().and_then(|s| s.last_mut()) {
                    s.size = v as u64;
                }
                continue;
            }
            LastConstantOffset => {
                if let Some(c) = p.constant_segment.as_mut().and_then(|c| c.offsets.as_mut()).and_then(|o| o.last_mut())
                {
                    *c = v as u64;
                }
                continue;
            }
            _ => {}
        }
        if plan_count == 0 {
            continue;
        }
        let plan = &mut plans[u.choose_index(plan_count).unwrap_or(0)];
        match what {
            InstructionIndex | InstructionArg | DropKernelArg | InstructionArgAgain => {
                let Some(ins) = plan.chains.as_mut().and_then(|c| c.first_mut()).and_then(|c| c.instructions.as_mut())
                else {
                    continue;
                };
                if ins.is_empty() {
                    continue;
                }
                let i = u.choose_index(ins.len()).unwrap_or(0);
                match &mut ins[i] {
                    Instruction::KernelCall(k) => {
                        if what == InstructionIndex {
                            k.op_index = v as i32;
                        } else if let Some(a) = k.args.as_mut().filter(|a| !a.is_empty()) {
                            let j = u.choose_index(a.len()).unwrap_or(0);
                            if what == InstructionArg {
                                a[j] = v as i32;
                            } else {
                                a.remove(j);
                            }
                        }
                    }
                    Instruction::DelegateCall(d) => {
                        if what == InstructionIndex {
                            d.delegate_index = v as i32;
                        } else if let Some(a) = d.args.as_mut().filter(|a| !a.is_empty()) {
                            let j = u.choose_index(a.len()).unwrap_or(0);
                            a[j] = v as i32;
                        }
                    }
                    Instruction::JumpFalseCall(j) => j.destination_instruction = v as i32,
                    Instruction::MoveCall(m) => m.move_to = v as i32,
                    Instruction::FreeCall(f) => f.value_index = v as i32,
                }
            }
            TensorSize | TensorRank | TensorPlacement => {
                let Some(vals) = plan.values.as_mut() else { continue };
                if vals.is_empty() {
                    continue;
                }
                let i = u.choose_index(vals.len()).unwrap_or(0);
                if let crate::program::EValue::Tensor(t) = &mut vals[i] {
                    match what {
                        TensorSize => {
                            if let Some(s) = t.sizes.as_mut().and_then(|s| s.first_mut()) {
                                *s = v as i32;
                            }
                        }
                        TensorRank => {
                            let rank = u.int_in_range(0..=20usize).unwrap_or(17);
                            t.sizes = Some(vec![1; rank]);
                            t.dim_order = Some((0..rank as u8).collect());
                        }
                        _ => {
                            if let Some(a) = t.allocation_info.as_mut() {
                                a.memory_offset_low = v as u32;
                                a.memory_offset_high = (v >> 32) as u32;
                            } else {
                                t.data_buffer_idx = v as u32;
                            }
                        }
                    }
                } else if let crate::program::EValue::IntList(Some(items)) = &mut vals[i]
                    && let Some(x) = items.first_mut()
                {
                    *x = v;
                }
            }
            FirstSegmentOffset | LastSegmentSize | LastConstantOffset => {}
        }
    }
}

/// `mutate_real`: decode a real corpus file, mutate fields of the decoded program, re-encode,
/// load, init, execute.
pub fn mutate_real(data: &[u8]) -> Outcome {
    match mutate_real_file(data) {
        Some(bytes) => load_pte(&bytes),
        None => Outcome::NotAProgram,
    }
}

/// The mutation half of `mutate_real`: the re-encoded file (`None` when the mutated program
/// cannot be written), for `load_pte` (the allocation guard is sized from this file).
pub fn mutate_real_file(data: &[u8]) -> Option<Vec<u8>> {
    let mut u = Unstructured::new(data);
    let file = REAL_FILES[u.choose_index(REAL_FILES.len()).unwrap_or(0)];
    let Ok(loaded) = format::load(file) else { unreachable!("corpus files load") };
    let mut program = loaded.program.clone();
    mutate_fields(&mut program, &mut u);
    format::write(&program, &loaded.segments, &Default::default()).ok()
}
