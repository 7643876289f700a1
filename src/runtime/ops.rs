//! Operator lookup for the init-time checks: an operator is known iff the runtime has a kernel
//! for it, and its argument count is that kernel's (schema arguments plus outputs, E12).
//! May not touch: the kernels' code (it reads only their names and arities), IR, emission.

use super::kernels;

/// Argument count of a known operator, by `name.overload` (or `name` for the default overload).
pub fn arity(qualified: &str) -> Option<usize> {
    kernels::lookup(qualified).map(|k| k.args)
}

/// Argument count of operator table entry `op` ([`arity`] of its qualified name).
pub fn arity_of(op: &crate::program::Operator) -> Option<usize> {
    kernels::lookup_operator(op.name.as_deref().unwrap_or(""), op.overload.as_deref().unwrap_or("")).map(|k| k.args)
}
