//! Wire enums of the schema as open newtypes over their storage integer.
//!
//! A decoded file may carry any value in an enum field (the runtime, not the decoder, decides
//! what is valid), so each enum keeps its raw value and knows the names of the values the schema
//! declares. Serialised as `{name, value}`, the shape of the corpus JSON dumps.
//! May not touch: validity (which values a program may hold is the runtime's), bytes, files.

use serde::de::Error as _;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

macro_rules! wire_enum {
    ($(#[$doc:meta])* $name:ident : $repr:ty { $($variant:ident = $value:expr),+ $(,)? }) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $repr);

        #[allow(missing_docs)]
        impl $name {
            $(pub const $variant: $name = $name($value);)+

            /// Every value the schema declares, in declaration order.
            pub const ALL: &'static [$name] = &[$($name($value)),+];

            /// The schema's name for this value, or `None` for an undeclared value.
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($variant)),)+
                    _ => None,
                }
            }

            /// Whether the schema declares this value.
            pub fn is_known(self) -> bool {
                self.name().is_some()
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(n) => f.write_str(n),
                    None => write!(f, "UNKNOWN({})", self.0),
                }
            }
        }

        impl Serialize for $name {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let mut st = s.serialize_struct(stringify!($name), 2)?;
                match self.name() {
                    Some(n) => st.serialize_field("name", n)?,
                    None => st.serialize_field("name", &format!("UNKNOWN_{}", self.0))?,
                }
                st.serialize_field("value", &self.0)?;
                st.end()
            }
        }

        impl<'de> Deserialize<'de> for $name {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                #[derive(Deserialize)]
                struct Repr {
                    value: i64,
                }
                let r = Repr::deserialize(d)?;
                <$repr>::try_from(r.value)
                    .map($name)
                    .map_err(|_| D::Error::custom(format!(
                        "{} value {} out of range", stringify!($name), r.value
                    )))
            }
        }
    };
}

wire_enum!(
    /// Tensor element type (`ScalarType`, stored as `byte`).
    ScalarType: i8 {
        BYTE = 0, CHAR = 1, SHORT = 2, INT = 3, LONG = 4, HALF = 5, FLOAT = 6, DOUBLE = 7,
        BOOL = 11, QINT8 = 12, QUINT8 = 13, QINT32 = 14, BFLOAT16 = 15, QUINT4X2 = 16,
        QUINT2X4 = 17, BITS16 = 22, FLOAT8E5M2 = 23, FLOAT8E4M3FN = 24, FLOAT8E5M2FNUZ = 25,
        FLOAT8E4M3FNUZ = 26, UINT16 = 27, UINT32 = 28, UINT64 = 29,
    }
);

impl ScalarType {
    /// Bytes per element for every type the runtime accepts (0..30), `None` otherwise.
    pub fn element_size(self) -> Option<usize> {
        Some(match self.0 {
            0 | 1 | 11 | 12 | 13 | 16 | 17 | 23..=26 => 1,
            2 | 5 | 15 | 22 | 27 => 2,
            3 | 6 | 14 | 28 => 4,
            4 | 7 | 29 => 8,
            8 => 4,       // ComplexHalf
            9 => 8,       // ComplexFloat
            10 => 16,     // ComplexDouble
            18..=21 => 1, // Bits1x8, Bits2x4, Bits4x2, Bits8
            _ => return None,
        })
    }
}

wire_enum!(
    /// Whether a tensor's shape may change at run time.
    TensorShapeDynamism: i8 { STATIC = 0, DYNAMIC_BOUND = 1, DYNAMIC_UNBOUND = 2 }
);

wire_enum!(
    /// Where a tensor's serialized data lives.
    TensorDataLocation: i8 { SEGMENT = 0, EXTERNAL = 1 }
);

wire_enum!(
    /// Where a delegate blob lives.
    DataLocation: i8 { INLINE = 0, SEGMENT = 1 }
);

wire_enum!(
    /// Device of a tensor or planned buffer.
    DeviceType: i8 { CPU = 0, CUDA = 1 }
);
