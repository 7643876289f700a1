//! ExecuTorch error codes and the typed init-time check failures that map onto them.
//! May not touch: the checks that raise them (`check`, `method`), IR, emission.

use serde::Serialize;
use smol_str::SmolStr;
use thiserror::Error;

/// `executorch::runtime::Error` values (semantics.md B.9).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[allow(missing_docs)]
pub enum ErrorCode {
    Internal = 0x01,
    InvalidState = 0x02,
    EndOfMethod = 0x03,
    NotSupported = 0x10,
    NotImplemented = 0x11,
    InvalidArgument = 0x12,
    InvalidType = 0x13,
    OperatorMissing = 0x14,
    NotFound = 0x20,
    MemoryAllocationFailed = 0x21,
    AccessFailed = 0x22,
    InvalidProgram = 0x23,
    InvalidExternalData = 0x24,
    OutOfResources = 0x25,
    DelegateInvalidCompatibility = 0x30,
    DelegateMemoryAllocationFailed = 0x31,
    DelegateInvalidHandle = 0x32,
}

impl ErrorCode {
    /// The code with ExecuTorch's numeric value `c`.
    pub fn from_code(c: u32) -> Option<ErrorCode> {
        use ErrorCode::*;
        [
            Internal,
            InvalidState,
            EndOfMethod,
            NotSupported,
            NotImplemented,
            InvalidArgument,
            InvalidType,
            OperatorMissing,
            NotFound,
            MemoryAllocationFailed,
            AccessFailed,
            InvalidProgram,
            InvalidExternalData,
            OutOfResources,
            DelegateInvalidCompatibility,
            DelegateMemoryAllocationFailed,
            DelegateInvalidHandle,
        ]
        .into_iter()
        .find(|e| *e as u32 == c)
    }
}

/// Where in a method a check failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Site {
    /// Chain index.
    pub chain: usize,
    /// Instruction index in the chain.
    pub instruction: usize,
}

impl std::fmt::Display for Site {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "chains[{}].instructions[{}]", self.chain, self.instruction)
    }
}

/// One violation found by the init-time checks; every variant names the method and place.
#[derive(Clone, Debug, PartialEq, Eq, Error, Serialize)]
#[allow(missing_docs)]
pub enum CheckError {
    #[error("method {method}: required field `{field}` is absent")]
    MissingField { method: SmolStr, field: &'static str },
    #[error("method {method}: {field} = {index} at {site} is out of range ({count} values)")]
    ValueIndex { method: SmolStr, site: Site, field: &'static str, index: i64, count: usize },
    #[error("method {method}: DelegateCall at {site} names delegate {index} but the method has {count}")]
    DelegateIndex { method: SmolStr, site: Site, index: i32, count: usize },
    #[error("method {method}: KernelCall at {site} names operator {index} but the method has {count}")]
    OpIndex { method: SmolStr, site: Site, index: i32, count: usize },
    #[error("method {method}: operators[{op_index}] `{name}` has no kernel")]
    UnknownOperator { method: SmolStr, op_index: usize, name: String },
    #[error("method {method}: KernelCall at {site} passes {found} args to `{op}`, which takes {expected}")]
    Arity { method: SmolStr, site: Site, op: SmolStr, expected: usize, found: usize },
    #[error("method {method}: JumpFalseCall at {site} jumps to {destination}, outside the chain's {len} instructions")]
    JumpDestination { method: SmolStr, site: Site, destination: i32, len: usize },
    #[error("method {method}: {which}[{position}] = {index} is out of range ({count} values)")]
    PlanIo { method: SmolStr, which: &'static str, position: usize, index: i32, count: usize },
    #[error("method {method}: {which}[{position}] names values[{index}], a {kind}, not a tensor or scalar")]
    PlanIoKind { method: SmolStr, which: &'static str, position: usize, index: i32, kind: &'static str },
    #[error("method {method}: values[{value}]: {what}")]
    Tensor { method: SmolStr, value: usize, what: String, code: ErrorCode },
    #[error("method {method}: values[{value}].items[{item}] = {index}: {what}")]
    ListItem { method: SmolStr, value: usize, item: usize, index: i64, what: &'static str, code: ErrorCode },
    #[error("method {method}: delegates[{delegate}] declares scratch but is called from {sites} call sites")]
    ScratchShared { method: SmolStr, delegate: usize, sites: usize },
    #[error("method {method}: delegates[{delegate}] {what}")]
    Delegate { method: SmolStr, delegate: usize, what: String, code: ErrorCode },
    #[error("method {method}: chain {chain} has no `instructions`")]
    MissingInstructions { method: SmolStr, chain: usize },
    #[error("method {method}: {what} at {site} has no `args`")]
    MissingArgs { method: SmolStr, site: Site, what: &'static str },
}

impl CheckError {
    /// What the runtime here lacks that this failure names (`kernel:NAME`), when it is not a rule
    /// the program breaks but a kernel this runtime does not have (ExecuTorch reports both as
    /// OperatorMissing; a program using a kernel ExecuTorch has is valid).
    pub fn unsupported_here(&self) -> Option<String> {
        match self {
            CheckError::UnknownOperator { name, .. } => Some(format!("kernel:{name}")),
            _ => None,
        }
    }

    /// The ExecuTorch error code this violation maps to.
    pub fn code(&self) -> ErrorCode {
        match self {
            CheckError::UnknownOperator { .. } => ErrorCode::OperatorMissing,
            CheckError::Tensor { code, .. } | CheckError::ListItem { code, .. } | CheckError::Delegate { code, .. } => {
                *code
            }
            _ => ErrorCode::InvalidProgram,
        }
    }
}

/// Why loading or running a method failed.
#[derive(Clone, Debug, PartialEq, Eq, Error)]
pub enum RuntimeError {
    /// No method of that name.
    #[error("no method named `{0}`")]
    MethodNotFound(String),
    /// An init-time check failed (the first violation).
    #[error("{0}")]
    Check(CheckError),
    /// A value could not be materialised.
    #[error("method {method}: values[{value}]: {detail}")]
    Value {
        /// Method.
        method: String,
        /// Value index.
        value: usize,
        /// What.
        detail: String,
        /// Code.
        code: ErrorCode,
    },
    /// The delegate's backend is not registered or not available.
    #[error("method {method}: delegates[{delegate}]: backend `{backend}` is not available (not registered)")]
    BackendNotAvailable {
        /// Method.
        method: String,
        /// Delegate index.
        delegate: usize,
        /// Backend id.
        backend: String,
    },
    /// A backend's `init` failed.
    #[error("method {method}: delegates[{delegate}] ({backend}) init failed: {detail}")]
    InitFailed {
        /// Method.
        method: String,
        /// Delegate index.
        delegate: usize,
        /// Backend id.
        backend: String,
        /// Code.
        code: ErrorCode,
        /// What.
        detail: String,
        /// What the reference runtime lacks, when that is why ([`OpError::lacking`]).
        lacks: Option<String>,
    },
    /// A kernel failed.
    #[error("method {method}: {site} `{op}` failed: {detail}")]
    Kernel {
        /// Method.
        method: String,
        /// Where.
        site: Site,
        /// Operator.
        op: String,
        /// Code.
        code: ErrorCode,
        /// What.
        detail: String,
        /// What the reference runtime lacks, when that is why ([`OpError::lacking`]).
        lacks: Option<String>,
    },
    /// A delegate's `execute` failed.
    #[error("method {method}: {site} delegate {delegate} failed: {detail}")]
    Delegate {
        /// Method.
        method: String,
        /// Where.
        site: Site,
        /// Delegate index.
        delegate: usize,
        /// Code.
        code: ErrorCode,
        /// What.
        detail: String,
        /// What the reference runtime lacks, when that is why ([`OpError::lacking`]).
        lacks: Option<String>,
    },
    /// Control-flow or value-kind error while executing.
    #[error("method {method}: {site}: {detail}")]
    Execute {
        /// Method.
        method: String,
        /// Where.
        site: Site,
        /// Code.
        code: ErrorCode,
        /// What.
        detail: String,
    },
    /// The instruction budget ran out (a non-terminating program).
    #[error("method {method}: executed {budget} instructions without finishing")]
    BudgetExceeded {
        /// Method.
        method: String,
        /// The budget.
        budget: u64,
    },
    /// A bad input.
    #[error("method {method}: input {index}: {detail}")]
    Input {
        /// Method.
        method: String,
        /// Input position.
        index: usize,
        /// ExecuTorch's code for it (NotSupported: a tensor that cannot take the given shape).
        code: ErrorCode,
        /// What.
        detail: String,
    },
}

impl RuntimeError {
    /// What the runtime here lacks that this failure names (`kernel:NAME`, `backend:ID`): a
    /// valid program this runtime cannot run, not one that breaks a rule.
    pub fn unsupported_here(&self) -> Option<String> {
        match self {
            RuntimeError::Check(c) => c.unsupported_here(),
            RuntimeError::BackendNotAvailable { backend, .. } => Some(format!("backend:{backend}")),
            RuntimeError::InitFailed { lacks, .. }
            | RuntimeError::Kernel { lacks, .. }
            | RuntimeError::Delegate { lacks, .. } => lacks.clone(),
            _ => None,
        }
    }

    /// The ExecuTorch code of this error.
    pub fn code(&self) -> ErrorCode {
        match self {
            RuntimeError::MethodNotFound(_) => ErrorCode::InvalidArgument,
            RuntimeError::Check(c) => c.code(),
            RuntimeError::BackendNotAvailable { .. } => ErrorCode::NotFound,
            RuntimeError::BudgetExceeded { .. } => ErrorCode::InvalidProgram,
            RuntimeError::Value { code, .. }
            | RuntimeError::InitFailed { code, .. }
            | RuntimeError::Kernel { code, .. }
            | RuntimeError::Delegate { code, .. }
            | RuntimeError::Execute { code, .. }
            | RuntimeError::Input { code, .. } => *code,
        }
    }
}
