//! The tolerance model: how far a conforming implementation may be from the eager value, per
//! element — explaining summation order and nothing more.
//!
//! Each value carries an [`Bound`]: `Exact` (every conforming implementation computes these bits),
//! `Abs` (float32 elements within an absolute bound), `Flags` (integer or bool elements that may
//! differ, because they compare or select between floats that may), or `Any` (nothing can be
//! said: an order-dependent overflow, or a control-flow decision that may go either way).
//!
//! Sources of inexactness: a dot product of n terms (mm, addmm, linear) may be summed in any
//! order (an optimised BLAS kernel), so two implementations differ by at most
//! `2·γ(n)·Σ|aᵢbᵢ|` with `γ(n) = n·ε / (1 − n·ε)`, `ε = 2⁻²⁴`; a division by a one-element
//! tensor may be a multiplication by the reciprocal (2 ulp, or anything where the reciprocal
//! or the quotient leaves the normal float32 range: [`reciprocal_allowance`]). Inside a
//! backend that evaluates transcendentals with polynomial approximations (XNNPACK), sin and
//! cos are within a few ulp of 1 plus a range-reduction error growing with |x|
//! ([`approximate`]), and subnormal values are flushed to zero. Everything else is exact,
//! and bounds propagate through each op by its Lipschitz constant plus one rounding; a float
//! result of an inexact operand may also differ in the sign of a zero ([`signed_zeros`]).
//! May not touch: `.pte` bytes, the runtime, the backends (a backend's id is all it reads).

use super::kernels::eval_op;
use super::op::Op;
use super::value::{Data, Tensor, Val, bmap};

/// How far a conforming implementation's value may be from the eager one.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum Bound {
    /// Every element is exact.
    #[default]
    Exact,
    /// float32: per element, an absolute bound (`inf`: anything).
    Abs(Vec<f64>),
    /// Integer or bool: per element, whether it may differ.
    Flags(Vec<bool>),
    /// Nothing can be said about the value.
    Any,
}

/// Unit roundoff of float32.
const EPS: f64 = 1.0 / (1u64 << 24) as f64;

fn gamma(n: usize) -> f64 {
    let ne = n as f64 * EPS;
    if ne >= 1.0 { f64::INFINITY } else { ne / (1.0 - ne) }
}

/// The spacing of float32 at `x` (one ulp), `inf` when `x` is not finite in float32.
pub fn ulp(x: f64) -> f64 {
    let a = (x.abs() as f32).abs();
    if !a.is_finite() {
        return f64::INFINITY;
    }
    f64::from(f32::from_bits(a.to_bits() + 1)) - f64::from(a)
}

impl Bound {
    /// Whether every element is exact.
    pub fn is_exact(&self) -> bool {
        match self {
            Bound::Exact => true,
            Bound::Abs(v) => v.iter().all(|e| *e == 0.0),
            Bound::Flags(v) => v.iter().all(|f| !f),
            Bound::Any => false,
        }
    }

    /// Whether every element is exact in magnitude: equal values, though the sign of a zero
    /// may differ ([`SIGN_OF_ZERO`]).
    pub fn is_exact_in_magnitude(&self) -> bool {
        match self {
            Bound::Abs(v) => v.iter().all(|e| *e <= SIGN_OF_ZERO),
            other => other.is_exact(),
        }
    }

    /// Per-element absolute bounds of an `n`-element tensor for callers outside the rules:
    /// [`SIGN_OF_ZERO`] kept, `inf` where an integer may differ or nothing is known.
    pub fn abs_of(&self, n: usize) -> Vec<f64> {
        self.raw_abs(n)
    }

    /// Per-element absolute bounds of an `n`-element float tensor, for the propagation
    /// formulas: a [`SIGN_OF_ZERO`] entry is 0 there (no op's magnitude depends on the sign of a
    /// zero operand, but a division's: see `Div`).
    fn abs(&self, n: usize) -> Vec<f64> {
        let mut v = self.raw_abs(n);
        for e in &mut v {
            if *e <= SIGN_OF_ZERO {
                *e = 0.0;
            }
        }
        v
    }

    /// This bound of float32 value `v` with every zero element whose sign may differ
    /// ([`SIGN_OF_ZERO`]) made unbounded: what a division by it can say.
    fn zeros_of_unknown_sign_unbounded(&self, v: &Val) -> Bound {
        let (Some(x), Bound::Abs(e)) = (f32s(v), self) else { return self.clone() };
        let unknown = |(xi, ei): (&f32, &f64)| *xi == 0.0 && *ei > 0.0 && *ei <= SIGN_OF_ZERO;
        if !x.iter().zip(e).any(unknown) {
            return self.clone();
        }
        Bound::Abs(x.iter().zip(e).map(|p| if unknown(p) { f64::INFINITY } else { *p.1 }).collect())
    }

    /// Per-element absolute bounds of an `n`-element float tensor, [`SIGN_OF_ZERO`] kept.
    fn raw_abs(&self, n: usize) -> Vec<f64> {
        match self {
            Bound::Exact => vec![0.0; n],
            Bound::Abs(v) if v.len() == n => v.clone(),
            Bound::Flags(v) if v.len() == n => v.iter().map(|f| if *f { f64::INFINITY } else { 0.0 }).collect(),
            _ => vec![f64::INFINITY; n],
        }
    }

    /// Per-element "may differ" flags of an `n`-element tensor.
    fn flags(&self, n: usize) -> Vec<bool> {
        match self {
            Bound::Exact => vec![false; n],
            // A comparison, a cast or a selection does not see the sign of a zero.
            Bound::Abs(v) if v.len() == n => v.iter().map(|e| *e > SIGN_OF_ZERO).collect(),
            Bound::Flags(v) if v.len() == n => v.clone(),
            _ => vec![true; n],
        }
    }

    /// Whether anything about the value may differ (a control-flow decision depends on it).
    pub fn may_differ(&self) -> bool {
        !self.is_exact()
    }

    /// From per-element bounds; a NaN bound (`inf · 0` in a propagation formula) means
    /// nothing is known: infinite.
    pub fn from_abs(mut v: Vec<f64>) -> Bound {
        for e in &mut v {
            if e.is_nan() {
                *e = f64::INFINITY;
            }
        }
        if v.iter().all(|e| *e == 0.0) { Bound::Exact } else { Bound::Abs(v) }
    }

    /// This bound with every finite absolute element multiplied by `k` (`k` < 1 tightens it:
    /// how much of its bound a result uses). Exact, integer and unknown elements are kept.
    pub fn scaled(&self, k: f64) -> Bound {
        match self {
            Bound::Abs(v) => Bound::Abs(v.iter().map(|e| if e.is_finite() { e * k } else { *e }).collect()),
            other => other.clone(),
        }
    }

    /// From per-element "may differ" flags.
    pub fn from_flags(v: Vec<bool>) -> Bound {
        if v.iter().all(|f| !f) { Bound::Exact } else { Bound::Flags(v) }
    }

    /// The error of a value moved by a gather (select, permute, view, index_select, stack):
    /// `map[i]` is the source element of output element `i`.
    pub fn gather(&self, n_in: usize, map: &[usize]) -> Bound {
        match self {
            Bound::Exact => Bound::Exact,
            Bound::Any => Bound::Any,
            Bound::Abs(_) => {
                let a = self.raw_abs(n_in);
                Bound::from_abs(map.iter().map(|i| a.get(*i).copied().unwrap_or(f64::INFINITY)).collect())
            }
            Bound::Flags(_) => {
                let f = self.flags(n_in);
                Bound::from_flags(map.iter().map(|i| f.get(*i).copied().unwrap_or(true)).collect())
            }
        }
    }

    /// The error of rows stacked along a new leading dimension.
    pub fn stack(rows: &[(usize, Bound)]) -> Bound {
        if rows.iter().all(|(_, e)| matches!(e, Bound::Exact)) {
            return Bound::Exact;
        }
        if rows.iter().any(|(_, e)| matches!(e, Bound::Any)) {
            return Bound::Any;
        }
        if rows.iter().any(|(_, e)| matches!(e, Bound::Flags(_))) {
            return Bound::from_flags(rows.iter().flat_map(|(n, e)| e.flags(*n)).collect());
        }
        Bound::from_abs(rows.iter().flat_map(|(n, e)| e.raw_abs(*n)).collect())
    }
}

fn len(v: &Val) -> usize {
    match v {
        Val::Tensor(t) => t.len(),
        _ => 1,
    }
}

fn f32s(v: &Val) -> Option<&[f32]> {
    match v {
        Val::Tensor(Tensor { data: Data::F32(x), .. }) => Some(x),
        _ => None,
    }
}

fn shape(v: &Val) -> &[usize] {
    match v {
        Val::Tensor(t) => &t.shape,
        _ => &[],
    }
}

/// Output element -> input element map of a data-movement op: the op applied to a tensor of
/// its own element indices.
fn movement_map(op: &Op, args: &[&Val]) -> Option<Vec<usize>> {
    let Val::Tensor(x) = args.first()? else { return None };
    let idx = Val::Tensor(Tensor { shape: x.shape.clone(), data: Data::I64((0..x.len() as i64).collect()) });
    let mut a: Vec<&Val> = vec![&idx];
    a.extend(args.iter().skip(1).copied());
    match eval_op(op, &a, "bound").ok()? {
        Val::Tensor(Tensor { data: Data::I64(v), .. }) => Some(v.into_iter().map(|i| i as usize).collect()),
        _ => None,
    }
}

/// Elementwise: output error from the operands' errors, the operands and the result.
fn elementwise(args: &[&Val], errs: &[&Bound], out: &Val, f: impl Fn(&[f64], &[f64], f64) -> f64) -> Bound {
    let o = shape(out).to_vec();
    let n = len(out);
    let maps: Vec<Vec<usize>> = args.iter().map(|a| bmap(&o, shape(a))).collect();
    let vals: Vec<Vec<f64>> =
        args.iter().map(|a| f32s(a).map(|x| x.iter().map(|v| f64::from(*v)).collect()).unwrap_or_default()).collect();
    let es: Vec<Vec<f64>> = args.iter().zip(errs).map(|(a, e)| e.abs(len(a))).collect();
    let r = f32s(out).unwrap_or(&[]);
    Bound::from_abs(
        (0..n)
            .map(|i| {
                let xs: Vec<f64> = maps.iter().zip(&vals).map(|(m, v)| v.get(m[i]).copied().unwrap_or(0.0)).collect();
                let ex: Vec<f64> = maps.iter().zip(&es).map(|(m, e)| e.get(m[i]).copied().unwrap_or(0.0)).collect();
                let ri = r.get(i).map_or(0.0, |v| f64::from(*v));
                let e = f(&xs, &ex, ri);
                // A perturbed operand may round to a neighbouring float.
                if e > 0.0 { e + ulp(ri.abs() + e) } else { e }
            })
            .collect(),
    )
}

/// Elementwise on integers or bools: an output element may differ when an operand it reads may.
fn flagwise(args: &[&Val], errs: &[&Bound], out: &Val) -> Bound {
    let o = shape(out).to_vec();
    let maps: Vec<Vec<usize>> = args.iter().map(|a| bmap(&o, shape(a))).collect();
    let fs: Vec<Vec<bool>> = args.iter().zip(errs).map(|(a, e)| e.flags(len(a))).collect();
    Bound::from_flags(
        (0..len(out)).map(|i| maps.iter().zip(&fs).any(|(m, f)| f.get(m[i]).copied().unwrap_or(true))).collect(),
    )
}

/// A comparison `a > b` may flip where the operands are within their bounds of each other, or
/// either may be anything.
fn comparison(args: &[&Val], errs: &[&Bound], out: &Val) -> Bound {
    let o = shape(out).to_vec();
    let maps: Vec<Vec<usize>> = args.iter().map(|a| bmap(&o, shape(a))).collect();
    let ints = args.iter().all(|a| f32s(a).is_none());
    if ints {
        return flagwise(args, errs, out);
    }
    let vals: Vec<Vec<f64>> =
        args.iter().map(|a| f32s(a).map(|x| x.iter().map(|v| f64::from(*v)).collect()).unwrap_or_default()).collect();
    let es: Vec<Vec<f64>> = args.iter().zip(errs).map(|(a, e)| e.abs(len(a))).collect();
    Bound::from_flags(
        (0..len(out))
            .map(|i| {
                let (a, b) = (vals[0][maps[0][i]], vals.get(1).and_then(|v| v.get(maps[1][i]).copied()).unwrap_or(0.0));
                let e = es[0][maps[0][i]] + es.get(1).and_then(|v| v.get(maps[1][i]).copied()).unwrap_or(0.0);
                // An unbounded operand may be anything; without this, two infinities (whose
                // difference is NaN) would read as decided.
                e > 0.0 && (e.is_infinite() || (a - b).abs() <= e || a.is_nan() || b.is_nan())
            })
            .collect(),
    )
}

/// What computing `a / b = r` as `a · (1/b)` (two roundings) may change: 2 ulp while `1/b` is a
/// normal float32 and the product stays below the largest float32; anything where `1/b` is
/// subnormal or overflows, or where the quotient overflows (the product may not, and the other
/// way round). Zero, infinite and NaN operands give the same special value either way.
fn reciprocal_allowance(a: f64, b: f64, r: f64) -> f64 {
    if a == 0.0 || b == 0.0 || !b.is_finite() || !a.is_finite() {
        return 0.0;
    }
    let (max, reciprocal) = (f64::from(f32::MAX), 1.0 / b.abs());
    if !(f64::from(f32::MIN_POSITIVE)..=max).contains(&reciprocal) || !r.is_finite() || r.abs() + 2.0 * ulp(r) > max {
        return f64::INFINITY;
    }
    2.0 * ulp(r)
}

/// `bias + x @ w` (w transposed for linear): per element, the summation-order bound, the
/// propagated operand errors, and one rounding.
fn matmul(x: (&Val, &Bound), w: (&Val, &Bound), bias: Option<(&Val, &Bound)>, w_transposed: bool, out: &Val) -> Bound {
    let (Some(xv), Some(wv), Some(r)) = (f32s(x.0), f32s(w.0), f32s(out)) else { return Bound::Any };
    let (xs, ws) = (shape(x.0), shape(w.0));
    if xs.len() != 2 || ws.len() != 2 {
        return Bound::Any;
    }
    let (n, k) = (xs[0], xs[1]);
    let m = if w_transposed { ws[0] } else { ws[1] };
    let (ex, ew) = (x.1.abs(xv.len()), w.1.abs(wv.len()));
    let (bv, eb, bmap_) = match bias {
        Some((b, e)) => {
            let v: Vec<f64> = f32s(b).map(|x| x.iter().map(|v| f64::from(*v)).collect()).unwrap_or_default();
            (v, e.abs(len(b)), Some(bmap(&[n, m], shape(b))))
        }
        None => (vec![], vec![], None),
    };
    let terms = k + usize::from(bias.is_some());
    let mut out_e = Vec::with_capacity(n * m);
    for i in 0..n {
        for j in 0..m {
            let (mut s, mut s_finite, mut prop, mut finite) = (0f64, 0f64, 0f64, true);
            for p in 0..k {
                let wi = if w_transposed { j * k + p } else { p * m + j };
                let (a, b) = (f64::from(xv[i * k + p]), f64::from(wv[wi]));
                finite &= (a * b).is_finite();
                s += (a * b).abs();
                if (a * b).is_finite() {
                    s_finite += (a * b).abs();
                }
                prop += a.abs() * ew[wi] + b.abs() * ex[i * k + p] + ex[i * k + p] * ew[wi];
            }
            if let Some(map) = &bmap_ {
                let bi = map[i * m + j];
                let bias = bv.get(bi).copied().unwrap_or(0.0).abs();
                s += bias;
                // An infinite or NaN bias is a non-finite term like a product.
                finite &= bias.is_finite();
                if bias.is_finite() {
                    s_finite += bias;
                }
                prop += eb.get(bi).copied().unwrap_or(0.0);
            }
            let ri = f64::from(r[i * m + j]);
            let e = if prop.is_nan() {
                f64::INFINITY
            } else if !finite {
                // Infinite or NaN terms give the same result in every order (when the operands
                // are exact), unless the finite terms may overflow in some order.
                if prop > 0.0 || s_finite > f64::from(f32::MAX) / 2.0 { f64::INFINITY } else { 0.0 }
            } else if s > f64::from(f32::MAX) / 2.0 {
                // An overflow to inf may or may not happen depending on the order.
                f64::INFINITY
            } else {
                let order = if terms >= 2 { 2.0 * gamma(terms) * s } else { 0.0 };
                let e = order + prop * (1.0 + gamma(terms));
                // NaN (an infinite gamma times a zero sum): nothing can be said.
                if e.is_nan() {
                    f64::INFINITY
                } else if e > 0.0 {
                    e + ulp(ri.abs() + e)
                } else {
                    0.0
                }
            };
            out_e.push(e);
        }
    }
    Bound::from_abs(out_e)
}

/// Backends whose kernels approximate transcendental functions (their sin/cos are not
/// correctly rounded).
pub const APPROXIMATING_BACKENDS: [&str; 1] = [pte::xnnpack::BACKEND_ID];

/// Whether ops inside a module of `backend` get [`approximate`]'s bounds.
pub fn approximates(backend: &str) -> bool {
    APPROXIMATING_BACKENDS.contains(&backend)
}

/// Largest |x| for which an approximating backend's sin and cos are meaningful: 2π·2²⁴, where
/// the quotient of XNNPACK's range reduction stops fitting a float32 significand. Measured
/// against ExecuTorch 1.5.1 (docs/xnnpack.md): the error is 0.06 at 1.07e8, 0.47 at 1.34e8 and
/// 1.9 at 1.59e8, then values leave [-1, 1], and from about 1e30 they are NaN. Beyond it
/// nothing is promised.
pub const SIN_COS_RANGE: f64 = std::f64::consts::TAU * (1u64 << 24) as f64;

/// Absolute error allowed for an approximated sin or cos of `x`: 8 ulp of 1.0 plus a range
/// reduction error of |x|·2⁻³⁶ (measured: under |x|·1.63·10⁻¹², 2⁻³⁹·²); anything beyond
/// [`SIN_COS_RANGE`].
fn approx_sin_cos(x: f64) -> f64 {
    if x.abs() > SIN_COS_RANGE { f64::INFINITY } else { 8.0 * EPS + x.abs() * (2.0f64).powi(-36) }
}

/// Whether an element whose eager value is `x`, within `e` of what an implementation computes,
/// may be a subnormal float32 there: the eager value is one, or the interval `x ± e` reaches
/// below the smallest normal magnitude without being exactly zero.
fn may_be_subnormal(x: f32, e: f64) -> bool {
    x.is_subnormal() || (e > 0.0 && f64::from(x.abs()) - e < f64::from(f32::MIN_POSITIVE))
}

/// `e` widened to |x| for every float32 element of `v` that may be subnormal where it is
/// computed ([`may_be_subnormal`]): flushed to zero, it is |x| from the eager value, and
/// otherwise within `e` of it (an approximating backend runs with denormals-are-zero and
/// flush-to-zero).
fn flush(v: &Val, e: &Bound) -> Bound {
    let Some(x) = f32s(v) else { return e.clone() };
    let a = e.abs(x.len());
    if !x.iter().zip(&a).any(|(xi, ei)| may_be_subnormal(*xi, *ei)) {
        return e.clone();
    }
    let widened = x
        .iter()
        .zip(a)
        .map(|(xi, ei)| if may_be_subnormal(*xi, ei) { ei.max(f64::from(xi.abs())) } else { ei })
        .collect();
    Bound::from_abs(widened)
}

/// A bound below every non-zero float32 difference: the values are equal, but the sign of a
/// zero may differ.
pub const SIGN_OF_ZERO: f64 = f64::MIN_POSITIVE;

/// `e`, the bound of a float32 result `out` computed from operands of which some are inexact
/// (`operands_exact` false), with every zero element whose bound is 0 loosened to
/// [`SIGN_OF_ZERO`]: a magnitude bound of 0 does not fix the sign of a zero (`0 · x` is `-0.0`
/// when `x` is negative, and an inexact `x` may be either), so those elements are equal up to
/// the sign of a zero. Non-zero elements keep their bound (a quotient by a zero whose sign may
/// differ is unbounded already, see `Div`).
pub fn signed_zeros(e: Bound, out: &Val, operands_exact: bool) -> Bound {
    let Some(x) = f32s(out) else { return e };
    if operands_exact || matches!(e, Bound::Any | Bound::Flags(_)) || !x.contains(&0.0) {
        return e;
    }
    let a = e.raw_abs(x.len());
    Bound::from_abs(x.iter().zip(a).map(|(xi, ei)| if *xi == 0.0 && ei == 0.0 { SIGN_OF_ZERO } else { ei }).collect())
}

/// The bound of `op` computed by an approximating backend: what [`of_op`] says for an exact
/// implementation (`exact_model`), widened for flushed subnormal operands, products and results,
/// and for approximated sin and cos.
pub fn approximate(op: &Op, args: &[&Val], errs: &[&Bound], out: &Val, exact_model: Bound) -> Bound {
    let Some(r) = f32s(out) else { return exact_model };
    let flushed: Vec<Bound> = args.iter().zip(errs).map(|(a, e)| flush(a, e)).collect();
    let widened = flushed.iter().zip(errs).any(|(f, e)| f != *e);
    let fr: Vec<&Bound> = flushed.iter().collect();
    let b = match op {
        // The range is checked on every value the operand may take, not the eager one alone.
        Op::Sin | Op::Cos => elementwise(args, &fr, out, |x, e, _| e[0] + approx_sin_cos(x[0].abs() + e[0])),
        Op::Linear | Op::Mm | Op::Addmm => {
            // Every partial product may be flushed: one smallest normal per term.
            let k = match op {
                Op::Addmm => shape(args[1]).last().copied().unwrap_or(0),
                _ => shape(args[0]).last().copied().unwrap_or(0),
            };
            let base = if widened { of_op(op, args, &fr, out) } else { exact_model };
            let extra = (k as f64 + 1.0) * f64::from(f32::MIN_POSITIVE);
            Bound::from_abs(base.abs(r.len()).into_iter().map(|e| e + extra).collect())
        }
        _ if widened => of_op(op, args, &fr, out),
        _ => exact_model,
    };
    flush(out, &b)
}

/// A float32 elementwise function a backend computes that is no IR operator (XNNPACK's
/// nodes), for [`of_function`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Function {
    /// `-x`.
    Neg,
    /// `|x|`.
    Abs,
    /// `min(max(x, lo), hi)`.
    Clamp,
    /// `min(a, b)`.
    Min,
    /// `max(a, b)`.
    Max,
    /// `⌈x⌉`.
    Ceil,
    /// `⌊x⌋`.
    Floor,
    /// `√x`.
    Sqrt,
    /// `eˣ`.
    Exp,
    /// `tanh x`.
    Tanh,
    /// `1 / (1 + e⁻ˣ)`.
    Sigmoid,
}

/// Error of an approximating backend's `f` beyond a correctly rounded result `r`, for an
/// operand in `[lo, hi]`, as measured (docs/xnnpack.md): a multiple of the spacing of float32
/// at `r`, anything outside the range it is accurate in, or nothing for the functions it
/// computes exactly.
fn approx_error(f: Function, lo: f64, hi: f64, r: f64) -> f64 {
    let a = &XNNPACK_ACCURACY;
    let reach = lo.abs().max(hi.abs());
    let ulps = match f {
        // Overflow only on the positive side (a large negative x underflows, and is flushed);
        // the argument reduction's error grows with |x|.
        Function::Exp if hi >= a.exp_overflow => return f64::INFINITY,
        Function::Exp => a.exp_ulps + reach,
        Function::Sqrt if hi >= a.sqrt_range => return f64::INFINITY,
        Function::Sqrt => a.sqrt_ulps,
        Function::Tanh => a.tanh_ulps,
        Function::Sigmoid if reach >= a.sigmoid_range => return f64::INFINITY,
        Function::Sigmoid => a.sigmoid_ulps,
        _ => 0.0,
    };
    ulps * ulp(r.abs())
}

/// XNNPACK's accuracy, measured against ExecuTorch 1.5.1 on every float32 input, against a
/// float64 reference (docs/xnnpack.md).
pub struct Accuracy {
    /// exp: ulps beyond |x| ulps (at most 65 ulps, at x = 84.6).
    pub exp_ulps: f64,
    /// The smallest x whose exp XNNPACK returns as +inf although it is finite (2.4e38).
    pub exp_overflow: f64,
    /// √x: ulps (2 in every binade below `sqrt_range`).
    pub sqrt_ulps: f64,
    /// From 2¹²⁶ up √x is wrong by up to half its value, and √inf is NaN.
    pub sqrt_range: f64,
    /// tanh: ulps.
    pub tanh_ulps: f64,
    /// sigmoid: ulps.
    pub sigmoid_ulps: f64,
    /// The smallest |x| whose sigmoid XNNPACK returns as NaN (4.29e26; from there on most are).
    pub sigmoid_range: f64,
}

/// The measured accuracy of XNNPACK's elementwise functions.
pub const XNNPACK_ACCURACY: Accuracy = Accuracy {
    exp_ulps: 3.0,
    exp_overflow: 88.376_266_479_492_19,
    sqrt_ulps: 2.0,
    sqrt_range: 8.507_059_173_023_462e37,
    tanh_ulps: 5.0,
    sigmoid_ulps: 4.0,
    sigmoid_range: 4.290_376_571_867_819e26,
};

/// The bound of `f` on `args` (errors `errs`) with eager result `out`: the operands' errors
/// through `f`'s slope over their intervals, one rounding where they are inexact, and — inside
/// an approximating backend (`approximate`) — its measured error and flushed subnormals.
pub fn of_function(f: Function, args: &[&Val], errs: &[&Bound], out: &Val, approximate: bool) -> Bound {
    let flushed: Vec<Bound> =
        args.iter().zip(errs).map(|(a, e)| if approximate { flush(a, e) } else { (*e).clone() }).collect();
    let fr: Vec<&Bound> = flushed.iter().collect();
    let own = |lo: f64, hi: f64, r: f64| if approximate { approx_error(f, lo, hi, r) } else { 0.0 };
    let b = elementwise(args, &fr, out, |x, e, r| {
        let (x0, e0) = (x[0], e[0]);
        let prop = match f {
            Function::Neg | Function::Abs | Function::Clamp => e0,
            Function::Min | Function::Max => e0.max(e.get(1).copied().unwrap_or(0.0)),
            // A step: exact unless the interval reaches another integer, then as far as the
            // steps it spans.
            Function::Ceil | Function::Floor => {
                let (lo, hi) = (x0 - e0, x0 + e0);
                let step = |v: f64| if f == Function::Ceil { v.ceil() } else { v.floor() };
                if e0 == 0.0 { 0.0 } else { step(hi) - step(lo) }
            }
            // √ is steepest at the interval's low end; anything where it reaches below 0.
            Function::Sqrt => {
                if e0 == 0.0 {
                    0.0
                } else if x0 - e0 <= 0.0 {
                    (x0 + e0).max(0.0).sqrt()
                } else {
                    e0 / ((x0 - e0).sqrt() + x0.sqrt())
                }
            }
            Function::Exp => {
                if e0 == 0.0 {
                    0.0
                } else {
                    (x0 + e0).exp() * (1.0 - (-e0).exp())
                }
            }
            // Slopes at most 1 (tanh) and 1/4 (sigmoid).
            Function::Tanh => e0,
            Function::Sigmoid => e0 / 4.0,
        };
        // `elementwise` adds the rounding of a perturbed result; the backend's own error is
        // there whatever the operands.
        prop + own(x0 - e0, x0 + e0, r)
    });
    let b = if approximate { flush(out, &b) } else { b };
    // XNNPACK's negation of +0.0 is +0.0 (measured): the sign of a zero it gives is not -x's.
    let exact_operands = errs.iter().all(|e| e.is_exact()) && !(approximate && f == Function::Neg);
    signed_zeros(b, out, exact_operands)
}

/// Absolute error of an approximating backend's exponential where its result is near the
/// float32 underflow: XNNPACK builds 2ⁿ from the exponent bits, so results below about 2⁻¹²²
/// are coarsened to a few multiples of the smallest normal or flushed (measured: 1.06e-37, 9
/// smallest normals, in a softmax whose row maximum is 80 above the rest; docs/xnnpack.md).
pub const APPROX_EXP_FLOOR: f64 = 16.0 * f32::MIN_POSITIVE as f64;

/// The bound of a softmax over the last dimension of `x` (error `e`) whose eager result is
/// `out`: each element `yᵢ` moves by at most `yᵢ·(e^{2·max e} − 1)` for its row's largest
/// operand error, plus the error of the exponentials (one rounding of `xᵢ − max`, relative
/// `|xᵢ − max|·u`, and inside an approximating backend its exp's own error and
/// [`APPROX_EXP_FLOOR`]), of the row sum and of the division.
pub fn softmax(x: &Val, e: &Bound, out: &Val, approximate: bool) -> Bound {
    let (Some(xv), Some(y)) = (f32s(x), f32s(out)) else { return Bound::Any };
    let c = shape(x).last().copied().unwrap_or(0);
    if c == 0 || xv.len() != y.len() {
        return if xv.is_empty() { Bound::Exact } else { Bound::Any };
    }
    let e = if approximate { flush(x, e) } else { e.clone() };
    let ea = e.abs(xv.len());
    let rel_exp = if approximate { XNNPACK_ACCURACY.exp_ulps * 2.0 * EPS } else { EPS };
    let floor = if approximate { APPROX_EXP_FLOOR } else { 0.0 };
    let mut out_e = Vec::with_capacity(y.len());
    for ((row_x, row_y), row_e) in xv.chunks(c).zip(y.chunks(c)).zip(ea.chunks(c)) {
        let worst = row_e.iter().copied().fold(0.0f64, f64::max);
        let spread = if worst > 0.0 { (2.0 * worst).exp() - 1.0 } else { 0.0 };
        let max = row_x.iter().copied().fold(f32::NEG_INFINITY, f32::max);
        // Exponentials within `rel_exp` relative, a sum of c of them within γ(c), a division.
        let own = 2.0 * rel_exp + gamma(c) + EPS;
        for (xi, yi) in row_x.iter().zip(row_y) {
            let shifted = f64::from(*xi) - f64::from(max);
            let argument = if shifted.is_finite() { shifted.abs() * EPS } else { 0.0 };
            let yi = f64::from(yi.abs());
            out_e.push(yi * (spread + own + argument) + ulp(yi) + floor);
        }
    }
    let b = Bound::from_abs(out_e);
    if approximate { flush(out, &b) } else { b }
}

/// Whose arithmetic a value is compared against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reference {
    /// The kernels ExecuTorch runs (portable and prim; XNNPACK inside its delegates), which
    /// ptecheck's runtime computes alike: the model above.
    Kernels,
    /// Another framework's eager kernels (torch on CPU), as an exporter computes its eager
    /// outputs: sin and cos vectorised within a few ulp, cumulative sums accumulated in another
    /// precision ([`framework`]).
    Framework,
}

/// The error of `op` when the other side is another framework's eager kernels: `model` (the
/// kernels' model) widened for sin and cos as an approximation, and for a float cumulative sum
/// by `γ(k)·Σ|xⱼ|` over the k terms summed plus one rounding (the framework may sum in double).
pub fn framework(op: &Op, args: &[&Val], errs: &[&Bound], out: &Val, model: Bound) -> Bound {
    match op {
        Op::Sin | Op::Cos => elementwise(args, errs, out, |x, e, _| e[0] + approx_sin_cos(x[0].abs() + e[0])),
        Op::Cumsum { dim } => {
            let (Some(x), Some(r)) = (f32s(args[0]), f32s(out)) else { return model };
            let shape = shape(args[0]);
            let rank = shape.len() as i64;
            let d = if *dim < 0 { dim + rank } else { *dim };
            let Ok(d) = usize::try_from(d) else { return model };
            if d >= shape.len() {
                return model;
            }
            let (outer, size, inner) = crate::ir::value::split_at_dim(shape, d);
            let base = model.abs(r.len());
            let mut e = base.clone();
            for o in 0..outer {
                for i in 0..inner {
                    let mut sum = 0.0f64;
                    for k in 0..size {
                        let at = o * size * inner + k * inner + i;
                        let (Some(xv), Some(rv)) = (x.get(at), r.get(at)) else { continue };
                        sum += f64::from(xv.abs());
                        if let Some(b) = e.get_mut(at) {
                            *b += gamma(k + 1) * sum + ulp(f64::from(rv.abs()));
                        }
                    }
                }
            }
            Bound::from_abs(e)
        }
        _ => model,
    }
}

/// Where an op runs, for [`op_bound`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Context {
    /// The value is compared against another framework's eager kernels ([`framework`]).
    pub framework: bool,
    /// Inside a delegate of an approximating backend ([`approximate`]).
    pub approximate: bool,
}

/// The bound of `op` on `args` (errors `errs`) with eager result `out`, in `ctx`: [`of_op`],
/// widened by [`framework`] and [`approximate`] where they apply, zeros marked by
/// [`signed_zeros`]. The one sequence the eager interpreter and a loaded program's bounds use.
pub fn op_bound(op: &Op, args: &[&Val], errs: &[&Bound], out: &Val, ctx: Context) -> Bound {
    let e = of_op(op, args, errs, out);
    let e = if ctx.framework { framework(op, args, errs, out, e) } else { e };
    let e = if ctx.approximate { approximate(op, args, errs, out, e) } else { e };
    signed_zeros(e, out, errs.iter().all(|b| b.is_exact()))
}

/// The error of `op` applied to `args` (with errors `errs`), whose eager result is `out`.
pub fn of_op(op: &Op, args: &[&Val], errs: &[&Bound], out: &Val) -> Bound {
    use Op::*;
    // Only a division sees the sign of a zero operand (`Div`); elsewhere a result whose
    // operands are exact in magnitude is too, and `signed_zeros` marks its zeros.
    let all_exact = errs.iter().all(|e| e.is_exact_in_magnitude());
    match op {
        Add | Sub | Mul if f32s(out).is_none() => {
            if all_exact {
                Bound::Exact
            } else {
                flagwise(args, errs, out)
            }
        }
        Add | Sub => {
            if all_exact {
                Bound::Exact
            } else {
                elementwise(args, errs, out, |_, e, _| e.iter().sum())
            }
        }
        Mul => {
            if all_exact {
                return Bound::Exact;
            }
            elementwise(args, errs, out, |x, e, _| x[0].abs() * e[1] + x[1].abs() * e[0] + e[0] * e[1])
        }
        Div => {
            // An optimised kernel divides by a one-element operand as a multiplication by its
            // reciprocal: two roundings.
            let recip = args.iter().any(|a| len(a) == 1);
            // x / ±0 is ±inf: a zero divisor whose sign may differ is a divisor of unknown value.
            let divisor = errs[1].zeros_of_unknown_sign_unbounded(args[1]);
            let errs = [errs[0], &divisor];
            elementwise(args, &errs, out, |x, e, r| {
                let (b, eb) = (x[1].abs(), e[1]);
                let prop = if e[0] == 0.0 && eb == 0.0 {
                    0.0
                } else if b > eb {
                    (e[0] + r.abs() * eb) / (b - eb)
                } else {
                    f64::INFINITY
                };
                prop + if recip { reciprocal_allowance(x[0], x[1], r) } else { 0.0 }
            })
        }
        Relu if f32s(out).is_none() => {
            if all_exact {
                Bound::Exact
            } else {
                flagwise(args, errs, out)
            }
        }
        Relu | Sin | Cos => {
            if all_exact {
                Bound::Exact
            } else {
                elementwise(args, errs, out, |_, e, _| e[0])
            }
        }
        Linear => matmul((args[0], errs[0]), (args[1], errs[1]), Some((args[2], errs[2])), true, out),
        Addmm => matmul((args[1], errs[1]), (args[2], errs[2]), Some((args[0], errs[0])), false, out),
        Mm => matmul((args[0], errs[0]), (args[1], errs[1]), None, false, out),
        Cumsum { .. } => {
            if all_exact {
                return Bound::Exact;
            }
            if f32s(out).is_none() {
                // A running integer sum: any element may differ.
                return Bound::Flags(vec![true; len(out)]);
            }
            // Running sums: errors accumulate along the dimension (bounded by the total).
            let total: f64 = errs[0].abs(len(args[0])).iter().sum();
            let r = f32s(out).unwrap_or(&[]);
            Bound::from_abs(
                r.iter().map(|v| if total > 0.0 { total + ulp(f64::from(*v).abs() + total) } else { 0.0 }).collect(),
            )
        }
        PermuteCopy { .. } | SelectCopy { .. } | IndexSelect { .. } | View { .. } => {
            if all_exact {
                return Bound::Exact;
            }
            match movement_map(op, args) {
                Some(map) => errs[0].gather(len(args[0]), &map),
                None => Bound::Any,
            }
        }
        Argmax { .. } => {
            if all_exact {
                return Bound::Exact;
            }
            // Any element may change when the maximum is not clear by the bounds.
            Bound::Flags(vec![true; len(out)])
        }
        Gt { other } => {
            if all_exact {
                return Bound::Exact;
            }
            let k = Val::Tensor(Tensor { shape: vec![], data: Data::F32(vec![*other as f32]) });
            comparison(&[args[0], &k], &[errs[0], &Bound::Exact], out)
        }
        GtTensor => {
            if all_exact {
                Bound::Exact
            } else {
                comparison(args, errs, out)
            }
        }
        SymSize { .. } => Bound::Exact,
        ScalarAdd | ScalarSub | ScalarMul | ScalarFloordiv | ScalarEq | ScalarLt | ScalarGt | ScalarGe | ScalarLe => {
            if all_exact {
                Bound::Exact
            } else {
                Bound::Any
            }
        }
    }
}
