//! The judges of one case: every invariant (semantics.md E) checked on one generated case or one
//! emitted program, the invariant vocabulary and the report a check fills. Used alike by tests,
//! fuzzers and every driver in `campaign`.
//! May not touch: the stages it reads (it changes none of them), and what drives cases
//! (`campaign`).

pub mod case;
pub mod exported;
pub mod invariant;
pub mod lifecycle;
pub mod negative;
pub mod report;
pub mod structure;
pub mod values;

pub use case::{case_of, check_case, check_emitted, check_ir, node_count, written_again_is_the_same};
pub use invariant::{Checked, Invariant};
pub use report::{CheckOptions, Coverage, Failure, Report, Timings};
