//! Opaque byte fields (`[ubyte]`: compile spec values, inline blobs, inline constants).
//!
//! Serialised in the corpus shape `{len, sha256, hex | hex_head64, utf8?}`: full hex up to
//! 256 bytes, otherwise the first 64 bytes; `utf8` when the bytes are printable UTF-8.
//! May not touch: the file's byte layout or the loader (these are values of the owned model).

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// Largest byte field serialised with its full hex.
pub const FULL_HEX_LIMIT: usize = 256;
/// Bytes shown in `hex_head64` for larger fields.
pub const HEAD_BYTES: usize = 64;

/// An owned, opaque byte string.
#[derive(Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Bytes(pub Vec<u8>);

impl Bytes {
    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.0.len()
    }
    /// Whether there are no bytes.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
    /// The bytes.
    pub fn as_slice(&self) -> &[u8] {
        &self.0
    }
}

impl std::fmt::Debug for Bytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.0.len() <= 32 {
            write!(f, "Bytes({})", hex::encode(&self.0))
        } else {
            write!(f, "Bytes({}.. {} B)", hex::encode(&self.0[..32]), self.0.len())
        }
    }
}

impl From<Vec<u8>> for Bytes {
    fn from(v: Vec<u8>) -> Self {
        Bytes(v)
    }
}

impl From<&[u8]> for Bytes {
    fn from(v: &[u8]) -> Self {
        Bytes(v.to_vec())
    }
}

/// Lower-case hex SHA-256 of `data`.
pub fn sha256_hex(data: &[u8]) -> String {
    hex::encode(Sha256::digest(data))
}

/// The printable-UTF-8 rendering of `data`, if it has one (non-empty, no control characters).
pub fn printable_utf8(data: &[u8]) -> Option<&str> {
    let s = std::str::from_utf8(data).ok()?;
    if s.is_empty() || s.chars().any(char::is_control) {
        return None;
    }
    Some(s)
}

/// Serialises `data` in the corpus byte encoding.
pub fn serialize_bytes<S: Serializer>(data: &[u8], s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let utf8 = printable_utf8(data);
    let mut m = s.serialize_map(Some(if utf8.is_some() { 4 } else { 3 }))?;
    m.serialize_entry("len", &data.len())?;
    m.serialize_entry("sha256", &sha256_hex(data))?;
    if data.len() <= FULL_HEX_LIMIT {
        m.serialize_entry("hex", &hex::encode(data))?;
    } else {
        m.serialize_entry("hex_head64", &hex::encode(&data[..HEAD_BYTES]))?;
    }
    if let Some(u) = utf8 {
        m.serialize_entry("utf8", u)?;
    }
    m.end()
}

impl Serialize for Bytes {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        serialize_bytes(&self.0, s)
    }
}

impl<'de> Deserialize<'de> for Bytes {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Repr {
            len: usize,
            hex: Option<String>,
        }
        let r = Repr::deserialize(d)?;
        let hex =
            r.hex.ok_or_else(|| D::Error::custom("byte field has no full `hex` (only a head); cannot rebuild it"))?;
        let v = hex::decode(&hex).map_err(|e| D::Error::custom(format!("bad hex: {e}")))?;
        if v.len() != r.len {
            return Err(D::Error::custom(format!(
                "byte field `len` {} does not match its hex ({} bytes)",
                r.len,
                v.len()
            )));
        }
        Ok(Bytes(v))
    }
}
