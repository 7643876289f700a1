//! Operator lookup for the init-time checks: an operator is known iff the runtime has a kernel
//! for it, and its argument count is that kernel's (schema arguments plus outputs, E12).

use super::kernels;

/// Argument count of a known operator, by `name.overload` (or `name` for the default overload).
pub fn arity(qualified: &str) -> Option<usize> {
    kernels::lookup(qualified).map(|k| k.args)
}
