//! The two schema unions, `KernelTypes` (as [`EValue`]) and `InstructionArguments` (as
//! [`Instruction`]), as Rust enums. Serialised in the corpus shape: `{val, val_type}` and
//! `{instr_args, instr_args_type}`, the payload being the member table's fields.
//! May not touch: bytes, files, the generated FlatBuffers accessors.

use super::{DelegateCall, FreeCall, JumpFalseCall, KernelCall, MoveCall, Tensor};
use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::{Value, json};

/// One value of a method (`EValue` with its `KernelTypes` payload).
#[derive(Clone, Debug, PartialEq)]
pub enum EValue {
    /// None.
    Null,
    /// i64 scalar.
    Int(i64),
    /// Boolean scalar.
    Bool(bool),
    /// f64 scalar.
    Double(f64),
    /// Tensor.
    Tensor(Tensor),
    /// String.
    String(Option<String>),
    /// Value indices of boxed Int values.
    IntList(Option<Vec<i64>>),
    /// Literal doubles.
    DoubleList(Option<Vec<f64>>),
    /// Literal booleans.
    BoolList(Option<Vec<bool>>),
    /// Value indices of Tensor values.
    TensorList(Option<Vec<i32>>),
    /// Value indices of Tensor values, -1 = None.
    OptionalTensorList(Option<Vec<i32>>),
}

impl EValue {
    /// Union tag of this member (`KernelTypes`).
    pub fn tag(&self) -> u8 {
        match self {
            EValue::Null => 1,
            EValue::Int(_) => 2,
            EValue::Bool(_) => 3,
            EValue::Double(_) => 4,
            EValue::Tensor(_) => 5,
            EValue::String(_) => 6,
            EValue::IntList(_) => 7,
            EValue::DoubleList(_) => 8,
            EValue::BoolList(_) => 9,
            EValue::TensorList(_) => 10,
            EValue::OptionalTensorList(_) => 11,
        }
    }

    /// Schema name of this member.
    pub fn kind(&self) -> &'static str {
        match self {
            EValue::Null => "Null",
            EValue::Int(_) => "Int",
            EValue::Bool(_) => "Bool",
            EValue::Double(_) => "Double",
            EValue::Tensor(_) => "Tensor",
            EValue::String(_) => "String",
            EValue::IntList(_) => "IntList",
            EValue::DoubleList(_) => "DoubleList",
            EValue::BoolList(_) => "BoolList",
            EValue::TensorList(_) => "TensorList",
            EValue::OptionalTensorList(_) => "OptionalTensorList",
        }
    }

    /// The tensor payload, if this is a tensor.
    pub fn as_tensor(&self) -> Option<&Tensor> {
        match self {
            EValue::Tensor(t) => Some(t),
            _ => None,
        }
    }
}

/// Serialises a double; non-finite values become the strings `nan`, `inf`, `-inf`.
fn double_json(v: f64) -> Value {
    if v.is_finite() {
        json!(v)
    } else if v.is_nan() {
        json!("nan")
    } else if v > 0.0 {
        json!("inf")
    } else {
        json!("-inf")
    }
}

fn double_from_json(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => match s.as_str() {
            "nan" | "NaN" => Some(f64::NAN),
            "inf" | "Infinity" => Some(f64::INFINITY),
            "-inf" | "-Infinity" => Some(f64::NEG_INFINITY),
            _ => None,
        },
        _ => None,
    }
}

impl EValue {
    fn payload_json(&self) -> Result<Value, serde_json::Error> {
        Ok(match self {
            EValue::Null => json!({}),
            EValue::Int(v) => json!({ "int_val": v }),
            EValue::Bool(v) => json!({ "bool_val": v }),
            EValue::Double(v) => json!({ "double_val": double_json(*v) }),
            EValue::Tensor(t) => serde_json::to_value(t)?,
            EValue::String(s) => json!({ "string_val": s }),
            EValue::IntList(v) => json!({ "items": v }),
            EValue::DoubleList(v) => {
                json!({ "items": v.as_ref().map(|v| v.iter().map(|d| double_json(*d)).collect::<Vec<_>>()) })
            }
            EValue::BoolList(v) => json!({ "items": v }),
            EValue::TensorList(v) => json!({ "items": v }),
            EValue::OptionalTensorList(v) => json!({ "items": v }),
        })
    }
}

impl Serialize for EValue {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeStruct};
        let payload = self.payload_json().map_err(S::Error::custom)?;
        let mut st = s.serialize_struct("EValue", 2)?;
        st.serialize_field("val", &payload)?;
        st.serialize_field("val_type", self.kind())?;
        st.end()
    }
}

fn field<'a>(v: &'a Value, name: &str) -> Option<&'a Value> {
    v.get(name).filter(|x| !x.is_null())
}

fn parse<T: serde::de::DeserializeOwned, E: serde::de::Error>(v: Option<&Value>, what: &str) -> Result<Option<T>, E> {
    match v {
        None => Ok(None),
        Some(v) => serde_json::from_value(v.clone()).map(Some).map_err(|e| E::custom(format!("{what}: {e}"))),
    }
}

impl<'de> Deserialize<'de> for EValue {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let kind =
            v.get("val_type").and_then(Value::as_str).ok_or_else(|| D::Error::custom("EValue without `val_type`"))?;
        let p = v.get("val").cloned().unwrap_or(Value::Null);
        let items = field(&p, "items");
        Ok(match kind {
            "Null" => EValue::Null,
            "Int" => EValue::Int(parse::<i64, D::Error>(field(&p, "int_val"), "int_val")?.unwrap_or(0)),
            "Bool" => EValue::Bool(parse::<bool, D::Error>(field(&p, "bool_val"), "bool_val")?.unwrap_or(false)),
            "Double" => EValue::Double(match field(&p, "double_val") {
                None => 0.0,
                Some(x) => double_from_json(x).ok_or_else(|| D::Error::custom("bad double_val"))?,
            }),
            "Tensor" => EValue::Tensor(serde_json::from_value(p).map_err(D::Error::custom)?),
            "String" => EValue::String(parse::<String, D::Error>(field(&p, "string_val"), "string_val")?),
            "IntList" => EValue::IntList(parse(items, "items")?),
            "DoubleList" => EValue::DoubleList(match items {
                None => None,
                Some(Value::Array(a)) => Some(
                    a.iter()
                        .map(|x| double_from_json(x).ok_or_else(|| D::Error::custom("bad double item")))
                        .collect::<Result<_, _>>()?,
                ),
                Some(_) => return Err(D::Error::custom("DoubleList items must be an array")),
            }),
            "BoolList" => EValue::BoolList(parse(items, "items")?),
            "TensorList" => EValue::TensorList(parse(items, "items")?),
            "OptionalTensorList" => EValue::OptionalTensorList(parse(items, "items")?),
            other => return Err(D::Error::custom(format!("unknown val_type `{other}`"))),
        })
    }
}

/// One instruction (`Instruction` with its `InstructionArguments` payload).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Instruction {
    /// Call a CPU kernel.
    KernelCall(KernelCall),
    /// Call a backend delegate.
    DelegateCall(DelegateCall),
    /// Copy a value slot.
    MoveCall(MoveCall),
    /// Conditional jump.
    JumpFalseCall(JumpFalseCall),
    /// Release a tensor.
    FreeCall(FreeCall),
}

impl Instruction {
    /// Union tag of this member (`InstructionArguments`).
    pub fn tag(&self) -> u8 {
        match self {
            Instruction::KernelCall(_) => 1,
            Instruction::DelegateCall(_) => 2,
            Instruction::MoveCall(_) => 3,
            Instruction::JumpFalseCall(_) => 4,
            Instruction::FreeCall(_) => 5,
        }
    }

    /// Schema name of this member.
    pub fn kind(&self) -> &'static str {
        match self {
            Instruction::KernelCall(_) => "KernelCall",
            Instruction::DelegateCall(_) => "DelegateCall",
            Instruction::MoveCall(_) => "MoveCall",
            Instruction::JumpFalseCall(_) => "JumpFalseCall",
            Instruction::FreeCall(_) => "FreeCall",
        }
    }

    /// All instruction kinds, in tag order.
    pub const KINDS: [&'static str; 5] = ["KernelCall", "DelegateCall", "MoveCall", "JumpFalseCall", "FreeCall"];
}

impl Serialize for Instruction {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("Instruction", 2)?;
        match self {
            Instruction::KernelCall(x) => st.serialize_field("instr_args", x)?,
            Instruction::DelegateCall(x) => st.serialize_field("instr_args", x)?,
            Instruction::MoveCall(x) => st.serialize_field("instr_args", x)?,
            Instruction::JumpFalseCall(x) => st.serialize_field("instr_args", x)?,
            Instruction::FreeCall(x) => st.serialize_field("instr_args", x)?,
        }
        st.serialize_field("instr_args_type", self.kind())?;
        st.end()
    }
}

impl<'de> Deserialize<'de> for Instruction {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = Value::deserialize(d)?;
        let kind = v
            .get("instr_args_type")
            .and_then(Value::as_str)
            .ok_or_else(|| D::Error::custom("Instruction without `instr_args_type`"))?;
        let p = v.get("instr_args").cloned().unwrap_or(Value::Null);
        let e = D::Error::custom;
        Ok(match kind {
            "KernelCall" => Instruction::KernelCall(serde_json::from_value(p).map_err(e)?),
            "DelegateCall" => Instruction::DelegateCall(serde_json::from_value(p).map_err(e)?),
            "MoveCall" => Instruction::MoveCall(serde_json::from_value(p).map_err(e)?),
            "JumpFalseCall" => Instruction::JumpFalseCall(serde_json::from_value(p).map_err(e)?),
            "FreeCall" => Instruction::FreeCall(serde_json::from_value(p).map_err(e)?),
            other => return Err(D::Error::custom(format!("unknown instr_args_type `{other}`"))),
        })
    }
}
