//! IR operators: [`Op`] with its literal parameters and its fieldless twin [`OpKind`], which
//! names every op once and gives its kernel and arity.
//! May not touch: evaluation, emission (they read these declarations).

use serde::Serialize;

/// A CPU operator with its literal parameters (read back by `tagged`). Its fieldless twin
/// [`OpKind`] names every op once (the `op:NAME` generator feature) and gives the kernel the
/// emitter calls.
#[derive(Clone, Debug, PartialEq, Serialize, strum::EnumDiscriminants)]
#[serde(rename_all = "snake_case", tag = "op")]
#[strum_discriminants(
    name(OpKind),
    doc = "The kind of an [`Op`], without its parameters.",
    derive(Hash, PartialOrd, Ord, strum::EnumIter, strum::IntoStaticStr),
    strum(serialize_all = "snake_case")
)]
pub enum Op {
    /// `a + b` (broadcasting; int64 wraps).
    Add,
    /// `a - b` (broadcasting; int64 wraps).
    Sub,
    /// `a * b` (broadcasting; int64 wraps).
    Mul,
    /// `a / b` (float32, broadcasting).
    Div,
    /// `max(x, 0)`.
    Relu,
    /// `sin(x)`.
    Sin,
    /// `cos(x)`.
    Cos,
    /// `x @ w.T + b` (args x, w, b).
    Linear,
    /// `bias + m1 @ m2` (args bias, m1, m2).
    Addmm,
    /// `a @ b`.
    Mm,
    /// Permute dimensions.
    PermuteCopy {
        /// The permutation.
        dims: Vec<i64>,
    },
    /// Cumulative sum along `dim`.
    Cumsum {
        /// Dimension.
        dim: i64,
    },
    /// `x.select(dim, index)`.
    SelectCopy {
        /// Dimension.
        dim: i64,
        /// Index.
        index: i64,
    },
    /// `x.index_select(dim, idx)` (args x, idx).
    IndexSelect {
        /// Dimension.
        dim: i64,
    },
    /// Index of the maximum along `dim` (None = flattened).
    Argmax {
        /// Dimension.
        dim: Option<i64>,
        /// Keep the reduced dimension.
        keepdim: bool,
    },
    /// `x > other` (a bool tensor).
    Gt {
        /// The scalar compared against.
        other: f64,
    },
    /// `a > b` elementwise, broadcasting (a bool tensor).
    GtTensor,
    /// A view of `x` with another shape of the same element count (`executorch_prim::et_view`;
    /// the result shares the operand's memory and is freed after its last use).
    View {
        /// The new shape.
        shape: Vec<i64>,
    },
    /// `x.size(dim)` as an Int.
    SymSize {
        /// Dimension.
        dim: i64,
    },
    /// Int `a + b` (wraps).
    ScalarAdd,
    /// Int `a - b` (wraps).
    ScalarSub,
    /// Int `a * b` (wraps).
    ScalarMul,
    /// Int `a // b` (floor division; division by zero is an error).
    ScalarFloordiv,
    /// Int `a == b` as Bool.
    ScalarEq,
    /// Int `a < b` as Bool.
    ScalarLt,
    /// Int `a > b` as Bool.
    ScalarGt,
    /// Int `a >= b` as Bool.
    ScalarGe,
    /// Int `a <= b` as Bool.
    ScalarLe,
}

impl Op {
    /// The fieldless kind.
    pub fn kind(&self) -> OpKind {
        self.into()
    }
}

impl OpKind {
    /// snake_case name (`add`, `scalar_floordiv`, ...).
    pub fn name(self) -> &'static str {
        self.into()
    }

    /// The generator feature counted when a program checks this op's result.
    pub fn feature(self) -> String {
        format!("op:{}", self.name())
    }

    /// The operator the emitter calls, as `(name, overload)` (E12).
    pub fn kernel(self) -> (&'static str, &'static str) {
        use OpKind::*;
        match self {
            Add => ("aten::add", "out"),
            Sub => ("aten::sub", "out"),
            Mul => ("aten::mul", "out"),
            Div => ("aten::div", "out"),
            Relu => ("aten::relu", "out"),
            Sin => ("aten::sin", "out"),
            Cos => ("aten::cos", "out"),
            Linear => ("aten::linear", "out"),
            Addmm => ("aten::addmm", "out"),
            Mm => ("aten::mm", "out"),
            PermuteCopy => ("aten::permute_copy", "out"),
            Cumsum => ("aten::cumsum", "out"),
            SelectCopy => ("aten::select_copy", "int_out"),
            IndexSelect => ("aten::index_select", "out"),
            Argmax => ("aten::argmax", "out"),
            Gt => ("aten::gt", "Scalar_out"),
            GtTensor => ("aten::gt", "Tensor_out"),
            View => ("executorch_prim::et_view", "default"),
            SymSize => ("aten::sym_size", "int"),
            ScalarAdd => ("executorch_prim::add", "Scalar"),
            ScalarSub => ("executorch_prim::sub", "Scalar"),
            ScalarMul => ("executorch_prim::mul", "Scalar"),
            ScalarFloordiv => ("executorch_prim::floordiv", "Scalar"),
            ScalarEq => ("executorch_prim::eq", "Scalar"),
            ScalarLt => ("executorch_prim::lt", "Scalar"),
            ScalarGt => ("executorch_prim::gt", "Scalar"),
            ScalarGe => ("executorch_prim::ge", "Scalar"),
            ScalarLe => ("executorch_prim::le", "Scalar"),
        }
    }

    /// The kernel as `name.overload`, the form runners announce.
    pub fn qualified_kernel(self) -> String {
        let (n, o) = self.kernel();
        format!("{n}.{o}")
    }

    /// The operator itself, for a kind that takes no parameters (`None` for one that does).
    pub fn without_parameters(self) -> Option<Op> {
        use OpKind::*;
        Some(match self {
            Add => Op::Add,
            Sub => Op::Sub,
            Mul => Op::Mul,
            Div => Op::Div,
            Relu => Op::Relu,
            Sin => Op::Sin,
            Cos => Op::Cos,
            Linear => Op::Linear,
            Addmm => Op::Addmm,
            Mm => Op::Mm,
            GtTensor => Op::GtTensor,
            ScalarAdd => Op::ScalarAdd,
            ScalarSub => Op::ScalarSub,
            ScalarMul => Op::ScalarMul,
            ScalarFloordiv => Op::ScalarFloordiv,
            ScalarEq => Op::ScalarEq,
            ScalarLt => Op::ScalarLt,
            ScalarGt => Op::ScalarGt,
            ScalarGe => Op::ScalarGe,
            ScalarLe => Op::ScalarLe,
            PermuteCopy | Cumsum | SelectCopy | IndexSelect | Argmax | Gt | View | SymSize => return None,
        })
    }

    /// Whether it computes on Int scalars only (so a result on sizes known at export is known
    /// at export too).
    pub fn on_int_scalars(self) -> bool {
        use OpKind::*;
        matches!(
            self,
            ScalarAdd | ScalarSub | ScalarMul | ScalarFloordiv | ScalarEq | ScalarLt | ScalarGt | ScalarGe | ScalarLe
        )
    }

    /// Operand count.
    pub fn arity(self) -> usize {
        use OpKind::*;
        match self {
            Add | Sub | Mul | Div | Mm | IndexSelect | GtTensor => 2,
            ScalarAdd | ScalarSub | ScalarMul | ScalarFloordiv => 2,
            ScalarEq | ScalarLt | ScalarGt | ScalarGe | ScalarLe => 2,
            Linear | Addmm => 3,
            Relu | Sin | Cos | PermuteCopy | Cumsum | SelectCopy | Argmax | Gt | View | SymSize => 1,
        }
    }
}
