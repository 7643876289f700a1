//! The operator table: every operator the reference runtime knows, with its argument count
//! (schema arguments plus the flattened outputs, as the emitter writes them, E12).
//!
//! Init-time checks resolve KernelCalls against this table; kernels are attached to the same
//! names when execution lands.

/// `(qualified name, argument count)` of every known operator.
pub const OPERATORS: &[(&str, usize)] = &[
    ("aten::add.out", 5),
    ("aten::sub.out", 5),
    ("aten::mul.out", 4),
    ("aten::div.out", 4),
    ("aten::mm.out", 4),
    ("aten::addmm.out", 7),
    ("aten::linear.out", 5),
    ("aten::permute_copy.out", 4),
    ("aten::relu.out", 3),
    ("aten::sin.out", 3),
    ("aten::cos.out", 3),
    ("aten::cumsum.out", 5),
    ("aten::select_copy.int_out", 5),
    ("aten::index_select.out", 5),
    ("aten::argmax.out", 5),
    ("aten::gt.Scalar_out", 4),
    ("aten::gt.Tensor_out", 4),
    ("aten::sym_size.int", 3),
    ("aten::copy_.default", 4),
    ("executorch_prim::add.Scalar", 3),
    ("executorch_prim::sub.Scalar", 3),
    ("executorch_prim::mul.Scalar", 3),
    ("executorch_prim::floordiv.Scalar", 3),
    ("executorch_prim::eq.Scalar", 3),
    ("executorch_prim::gt.Scalar", 3),
    ("executorch_prim::lt.Scalar", 3),
    ("executorch_prim::ge.Scalar", 3),
    ("executorch_prim::le.Scalar", 3),
    ("executorch_prim::et_copy_index.tensor", 3),
    ("executorch_prim::et_view.default", 3),
];

/// Argument count of a known operator, by `name.overload` (or `name` for the default overload).
pub fn arity(qualified: &str) -> Option<usize> {
    OPERATORS.iter().find(|(n, _)| *n == qualified).map(|(_, a)| *a)
}
