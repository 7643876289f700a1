//! Eager interpreter of the IR: the output oracle. Lowered modules are evaluated from their own
//! sub-graph (never from processed bytes) and every call is recorded with its inputs and
//! outputs. Arithmetic follows what ExecuTorch's portable kernels compute, written here on its
//! own (nothing is shared with `runtime::kernels`): float32 ops in f32, products summed in f32
//! in index order, int64 arithmetic wrapping in two's complement, NaN propagating.
//! May not touch: operator arithmetic (`kernels`), the bound rules (`bound`): it calls them.

use super::bound::{Bound, Reference};
use super::infer::{IrError, err};
use super::kernels::{eval_op, select, t};
use super::program::{Dtype, Graph, IrProgram, LoweredModule, Node, Ref, ValueType};
use super::value::{Data, Tensor, Val, constant, fits};

/// One call of a lowered module, as the interpreter made it.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRecord {
    /// Static call site: index of the Call node in the method's pre-order walk (sub-graphs in
    /// place), which is the order the emitter emits DelegateCalls in.
    pub site: usize,
    /// Module index.
    pub module: usize,
    /// The call's inputs.
    pub inputs: Vec<Val>,
    /// The module's outputs.
    pub outputs: Vec<Val>,
    /// How far a conforming implementation's inputs may be from `inputs`.
    pub input_bounds: Vec<Bound>,
    /// How far a conforming implementation's outputs may be from `outputs`.
    pub output_bounds: Vec<Bound>,
}

fn stack(rows: Vec<Val>, path: &str) -> Result<Val, IrError> {
    let n = rows.len();
    let mut inner: Option<Vec<usize>> = None;
    let mut data: Option<Data> = None;
    for r in rows {
        let Val::Tensor(r) = r else { return Err(err(path, "loop output is not a tensor")) };
        inner.get_or_insert_with(|| r.shape.clone());
        match (&mut data, r.data) {
            (None, d) => data = Some(d),
            (Some(Data::F32(a)), Data::F32(b)) => a.extend(b),
            (Some(Data::I64(a)), Data::I64(b)) => a.extend(b),
            (Some(Data::Bool(a)), Data::Bool(b)) => a.extend(b),
            _ => return Err(err(path, "loop outputs change dtype")),
        }
    }
    let (Some(s), Some(data)) = (inner, data) else { return Err(err(path, "empty loop")) };
    let mut shape = vec![n];
    shape.extend(s);
    Ok(Val::Tensor(Tensor { shape, data }))
}

/// Number of Call nodes in `g`, sub-graphs included.
fn calls_in(g: &Graph) -> usize {
    let mut n = 0;
    g.walk(0, &mut |node, _| n += usize::from(matches!(node, Node::Call { .. })));
    n
}

struct Interp<'p> {
    modules: &'p [LoweredModule],
    calls: Vec<CallRecord>,
    /// The calls made before the first decision that may go the other way ([`Run::decided_calls`]).
    decided: Option<usize>,
    /// Inside a module of an approximating backend (`bound::approximates`).
    approximate: bool,
    /// The bounds are for another framework's eager kernels ([`Reference::Framework`]).
    framework: bool,
}

/// Elements per leading index of a tensor value.
fn row_len(v: &Val) -> usize {
    match v {
        Val::Tensor(t) => t.shape.iter().skip(1).product(),
        _ => 1,
    }
}

/// The error of row `k` of a value with rows of `row` elements.
fn row_err(e: &Bound, total: usize, row: usize, k: usize) -> Bound {
    e.gather(total, &(k * row..(k + 1) * row).collect::<Vec<_>>())
}

fn val_len(v: &Val) -> usize {
    match v {
        Val::Tensor(t) => t.len(),
        _ => 1,
    }
}

/// Where a graph or node sits (`methods[0].graph.nodes[3].body`), written out only when an
/// error names it: evaluation passes it down without formatting anything.
#[derive(Clone, Copy)]
enum At<'a> {
    /// A path given as text.
    Root(&'a str),
    /// The graph of method `i`.
    Method(usize),
    /// The graph of module `i`.
    Module(usize),
    /// Node `i` of a graph.
    Node(&'a At<'a>, usize),
    /// A sub-graph member (`then_graph`, `body`, …) of a node.
    Member(&'a At<'a>, &'static str),
}

impl std::fmt::Display for At<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            At::Root(p) => f.write_str(p),
            At::Method(i) => write!(f, "methods[{i}].graph"),
            At::Module(i) => write!(f, "modules[{i}].graph"),
            At::Node(g, i) => write!(f, "{g}.nodes[{i}]"),
            At::Member(n, m) => write!(f, "{n}.{m}"),
        }
    }
}

/// `e` (made with an empty path) placed at `at`.
fn placed<'a>(at: &'a At<'a>) -> impl FnOnce(IrError) -> IrError + 'a {
    move |e| IrError { path: at.to_string(), detail: e.detail }
}

impl Interp<'_> {
    /// Marks a decision that may go the other way: the calls made so far are the decided ones.
    fn undecide(&mut self) {
        self.decided.get_or_insert(self.calls.len());
    }

    /// Evaluates `g` on `inputs` (with their errors); the first Call node of `g` (pre-order) is
    /// call site `site`. Returns the outputs and their errors.
    fn graph(
        &mut self,
        g: &Graph,
        inputs: &[Val],
        in_errs: &[Bound],
        path: &At<'_>,
        site: usize,
    ) -> Result<(Vec<Val>, Vec<Bound>), IrError> {
        if inputs.len() != g.inputs.len() {
            return Err(err(
                &path.to_string(),
                format!("{} inputs given, graph takes {}", inputs.len(), g.inputs.len()),
            ));
        }
        // Values from outside (a caller's arguments) must have the declared types.
        for (i, (v, ty)) in inputs.iter().zip(&g.inputs).enumerate() {
            if !fits(v, ty) {
                return Err(err(&path.to_string(), format!("input {i} does not have the declared type {ty:?}")));
            }
        }
        let mut vals: Vec<Val> = g.constants.iter().map(constant).collect();
        let mut errs: Vec<Bound> = vec![Bound::Exact; vals.len()];
        vals.extend(inputs.iter().cloned());
        errs.extend((0..inputs.len()).map(|i| in_errs.get(i).cloned().unwrap_or_default()));
        let mut site = site;
        for (i, n) in g.nodes.iter().enumerate() {
            let p = At::Node(path, i);
            let get = |r: Ref| vals.get(r).ok_or_else(|| err(&p.to_string(), format!("ref {r} undefined")));
            let get_all = |rs: &[Ref]| rs.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>();
            let errs_of =
                |rs: &[Ref]| rs.iter().map(|r| errs.get(*r).cloned().unwrap_or(Bound::Any)).collect::<Vec<_>>();
            let (out, out_errs): (Vec<Val>, Vec<Bound>) = match n {
                Node::Op { op, args } => {
                    let a = args.iter().map(|r| get(*r)).collect::<Result<Vec<_>, _>>()?;
                    let v = eval_op(op, &a, "").map_err(placed(&p))?;
                    let es = errs_of(args);
                    let es: Vec<&Bound> = es.iter().collect();
                    let ctx = super::bound::Context { framework: self.framework, approximate: self.approximate };
                    let e = super::bound::op_bound(op, &a, &es, &v, ctx);
                    (vec![v], vec![e])
                }
                Node::Call { module, args } => {
                    let m = self.modules.get(*module).ok_or_else(|| err(&p.to_string(), "module"))?;
                    let a = get_all(args)?;
                    let ae = errs_of(args);
                    let outer = std::mem::replace(&mut self.approximate, super::bound::approximates(&m.backend));
                    let res = self.graph(&m.graph, &a, &ae, &At::Module(*module), 0);
                    self.approximate = outer;
                    let (out, e) = res?;
                    self.calls.push(CallRecord {
                        site,
                        module: *module,
                        inputs: a,
                        outputs: out.clone(),
                        input_bounds: ae,
                        output_bounds: e.clone(),
                    });
                    (out, e)
                }
                Node::Cond { pred, then_graph, else_graph, operands } => {
                    let truth = match get(*pred)? {
                        Val::Bool(b) => *b,
                        // A bool tensor is true iff every element is (ExecuTorch's JumpFalseCall).
                        Val::Tensor(Tensor { data: Data::Bool(v), .. }) => v.iter().all(|b| *b),
                        other => return Err(err(&p.to_string(), format!("pred {other:?}"))),
                    };
                    let a = get_all(operands)?;
                    let ae = errs_of(operands);
                    // A decision that may go the other way: nothing is known of the result, nor
                    // of the calls from here on.
                    let undecided = errs.get(*pred).is_none_or(Bound::may_differ);
                    if undecided {
                        self.undecide();
                    }
                    let (out, e) = if truth {
                        self.graph(then_graph, &a, &ae, &At::Member(&p, "then_graph"), site)?
                    } else {
                        self.graph(else_graph, &a, &ae, &At::Member(&p, "else_graph"), site + calls_in(then_graph))?
                    };
                    let e = if undecided { vec![Bound::Any; out.len()] } else { e };
                    (out, e)
                }
                Node::Map { body, xs, args } => {
                    let xv = get(*xs)?.clone();
                    let x = t(&xv, "").map_err(placed(&p))?.clone();
                    let xe = errs.get(*xs).cloned().unwrap_or(Bound::Any);
                    let extra = get_all(args)?;
                    let extra_e = errs_of(args);
                    let (row, total) = (row_len(&xv), x.len());
                    let mut rows = Vec::new();
                    let mut row_errs = Vec::new();
                    for k in 0..x.shape.first().copied().unwrap_or(0) {
                        let mut a = vec![Val::Tensor(select(&x, 0, k))];
                        a.extend(extra.iter().cloned());
                        let mut ae = vec![row_err(&xe, total, row, k)];
                        ae.extend(extra_e.iter().cloned());
                        let (o, e) = self.graph(body, &a, &ae, &At::Member(&p, "body"), site)?;
                        for (v, e) in o.iter().zip(e) {
                            row_errs.push((val_len(v), e));
                        }
                        rows.extend(o);
                    }
                    (vec![stack(rows, "").map_err(placed(&p))?], vec![Bound::stack(&row_errs)])
                }
                Node::Scan { body, init, xs } => {
                    let mut carries = get_all(init)?;
                    let mut carry_errs = errs_of(init);
                    let xvals = xs.iter().map(|r| get(*r).cloned()).collect::<Result<Vec<_>, _>>()?;
                    let xerrs = errs_of(xs);
                    let xts =
                        xvals.iter().map(|v| t(v, "").cloned()).collect::<Result<Vec<_>, _>>().map_err(placed(&p))?;
                    let n = xts.first().and_then(|x| x.shape.first().copied()).unwrap_or(0);
                    let mut ys: Vec<Vec<Val>> = Vec::new();
                    let mut ys_e: Vec<Vec<(usize, Bound)>> = Vec::new();
                    for k in 0..n {
                        let mut a = carries.clone();
                        a.extend(xts.iter().map(|x| Val::Tensor(select(x, 0, k))));
                        let mut ae = carry_errs.clone();
                        ae.extend(xvals.iter().zip(&xerrs).map(|(v, e)| row_err(e, val_len(v), row_len(v), k)));
                        let (mut out, mut oe) = self.graph(body, &a, &ae, &At::Member(&p, "body"), site)?;
                        let rest = out.split_off(carries.len());
                        let rest_e = oe.split_off(carries.len());
                        carries = out;
                        carry_errs = oe;
                        if ys.is_empty() {
                            ys = vec![Vec::new(); rest.len()];
                            ys_e = vec![Vec::new(); rest.len()];
                        }
                        for ((slot, se), (y, e)) in ys.iter_mut().zip(ys_e.iter_mut()).zip(rest.into_iter().zip(rest_e))
                        {
                            se.push((val_len(&y), e));
                            slot.push(y);
                        }
                    }
                    let mut out = carries;
                    let mut oe = carry_errs;
                    for (y, e) in ys.into_iter().zip(ys_e) {
                        out.push(stack(y, "").map_err(placed(&p))?);
                        oe.push(Bound::stack(&e));
                    }
                    (out, oe)
                }
                Node::While { cond, body, carried, max_iterations } => {
                    let mut c = get_all(carried)?;
                    let mut ce = errs_of(carried);
                    let body_site = site + calls_in(cond);
                    let mut iterations = 0u32;
                    let mut undecided = false;
                    loop {
                        let (cv, cerr) = self.graph(cond, &c, &ce, &At::Member(&p, "cond"), site)?;
                        if cerr.first().is_none_or(Bound::may_differ) {
                            undecided = true;
                            self.undecide();
                        }
                        match cv.first() {
                            Some(Val::Bool(true)) => {}
                            Some(Val::Bool(false)) => break,
                            other => return Err(err(&p.to_string(), format!("while condition gave {other:?}"))),
                        }
                        iterations += 1;
                        if iterations > *max_iterations {
                            return Err(err(
                                &p.to_string(),
                                format!("while_loop exceeded {max_iterations} iterations"),
                            ));
                        }
                        (c, ce) = self.graph(body, &c, &ce, &At::Member(&p, "body"), body_site)?;
                    }
                    let ce = if undecided { vec![Bound::Any; c.len()] } else { ce };
                    (c, ce)
                }
            };
            site += match n {
                Node::Call { .. } => 1,
                other => other.subgraphs().into_iter().map(calls_in).sum(),
            };
            vals.extend(out);
            errs.extend(out_errs);
        }
        let outs = g
            .outputs
            .iter()
            .map(|r| vals.get(*r).cloned().ok_or_else(|| err(&path.to_string(), format!("output ref {r} undefined"))))
            .collect::<Result<Vec<_>, _>>()?;
        let out_errs = g.outputs.iter().map(|r| errs.get(*r).cloned().unwrap_or(Bound::Any)).collect();
        Ok((outs, out_errs))
    }
}

/// Evaluates a graph on `inputs` (its calls resolve against `modules`).
pub fn eval_graph(g: &Graph, modules: &[LoweredModule], inputs: &[Val], path: &str) -> Result<Vec<Val>, IrError> {
    Interp { modules, calls: Vec::new(), decided: None, approximate: false, framework: false }
        .graph(g, inputs, &[], &At::Root(path), 0)
        .map(|(v, _)| v)
}

/// One eager run of a method: outputs, how far a conforming implementation may be from each
/// (`bound`), and every module call made, in order.
#[derive(Clone, Debug)]
pub struct Run {
    /// Outputs.
    pub outputs: Vec<Val>,
    /// The tolerance of each output.
    pub bounds: Vec<Bound>,
    /// Every module call.
    pub calls: Vec<CallRecord>,
    /// How many of `calls`, from the first, any conforming implementation makes as they are
    /// (site and order): those before the first decision that may go the other way (a cond
    /// predicate or while condition whose bound lets it differ). After it, a conforming run may
    /// take the other branch or another number of iterations, and make other calls.
    pub decided_calls: usize,
}

/// Runs method `name` of `p` on exact `inputs`.
pub fn run_method(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<Run, IrError> {
    run_method_against(p, name, inputs, Reference::Kernels)
}

/// [`run_method`], with bounds for comparing against `reference`'s arithmetic.
pub fn run_method_against(p: &IrProgram, name: &str, inputs: &[Val], reference: Reference) -> Result<Run, IrError> {
    let (i, m) = p
        .methods
        .iter()
        .enumerate()
        .find(|(_, m)| m.name == name)
        .ok_or_else(|| err("methods", format!("no method `{name}`")))?;
    let framework = reference == Reference::Framework;
    let mut interp = Interp { modules: &p.modules, calls: Vec::new(), decided: None, approximate: false, framework };
    let (outputs, bounds) = interp.graph(&m.graph, inputs, &[], &At::Method(i), 0)?;
    let decided_calls = interp.decided.unwrap_or(interp.calls.len());
    Ok(Run { outputs, bounds, calls: interp.calls, decided_calls })
}

/// Runs method `name` of `p` on `inputs`: its outputs and every module call it made, in order.
pub fn eval_method_calls(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<(Vec<Val>, Vec<CallRecord>), IrError> {
    run_method(p, name, inputs).map(|r| (r.outputs, r.calls))
}

/// Runs method `name` of `p` on `inputs`.
pub fn eval_method(p: &IrProgram, name: &str, inputs: &[Val]) -> Result<Vec<Val>, IrError> {
    run_method(p, name, inputs).map(|r| r.outputs)
}

/// Deterministic, tame inputs for a graph (multiples of 1/256 in about ±3.9, ints in [-10,
/// 10]; dynamic tensors at their bound), for examples and tests; the campaign draws harsher
/// ones (`generator::inputs`).
pub fn sample_inputs(g: &Graph, seed: u64) -> Vec<Val> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15).wrapping_add(1);
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    g.inputs
        .iter()
        .map(|t| match t {
            ValueType::Tensor { dtype, shape, .. } => {
                let n: usize = shape.iter().product();
                let data = match dtype {
                    Dtype::F32 => Data::F32((0..n).map(|_| ((next() % 2001) as f32 - 1000.0) / 256.0).collect()),
                    Dtype::I64 => Data::I64((0..n).map(|_| (next() % 21) as i64 - 10).collect()),
                    Dtype::Bool => Data::Bool((0..n).map(|_| next() % 2 == 1).collect()),
                };
                Val::Tensor(Tensor { shape: shape.clone(), data })
            }
            ValueType::Int => Val::Int((next() % 7) as i64),
            ValueType::Bool => Val::Bool(next() % 2 == 0),
            ValueType::Double => Val::Double(((next() % 2001) as f64 - 1000.0) / 64.0),
        })
        .collect()
}
