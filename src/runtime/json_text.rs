//! Reading JSON text without building a `serde_json::Value`: the members of an object a reader
//! asks for, each kept as its text; a scalar; an array streamed element by element.
//!
//! A `Value` costs tens of bytes per JSON element (a 62 MiB line of `0,0,…` took 3.5 GB), so
//! readers of text from another process (runner replies, requests) and of documents keep only
//! what they use: unknown members and the insides of arrays or objects where a scalar was
//! expected are skipped without being stored, and a tensor's values go straight into its bytes
//! (`runtime::io`). Memory is then the text plus what is decoded from it.
//! May not touch: what the members mean (`runtime::io` and `runner::protocol` own that).

use serde::Deserializer as _;
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;
use std::borrow::Cow;
use std::fmt;

/// Reads `text` whole as JSON, building nothing: every number in range, every string's escapes
/// (surrogates paired), nesting within serde_json's limit and nothing after the value, as a
/// `serde_json::Value` would read it (with the same error and place). What this module skips
/// is only skipped once the text it lies in has passed this check, since skipping checks the
/// syntax alone. It stores nothing but what serde_json's own scratch holds while it reads one
/// escaped string or long number (at most the line).
pub fn validate(text: &str) -> Result<(), serde_json::Error> {
    let mut de = serde_json::Deserializer::from_str(text);
    de.deserialize_any(Valid)?;
    de.end()
}

/// A JSON value read whole and kept nowhere.
struct Valid;

impl<'de> de::Deserialize<'de> for Valid {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(Valid)
    }
}

impl<'de> Visitor<'de> for Valid {
    type Value = Valid;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, _: bool) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_str<E>(self, _: &str) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_unit<E>(self) -> Result<Valid, E> {
        Ok(Valid)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Valid, A::Error> {
        while seq.next_element::<Valid>()?.is_some() {}
        Ok(Valid)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Valid, A::Error> {
        while map.next_entry::<Valid, Valid>()?.is_some() {}
        Ok(Valid)
    }
}

/// The members named `keys` of the JSON object `text`, each as its text (the last of a member
/// given twice, as a `Value` keeps it), once `text` is read whole ([`validate`]).
/// `Ok(None)`: `text` is JSON but not an object.
pub fn members<'t, const N: usize>(
    text: &'t str,
    keys: [&'static str; N],
) -> Result<Option<[Option<&'t RawValue>; N]>, serde_json::Error> {
    validate(text)?;
    let mut de = serde_json::Deserializer::from_str(text);
    Ok(de.deserialize_any(Members { keys }).ok())
}

/// [`members`] of `raw`, a value inside a text read whole already (by [`members`] or as a
/// `Value`). `None`: not an object.
pub fn members_of<'t, const N: usize>(raw: &'t RawValue, keys: [&'static str; N]) -> Option<[Option<&'t RawValue>; N]> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    de.deserialize_any(Members { keys }).ok()
}

/// The asked-for members of an object; any other value is refused (serde's "invalid type"),
/// which the callers read as "not an object" since the text is valid JSON.
struct Members<const N: usize> {
    keys: [&'static str; N],
}

impl<'de, const N: usize> Visitor<'de> for Members<N> {
    type Value = [Option<&'de RawValue>; N];

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut found = [None; N];
        while let Some(k) = map.next_key_seed(KeyIndex(&self.keys))? {
            match k {
                Some(k) => found[k] = Some(map.next_value::<&'de RawValue>()?),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(found)
    }
}

/// A member name: its index among the keys asked for (`None`: not asked for), compared
/// without copying it.
struct KeyIndex<'k, const N: usize>(&'k [&'static str; N]);

impl<'de, const N: usize> DeserializeSeed<'de> for KeyIndex<'_, N> {
    type Value = Option<usize>;
    fn deserialize<D: de::Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de, const N: usize> Visitor<'de> for KeyIndex<'_, N> {
    type Value = Option<usize>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a member name")
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(self.0.iter().position(|k| *k == s))
    }
}

/// A JSON value where a scalar is expected: an array or an object (skipped, not stored) is
/// [`Scalar::Other`], as is `null`.
#[derive(Clone, Debug, PartialEq)]
pub enum Scalar<'t> {
    /// An integer in i64's range.
    Int(i64),
    /// An integer above i64's range.
    Big(u64),
    /// A number with a fraction or an exponent.
    Float(f64),
    /// `true` or `false`.
    Bool(bool),
    /// A string.
    Text(Cow<'t, str>),
    /// `null`, an array or an object.
    Other,
}

impl Scalar<'_> {
    /// The scalar of the JSON text `raw`.
    pub fn of(raw: &RawValue) -> Scalar<'_> {
        // `raw` lies in a text read whole already ([`validate`], or a `Value`), so it reads again.
        serde_json::from_str(raw.get()).unwrap_or(Scalar::Other)
    }

    /// An integer in i64's range (as `Value::as_i64`).
    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Scalar::Int(i) => Some(*i),
            _ => None,
        }
    }

    /// A non-negative integer (as `Value::as_u64`).
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Scalar::Int(i) => u64::try_from(*i).ok(),
            Scalar::Big(u) => Some(*u),
            _ => None,
        }
    }

    /// Any number, as f64 (as `Value::as_f64`).
    pub fn as_number(&self) -> Option<f64> {
        match self {
            Scalar::Int(i) => Some(*i as f64),
            Scalar::Big(u) => Some(*u as f64),
            Scalar::Float(x) => Some(*x),
            _ => None,
        }
    }

    /// A bool.
    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Scalar::Bool(b) => Some(*b),
            _ => None,
        }
    }

    /// A string.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            Scalar::Text(s) => Some(s),
            _ => None,
        }
    }
}

impl<'de> de::Deserialize<'de> for Scalar<'de> {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(ScalarVisitor)
    }
}

struct ScalarVisitor;

impl<'de> Visitor<'de> for ScalarVisitor {
    type Value = Scalar<'de>;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, b: bool) -> Result<Self::Value, E> {
        Ok(Scalar::Bool(b))
    }
    fn visit_i64<E>(self, i: i64) -> Result<Self::Value, E> {
        Ok(Scalar::Int(i))
    }
    fn visit_u64<E>(self, u: u64) -> Result<Self::Value, E> {
        Ok(i64::try_from(u).map_or(Scalar::Big(u), Scalar::Int))
    }
    fn visit_f64<E>(self, x: f64) -> Result<Self::Value, E> {
        Ok(Scalar::Float(x))
    }
    fn visit_borrowed_str<E>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Borrowed(s)))
    }
    fn visit_str<E>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Scalar::Text(Cow::Owned(s.to_string())))
    }
    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(Scalar::Other)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        while seq.next_element::<IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
        Ok(Scalar::Other)
    }
}

/// Calls `each` on every element of the JSON array `raw`, in order, as a [`Scalar`] (an
/// element that is an array or an object is skipped, not stored, and given as
/// [`Scalar::Other`]). `None`: `raw` is not an array.
pub fn for_each_element<'t>(raw: &'t RawValue, each: impl FnMut(Scalar<'t>)) -> Option<()> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    // `raw` lies in a text read whole already, so the only refusal is serde's "invalid type"
    // for a value that is not an array.
    de.deserialize_any(Elements(each)).ok()
}

struct Elements<F>(F);

impl<'de, F: FnMut(Scalar<'de>)> Visitor<'de> for Elements<F> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        while let Some(e) = seq.next_element::<Scalar<'de>>()? {
            (self.0)(e);
        }
        Ok(())
    }
}

/// Calls `each` on every element of the JSON array `raw` in order, with its index and text,
/// until `each` refuses one: `Some(Err)` is that refusal (the rest is not read), `None` means
/// `raw` is not an array.
pub fn try_each<'t, E>(
    raw: &'t RawValue,
    each: impl FnMut(usize, &'t RawValue) -> Result<(), E>,
) -> Option<Result<(), E>> {
    let mut de = serde_json::Deserializer::from_str(raw.get());
    let mut refused = None;
    match de.deserialize_any(EachRaw { each, refused: &mut refused }) {
        Ok(()) => Some(Ok(())),
        // `raw` lies in a text read whole already: an error is the refusal that stopped the
        // walk, or serde's "invalid type" for a value that is not an array.
        Err(_) => refused.map(Err),
    }
}

struct EachRaw<'r, F, E> {
    each: F,
    refused: &'r mut Option<E>,
}

impl<'de, F: FnMut(usize, &'de RawValue) -> Result<(), E>, E> Visitor<'de> for EachRaw<'_, F, E> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an array")
    }
    fn visit_seq<A: SeqAccess<'de>>(mut self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while let Some(e) = seq.next_element::<&'de RawValue>()? {
            if let Err(e) = (self.each)(i, e) {
                *self.refused = Some(e);
                return Err(de::Error::custom("refused"));
            }
            i += 1;
        }
        Ok(())
    }
}

/// Whether the JSON text `raw` is `null`.
pub fn is_null(raw: &RawValue) -> bool {
    raw.get() == "null"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_object_gives_the_members_asked_for_and_skips_the_rest() {
        let text = r#"{"a": 1, "big": [[1, 2], {"x": 3}], "b": "x\"y", "a": [2]}"#;
        let [a, b, c] = members(text, ["a", "b", "c"]).expect("JSON").expect("an object");
        // The last of a member given twice.
        assert_eq!(a.map(RawValue::get), Some("[2]"));
        assert_eq!(Scalar::of(b.expect("b")), Scalar::Text("x\"y".into()));
        assert!(c.is_none());
        assert!(members("[1, 2]", ["a"]).expect("JSON").is_none());
        assert!(members("7", ["a"]).expect("JSON").is_none());
        assert!(members("{\"a\": 1", ["a"]).is_err());
        assert!(members("{} {}", ["a"]).is_err(), "trailing text");
    }

    #[test]
    fn a_text_is_read_whole_before_anything_of_it_is_skipped() {
        // Skipping checks only the syntax, so a member nobody reads must still be JSON as a
        // `Value` reads it: in range, its surrogates paired, nested within the limit.
        let deep = format!("{{\"id\": 1, \"junk\": {}{}}}", "[".repeat(100_000), "]".repeat(100_000));
        for text in [
            r#"{"id": 1, "outputs": [], "junk": 1e400}"#,
            r#"{"id": 1, "outputs": [], "junk": -1e999}"#,
            r#"{"id": 1, "outputs": [], "junk": "\ud800"}"#,
            r#"{"id": 1, "outputs": [{"kind": "none", "x": "\udfff"}]}"#,
            r#"{"id": 1, "outputs": [], "junk": 1} x"#,
            deep.as_str(),
        ] {
            let value = serde_json::from_str::<serde_json::Value>(text).map(drop).map_err(|e| e.to_string());
            let ours = members(text, ["id", "outputs"]).map(drop).map_err(|e| e.to_string());
            assert!(value.is_err(), "{text:.60}");
            assert_eq!(ours, value, "the same error at the same place: {text:.60}");
        }
        assert!(validate(r#"{"a": [1, -0, 1.5e300, "\ud83d\ude00", {"b": null}]}"#).is_ok());
    }

    #[test]
    fn scalars_read_as_a_value_reads_them_and_containers_are_other() {
        let read = |t: &str| Scalar::of(&RawValue::from_string(t.to_string()).expect("JSON")).to_owned_text();
        assert_eq!(read("-3"), Scalar::Int(-3));
        assert_eq!(read("18446744073709551615"), Scalar::Big(u64::MAX));
        assert_eq!(read("1.5e3"), Scalar::Float(1500.0));
        assert_eq!(read("true"), Scalar::Bool(true));
        assert_eq!(read("\"NaN\""), Scalar::Text("NaN".into()));
        for other in ["null", "[1, [2]]", "{\"k\": [1]}"] {
            assert_eq!(read(other), Scalar::Other, "{other}");
        }
        let raw = RawValue::from_string("[1, \"x\", [9, 9], 2.5]".to_string()).expect("JSON");
        let mut seen = Vec::new();
        assert_eq!(for_each_element(&raw, |e| seen.push(e.to_owned_text())), Some(()));
        assert_eq!(seen, [Scalar::Int(1), Scalar::Text("x".into()), Scalar::Other, Scalar::Float(2.5)]);
        let object = RawValue::from_string("{\"a\": 1}".to_string()).expect("JSON");
        assert_eq!(for_each_element(&object, |_| panic!("not an element")), None);
    }

    impl Scalar<'_> {
        fn to_owned_text(&self) -> Scalar<'static> {
            match self {
                Scalar::Int(i) => Scalar::Int(*i),
                Scalar::Big(u) => Scalar::Big(*u),
                Scalar::Float(x) => Scalar::Float(*x),
                Scalar::Bool(b) => Scalar::Bool(*b),
                Scalar::Text(s) => Scalar::Text(Cow::Owned(s.to_string())),
                Scalar::Other => Scalar::Other,
            }
        }
    }
}
