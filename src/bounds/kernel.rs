//! What each CPU kernel computes, in the terms of `ir::bound`'s rules: the IR operator it is
//! (with its parameters read from the KernelCall's arguments), or a data movement, a dtype
//! conversion, a scalar computation or a stacked copy.
//! May not touch: the rules (`ir::bound`), the frame.

use crate::ir::Op;
use crate::runtime::Frame;
use crate::runtime::value::Value;

/// What a kernel call does to the bounds of its values (value indices of the frame).
#[derive(Clone, Debug, PartialEq)]
pub enum Rule {
    /// IR operator `op` on `operands`, result in `out`.
    Op { op: Op, operands: Vec<usize>, out: usize },
    /// `a ± alpha·b` with `alpha ≠ 1`: a product, then the sum (`sub`: a difference).
    Scaled { a: usize, b: usize, alpha: f64, sub: bool, out: usize },
    /// `x @ w.T + bias` where the bias may be absent (zeros).
    Linear { x: usize, w: usize, bias: Option<usize>, out: usize },
    /// The elements of `src`, in order or broadcast to `out`'s shape.
    Copy { src: usize, out: usize },
    /// `src` converted to `out`'s dtype element for element.
    Convert { src: usize, out: usize },
    /// `src` written as row `index` of the stacked `out`.
    CopyIndex { src: usize, out: usize, index: usize },
    /// Results every implementation computes alike from the program alone (a size).
    Exact { out: usize },
    /// A scalar computed from scalar `operands`: exact when they are, else anything.
    Scalar { operands: Vec<usize>, out: usize },
}

/// The rule of kernel `name` called with `args` (schema arguments, then outputs: the last is the
/// returned value, the written one but for `copy_` and `et_copy_index`), reading its non-tensor
/// arguments from `frame`; `Err` names what has no rule.
pub fn rule(name: &str, args: &[usize], frame: &Frame<'_>) -> Result<Rule, String> {
    let arg = |i: usize| args.get(i).copied().ok_or_else(|| format!("{name}: argument {i} is missing"));
    let out = *args.last().ok_or_else(|| format!("{name}: no arguments"))?;
    let int = |i: usize| -> Result<i64, String> { frame.int(arg(i)?).map_err(|e| format!("{name}: {}", e.detail)) };
    let scalar =
        |i: usize| -> Result<f64, String> { frame.scalar(arg(i)?).map_err(|e| format!("{name}: {}", e.detail)) };
    let ints =
        |i: usize| -> Result<Vec<i64>, String> { frame.int_list(arg(i)?).map_err(|e| format!("{name}: {}", e.detail)) };
    let op = |op: Op, operands: &[usize]| -> Result<Rule, String> {
        let operands = operands.iter().map(|i| arg(*i)).collect::<Result<Vec<_>, _>>()?;
        Ok(Rule::Op { op, operands, out })
    };
    match name {
        "aten::add.out" | "aten::sub.out" => {
            let alpha = scalar(2)?;
            let sub = name == "aten::sub.out";
            if alpha == 1.0 {
                op(if sub { Op::Sub } else { Op::Add }, &[0, 1])
            } else {
                Ok(Rule::Scaled { a: arg(0)?, b: arg(1)?, alpha, sub, out })
            }
        }
        "aten::mul.out" => op(Op::Mul, &[0, 1]),
        "aten::div.out" => op(Op::Div, &[0, 1]),
        "aten::mm.out" => op(Op::Mm, &[0, 1]),
        "aten::addmm.out" => {
            if scalar(3)? == 1.0 && scalar(4)? == 1.0 {
                op(Op::Addmm, &[0, 1, 2])
            } else {
                Err(format!("{name} with beta or alpha other than 1"))
            }
        }
        "aten::linear.out" => {
            let bias = matches!(frame.value(arg(2)?), Ok(Value::Tensor(_))).then_some(arg(2)?);
            Ok(Rule::Linear { x: arg(0)?, w: arg(1)?, bias, out })
        }
        "aten::relu.out" => op(Op::Relu, &[0]),
        "aten::sin.out" => op(Op::Sin, &[0]),
        "aten::cos.out" => op(Op::Cos, &[0]),
        "aten::permute_copy.out" => op(Op::PermuteCopy { dims: ints(1)? }, &[0]),
        "aten::cumsum.out" => op(Op::Cumsum { dim: int(1)? }, &[0]),
        "aten::select_copy.int_out" => op(Op::SelectCopy { dim: int(1)?, index: int(2)? }, &[0]),
        "aten::index_select.out" => op(Op::IndexSelect { dim: int(1)? }, &[0, 2]),
        "aten::argmax.out" => {
            let dim = match frame.value(arg(1)?) {
                Ok(Value::Int(d)) => Some(*d),
                _ => None,
            };
            let keepdim = frame.bool(arg(2)?).map_err(|e| format!("{name}: {}", e.detail))?;
            op(Op::Argmax { dim, keepdim }, &[0])
        }
        "aten::gt.Scalar_out" => op(Op::Gt { other: scalar(1)? }, &[0]),
        "aten::gt.Tensor_out" => op(Op::GtTensor, &[0, 1]),
        "aten::sym_size.int" => Ok(Rule::Exact { out }),
        // Written into `self`, which the return slot then names.
        "aten::copy_.default" => Ok(Rule::Copy { src: arg(1)?, out: arg(0)? }),
        "aten::view_copy.out" | "executorch_prim::et_view.default" => Ok(Rule::Copy { src: arg(0)?, out }),
        "dim_order_ops::_to_dim_order_copy.out" | "dim_order_ops::_clone_dim_order.out" => {
            Ok(Rule::Convert { src: arg(0)?, out })
        }
        "executorch_prim::et_copy_index.tensor" => {
            let index = usize::try_from(int(2)?).map_err(|_| format!("{name}: a negative index"))?;
            Ok(Rule::CopyIndex { src: arg(1)?, out: arg(0)?, index })
        }
        n if n.starts_with("executorch_prim::") && n.ends_with(".Scalar") => {
            Ok(Rule::Scalar { operands: vec![arg(0)?, arg(1)?], out })
        }
        other => Err(format!("no bound rule for kernel {other}")),
    }
}
