//! Reading the IR's internally tagged enums (`Node` by its `node` member, `Op` by its `op`
//! member) without serde's derived buffering of every object into an intermediate tree, which
//! nested graphs paid once per level. The members are read as they come: those before the tag
//! are held as JSON values (none when the tag comes first, as `save` writes it), the tag names
//! the variant, and the variant then reads the held members and the rest in order.
//!
//! The variants are spelled once more here, as serde `remote` definitions: the compiler checks
//! the fields of every variant listed, and the tests (exhaustive matches over the IR's variants)
//! check that none is missing and that each reads back. Errors are serde's own (unknown variant;
//! unknown, missing or duplicate field) at the member's path; what is wrong inside a member held
//! before the tag is named in the detail, from that member (`in `op.dim`: ...`). Stricter than
//! serde's derive, which ignored members of a variant without fields and took nodes written as
//! arrays: both are rejected (`save` writes neither).
//! Owns: `Deserialize` for `Node` and `Op`. May not touch: the IR's types or their saved form.

use super::op::Op;
use super::program::{Graph, Node, Ref};
use serde::de::value::StringDeserializer;
use serde::de::{self, DeserializeSeed, EnumAccess, IntoDeserializer, MapAccess, VariantAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::Value;
use std::marker::PhantomData;

#[derive(Deserialize)]
#[serde(remote = "Op", rename_all = "snake_case", deny_unknown_fields)]
enum OpDef {
    Add,
    Sub,
    Mul,
    Div,
    Relu,
    Sin,
    Cos,
    Linear,
    Addmm,
    Mm,
    PermuteCopy { dims: Vec<i64> },
    Cumsum { dim: i64 },
    SelectCopy { dim: i64, index: i64 },
    IndexSelect { dim: i64 },
    Argmax { dim: Option<i64>, keepdim: bool },
    Gt { other: f64 },
    GtTensor,
    View { shape: Vec<i64> },
    SymSize { dim: i64 },
    ScalarAdd,
    ScalarSub,
    ScalarMul,
    ScalarFloordiv,
    ScalarEq,
    ScalarLt,
    ScalarGt,
    ScalarGe,
    ScalarLe,
}

#[derive(Deserialize)]
#[serde(remote = "Node", rename_all = "snake_case", deny_unknown_fields)]
enum NodeDef {
    Op { op: Op, args: Vec<Ref> },
    Call { module: usize, args: Vec<Ref> },
    Cond { pred: Ref, then_graph: Graph, else_graph: Graph, operands: Vec<Ref> },
    Map { body: Graph, xs: Ref, args: Vec<Ref> },
    Scan { body: Graph, init: Vec<Ref>, xs: Vec<Ref> },
    While { cond: Graph, body: Graph, carried: Vec<Ref>, max_iterations: u32 },
}

impl<'de> Deserialize<'de> for Op {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TaggedVisitor { tag: "op", read: PhantomData::<OpRead> })
    }
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(TaggedVisitor { tag: "node", read: PhantomData::<NodeRead> })
    }
}

/// How one tagged enum reads its variant from an externally tagged view of the object.
trait ReadVariant<'de> {
    /// The enum read.
    type Out;
    /// Reads it (the remote definition's derive).
    fn read<D: Deserializer<'de>>(d: D) -> Result<Self::Out, D::Error>;
}

struct OpRead;
impl<'de> ReadVariant<'de> for OpRead {
    type Out = Op;
    fn read<D: Deserializer<'de>>(d: D) -> Result<Op, D::Error> {
        OpDef::deserialize(d)
    }
}

struct NodeRead;
impl<'de> ReadVariant<'de> for NodeRead {
    type Out = Node;
    fn read<D: Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        NodeDef::deserialize(d)
    }
}

/// Visits an object whose member `tag` names its variant.
struct TaggedVisitor<R> {
    tag: &'static str,
    read: PhantomData<R>,
}

impl<'de, R: ReadVariant<'de>> Visitor<'de> for TaggedVisitor<R> {
    type Value = R::Out;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "an object with a `{}` member", self.tag)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<R::Out, A::Error> {
        let mut held = Vec::new();
        loop {
            match map.next_key_seed(KeySeed { tag: self.tag })? {
                None => return Err(de::Error::missing_field(self.tag)),
                Some(Key::Tag) => break,
                Some(Key::Other(k)) => {
                    let v: Value = map.next_value()?;
                    held.push((k, v));
                }
            }
        }
        R::read(Variant { map, held: held.into_iter(), pending: None })
    }
}

/// A member name: the tag, or another one (kept, to be read after the tag).
enum Key {
    Tag,
    Other(String),
}

struct KeySeed {
    tag: &'static str,
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Key, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("a member name")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        Ok(if v == self.tag { Key::Tag } else { Key::Other(v.to_string()) })
    }
}

/// The object seen from its tag on: the variant name (the tag's value, read in place), then
/// the members held before the tag, then the rest of the object.
struct Variant<A> {
    map: A,
    held: std::vec::IntoIter<(String, Value)>,
    /// The held member whose name was just given.
    pending: Option<(String, Value)>,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for Variant<A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, v: V) -> Result<V::Value, A::Error> {
        v.visit_enum(self)
    }

    serde::forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct enum identifier
        ignored_any
    }
}

impl<'de, A: MapAccess<'de>> EnumAccess<'de> for Variant<A> {
    type Error = A::Error;
    type Variant = Self;

    fn variant_seed<S: DeserializeSeed<'de>>(mut self, seed: S) -> Result<(S::Value, Self), A::Error> {
        let v = self.map.next_value_seed(seed)?;
        Ok((v, self))
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Variant<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        match self.held.next() {
            Some((k, v)) => {
                let name: StringDeserializer<A::Error> = k.clone().into_deserializer();
                self.pending = Some((k, v));
                seed.deserialize(name).map(Some)
            }
            None => self.map.next_key_seed(seed),
        }
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        match self.pending.take() {
            // A held value is read apart from the document's reader, so what is wrong in it is
            // named by its path from the member (the document's path ends at this object).
            Some((k, v)) => {
                let mut track = serde_path_to_error::Track::new();
                seed.deserialize(serde_path_to_error::Deserializer::new(v, &mut track)).map_err(|e| {
                    let inner = track.path().to_string();
                    let at = match inner.as_str() {
                        "." => k,
                        i if i.starts_with('[') => format!("{k}{i}"),
                        i => format!("{k}.{i}"),
                    };
                    de::Error::custom(format_args!("in `{at}`: {e}"))
                })
            }
            None => self.map.next_value_seed(seed),
        }
    }
}

impl<'de, A: MapAccess<'de>> VariantAccess<'de> for Variant<A> {
    type Error = A::Error;

    fn unit_variant(mut self) -> Result<(), A::Error> {
        match self.next_key::<String>()? {
            Some(k) => Err(de::Error::unknown_field(&k, &[])),
            None => Ok(()),
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _: T) -> Result<T::Value, A::Error> {
        Err(de::Error::custom("a tagged variant has named members, not one value"))
    }

    fn tuple_variant<V: Visitor<'de>>(self, _: usize, _: V) -> Result<V::Value, A::Error> {
        Err(de::Error::custom("a tagged variant has named members, not a tuple"))
    }

    fn struct_variant<V: Visitor<'de>>(self, _: &'static [&'static str], v: V) -> Result<V::Value, A::Error> {
        v.visit_map(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{OpKind, ValueType};
    use strum::IntoEnumIterator;

    /// One op of each kind (the match makes a new kind a compile error here).
    fn op_of(k: OpKind) -> Op {
        use OpKind as K;
        match k {
            K::Add => Op::Add,
            K::Sub => Op::Sub,
            K::Mul => Op::Mul,
            K::Div => Op::Div,
            K::Relu => Op::Relu,
            K::Sin => Op::Sin,
            K::Cos => Op::Cos,
            K::Linear => Op::Linear,
            K::Addmm => Op::Addmm,
            K::Mm => Op::Mm,
            K::PermuteCopy => Op::PermuteCopy { dims: vec![1, 0] },
            K::Cumsum => Op::Cumsum { dim: -1 },
            K::SelectCopy => Op::SelectCopy { dim: 0, index: 2 },
            K::IndexSelect => Op::IndexSelect { dim: 1 },
            K::Argmax => Op::Argmax { dim: None, keepdim: true },
            K::Gt => Op::Gt { other: -0.5 },
            K::GtTensor => Op::GtTensor,
            K::View => Op::View { shape: vec![2, -1] },
            K::SymSize => Op::SymSize { dim: 0 },
            K::ScalarAdd => Op::ScalarAdd,
            K::ScalarSub => Op::ScalarSub,
            K::ScalarMul => Op::ScalarMul,
            K::ScalarFloordiv => Op::ScalarFloordiv,
            K::ScalarEq => Op::ScalarEq,
            K::ScalarLt => Op::ScalarLt,
            K::ScalarGt => Op::ScalarGt,
            K::ScalarGe => Op::ScalarGe,
            K::ScalarLe => Op::ScalarLe,
        }
    }

    fn graph() -> Graph {
        Graph { constants: vec![], inputs: vec![ValueType::Int], nodes: vec![], outputs: vec![0] }
    }

    /// One node of each variant (the match makes a new variant a compile error here).
    fn nodes() -> Vec<Node> {
        let all = vec![
            Node::Op { op: Op::Argmax { dim: Some(1), keepdim: false }, args: vec![0] },
            Node::Call { module: 3, args: vec![0, 1] },
            Node::Cond { pred: 0, then_graph: graph(), else_graph: Graph::default(), operands: vec![1] },
            Node::Map { body: graph(), xs: 2, args: vec![] },
            Node::Scan { body: graph(), init: vec![0], xs: vec![1, 2] },
            Node::While { cond: graph(), body: graph(), carried: vec![4], max_iterations: 7 },
        ];
        let mut seen = [false; 6];
        for n in &all {
            seen[match n {
                Node::Op { .. } => 0,
                Node::Call { .. } => 1,
                Node::Cond { .. } => 2,
                Node::Map { .. } => 3,
                Node::Scan { .. } => 4,
                Node::While { .. } => 5,
            }] = true;
        }
        assert!(seen.iter().all(|s| *s), "a node variant is not exercised");
        all
    }

    fn back<T: for<'de> Deserialize<'de>>(text: &str) -> Result<T, String> {
        serde_json::from_str(text).map_err(|e| e.to_string())
    }

    #[test]
    fn every_op_and_node_reads_back_from_its_saved_form() {
        for k in OpKind::iter() {
            let op = op_of(k);
            let text = serde_json::to_string(&op).unwrap();
            assert_eq!(back::<Op>(&text), Ok(op), "{text}");
        }
        for n in nodes() {
            let text = serde_json::to_string(&n).unwrap();
            assert!(text.starts_with("{\"node\":"), "{text}");
            assert_eq!(back::<Node>(&text), Ok(n), "{text}");
        }
    }

    #[test]
    fn the_tag_may_come_anywhere_in_the_object() {
        let text = r#"{"args": [0, 1], "op": {"dim": 1, "op": "select_copy", "index": 4}, "node": "op"}"#;
        assert_eq!(back::<Node>(text), Ok(Node::Op { op: Op::SelectCopy { dim: 1, index: 4 }, args: vec![0, 1] }));
        let text = r#"{"then_graph": {"inputs": ["int"], "nodes": [], "outputs": [0]}, "else_graph":
            {"inputs": [], "nodes": [], "outputs": []}, "node": "cond", "operands": [1], "pred": 0}"#;
        assert_eq!(
            back::<Node>(text),
            Ok(Node::Cond { pred: 0, then_graph: graph(), else_graph: Graph::default(), operands: vec![1] })
        );
    }

    #[test]
    fn bad_objects_are_named() {
        let err = |t: &str| back::<Node>(t).unwrap_err();
        assert!(err(r#"{"args": [0]}"#).contains("missing field `node`"), "{}", err(r#"{"args": [0]}"#));
        let e = err(r#"{"node": "loop", "args": [0]}"#);
        assert!(e.contains("unknown variant `loop`") && e.contains("`while`"), "{e}");
        let e = err(r#"{"node": "call", "module": 0, "args": [], "extra": 1}"#);
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = err(r#"{"extra": 1, "node": "call", "module": 0, "args": []}"#);
        assert!(e.contains("unknown field `extra`"), "{e}");
        let e = err(r#"{"node": "call", "args": []}"#);
        assert!(e.contains("missing field `module`"), "{e}");
        let e = err(r#"{"args": [], "args": [1], "node": "call", "module": 0}"#);
        assert!(e.contains("duplicate field `args`"), "{e}");
        let e = err(r#"{"args": [], "node": "call", "args": [1], "module": 0}"#);
        assert!(e.contains("duplicate field `args`"), "{e}");
        let e = err(r#"{"node": "call", "node": "call", "args": [], "module": 0}"#);
        assert!(e.contains("unknown field `node`"), "{e}");
        let e = err(r#"["call", 0, [1]]"#);
        assert!(e.contains("an object with a `node` member"), "{e}");
        // An op without fields takes no members, before its tag or after.
        let e = err(r#"{"node": "op", "op": {"dim": 0, "op": "add"}, "args": [0, 1]}"#);
        assert!(e.contains("unknown field `dim`"), "{e}");
        let e = err(r#"{"node": "op", "op": {"op": "add", "dim": 0}, "args": [0, 1]}"#);
        assert!(e.contains("unknown field `dim`"), "{e}");
        let e = err(r#"{"node": "op", "op": {"op": "cumsum", "dim": "x"}, "args": [0]}"#);
        assert!(e.contains("invalid type: string \"x\""), "{e}");
        let e = err(r#"{"node": "op", "op": {"dim": "x", "op": "cumsum"}, "args": [0]}"#);
        assert!(e.contains("invalid type: string \"x\""), "{e}");
        let e = err(r#"[1, 2]"#);
        assert!(e.contains("an object with a `node` member"), "{e}");
    }

    #[test]
    fn the_saved_loader_names_the_member_inside_a_node() {
        let doc = |op: &str| {
            format!(
                r#"{{"schema_version": [5, 6], "program": {{"methods": [{{"name": "forward", "graph":
                {{"inputs": [{{"tensor": {{"dtype": "f32", "shape": [2, 3]}}}}], "nodes": [{op}], "outputs": [1]}}}}]}}}}"#
            )
        };
        let good = doc(r#"{"node": "op", "op": {"op": "cumsum", "dim": 1}, "args": [0]}"#);
        assert!(crate::ir::saved::load(&good).is_ok());
        // The tag first (as saved): the path goes down to the member.
        let e = crate::ir::saved::load(&doc(r#"{"node": "op", "op": {"op": "cumsum", "dim": "x"}, "args": [0]}"#));
        let e = e.unwrap_err();
        assert_eq!(e.path, "$.program.methods[0].graph.nodes[0].op.dim", "{e}");
        // Members before the tag: the path ends at the node, the detail goes on from there.
        let e = crate::ir::saved::load(&doc(r#"{"args": [0], "op": {"dim": "x", "op": "cumsum"}, "node": "op"}"#));
        let e = e.unwrap_err();
        assert_eq!(e.path, "$.program.methods[0].graph.nodes[0]", "{e}");
        // (`op` was held too, and names its own held member.)
        assert!(
            matches!(&e.fault, crate::ir::saved::SavedFault::Shape(m) if m.starts_with("in `op`: in `dim`: invalid type: string \"x\"")),
            "{e}"
        );
        let e = crate::ir::saved::load(&doc(r#"{"args": [0, "y"], "op": {"op": "cumsum", "dim": 1}, "node": "op"}"#));
        let e = e.unwrap_err();
        assert!(
            matches!(&e.fault, crate::ir::saved::SavedFault::Shape(m) if m.starts_with("in `args[1]`: invalid type: string \"y\"")),
            "{e}"
        );
        // A member given twice is named, not dropped, on the loader's careful path too.
        let e = crate::ir::saved::load(&doc(
            r#"{"args": [0], "node": "op", "op": {"op": "cumsum", "dim": 1}, "args": [0]}"#,
        ));
        let e = e.unwrap_err();
        assert_eq!(e.path, "$.program.methods[0].graph.nodes[0]", "{e}");
        assert!(
            matches!(&e.fault, crate::ir::saved::SavedFault::Shape(m) if m.starts_with("duplicate field `args` at line 2")),
            "{e}"
        );
    }
}
