//! Input programs: the exported-program IR the emitter consumes, its type checker, its eager
//! interpreter (the output oracle) and its saved-JSON form (the `exir.save` analogue).
//!
//! A program has methods and program-wide lowered modules. Every graph (method body, cond
//! branch, loop body, lowered module) is closed: it sees only its own constants, inputs and
//! node outputs, numbered in that order (`Ref`). A lowered module's identity is its index in
//! `IrProgram::modules`: two modules with equal bytes are still two modules.
//! May not touch: `.pte` bytes, the runtime.

pub mod bound;
pub mod build;
pub mod eval;
pub mod infer;
pub mod kernels;
pub mod op;
pub mod pretty;
pub mod program;
pub mod saved;
mod tagged;
pub mod value;

pub use op::{Op, OpKind};
pub use program::{
    ConstTensor, Dtype, Graph, HexBytes, IrMethod, IrProgram, LoweredModule, NamedBlob, Node, Ref, ScratchDecl,
    ValueType,
};
