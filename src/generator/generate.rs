//! Random valid IR programs from [`GenConfig`], driven by `arbitrary::Unstructured` bytes.
//!
//! The generator is total: every byte string (including an empty one) yields a valid program,
//! because each choice is resolved against what already exists (value refs index the pool of
//! values of the right type defined so far, modules index the modules made so far). Shrinking
//! the bytes therefore can never produce a dangling reference or an ill-typed program — the
//! structure is built first and references are resolved into it.
//!
//! Values flowing between nodes live in typed pools: float32 `S = [r, c]` (static), float32
//! `D` (the same bound, rows shrinking at run time), int64 `[r, c]`, and Int scalars. "Side" ops
//! (select, index_select, argmax, comparisons, permute, view, scalar ops) produce other types;
//! their results become extra outputs — of the method, of a cond branch (the other branch
//! rebuilds the same types), of a scan body (extra stacked outputs) or of a module — so every
//! result the generator makes is one the oracle compares. Map and while bodies, whose outputs
//! are fixed, make no side ops. Every node made counts against the program's node budget
//! (`GenConfig::max_total_nodes`), a cond's replayed side ops when its then-branch records them
//! and a control-flow step's own nodes before its bodies are made; once it is spent each further
//! graph takes one step and no control flow, and no module is cloned. After generation, the
//! case's remaining bytes draw its inputs (`generator::inputs`) and its run choices.
//! May not touch: emission, the runtime (a case is IR, inputs and run choices).

use super::config::GenConfig;
use super::features::{Feature, Switch};
use super::inputs::draw_inputs;
use super::observe::observe;
use super::recipes::{Check, FLOAT, FLOAT_SIDE, Form, INT, INT_SIDE, Recipe, SCALAR};
use crate::backends::graph::{Flavor, lower};
use crate::backends::multifn::{self, MULTIFUNCTION_SPEC, MethodPartitions};
use crate::backends::{compiler_demo, xnnpack};
use crate::fault::Fault;
use crate::ir::build::GraphBuilder;
use crate::ir::value::Val;
use crate::ir::{
    ConstTensor, Dtype, Graph, IrMethod, IrProgram, LoweredModule, NamedBlob, Node, Op, OpKind, Ref, ValueType,
};
use arbitrary::Unstructured;
use std::collections::{BTreeMap, BTreeSet};

/// How a case is run, drawn with it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunChoices {
    /// Keep delegate blobs inline (no delegate segments).
    pub inline_blobs: bool,
    /// Run `multifn` delegates with one shared loaded model per bundle.
    pub share_models: bool,
}

/// A generated case: the program, its inputs per method, how to run it, and what it exercises.
#[derive(Clone, Debug)]
pub struct Generated {
    /// The program.
    pub program: IrProgram,
    /// Inputs of each method.
    pub inputs: BTreeMap<String, Vec<Val>>,
    /// Run choices.
    pub run: RunChoices,
    /// Names of the features present (see `features::feature_names`).
    pub features: BTreeSet<String>,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Place {
    Top,
    Cond,
    Map,
    Scan,
    While,
    Module,
}

/// The tensor pool a value belongs to.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Pool {
    S,
    D,
    I,
}

/// A side op recorded in a then-branch, replayed in the else-branch so both produce the same
/// output types.
#[derive(Clone)]
struct Template {
    op: Op,
    /// Takes the constant index tensor as its second operand.
    with_idx: bool,
    /// Takes its first operand twice.
    twice: bool,
    /// A relu applied to the result (a freed view).
    relu_after: bool,
}

#[derive(Default)]
struct Pools {
    s: Vec<Ref>,
    d: Vec<Ref>,
    i: Vec<Ref>,
    ints: Vec<Ref>,
    /// Ints known to be >= 1 (sizes): safe divisors.
    pos_ints: Vec<Ref>,
    /// Tensor side results.
    side: Vec<Ref>,
    /// Scalar side results (Int/Bool).
    side_scalars: Vec<Ref>,
    /// The stacked `[n, r, c]` input, if any.
    stack: Option<Ref>,
}

/// What a module takes and returns.
#[derive(Clone)]
struct ModuleInfo {
    /// Input pool (all inputs alike).
    input: Pool,
    /// Extra outputs beyond the first (side results).
    extra_outputs: usize,
    /// A multi-function partition: called exactly once, from one method.
    partition: bool,
}

/// The most nodes a control-flow step makes besides its bodies' (a while loop: the size it
/// starts from, its 3-node cond graph, the 2 nodes counting in its body, the loop node). A step
/// is control flow only while the budget has that many left.
const CONTROL_NODES: usize = 7;

/// Indices of the constants every graph gets when constants are on: `w, b, k, idx, one`.
const W: usize = 0;
const B: usize = 1;
const K: usize = 2;
const IDX: usize = 3;
const ONE: usize = 4;

struct Ctx<'c, 'u, 'a> {
    u: &'u mut Unstructured<'a>,
    cfg: &'c GenConfig,
    fault: Option<Fault>,
    r: usize,
    c: usize,
    n: usize,
    modules: Vec<LoweredModule>,
    info: Vec<ModuleInfo>,
    /// For cloned modules: (clone, original, same specs).
    clones: Vec<(usize, usize, bool)>,
    features: BTreeSet<Feature>,
    /// Calls per module in the current method.
    calls: BTreeMap<usize, usize>,
    last_call: Option<usize>,
    /// Methods that call each module.
    users: BTreeMap<usize, BTreeSet<usize>>,
    method: usize,
    /// Multi-function partitions per method: (method, module slot).
    partitions: Vec<(usize, usize)>,
    /// Named data the lowered modules need in the program (XNNPACK constants), by key.
    named: Vec<NamedBlob>,
    /// The program's node budget, handed to sub-contexts and taken back from them.
    budget: Budget,
}

/// What is left of the program's node budget (`GenConfig::max_total_nodes`) and what was spent.
#[derive(Clone, Copy)]
struct Budget {
    /// Nodes the program may still get.
    left: usize,
    /// Nodes spent, past the budget too.
    spent: usize,
}

impl<'c, 'u, 'a> Ctx<'c, 'u, 'a> {
    fn on(&self, s: Switch) -> bool {
        self.cfg.features.on(s)
    }

    /// Takes `n` nodes made from the program's node budget.
    fn spend(&mut self, n: usize) {
        self.budget.left = self.budget.left.saturating_sub(n);
        self.budget.spent += n;
    }

    /// Whether the configuration allows operator `k`.
    fn can(&self, k: OpKind) -> bool {
        self.cfg.allows_op(k)
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

    fn ty(&self, pool: Pool) -> ValueType {
        let (dtype, dynamic) = match pool {
            Pool::S => (Dtype::F32, false),
            Pool::D => (Dtype::F32, true),
            Pool::I => (Dtype::I64, false),
        };
        ValueType::Tensor { dtype, shape: vec![self.r, self.c], dynamic }
    }

    fn feature(&mut self, f: Feature) {
        self.features.insert(f);
    }

    fn constants(&mut self) -> Vec<ConstTensor> {
        if !self.on(Switch::Constants) {
            return Vec::new();
        }
        self.feature(Feature::Constants);
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

    /// A pool to draw the next op's operand from.
    fn pool(&mut self, p: &Pools) -> Option<Pool> {
        let mut avail = Vec::new();
        if !p.s.is_empty() {
            avail.extend([Pool::S, Pool::S]);
        }
        if !p.d.is_empty() {
            avail.push(Pool::D);
        }
        if !p.i.is_empty() {
            avail.push(Pool::I);
        }
        (!avail.is_empty()).then(|| avail[self.pick(avail.len())])
    }

    fn from(&mut self, p: &Pools, pool: Pool) -> Ref {
        let v = match pool {
            Pool::S => &p.s,
            Pool::D => &p.d,
            Pool::I => &p.i,
        };
        v[self.pick(v.len())]
    }

    fn push(p: &mut Pools, pool: Pool, r: Ref) {
        match pool {
            Pool::S => p.s.push(r),
            Pool::D => p.d.push(r),
            Pool::I => p.i.push(r),
        }
    }

    /// Whether the configuration allows recipe `r` (a matrix product needs `mm` as well: it
    /// makes either).
    fn allows(&self, r: &Recipe) -> bool {
        self.can(r.kind) && (r.form != Form::MatMul || self.can(OpKind::Mm))
    }

    /// One CPU op, drawn from the recipe tables of an operand's pool. `side_ok`: side ops may be
    /// made (their results kept by the caller); `scalars_ok`: scalar side results may be made;
    /// `templates`: record side ops for replay.
    fn cpu_op(
        &mut self,
        b: &mut GraphBuilder,
        consts: bool,
        p: &mut Pools,
        side_ok: bool,
        scalars_ok: bool,
        templates: &mut Option<&mut Vec<Template>>,
    ) {
        let Some(pool) = self.pool(p) else { return };
        let x = self.from(p, pool);
        let (main, side) = if pool == Pool::I { (&INT, &INT_SIDE) } else { (&FLOAT, &FLOAT_SIDE) };
        let y = self.from(p, pool);
        let side_ops = side_ok && self.on(Switch::SideOps);
        let n_main = main.slots(consts);
        let k = self.pick(n_main + if side_ops { side.slots(consts) } else { 0 });
        let (table, slot) = if k < n_main { (main, k) } else { (side, k - n_main) };
        let Some((r, nth)) = table.at(slot, consts) else { return };
        let fed = (!r.needs.static_shape || pool != Pool::D)
            && (!r.needs.constants || consts)
            && (!r.needs.scalars || scalars_ok);
        if !fed || (table.check == Check::BeforeDraw && !self.allows(r)) {
            return;
        }
        if pool == Pool::I {
            let Some((op, args)) = self.int_op(r, x, y) else { return };
            if !self.can(op.kind()) {
                return;
            }
            let v = b.op(op, &args);
            if std::ptr::eq(table, main) { p.i.push(v) } else { p.side.push(v) }
        } else if std::ptr::eq(table, main) {
            self.float_op(b, r, (pool, consts), x, y, p);
        } else if let Some(t) = self.side_template(b, r, nth, pool, x, p)
            && self.can(t.op.kind())
            && (!t.relu_after || self.can(OpKind::Relu))
        {
            let v = apply(b, &t, x, y);
            p.side.push(v);
            if let Some(ts) = templates.as_mut() {
                ts.push(t);
            }
        }
    }

    /// An int64 recipe's operator and operands.
    fn int_op(&mut self, r: &Recipe, x: Ref, y: Ref) -> Option<(Op, Vec<Ref>)> {
        Some(match r.form {
            Form::Binary | Form::GtTensor => (r.kind.without_parameters()?, vec![x, y]),
            Form::Unary => (r.kind.without_parameters()?, vec![x]),
            Form::Cumsum => (Op::Cumsum { dim: self.pick(2) as i64 }, vec![x]),
            Form::Argmax => (Op::Argmax { dim: Some(self.pick(2) as i64), keepdim: self.chance(50) }, vec![x]),
            Form::Transpose => (Op::PermuteCopy { dims: vec![1, 0] }, vec![x]),
            Form::Select => {
                let dim = self.pick(2);
                let index = self.pick([self.r, self.c][dim]) as i64;
                (Op::SelectCopy { dim: dim as i64, index }, vec![x])
            }
            _ => return None,
        })
    }

    /// Makes a float32 recipe whose result stays in `pool`.
    /// `(pool, consts)`: the result's pool, and whether the graph has constants.
    fn float_op(
        &mut self,
        b: &mut GraphBuilder,
        r: &Recipe,
        (pool, consts): (Pool, bool),
        x: Ref,
        y: Ref,
        p: &mut Pools,
    ) {
        let v = match (r.form, r.kind.without_parameters()) {
            (Form::Binary, Some(op)) => {
                // The other operand: the same pool, or a constant that broadcasts.
                let other = if consts && self.chance(40) { b.constant([B, K, ONE][self.pick(3)]) } else { y };
                let args = if self.chance(20) { vec![other, x] } else { vec![x, other] };
                b.op(op, &args)
            }
            (Form::Unary, Some(op)) => b.op(op, &[x]),
            (Form::Linear, _) => b.op(Op::Linear, &[x, b.constant(W), b.constant(B)]),
            (Form::MatMul, _) if self.chance(50) => b.op(Op::Addmm, &[b.constant(B), x, b.constant(W)]),
            (Form::MatMul, _) => b.op(Op::Mm, &[x, b.constant(W)]),
            (Form::Cumsum, _) => b.op(Op::Cumsum { dim: self.pick(2) as i64 }, &[x]),
            _ => return,
        };
        Self::push(p, pool, v);
    }

    /// A float32 side recipe's template (`nth`: which of its slots was drawn); sizes and scalar
    /// arithmetic are made here and kept in `p`'s Int pools, with no template.
    fn side_template(
        &mut self,
        b: &mut GraphBuilder,
        r: &Recipe,
        nth: usize,
        pool: Pool,
        x: Ref,
        p: &mut Pools,
    ) -> Option<Template> {
        let dynamic = pool == Pool::D;
        let template = |op| Template { op, with_idx: false, twice: false, relu_after: false };
        Some(match r.form {
            Form::Transpose => template(Op::PermuteCopy { dims: vec![1, 0] }),
            Form::Select => {
                let dim = self.pick(2);
                let index = if dynamic { [0, -1][self.pick(2)] } else { self.pick([self.r, self.c][dim]) as i64 };
                template(Op::SelectCopy { dim: dim as i64, index })
            }
            Form::IndexSelect => Template { with_idx: true, ..template(Op::IndexSelect { dim: 0 }) },
            Form::Argmax => {
                let dim = if self.chance(30) { None } else { Some(self.pick(2) as i64) };
                template(Op::Argmax { dim, keepdim: self.chance(50) })
            }
            Form::GtScalar => template(Op::Gt { other: self.small_f32() }),
            Form::GtTensor => Template { twice: true, ..template(Op::GtTensor) },
            Form::View => {
                let (r, cc) = (self.r as i64, self.c as i64);
                let shape = [vec![r * cc], vec![cc, r], vec![1, r * cc]][self.pick(3)].clone();
                Template { relu_after: self.chance(60), ..template(Op::View { shape }) }
            }
            Form::Sizes if self.can(OpKind::SymSize) => {
                let s = b.op(Op::SymSize { dim: self.pick(2) as i64 }, &[x]);
                p.ints.push(s);
                p.pos_ints.push(s);
                if nth == 1 {
                    self.scalar_op(b, p);
                }
                return None;
            }
            _ => return None,
        })
    }

    /// Int scalar arithmetic or a comparison on the sizes made so far.
    fn scalar_op(&mut self, b: &mut GraphBuilder, p: &mut Pools) {
        let a = p.ints[self.pick(p.ints.len())];
        let c = p.ints[self.pick(p.ints.len())];
        let Some((r, _)) = SCALAR.at(self.pick(SCALAR.slots(false)), false) else { return };
        let Some(op) = r.kind.without_parameters().filter(|_| self.can(r.kind)) else { return };
        // Floor division only by a size (never zero).
        let divisor = p.pos_ints[self.pick(p.pos_ints.len())];
        match r.form {
            Form::ScalarCompare => p.side_scalars.push(b.op(op, &[a, c])),
            _ if r.kind == OpKind::ScalarFloordiv => p.ints.push(b.op(op, &[a, divisor])),
            _ => p.ints.push(b.op(op, &[a, c])),
        }
    }

    fn call(&mut self, b: &mut GraphBuilder, place: Place, p: &mut Pools) {
        let candidates: Vec<usize> = (0..self.modules.len())
            .filter(|m| !self.info[*m].partition)
            .filter(|m| place == Place::Top || self.info[*m].extra_outputs == 0)
            .filter(|m| match self.info[*m].input {
                Pool::S => !p.s.is_empty(),
                Pool::D => !p.d.is_empty(),
                Pool::I => !p.i.is_empty(),
            })
            .collect();
        if candidates.is_empty() {
            return;
        }
        let repeat = self.on(Switch::RepeatedCalls) && self.chance(50);
        let m = match self.last_call {
            Some(last) if repeat && candidates.contains(&last) => last,
            _ => candidates[self.pick(candidates.len())],
        };
        if self.calls.get(&m).copied().unwrap_or(0) >= self.cfg.max_calls_per_module {
            return;
        }
        self.call_module(b, m, place, p);
    }

    fn call_module(&mut self, b: &mut GraphBuilder, m: usize, place: Place, p: &mut Pools) {
        let info = self.info[m].clone();
        let n_in = self.modules[m].graph.inputs.len();
        let args: Vec<Ref> = (0..n_in).map(|_| self.from(p, info.input)).collect();
        let outs = b.call(m, &args, 1 + info.extra_outputs);
        Self::push(p, info.input, outs[0]);
        p.side.extend(&outs[1..]);
        let before = self.calls.get(&m).copied().unwrap_or(0);
        self.feature(Feature::Call);
        if before > 0 {
            self.feature(Feature::RepeatedCall);
            if self.last_call.is_some_and(|l| l != m) {
                self.feature(Feature::InterleavedModules);
            }
        }
        match place {
            Place::Cond => self.feature(Feature::CallInCond),
            Place::Map => self.feature(Feature::CallInMap),
            Place::Scan => self.feature(Feature::CallInScan),
            Place::While => self.feature(Feature::CallInWhile),
            Place::Top | Place::Module => {}
        }
        *self.calls.entry(m).or_default() += 1;
        self.users.entry(m).or_default().insert(self.method);
        self.last_call = Some(m);
    }

    /// Generates a graph with `inputs`. Its outputs: the last `want` S values (or, when it has
    /// none, of its main pool), then what `keep` allows of its side results.
    #[allow(clippy::too_many_arguments)]
    fn graph(
        &mut self,
        inputs: Vec<ValueType>,
        depth: usize,
        place: Place,
        want: usize,
        templates: &mut Option<&mut Vec<Template>>,
    ) -> Graph {
        let consts = self.constants();
        let has_consts = !consts.is_empty();
        let n_consts = consts.len();
        let mut b = GraphBuilder::new(consts, inputs.clone());
        let mut p = Pools::default();
        for (i, t) in inputs.iter().enumerate() {
            let r = n_consts + i;
            match t {
                t if *t == self.ty(Pool::S) => p.s.push(r),
                t if *t == self.ty(Pool::D) => p.d.push(r),
                t if *t == self.ty(Pool::I) => p.i.push(r),
                ValueType::Tensor { shape, .. } if shape.len() == 3 => p.stack = Some(r),
                _ => {}
            }
        }
        // Which side results this graph can hand on.
        let (side_ok, scalars_ok) = match place {
            Place::Top => (true, true),
            Place::Cond | Place::Scan => (templates.is_some(), false),
            Place::Module => (true, false),
            Place::Map | Place::While => (false, false),
        };
        let n_nodes = 1 + self.pick(self.cfg.max_nodes);
        for step in 0..n_nodes {
            // Every graph takes one step; past the program's node budget, only that one, and
            // no control flow (whose bodies would take steps of their own).
            if step > 0 && self.budget.left == 0 {
                break;
            }
            // Nodes of this graph not yet spent (a control-flow step spends its own before its
            // bodies, so they see what is left), and the side ops recorded so far.
            let mut counted = b.len();
            let recorded = templates.as_deref().map_or(0, Vec::len);
            let can_call = self.on(Switch::Calls) && !self.modules.is_empty() && place != Place::Module;
            let can_nest = depth < self.cfg.max_depth && place != Place::Module && self.budget.left >= CONTROL_NODES;
            if can_call && self.chance(self.cfg.call_percent) {
                self.call(&mut b, place, &mut p);
            } else if can_nest && self.chance(self.cfg.control_percent) {
                self.control(&mut b, depth, place, &mut p, &mut counted);
            } else {
                self.cpu_op(&mut b, has_consts, &mut p, side_ok, scalars_ok, templates);
            }
            // A cond's then-branch pays for the nodes its side ops will add to the else-branch.
            let mirrored: usize = match templates.as_deref() {
                Some(ts) if place == Place::Cond => ts[recorded..].iter().map(|t| 1 + usize::from(t.relu_after)).sum(),
                _ => 0,
            };
            self.spend(b.len().saturating_sub(counted) + mirrored);
        }
        let main = if p.s.is_empty() && !p.d.is_empty() { p.d.clone() } else { p.s.clone() };
        let mut outs: Vec<Ref> = main.iter().rev().take(want).copied().collect();
        while outs.len() < want {
            outs.push(main.first().copied().unwrap_or(n_consts));
        }
        match place {
            Place::Top => {
                outs.extend(p.d.last());
                outs.extend(p.i.last());
                outs.extend(&p.side);
                outs.extend(&p.side_scalars);
                outs.extend(p.ints.last());
            }
            Place::Cond | Place::Scan | Place::Module => outs.extend(&p.side),
            Place::Map | Place::While => {}
        }
        if self.cfg.exportable && place != Place::Top {
            self.unalias(&mut b, &mut outs, n_consts..n_consts + inputs.len());
        }
        b.finish(&outs)
    }

    /// Makes every output of a body that is one of its `inputs`, or a view of one, a value of its
    /// own (`x + x`, or another elementwise op the configuration allows): torch.export refuses a
    /// control-flow body whose output aliases an input, and XNNPACK a module that passes an
    /// input through.
    fn unalias(&mut self, b: &mut GraphBuilder, outs: &mut [Ref], inputs: std::ops::Range<Ref>) {
        let ops = [Op::Add, Op::Mul, Op::Sub];
        for o in outs.iter_mut() {
            let view_of_input =
                b.op_of(*o).is_some_and(|(op, args)| matches!(op, Op::View { .. }) && inputs.contains(&args[0]));
            if !inputs.contains(o) && !view_of_input {
                continue;
            }
            if let Some(op) = ops.iter().find(|op| self.can(op.kind())) {
                *o = b.op(op.clone(), &[*o, *o]);
            } else if self.can(OpKind::Relu) {
                *o = b.op(Op::Relu, &[*o]);
            } else {
                continue;
            }
            self.spend(1);
        }
    }

    /// Before a control-flow step makes its bodies: spends the nodes `b` got since `counted` and
    /// the `after` nodes the step adds to `b` once its bodies are made, so the bodies see what
    /// is left and the step's own nodes never go past the budget.
    fn settle(&mut self, b: &GraphBuilder, counted: &mut usize, after: usize) {
        self.spend(b.len() - *counted + after);
        *counted = b.len() + after;
    }

    fn control(&mut self, b: &mut GraphBuilder, depth: usize, place: Place, p: &mut Pools, counted: &mut usize) {
        let mut kinds = Vec::new();
        // A result handed back from a nested loop is a row of it (select_copy).
        let rows = place == Place::Top || self.can(OpKind::SelectCopy);
        if self.on(Switch::Cond) && !p.s.is_empty() && self.can(OpKind::Gt) {
            kinds.push(0);
        }
        if self.on(Switch::Map) && p.stack.is_some() && rows {
            kinds.push(1);
        }
        if self.on(Switch::Scan) && p.stack.is_some() && !p.s.is_empty() && rows {
            kinds.push(2);
        }
        let while_ops = [OpKind::SymSize, OpKind::ScalarAdd, OpKind::ScalarLt].into_iter().all(|k| self.can(k));
        if self.on(Switch::WhileLoop) && !p.s.is_empty() && while_ops {
            kinds.push(3);
        }
        if kinds.is_empty() {
            return;
        }
        let s = self.ty(Pool::S);
        // The row `hand_on` takes of a loop's result below the top level.
        let row = usize::from(place != Place::Top);
        match kinds[self.pick(kinds.len())] {
            0 => {
                let x = self.from(p, Pool::S);
                let pred = if !p.ints.is_empty() && self.can(OpKind::ScalarLt) && self.chance(30) {
                    let (a, c) = (p.ints[self.pick(p.ints.len())], p.ints[self.pick(p.ints.len())]);
                    b.op(Op::ScalarLt, &[a, c])
                } else {
                    b.op(Op::Gt { other: self.small_f32() }, &[x])
                };
                let n_ops = 1 + self.pick(2);
                let operands: Vec<Ref> = (0..n_ops).map(|_| self.from(p, Pool::S)).collect();
                let ins = vec![s.clone(); n_ops];
                // The then-branch records its side ops; the else-branch replays them.
                let mut ts: Vec<Template> = Vec::new();
                let mut rec = (place == Place::Top).then_some(&mut ts);
                self.settle(b, counted, 1);
                let then_graph = self.graph(ins.clone(), depth + 1, Place::Cond, 1, &mut rec);
                let mut else_graph = self.graph(ins, depth + 1, Place::Cond, 1, &mut None);
                if !ts.is_empty() {
                    // Paid for by the then-branch as it recorded them.
                    replay(&mut else_graph, &ts, &self.modules);
                    self.feature(Feature::SideInCond);
                }
                let outs = b.node(Node::Cond { pred, then_graph, else_graph, operands }, 1 + ts.len());
                p.s.push(outs[0]);
                self.hand_on(b, place, p, &outs[1..]);
                self.feature(Feature::Cond);
            }
            1 => {
                let mut ins = vec![s.clone()];
                let mut args = Vec::new();
                if !p.s.is_empty() && self.chance(50) {
                    ins.push(s.clone());
                    args.push(self.from(p, Pool::S));
                }
                self.settle(b, counted, 1 + row);
                let body = self.graph(ins, depth + 1, Place::Map, 1, &mut None);
                let xs = p.stack.unwrap_or_default();
                let out = b.node(Node::Map { body, xs, args }, 1)[0];
                self.hand_on(b, place, p, &[out]);
                self.feature(Feature::Map);
            }
            3 => {
                // while i < 2 * r: i += step; x = body(x), with i starting at r.
                let x = self.from(p, Pool::S);
                let i0 = b.op(Op::SymSize { dim: 0 }, &[x]);
                let mut cb = GraphBuilder::new(vec![], vec![ValueType::Int, s.clone()]);
                let r1 = cb.op(Op::SymSize { dim: 0 }, &[cb.input(1)]);
                let limit = cb.op(Op::ScalarAdd, &[r1, r1]);
                let lt = cb.op(Op::ScalarLt, &[cb.input(0), limit]);
                // The cond graph, and the two nodes appended to the body below.
                self.spend(cb.len() + 2);
                self.settle(b, counted, 1);
                let cond = cb.finish(&[lt]);
                let mut body = self.graph(vec![ValueType::Int, s.clone()], depth + 1, Place::While, 1, &mut None);
                // Append `i + step` to the generated body: step = 1 (a size of the [1] constant) or r.
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
                p.s.push(outs[1]);
                self.feature(Feature::While);
            }
            _ => {
                let x = self.from(p, Pool::S);
                // At the top level the body's side results become extra stacked outputs.
                let mut ts = Vec::new();
                let mut rec = (place == Place::Top).then_some(&mut ts);
                self.settle(b, counted, 1 + row);
                let body = self.graph(vec![s.clone(), s], depth + 1, Place::Scan, 2, &mut rec);
                let n_out = body.outputs.len();
                if n_out > 2 {
                    self.feature(Feature::SideInScan);
                }
                let xs = p.stack.unwrap_or_default();
                let outs = b.node(Node::Scan { body, init: vec![x], xs: vec![xs] }, n_out);
                p.s.push(outs[0]);
                self.hand_on(b, place, p, &outs[1..]);
                self.feature(Feature::Scan);
            }
        }
    }

    /// Results a control-flow node produced besides its main one: kept as side outputs at the
    /// top level; elsewhere a stacked `[n, r, c]` result comes back as an S row and others are
    /// dropped (the generator only makes them at the top level).
    fn hand_on(&mut self, b: &mut GraphBuilder, place: Place, p: &mut Pools, outs: &[Ref]) {
        if place == Place::Top {
            p.side.extend(outs);
            return;
        }
        if let Some(first) = outs.first() {
            p.s.push(b.op(Op::SelectCopy { dim: 0, index: 0 }, &[*first]));
        }
    }

    fn module(&mut self) -> Option<(LoweredModule, ModuleInfo)> {
        // `None` = an XNNPACK module (listed after the graph flavors, and the compiler demo
        // last, so that configurations without it draw as they did before it existed).
        let mut flavors = vec![Some(Flavor::Demo)];
        if self.on(Switch::Argkeep) {
            flavors.push(Some(Flavor::ArgKeep));
        }
        if self.on(Switch::Scratch) {
            flavors.push(Some(Flavor::Scratch));
        }
        flavors.retain(|f| f.is_some_and(|f| self.cfg.allows_backend(f.id())));
        if self.on(Switch::Xnnpack) && self.cfg.allows_backend(xnnpack::ID) {
            flavors.push(None);
        }
        let demo_chain =
            self.on(Switch::CompilerDemo) && self.cfg.allows_backend(compiler_demo::ID) && !self.demo_ops().is_empty();
        let picked = self.pick(flavors.len() + usize::from(demo_chain));
        let Some(&flavor) = flavors.get(picked) else {
            return demo_chain.then(|| self.demo_chain());
        };
        let input = if self.on(Switch::DynamicShapes) && self.chance(30) { Pool::D } else { Pool::S };
        let n_in = 1 + self.pick(2);
        let multi = self.chance(30);
        // A lowered module holds CPU ops only; an XNNPACK one only the ops it lowers.
        let g = {
            let mut cfg = self.cfg.clone();
            cfg.max_nodes = cfg.max_nodes.min(3);
            cfg.features.set(Switch::SideOps, self.on(Switch::SideOps) && multi);
            if flavor.is_none() {
                let lowerable: std::collections::BTreeSet<String> =
                    xnnpack::lower::LOWERABLE_OPS.iter().map(|k| k.name().to_string()).collect();
                cfg.only_ops = Some(match cfg.only_ops.take() {
                    Some(allowed) => allowed.intersection(&lowerable).cloned().collect(),
                    None => lowerable,
                });
                cfg.features.set(Switch::IntTensors, false);
            }
            let mut sub = self.sub(&cfg);
            let ins = vec![sub.ty(input); n_in];
            let g = sub.graph(ins, 0, Place::Module, 1, &mut None);
            let (f, budget) = (std::mem::take(&mut sub.features), sub.budget);
            self.features.extend(f);
            self.budget = budget;
            g
        };
        let extra_outputs = g.outputs.len() - 1;
        let n_specs = self.pick(3);
        let specs: Vec<(String, Vec<u8>)> = (0..n_specs).map(|i| (format!("k{i}"), vec![self.pick(4) as u8])).collect();
        // The graph type-checks by construction, so preprocess cannot fail; fall back to the
        // demo backend (or an identity-like module) if it ever did.
        let lowered = match flavor {
            Some(f) => lower(f, g.clone(), specs.clone(), self.fault),
            None => xnnpack::lower(g.clone(), specs.clone(), self.fault).map(|(m, named)| {
                for n in named {
                    if !self.named.iter().any(|x| x.key == n.key) {
                        self.named.push(n);
                    }
                }
                m
            }),
        };
        let m = lowered.or_else(|_| lower(Flavor::Demo, g, specs, self.fault)).unwrap_or_else(|_| {
            let mut b = GraphBuilder::new(vec![], vec![self.ty(Pool::S)]);
            let r = b.op(Op::Relu, &[b.input(0)]);
            lower(Flavor::Demo, b.finish(&[r]), vec![], None).unwrap_or_else(|e| unreachable!("relu module: {e}"))
        });
        let extra_outputs = if m.graph.outputs.len() == 1 { 0 } else { extra_outputs };
        let input = if m.graph.inputs.first() == Some(&self.ty(Pool::D)) { Pool::D } else { Pool::S };
        Some((m, ModuleInfo { input, extra_outputs, partition: false }))
    }

    /// A `BackendWithCompilerDemo` module: a chain of one to three sin, add and mm nodes over
    /// static S inputs, each input used once in order (P13); mm only when S is square.
    fn demo_chain(&mut self) -> (LoweredModule, ModuleInfo) {
        let allowed = self.demo_ops();
        let n = 1 + self.pick(self.cfg.max_nodes.clamp(1, 3));
        let mut ops = Vec::with_capacity(n);
        for _ in 0..n {
            let k = self.pick(allowed.len());
            ops.push(allowed[k].clone());
        }
        let unary = |op: &Op| matches!(op, Op::Sin);
        let n_in = ops.iter().enumerate().map(|(i, op)| usize::from(!unary(op)) + usize::from(i == 0)).sum();
        let mut b = GraphBuilder::new(vec![], vec![self.ty(Pool::S); n_in]);
        let mut next = 0;
        let mut prev = None;
        for op in ops {
            let mut args: Vec<Ref> = prev.into_iter().collect();
            while args.len() < if unary(&op) { 1 } else { 2 } {
                args.push(b.input(next));
                next += 1;
            }
            prev = Some(b.op(op, &args));
        }
        let out = prev.unwrap_or_else(|| unreachable!("a chain has at least one node"));
        self.spend(n);
        let n_specs = self.pick(3);
        let specs = (0..n_specs).map(|i| (format!("k{i}"), vec![self.pick(4) as u8])).collect();
        let m = compiler_demo::lower(b.finish(&[out]), specs)
            .unwrap_or_else(|e| unreachable!("a chain made as P13 reads it lowers: {e}"));
        (m, ModuleInfo { input: Pool::S, extra_outputs: 0, partition: false })
    }

    /// The operators a demo chain may use here: those the backend lowers and the configuration
    /// allows, mm only when S is square.
    fn demo_ops(&self) -> Vec<Op> {
        compiler_demo::DemoOp::LOWERED
            .iter()
            .map(|(_, op)| op.clone())
            .filter(|op| self.can(op.kind()) && (*op != Op::Mm || self.r == self.c))
            .collect()
    }

    /// A context for a sub-generation (module bodies) sharing the byte stream.
    fn sub<'s>(&'s mut self, cfg: &'s GenConfig) -> Ctx<'s, 's, 'a> {
        Ctx {
            u: &mut *self.u,
            cfg,
            fault: self.fault,
            r: self.r,
            c: self.c,
            n: self.n,
            modules: Vec::new(),
            info: Vec::new(),
            clones: Vec::new(),
            features: BTreeSet::new(),
            calls: BTreeMap::new(),
            last_call: None,
            users: BTreeMap::new(),
            method: 0,
            partitions: Vec::new(),
            named: Vec::new(),
            budget: self.budget,
        }
    }

    /// A multi-function partition for the current method: an S -> S graph of CPU ops, called
    /// once at the top level; its module is filled in by the export after all methods exist.
    fn partition(&mut self, b: &mut GraphBuilder, p: &mut Pools) {
        if p.s.is_empty() {
            return;
        }
        let g = {
            let mut cfg = self.cfg.clone();
            cfg.max_nodes = cfg.max_nodes.min(3);
            cfg.features.set(Switch::SideOps, false);
            let mut sub = self.sub(&cfg);
            let s = sub.ty(Pool::S);
            let g = sub.graph(vec![s], 0, Place::Module, 1, &mut None);
            let budget = sub.budget;
            self.budget = budget;
            g
        };
        let slot = self.modules.len();
        self.modules.push(LoweredModule {
            backend: multifn::ID.into(),
            graph: g,
            processed: vec![],
            compile_specs: vec![],
            share_handle_across_calls: false,
            scratch_specs: vec![],
        });
        self.info.push(ModuleInfo { input: Pool::S, extra_outputs: 0, partition: true });
        self.partitions.push((self.method, slot));
        self.call_module(b, slot, Place::Top, p);
    }
}

/// Applies a side op to `x` (and `y` or the index constant).
fn apply(b: &mut GraphBuilder, t: &Template, x: Ref, y: Ref) -> Ref {
    let args = if t.with_idx {
        vec![x, b.constant(IDX)]
    } else if t.twice {
        vec![x, y]
    } else {
        vec![x]
    };
    let v = b.op(t.op.clone(), &args);
    if t.relu_after { b.op(Op::Relu, &[v]) } else { v }
}

/// Appends the side ops of `ts` to `g` (on its first S-typed value) as extra outputs, so it
/// returns the same types as the branch that recorded them.
fn replay(g: &mut Graph, ts: &[Template], modules: &[LoweredModule]) {
    let n_consts = g.constants.len();
    let x = g.outputs[0];
    let mut next = crate::ir::infer::graph_types(g, modules, "branch").map_or(0, |t| t.len());
    for t in ts {
        let args = if t.with_idx {
            vec![x, IDX.min(n_consts.saturating_sub(1))]
        } else if t.twice {
            vec![x, x]
        } else {
            vec![x]
        };
        g.nodes.push(Node::Op { op: t.op.clone(), args });
        let mut out = next;
        next += 1;
        if t.relu_after {
            g.nodes.push(Node::Op { op: Op::Relu, args: vec![out] });
            out = next;
            next += 1;
        }
        g.outputs.push(out);
    }
}

/// Generates one valid case (`fault`: a seeded preprocess bug the lowering exhibits, or `None`).
pub fn generate(cfg: &GenConfig, u: &mut Unstructured<'_>, fault: Option<Fault>) -> Generated {
    generate_counted(cfg, u, fault).0
}

/// [`generate`], with the nodes it spent from the node budget (past the budget too).
pub fn generate_counted(cfg: &GenConfig, u: &mut Unstructured<'_>, fault: Option<Fault>) -> (Generated, usize) {
    let r = u.int_in_range(1..=3usize).unwrap_or(2);
    let c = u.int_in_range(1..=4usize).unwrap_or(2);
    let n = u.int_in_range(1..=3usize).unwrap_or(2);
    let mut ctx = Ctx {
        u,
        cfg,
        fault,
        r,
        c,
        n,
        modules: Vec::new(),
        info: Vec::new(),
        clones: Vec::new(),
        features: BTreeSet::new(),
        calls: BTreeMap::new(),
        last_call: None,
        users: BTreeMap::new(),
        method: 0,
        partitions: Vec::new(),
        named: Vec::new(),
        budget: Budget { left: cfg.max_total_nodes, spent: 0 },
    };
    if ctx.on(Switch::Calls) {
        let k = 1 + ctx.pick(cfg.max_modules.max(1));
        for _ in 0..k {
            let existing = ctx.modules.len();
            let clone_of = (ctx.on(Switch::IdenticalPartitions) && existing > 0 && ctx.chance(35))
                .then(|| ctx.pick(existing))
                // A clone's nodes count against the budget; one that does not fit is not made.
                .filter(|&orig| ctx.modules[orig].graph.node_count() <= ctx.budget.left);
            if let Some(orig) = clone_of {
                let mut m = ctx.modules[orig].clone();
                ctx.spend(m.graph.node_count());
                let same = ctx.chance(50);
                if !same {
                    m.compile_specs.push(("variant".into(), crate::ir::HexBytes(vec![1 + ctx.pick(3) as u8])));
                }
                ctx.clones.push((ctx.modules.len(), orig, same));
                let info = ctx.info[orig].clone();
                ctx.modules.push(m);
                ctx.info.push(info);
            } else if let Some((m, info)) = ctx.module() {
                ctx.modules.push(m);
                ctx.info.push(info);
            }
        }
    }
    let multifunction =
        ctx.on(Switch::Calls) && ctx.on(Switch::Multifunction) && cfg.allows_backend(multifn::ID) && ctx.chance(30);
    let max_m = if ctx.on(Switch::MultiMethod) { cfg.max_methods.max(1) } else { 1 };
    let min_m = cfg.min_methods.clamp(1, max_m);
    let n_methods = min_m + ctx.pick(max_m - min_m + 1);
    let mut methods = Vec::new();
    let mut scratch_counts: Vec<usize> = Vec::new();
    let mut argkeep_counts: Vec<usize> = Vec::new();
    for mi in 0..n_methods {
        ctx.method = mi;
        ctx.calls.clear();
        ctx.last_call = None;
        let s = ctx.ty(Pool::S);
        let mut inputs = vec![s.clone()];
        if ctx.chance(50) {
            inputs.push(s.clone());
        }
        if ctx.on(Switch::Map) || ctx.on(Switch::Scan) {
            inputs.push(ValueType::tensor(Dtype::F32, vec![ctx.n, ctx.r, ctx.c]));
        }
        if ctx.on(Switch::DynamicShapes) && ctx.chance(50) {
            inputs.push(ctx.ty(Pool::D));
            ctx.feature(Feature::DynamicInput);
        }
        if ctx.on(Switch::IntTensors) && ctx.chance(50) {
            inputs.push(ctx.ty(Pool::I));
            ctx.feature(Feature::IntTensors);
        }
        let mut g = ctx.graph(inputs, 0, Place::Top, 1, &mut None);
        if multifunction {
            // Partitions (1 or 2) called in sequence on the method's main output.
            let n_parts = 1 + ctx.pick(2);
            let types = crate::ir::infer::graph_types(&g, &ctx.modules, "method").unwrap_or_default();
            if let Some(o) = g.outputs.first().copied().filter(|o| types.get(*o) == Some(&s)) {
                let outs = g.outputs.clone();
                let mut b = GraphBuilder::resume(g, types.len());
                let mut p = Pools { s: vec![o], ..Pools::default() };
                for _ in 0..n_parts {
                    // The partition's body is spent as it is made; its call here.
                    let before = b.len();
                    ctx.partition(&mut b, &mut p);
                    ctx.spend(b.len() - before);
                }
                let mut outs = outs;
                outs.extend(p.s.last().filter(|l| **l != o));
                g = b.finish(&outs);
            }
        }
        for (m, count) in &ctx.calls {
            match ctx.modules[*m].backend.as_str() {
                "scratch" => scratch_counts.push(*count),
                "argkeep" => argkeep_counts.push(*count),
                compiler_demo::ID => {
                    ctx.features.insert(Feature::CompilerDemoCall);
                }
                xnnpack::ID => {
                    ctx.features.insert(Feature::XnnpackCall);
                    if *count >= 2 {
                        ctx.features.insert(Feature::XnnpackCalledTwice);
                    }
                }
                _ => {}
            }
            if ctx.info[*m].partition {
                continue;
            }
            ctx.features.insert(if ctx.modules[*m].share_handle_across_calls {
                Feature::OptedIn
            } else {
                Feature::NotOptedIn
            });
            if ctx.info[*m].extra_outputs > 0 {
                ctx.features.insert(Feature::ModuleMultiOutput);
            }
            if ctx.info[*m].input == Pool::D {
                ctx.features.insert(Feature::DynamicModule);
            }
        }
        let name = if mi == 0 { "forward".to_string() } else { format!("method{mi}") };
        methods.push(IrMethod { name, graph: g });
    }
    let mut named_data = std::mem::take(&mut ctx.named);
    let mut share_models = false;
    if !ctx.partitions.is_empty() {
        let on = ctx.chance(75);
        let specs = if on { vec![(MULTIFUNCTION_SPEC.to_string(), vec![1u8])] } else { vec![] };
        let parts: Vec<MethodPartitions> = methods
            .iter()
            .enumerate()
            .map(|(mi, m)| MethodPartitions {
                method: m.name.clone(),
                partitions: ctx
                    .partitions
                    .iter()
                    .filter(|(pm, _)| *pm == mi)
                    .map(|(_, slot)| (ctx.modules[*slot].graph.clone(), specs.clone()))
                    .collect(),
            })
            .collect();
        match multifn::export(&parts) {
            Ok((modules, named)) => {
                let slots: Vec<usize> = (0..methods.len())
                    .flat_map(|mi| ctx.partitions.iter().filter(move |(pm, _)| *pm == mi).map(|(_, s)| *s))
                    .collect();
                for (slot, m) in slots.into_iter().zip(modules) {
                    ctx.modules[slot] = m;
                }
                for n in named {
                    if !named_data.iter().any(|x: &NamedBlob| x.key == n.key) {
                        named_data.push(n);
                    }
                }
                share_models = on && ctx.chance(75);
                ctx.feature(if share_models { Feature::MultifunctionShared } else { Feature::MultifunctionSeparate });
            }
            Err(e) => unreachable!("partitions of one config export: {e}"),
        }
    }
    if n_methods > 1 {
        ctx.feature(Feature::MultiMethod);
    }
    for c in scratch_counts {
        ctx.feature(if c >= 2 { Feature::ScratchCalledTwice } else { Feature::ScratchCalledOnce });
    }
    if argkeep_counts.iter().any(|c| *c >= 2) {
        ctx.feature(Feature::ArgkeepCalledTwice);
    }
    if ctx.users.iter().any(|(m, u)| u.len() > 1 && !ctx.info[*m].partition) {
        ctx.feature(Feature::ModuleSharedAcrossMethods);
    }
    for (clone, orig, same) in ctx.clones.clone() {
        if ctx.users.contains_key(&clone) && ctx.users.contains_key(&orig) {
            ctx.feature(if same {
                Feature::IdenticalPartitionsSameSpecs
            } else {
                Feature::IdenticalPartitionsDiffSpecs
            });
        }
    }
    let inline_blobs = ctx.on(Switch::InlineBlobs) && ctx.chance(25);
    if inline_blobs && !ctx.modules.is_empty() {
        ctx.feature(Feature::InlineBlobs);
    }
    let program = IrProgram { methods, modules: ctx.modules, named_data };
    let inputs = program.methods.iter().map(|m| (m.name.clone(), draw_inputs(&m.graph, ctx.u))).collect();
    let observed = observe(&program);
    let mut features: BTreeSet<String> = ctx.features.iter().map(|f| f.name().to_string()).collect();
    features.extend(observed.ops.iter().map(|o| o.feature()));
    if observed.view_freed {
        features.insert(Feature::ViewFreed.name().to_string());
    }
    (Generated { program, inputs, run: RunChoices { inline_blobs, share_models }, features }, ctx.budget.spent)
}

/// Generates from raw bytes (for fuzzers and proptest).
pub fn generate_from_bytes(cfg: &GenConfig, bytes: &[u8]) -> Generated {
    generate(cfg, &mut Unstructured::new(bytes), None)
}
