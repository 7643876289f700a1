//! The oracle's own view of values: eager results encoded to the host form with its own byte
//! encoding (not the runtime's), and the comparison every output check uses:
//!
//! * tensors are equal when dtype and shape are equal and every element is equal, where for
//!   floating point **any NaN equals any NaN** (payload and sign ignored: NaN payloads are not
//!   specified by the kernels) and **`-0.0` differs from `+0.0`** (the sign of zero is
//!   deterministic for every op we generate); all other elements compare bit for bit;
//! * scalars likewise; kinds must match.

use crate::ir::bound::Bound;
use crate::ir::value::Val;
use crate::program::ScalarType;
use crate::runtime::HostValue;

pub use crate::bounds::host::{decode, encode};

/// Host forms of eager values.
pub fn encode_all(v: &[Val]) -> Vec<HostValue> {
    v.iter().map(encode).collect()
}

fn same_f32(a: &[u8], b: &[u8]) -> bool {
    a.chunks_exact(4).zip(b.chunks_exact(4)).all(|(x, y)| {
        let (p, q) = (f32::from_le_bytes([x[0], x[1], x[2], x[3]]), f32::from_le_bytes([y[0], y[1], y[2], y[3]]));
        p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())
    })
}

fn same_f64(a: &[u8], b: &[u8]) -> bool {
    a.chunks_exact(8).zip(b.chunks_exact(8)).all(|(x, y)| {
        let p = f64::from_le_bytes(x.try_into().unwrap_or([0; 8]));
        let q = f64::from_le_bytes(y.try_into().unwrap_or([0; 8]));
        p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan())
    })
}

/// Whether two values are equal under the comparison above.
pub fn same(a: &HostValue, b: &HostValue) -> bool {
    match (a, b) {
        (HostValue::Tensor(x), HostValue::Tensor(y)) => {
            x.dtype == y.dtype
                && x.sizes == y.sizes
                && x.data.len() == y.data.len()
                && match x.dtype {
                    ScalarType::FLOAT => same_f32(&x.data, &y.data),
                    ScalarType::DOUBLE => same_f64(&x.data, &y.data),
                    // Bool bytes: any non-zero byte is true.
                    ScalarType::BOOL => x.data.iter().zip(&y.data).all(|(p, q)| (*p != 0) == (*q != 0)),
                    _ => x.data == y.data,
                }
        }
        (HostValue::Double(p), HostValue::Double(q)) => p.to_bits() == q.to_bits() || (p.is_nan() && q.is_nan()),
        (x, y) => x == y,
    }
}

/// Whether two lists are equal element-wise under [`same`].
pub fn same_all(a: &[HostValue], b: &[HostValue]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| same(x, y))
}

/// A short description of the first difference between two lists (`None` when equal).
pub fn difference(want: &[HostValue], got: &[HostValue]) -> Option<String> {
    if want.len() != got.len() {
        return Some(format!("{} values expected, {} given", want.len(), got.len()));
    }
    want.iter()
        .zip(got)
        .enumerate()
        .find(|(_, (w, g))| !same(w, g))
        .map(|(i, (w, g))| format!("value {i}: expected {}, got {}", show(w), show(g)))
}

/// A short description of the first value of `got` outside its bound from `want` (`None`:
/// every value exact or within bound; a missing bound is `Exact`).
pub fn bounded_difference(want: &[HostValue], bounds: &[Bound], got: &[HostValue]) -> Option<String> {
    if want.len() != got.len() {
        return Some(format!("{} values expected, {} given", want.len(), got.len()));
    }
    want.iter()
        .zip(got)
        .enumerate()
        .find(|(i, (w, g))| compare(w, bounds.get(*i).unwrap_or(&Bound::Exact), g) == Verdict::Mismatch)
        .map(|(i, (w, g))| {
            let bound = match bounds.get(i) {
                Some(Bound::Abs(_)) => "outside its per-element bound",
                Some(Bound::Flags(_)) => "differs where no difference is allowed",
                _ => "the value is exact",
            };
            format!("value {i}: expected {}, got {} ({bound})", show(w), show(g))
        })
}

/// A short rendering of a value: dtype, shape and the first elements, exactly.
pub fn show(v: &HostValue) -> String {
    let HostValue::Tensor(t) = v else { return format!("{v:?}") };
    let elems: Vec<String> = match t.dtype {
        ScalarType::FLOAT => {
            t.data.chunks_exact(4).map(|c| format!("{:?}", f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect()
        }
        ScalarType::LONG => {
            t.data.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap_or([0; 8])).to_string()).collect()
        }
        ScalarType::BOOL => t.data.iter().map(|b| (*b != 0).to_string()).collect(),
        _ => t.data.iter().map(|b| format!("{b:#04x}")).collect(),
    };
    let more = if elems.len() > 8 { ", …" } else { "" };
    format!("{} {:?} [{}{more}]", t.dtype, t.sizes, elems.iter().take(8).cloned().collect::<Vec<_>>().join(", "))
}

/// How an output compares with the eager value under the tolerance model.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Equal under [`same`].
    Exact,
    /// Different, but every element within its bound.
    WithinBound,
    /// Outside the bound (or a different kind, dtype or shape).
    Mismatch,
}

fn floats(t: &crate::runtime::HostTensor) -> Option<Vec<f64>> {
    match t.dtype {
        ScalarType::FLOAT => {
            Some(t.data.chunks_exact(4).map(|c| f64::from(f32::from_le_bytes([c[0], c[1], c[2], c[3]]))).collect())
        }
        _ => None,
    }
}

/// Compares `got` with the eager value `want` whose tolerance is `bound`: bit for bit (NaN and
/// signed-zero aware) where exact; within the absolute bound for float elements that have one
/// (NaN only where the eager value is NaN, unless the bound is infinite); anything where the
/// element may differ or nothing is known.
pub fn compare(want: &HostValue, bound: &Bound, got: &HostValue) -> Verdict {
    if same(want, got) {
        return Verdict::Exact;
    }
    // A bound says how far values may be; kind, dtype and shape are never free.
    if std::mem::discriminant(want) != std::mem::discriminant(got) {
        return Verdict::Mismatch;
    }
    let (HostValue::Tensor(w), HostValue::Tensor(g)) = (want, got) else {
        return if matches!(bound, Bound::Any) { Verdict::WithinBound } else { Verdict::Mismatch };
    };
    if w.dtype != g.dtype || w.sizes != g.sizes || w.data.len() != g.data.len() {
        return Verdict::Mismatch;
    }
    if matches!(bound, Bound::Any) {
        return Verdict::WithinBound;
    }
    let n = w.sizes.iter().product::<usize>();
    let ok = match (bound, floats(w), floats(g)) {
        (Bound::Abs(b), Some(wv), Some(gv)) if b.len() == n => wv.iter().zip(&gv).zip(b).all(|((x, y), e)| {
            x.to_bits() == y.to_bits()
                || (x.is_nan() && y.is_nan())
                || e.is_infinite()
                || (x.is_finite() && y.is_finite() && *e > 0.0 && (x - y).abs() <= *e)
        }),
        (Bound::Flags(f), _, _) if f.len() == n => {
            let size = w.data.len() / n.max(1);
            (0..n).all(|i| f[i] || w.data[i * size..(i + 1) * size] == g.data[i * size..(i + 1) * size])
        }
        _ => false,
    };
    if ok { Verdict::WithinBound } else { Verdict::Mismatch }
}

/// The worst verdict over a method's outputs (a different count is a mismatch).
pub fn verdict_of(want: &[HostValue], bounds: &[Bound], got: &[HostValue]) -> Verdict {
    if want.len() != got.len() {
        return Verdict::Mismatch;
    }
    // An output without a bound is exact: none goes uncompared.
    want.iter()
        .zip(got)
        .enumerate()
        .map(|(i, (w, g))| compare(w, bounds.get(i).unwrap_or(&Bound::Exact), g))
        .max()
        .unwrap_or(Verdict::Exact)
}

/// [`verdict_of`] with `-0.0` and `+0.0` taken as equal in float tensors of `got` and `want`:
/// for outputs another framework computed, whose kernels do not promise the sign of a zero.
pub fn verdict_of_ignoring_zero_signs(want: &[HostValue], bounds: &[Bound], got: &[HostValue]) -> Verdict {
    let unsign = |v: &HostValue| match v {
        HostValue::Tensor(t) if t.dtype == ScalarType::FLOAT => {
            let mut t = t.clone();
            for c in t.data.chunks_exact_mut(4) {
                if f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 0.0 {
                    c.copy_from_slice(&0f32.to_le_bytes());
                }
            }
            HostValue::Tensor(t)
        }
        other => other.clone(),
    };
    let (want, got): (Vec<HostValue>, Vec<HostValue>) =
        (want.iter().map(unsign).collect(), got.iter().map(unsign).collect());
    verdict_of(&want, bounds, &got)
}

/// The element of an output furthest from its eager value relative to its bound.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub struct Gap {
    /// Row-major index of the element.
    pub index: usize,
    /// `|got − want|` there (`inf`: NaN against a number, or an integer that differs).
    pub gap: f64,
    /// Its bound (`inf`: anything).
    pub bound: f64,
    /// `gap / bound`: at most 1 within the bound (0 when equal, `inf` past a bound of 0).
    pub ratio: f64,
}

/// `largest gap G at element I, R of its bound B` (`past` for a gap beyond a bound of 0).
impl std::fmt::Display for Gap {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.bound.is_infinite() {
            return write!(f, "largest gap {:e} at element {}, whose bound allows anything", self.gap, self.index);
        }
        let share = if self.ratio.is_finite() { format!("{:.3}", self.ratio) } else { "past".into() };
        write!(f, "largest gap {:e} at element {}, {share} of its bound {:e}", self.gap, self.index, self.bound)
    }
}

/// The largest gap of `got` from `want` as a fraction of `bound`, over the elements of a tensor
/// (`None` when the two differ in kind, dtype or shape; a scalar is one element). Equal
/// elements (NaN with NaN; zeros of either sign where the bound allows the sign) have gap 0.
pub fn largest_gap(want: &HostValue, bound: &Bound, got: &HostValue) -> Option<Gap> {
    let ratio = |gap: f64, b: f64| {
        if gap == 0.0 || b.is_infinite() {
            0.0
        } else if b == 0.0 {
            f64::INFINITY
        } else {
            gap / b
        }
    };
    let (w, g) = match (want, got) {
        (HostValue::Tensor(w), HostValue::Tensor(g)) => (w, g),
        (w, g) if std::mem::discriminant(w) == std::mem::discriminant(g) => {
            let gap = if same(w, g) { 0.0 } else { f64::INFINITY };
            let b = if matches!(bound, Bound::Any) { f64::INFINITY } else { 0.0 };
            return Some(Gap { index: 0, gap, bound: b, ratio: ratio(gap, b) });
        }
        _ => return None,
    };
    if w.dtype != g.dtype || w.sizes != g.sizes || w.data.len() != g.data.len() {
        return None;
    }
    let n: usize = w.sizes.iter().product();
    let bounds = bound.abs_of(n);
    let elems = |t: &crate::runtime::HostTensor| crate::runtime::value::decode_f64(t.dtype, &t.data).ok();
    let (wv, gv) = (elems(w)?, elems(g)?);
    let float = matches!(w.dtype, ScalarType::FLOAT | ScalarType::DOUBLE);
    let mut worst: Option<Gap> = None;
    for (i, ((x, y), b)) in wv.iter().zip(&gv).zip(&bounds).enumerate() {
        let gap = if x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()) {
            0.0
        } else if !float || x.is_nan() || y.is_nan() || x.is_infinite() || y.is_infinite() {
            f64::INFINITY
        } else if *x == 0.0 && *y == 0.0 && *b > 0.0 {
            // Zeros of other signs, where the sign may differ.
            0.0
        } else {
            (x - y).abs().max(f64::MIN_POSITIVE)
        };
        let here = Gap { index: i, gap, bound: *b, ratio: ratio(gap, *b) };
        if worst.is_none_or(|w| here.ratio > w.ratio || (here.ratio == w.ratio && here.gap > w.gap)) {
            worst = Some(here);
        }
    }
    Some(worst.unwrap_or(Gap { index: 0, gap: 0.0, bound: 0.0, ratio: 0.0 }))
}
