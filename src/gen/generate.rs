//! Random valid IR programs from [`GenConfig`], driven by `arbitrary::Unstructured` bytes.
//!
//! The generator is total: every byte string (including an empty one) yields a valid program,
//! because each choice is resolved against what already exists (value refs index the pool of
//! values of the right type defined so far, modules index the modules made so far). Shrinking
//! the bytes therefore can never produce a dangling reference or an ill-typed program — the
//! structure is built first and references are resolved into it.
//!
//! Every value flowing between nodes is an f32 tensor of one program-wide shape `S = [r, c]`;
//! "side" ops (select, index_select, argmax, gt, permute, sym_size, scalar ops) produce other
//! types that become extra method outputs.

use super::config::GenConfig;
use crate::backends::graph::{lower, Flavor};
use crate::ir::build::GraphBuilder;
use crate::ir::{ConstTensor, Dtype, Graph, IrMethod, IrProgram, LoweredModule, Node, Op, Ref, ValueType};
use arbitrary::Unstructured;
use std::collections::{BTreeMap, BTreeSet};

/// A generated program and the generator features it exercises.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The program.
    pub program: IrProgram,
    /// Names of the features present (see [`FEATURES`]).
    pub features: BTreeSet<String>,
}

/// Every named feature the generator can produce (coverage is measured against this list).
pub const FEATURES: &[&str] = &[
    "multi_method",
    "module_shared_across_methods",
    "constants",
    "call",
    "repeated_call",
    "interleaved_modules",
    "call_in_cond",
    "call_in_map",
    "call_in_scan",
    "cond",
    "map",
    "scan",
    "identical_partitions_same_specs",
    "identical_partitions_diff_specs",
    "scratch_called_once",
    "scratch_called_twice",
    "opted_in",
    "not_opted_in",
    "argkeep_called_twice",
    "op:add",
    "op:sub",
    "op:mul",
    "op:relu",
    "op:sin",
    "op:cos",
    "op:linear",
    "op:addmm",
    "op:mm",
    "op:cumsum",
    "op:permute_copy",
    "op:select_copy",
    "op:index_select",
    "op:argmax",
    "op:gt",
    "op:sym_size",
    "op:scalar_add",
    "op:scalar_sub",
    "op:scalar_mul",
    "op:scalar_eq",
    "op:scalar_lt",
];

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Top,
    Cond,
    Map,
    Scan,
    While,
}

struct Ctx<'c, 'u, 'a> {
    u: &'u mut Unstructured<'a>,
    cfg: &'c GenConfig,
    r: usize,
    c: usize,
    n: usize,
    modules: Vec<LoweredModule>,
    /// For cloned modules: (original, same specs).
    clones: Vec<(usize, usize, bool)>,
    features: BTreeSet<String>,
    /// Calls per module in the current method.
    calls: BTreeMap<usize, usize>,
    last_call: Option<usize>,
    /// Methods that call each module.
    users: BTreeMap<usize, BTreeSet<usize>>,
    method: usize,
}

/// Index of the `[1]`-shaped constant among a graph's constants (`w, b, k, idx, one`).
const ONE: usize = 4;

impl<'c, 'u, 'a> Ctx<'c, 'u, 'a> {
    fn new(u: &'u mut Unstructured<'a>, cfg: &'c GenConfig, r: usize, c: usize, n: usize) -> Self {
        Ctx {
            u,
            cfg,
            r,
            c,
            n,
            modules: Vec::new(),
            clones: Vec::new(),
            features: BTreeSet::new(),
            calls: BTreeMap::new(),
            last_call: None,
            users: BTreeMap::new(),
            method: 0,
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.u.int_in_range(0..=n - 1).unwrap_or(0)
    }

    fn chance(&mut self, percent: u32) -> bool {
        self.u.int_in_range(0..=99u32).map(|x| x < percent).unwrap_or(false)
    }

    fn small_f32(&mut self) -> f64 {
        let k: i32 = self.u.int_in_range(-8..=8).unwrap_or(1);
        f64::from(k) / 4.0
    }

    fn s(&self) -> ValueType {
        ValueType::tensor(Dtype::F32, vec![self.r, self.c])
    }

    fn feature(&mut self, f: impl Into<String>) {
        self.features.insert(f.into());
    }

    fn constants(&mut self) -> Vec<ConstTensor> {
        if !self.cfg.features.constants {
            return Vec::new();
        }
        let c = self.c;
        let w: Vec<f64> = (0..c * c).map(|_| self.small_f32()).collect();
        let b: Vec<f64> = (0..c).map(|_| self.small_f32()).collect();
        let k = vec![self.small_f32()];
        let r = self.r as i64;
        let idx: Vec<f64> = (0..2).map(|_| self.u.int_in_range(0..=r - 1).unwrap_or(0) as f64).collect();
        vec![
            ConstTensor { dtype: Dtype::F32, shape: vec![c, c], values: w },
            ConstTensor { dtype: Dtype::F32, shape: vec![c], values: b },
            ConstTensor { dtype: Dtype::F32, shape: vec![], values: k },
            ConstTensor { dtype: Dtype::I64, shape: vec![2], values: idx },
            ConstTensor { dtype: Dtype::F32, shape: vec![1], values: vec![1.5] },
        ]
    }

    /// One S-preserving CPU op on the pool (plus side ops when enabled).
    fn cpu_op(
        &mut self,
        b: &mut GraphBuilder,
        has_consts: bool,
        pool: &mut Vec<Ref>,
        ints: &mut Vec<Ref>,
        side: &mut Vec<Ref>,
    ) {
        let x = pool[self.pick(pool.len())];
        let y = pool[self.pick(pool.len())];
        let side_ops = self.cfg.features.side_ops;
        let choices = 9 + if side_ops { 8 } else { 0 };
        let k = self.pick(choices);
        let c = |i: usize| b.constant(i);
        match k {
            0 => self.binary(b, Op::Add, x, y, "op:add", pool),
            1 => self.binary(b, Op::Sub, x, y, "op:sub", pool),
            2 if has_consts && self.chance(50) => {
                let v = b.op(Op::Mul, &[x, c(2)]);
                self.feature("op:mul");
                pool.push(v);
            }
            2 => self.binary(b, Op::Mul, x, y, "op:mul", pool),
            3 => self.unary(b, Op::Relu, x, "op:relu", pool),
            4 => self.unary(b, Op::Sin, x, "op:sin", pool),
            5 => self.unary(b, Op::Cos, x, "op:cos", pool),
            6 if has_consts => {
                let v = b.op(Op::Linear, &[x, c(0), c(1)]);
                self.feature("op:linear");
                pool.push(v);
            }
            7 if has_consts => {
                let (op, name, args) = if self.chance(50) {
                    (Op::Addmm, "op:addmm", vec![c(1), x, c(0)])
                } else {
                    (Op::Mm, "op:mm", vec![x, c(0)])
                };
                let v = b.op(op, &args);
                self.feature(name);
                pool.push(v);
            }
            8 => {
                let dim = self.pick(2) as i64;
                let v = b.op(Op::Cumsum { dim }, &[x]);
                self.feature("op:cumsum");
                pool.push(v);
            }
            9 => {
                side.push(b.op(Op::PermuteCopy { dims: vec![1, 0] }, &[x]));
                self.feature("op:permute_copy");
            }
            10 => {
                let dim = self.pick(2);
                let index = self.pick([self.r, self.c][dim]) as i64;
                side.push(b.op(Op::SelectCopy { dim: dim as i64, index }, &[x]));
                self.feature("op:select_copy");
            }
            11 if has_consts => {
                side.push(b.op(Op::IndexSelect { dim: 0 }, &[x, c(3)]));
                self.feature("op:index_select");
            }
            12 => {
                let dim = if self.chance(30) { None } else { Some(self.pick(2) as i64) };
                let keepdim = self.chance(50);
                side.push(b.op(Op::Argmax { dim, keepdim }, &[x]));
                self.feature("op:argmax");
            }
            13 => {
                let other = self.small_f32();
                side.push(b.op(Op::Gt { other }, &[x]));
                self.feature("op:gt");
            }
            14 => {
                let dim = self.pick(2) as i64;
                ints.push(b.op(Op::SymSize { dim }, &[x]));
                self.feature("op:sym_size");
            }
            15 | 16 => {
                if ints.is_empty() {
                    ints.push(b.op(Op::SymSize { dim: 1 }, &[x]));
                    self.feature("op:sym_size");
                }
                let (a, bb) = (ints[self.pick(ints.len())], ints[self.pick(ints.len())]);
                let (op, name) = match self.pick(5) {
                    0 => (Op::ScalarAdd, "op:scalar_add"),
                    1 => (Op::ScalarSub, "op:scalar_sub"),
                    2 => (Op::ScalarMul, "op:scalar_mul"),
                    3 => (Op::ScalarEq, "op:scalar_eq"),
                    _ => (Op::ScalarLt, "op:scalar_lt"),
                };
                let v = b.op(op.clone(), &[a, bb]);
                if matches!(op, Op::ScalarEq | Op::ScalarLt) {
                    side.push(v);
                } else {
                    ints.push(v);
                }
                self.feature(name);
            }
            _ => self.unary(b, Op::Relu, x, "op:relu", pool),
        }
    }

    fn binary(&mut self, b: &mut GraphBuilder, op: Op, x: Ref, y: Ref, name: &str, pool: &mut Vec<Ref>) {
        pool.push(b.op(op, &[x, y]));
        self.feature(name);
    }

    fn unary(&mut self, b: &mut GraphBuilder, op: Op, x: Ref, name: &str, pool: &mut Vec<Ref>) {
        pool.push(b.op(op, &[x]));
        self.feature(name);
    }

    fn call(&mut self, b: &mut GraphBuilder, place: Place, pool: &mut Vec<Ref>) {
        let n = self.modules.len();
        let repeat = self.cfg.features.repeated_calls && self.chance(50);
        let m = match self.last_call {
            Some(last) if repeat => last,
            _ => self.pick(n),
        };
        if self.calls.get(&m).copied().unwrap_or(0) >= self.cfg.max_calls_per_module {
            return;
        }
        let n_in = self.modules[m].graph.inputs.len();
        let args: Vec<Ref> = (0..n_in).map(|_| pool[self.pick(pool.len())]).collect();
        let out = b.call(m, &args, 1)[0];
        pool.push(out);
        let before = self.calls.get(&m).copied().unwrap_or(0);
        self.feature("call");
        if before > 0 {
            self.feature("repeated_call");
            if self.last_call.is_some_and(|l| l != m) {
                self.feature("interleaved_modules");
            }
        }
        match place {
            Place::Cond => self.feature("call_in_cond"),
            Place::Map => self.feature("call_in_map"),
            Place::Scan => self.feature("call_in_scan"),
            Place::While => self.feature("call_in_while"),
            Place::Top => {}
        }
        *self.calls.entry(m).or_default() += 1;
        self.users.entry(m).or_default().insert(self.method);
        self.last_call = Some(m);
    }

    /// Generates a graph with `inputs`; returns it with its first `want` outputs being S values,
    /// followed by the extras produced by side ops (only kept where `keep_side`).
    fn graph(&mut self, inputs: Vec<ValueType>, depth: usize, place: Place, want: usize, keep_side: bool) -> Graph {
        let consts = self.constants();
        let has_consts = !consts.is_empty();
        if has_consts {
            self.feature("constants");
        }
        let n_consts = consts.len();
        let mut b = GraphBuilder::new(consts, inputs.clone());
        let s = self.s();
        let mut pool: Vec<Ref> =
            inputs.iter().enumerate().filter(|(_, t)| **t == s).map(|(i, _)| n_consts + i).collect();
        let stack = inputs
            .iter()
            .position(|t| matches!(t, ValueType::Tensor { shape, .. } if shape.len() == 3))
            .map(|i| n_consts + i);
        let mut ints = Vec::new();
        let mut side = Vec::new();
        let n_nodes = 1 + self.pick(self.cfg.max_nodes);
        for _ in 0..n_nodes {
            let can_call = self.cfg.features.calls && !self.modules.is_empty();
            if can_call && self.chance(self.cfg.call_percent) {
                self.call(&mut b, place, &mut pool);
            } else if depth < self.cfg.max_depth && self.chance(self.cfg.control_percent) {
                self.control(&mut b, depth, stack, &mut pool, &mut side);
            } else {
                self.cpu_op(&mut b, has_consts, &mut pool, &mut ints, &mut side);
            }
        }
        let mut outs: Vec<Ref> = pool.iter().rev().take(want).copied().collect();
        while outs.len() < want {
            outs.push(pool[0]);
        }
        if keep_side {
            let k = side.len().min(3);
            outs.extend(side.iter().rev().take(k));
            if let Some(i) = ints.last() {
                outs.push(*i);
            }
        }
        b.finish(&outs)
    }

    fn control(
        &mut self,
        b: &mut GraphBuilder,
        depth: usize,
        stack: Option<Ref>,
        pool: &mut Vec<Ref>,
        side: &mut Vec<Ref>,
    ) {
        let f = self.cfg.features.clone();
        let mut kinds = Vec::new();
        if f.cond {
            kinds.push(0);
        }
        if f.map && stack.is_some() {
            kinds.push(1);
        }
        if f.scan && stack.is_some() {
            kinds.push(2);
        }
        if f.while_loop {
            kinds.push(3);
        }
        if kinds.is_empty() {
            return;
        }
        let x = pool[self.pick(pool.len())];
        let s = self.s();
        match kinds[self.pick(kinds.len())] {
            0 => {
                let other = self.small_f32();
                let pred = b.op(Op::Gt { other }, &[x]);
                self.feature("op:gt");
                let n_ops = 1 + self.pick(2);
                let operands: Vec<Ref> = (0..n_ops).map(|_| pool[self.pick(pool.len())]).collect();
                let ins = vec![s.clone(); n_ops];
                let then_graph = self.graph(ins.clone(), depth + 1, Place::Cond, 1, false);
                let else_graph = self.graph(ins, depth + 1, Place::Cond, 1, false);
                let out = b.node(Node::Cond { pred, then_graph, else_graph, operands }, 1)[0];
                pool.push(out);
                self.feature("cond");
            }
            1 => {
                let extra = self.chance(50);
                let mut ins = vec![s.clone()];
                let mut args = Vec::new();
                if extra {
                    ins.push(s.clone());
                    args.push(x);
                }
                let body = self.graph(ins, depth + 1, Place::Map, 1, false);
                let out = b.node(Node::Map { body, xs: stack.unwrap_or(x), args }, 1)[0];
                side.push(out);
                self.feature("map");
            }
            3 => {
                // while i < 2 * r: i += step; x = body(x), with i starting at r.
                let i0 = b.op(Op::SymSize { dim: 0 }, &[x]);
                self.feature("op:sym_size");
                let mut cb = GraphBuilder::new(vec![], vec![ValueType::Int, s.clone()]);
                let r1 = cb.op(Op::SymSize { dim: 0 }, &[cb.input(1)]);
                let limit = cb.op(Op::ScalarAdd, &[r1, r1]);
                let lt = cb.op(Op::ScalarLt, &[cb.input(0), limit]);
                let cond = cb.finish(&[lt]);
                let mut body = self.graph(vec![ValueType::Int, s.clone()], depth + 1, Place::While, 1, false);
                // Append `i + step` to the generated body: step = 1 (from the [1] constant) or r.
                let mut next = crate::ir::infer::graph_types(&body, &self.modules, "while body").map_or(0, |t| t.len());
                let n_consts = body.constants.len();
                let step_src = if n_consts > ONE { ONE } else { n_consts + 1 };
                body.nodes.push(Node::Op { op: Op::SymSize { dim: 0 }, args: vec![step_src] });
                let step = next;
                next += 1;
                body.nodes.push(Node::Op { op: Op::ScalarAdd, args: vec![n_consts, step] });
                let x_out = body.outputs[0];
                body.outputs = vec![next, x_out];
                let outs = b.node(Node::While { cond, body, carried: vec![i0, x], max_iterations: 64 }, 2);
                pool.push(outs[1]);
                self.feature("while");
            }
            _ => {
                let body = self.graph(vec![s.clone(), s], depth + 1, Place::Scan, 2, false);
                let outs = b.node(Node::Scan { body, init: vec![x], xs: vec![stack.unwrap_or(x)] }, 2);
                pool.push(outs[0]);
                side.push(outs[1]);
                self.feature("scan");
            }
        }
    }

    fn module(&mut self) -> LoweredModule {
        let mut flavors = vec![Flavor::Demo];
        if self.cfg.features.argkeep {
            flavors.push(Flavor::ArgKeep);
        }
        if self.cfg.features.scratch {
            flavors.push(Flavor::Scratch);
        }
        let flavor = flavors[self.pick(flavors.len())];
        let n_in = 1 + self.pick(2);
        let saved = (self.cfg.features.calls, self.cfg.max_depth);
        // A lowered module holds CPU ops only: generate with calls and control flow off.
        let g = {
            let mut cfg = self.cfg.clone();
            cfg.features.calls = false;
            cfg.max_depth = 0;
            cfg.max_nodes = cfg.max_nodes.min(3);
            cfg.features.side_ops = false;
            let mut sub = Ctx::new(self.u, &cfg, self.r, self.c, self.n);
            let g = sub.graph(vec![sub.s(); n_in], 0, Place::Top, 1, false);
            self.features.extend(sub.features);
            g
        };
        let _ = saved;
        let n_specs = self.pick(3);
        let specs: Vec<(String, Vec<u8>)> = (0..n_specs).map(|i| (format!("k{i}"), vec![self.pick(4) as u8])).collect();
        // The graph type-checks by construction, so preprocess cannot fail; fall back to an
        // identity-like module if it ever did.
        lower(flavor, g, specs).unwrap_or_else(|_| {
            let mut b = GraphBuilder::new(vec![], vec![self.s()]);
            let r = b.op(Op::Relu, &[b.input(0)]);
            lower(Flavor::Demo, b.finish(&[r]), vec![]).unwrap_or_else(|e| unreachable!("relu module: {e}"))
        })
    }
}

/// Generates one valid program.
pub fn generate(cfg: &GenConfig, u: &mut Unstructured<'_>) -> Generated {
    let r = u.int_in_range(1..=3usize).unwrap_or(2);
    let c = u.int_in_range(1..=4usize).unwrap_or(2);
    let n = u.int_in_range(1..=3usize).unwrap_or(2);
    let mut ctx = Ctx::new(u, cfg, r, c, n);
    if cfg.features.calls {
        let k = 1 + ctx.pick(cfg.max_modules.max(1));
        for _ in 0..k {
            let existing = ctx.modules.len();
            if cfg.features.identical_partitions && existing > 0 && ctx.chance(35) {
                let orig = ctx.pick(existing);
                let mut m = ctx.modules[orig].clone();
                let same = ctx.chance(50);
                if !same {
                    m.compile_specs.push(("variant".into(), crate::ir::HexBytes(vec![1 + ctx.pick(3) as u8])));
                }
                ctx.clones.push((ctx.modules.len(), orig, same));
                ctx.modules.push(m);
            } else {
                let m = ctx.module();
                ctx.modules.push(m);
            }
        }
    }
    let max_m = if cfg.features.multi_method { cfg.max_methods.max(1) } else { 1 };
    let min_m = cfg.min_methods.clamp(1, max_m);
    let n_methods = min_m + ctx.pick(max_m - min_m + 1);
    let mut methods = Vec::new();
    let mut scratch_counts: Vec<usize> = Vec::new();
    let mut argkeep_counts: Vec<usize> = Vec::new();
    for mi in 0..n_methods {
        ctx.method = mi;
        ctx.calls.clear();
        ctx.last_call = None;
        let s = ctx.s();
        let mut inputs = vec![s.clone()];
        if ctx.chance(50) {
            inputs.push(s.clone());
        }
        if cfg.features.map || cfg.features.scan {
            inputs.push(ValueType::tensor(Dtype::F32, vec![ctx.n, ctx.r, ctx.c]));
        }
        let g = ctx.graph(inputs, 0, Place::Top, 1, true);
        for (m, count) in &ctx.calls {
            match ctx.modules[*m].backend.as_str() {
                "scratch" => scratch_counts.push(*count),
                "argkeep" => argkeep_counts.push(*count),
                _ => {}
            }
            if ctx.modules[*m].share_handle_across_calls {
                ctx.features.insert("opted_in".into());
            } else {
                ctx.features.insert("not_opted_in".into());
            }
        }
        let name = if mi == 0 { "forward".to_string() } else { format!("method{mi}") };
        methods.push(IrMethod { name, graph: g });
    }
    if n_methods > 1 {
        ctx.feature("multi_method");
    }
    for c in scratch_counts {
        ctx.feature(if c >= 2 { "scratch_called_twice" } else { "scratch_called_once" });
    }
    if argkeep_counts.iter().any(|c| *c >= 2) {
        ctx.feature("argkeep_called_twice");
    }
    if ctx.users.values().any(|u| u.len() > 1) {
        ctx.feature("module_shared_across_methods");
    }
    for (clone, orig, same) in ctx.clones.clone() {
        if ctx.users.contains_key(&clone) && ctx.users.contains_key(&orig) {
            ctx.feature(if same { "identical_partitions_same_specs" } else { "identical_partitions_diff_specs" });
        }
    }
    let program = IrProgram { methods, modules: ctx.modules, named_data: vec![] };
    Generated { program, features: ctx.features }
}

/// Generates from raw bytes (for fuzzers and proptest).
pub fn generate_from_bytes(cfg: &GenConfig, bytes: &[u8]) -> Generated {
    generate(cfg, &mut Unstructured::new(bytes))
}
