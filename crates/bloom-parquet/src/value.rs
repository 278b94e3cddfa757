//! What Parquet hashes: the plain encoding of a value, by the column's physical type.
//!
//! | physical type            | bytes hashed                         | key encoding of the snapshot |
//! | ------------------------ | ------------------------------------ | ---------------------------- |
//! | `BYTE_ARRAY` (`STRING`)  | the value's bytes, no length prefix  | `utf8`                       |
//! | `BYTE_ARRAY` (other)     | the value's bytes, no length prefix  | `bytes`                      |
//! | `FIXED_LEN_BYTE_ARRAY`   | the value's `L` bytes                | `bytes`                      |
//! | `INT32`                  | 4 bytes, little-endian               | `bytes`                      |
//! | `INT64`                  | 8 bytes, little-endian               | `bytes`                      |
//! | `INT96`                  | 12 bytes, as stored                  | `bytes`                      |
//! | `FLOAT`                  | IEEE 754 binary32, little-endian     | `bytes`                      |
//! | `DOUBLE`                 | IEEE 754 binary64, little-endian     | `bytes`                      |
//! | `BOOLEAN`                | one byte, 0 or 1                     | `bytes`                      |
//!
//! Logical types change nothing: a `DATE` is its `INT32` day count, a `DECIMAL` its stored
//! integer or bytes, an unsigned integer its bits.

use parquet::basic::{ConvertedType, LogicalType, Type as PhysicalType};
use parquet::schema::types::ColumnDescriptor;

use bloom_core::KeyEncoding;

use crate::error::ValueError;

/// A column's physical type, as far as its Bloom filter's keys go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ColumnKind {
    /// `BOOLEAN`.
    Boolean,
    /// `INT32` (also `DATE`, `TIME(MILLIS)`, small `DECIMAL`s, 8- to 32-bit integers).
    Int32,
    /// `INT64`.
    Int64,
    /// `INT96` (legacy timestamps).
    Int96,
    /// `FLOAT`.
    Float,
    /// `DOUBLE`.
    Double,
    /// `BYTE_ARRAY`; `utf8` when annotated as a string (`STRING`, `ENUM`, `JSON` or the
    /// `UTF8` converted type).
    ByteArray {
        /// Whether the values are UTF-8 text.
        utf8: bool,
    },
    /// `FIXED_LEN_BYTE_ARRAY` of this many bytes.
    FixedLenByteArray(usize),
}

impl ColumnKind {
    /// The kind of a Parquet column.
    #[must_use]
    pub fn of(column: &ColumnDescriptor) -> Self {
        match column.physical_type() {
            PhysicalType::BOOLEAN => Self::Boolean,
            PhysicalType::INT32 => Self::Int32,
            PhysicalType::INT64 => Self::Int64,
            PhysicalType::INT96 => Self::Int96,
            PhysicalType::FLOAT => Self::Float,
            PhysicalType::DOUBLE => Self::Double,
            PhysicalType::BYTE_ARRAY => Self::ByteArray {
                utf8: matches!(
                    column.logical_type_ref(),
                    Some(LogicalType::String | LogicalType::Enum | LogicalType::Json)
                ) || matches!(
                    column.converted_type(),
                    ConvertedType::UTF8 | ConvertedType::ENUM | ConvertedType::JSON
                ),
            },
            PhysicalType::FIXED_LEN_BYTE_ARRAY => {
                Self::FixedLenByteArray(usize::try_from(column.type_length()).unwrap_or(0))
            }
        }
    }

    /// The name of the physical type.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Self::Boolean => "BOOLEAN",
            Self::Int32 => "INT32",
            Self::Int64 => "INT64",
            Self::Int96 => "INT96",
            Self::Float => "FLOAT",
            Self::Double => "DOUBLE",
            Self::ByteArray { .. } => "BYTE_ARRAY",
            Self::FixedLenByteArray(_) => "FIXED_LEN_BYTE_ARRAY",
        }
    }

    /// The key encoding of a snapshot of this column's filter: `utf8` for text, `bytes`
    /// (the plain-encoded value) for every other type.
    #[must_use]
    pub const fn key_encoding(self) -> KeyEncoding {
        match self {
            Self::ByteArray { utf8: true } => KeyEncoding::Utf8,
            _ => KeyEncoding::Bytes,
        }
    }

    /// The bytes Parquet hashes for a value written as text: the text's bytes for byte
    /// arrays (exactly `L` of them for a fixed length), the number's little-endian bytes for
    /// `INT32` and `INT64` (signed, or unsigned up to the type's width), the IEEE 754
    /// little-endian bytes for `FLOAT` and `DOUBLE` (as Rust parses them: `-0` and `0` are
    /// different values, as in Parquet), `true` or `false` for `BOOLEAN`. `INT96` has no
    /// text form: use [`ColumnKind::encode_hex`].
    ///
    /// # Errors
    /// A [`ValueError`] if the text is not a value of the type.
    pub fn encode_text(self, text: &str) -> Result<Vec<u8>, ValueError> {
        let not = |expected| ValueError::NotANumber {
            found: text.to_owned(),
            expected,
        };
        match self {
            Self::ByteArray { .. } => Ok(text.as_bytes().to_vec()),
            Self::FixedLenByteArray(_) => self.check_len(text.as_bytes().to_vec()),
            Self::Int32 => {
                let value: i64 = text.trim().parse().map_err(|_| not("a 32-bit integer"))?;
                let bits = i32::try_from(value)
                    .map(|v| v as u32)
                    .or_else(|_| u32::try_from(value))
                    .map_err(|_| not("a 32-bit integer"))?;
                Ok(bits.to_le_bytes().to_vec())
            }
            Self::Int64 => {
                let value: i128 = text.trim().parse().map_err(|_| not("a 64-bit integer"))?;
                let bits = i64::try_from(value)
                    .map(|v| v as u64)
                    .or_else(|_| u64::try_from(value))
                    .map_err(|_| not("a 64-bit integer"))?;
                Ok(bits.to_le_bytes().to_vec())
            }
            Self::Float => {
                let value: f32 = text.trim().parse().map_err(|_| not("a FLOAT"))?;
                finite_unless_asked(text, value.is_infinite(), "a FLOAT")?;
                Ok(value.to_le_bytes().to_vec())
            }
            Self::Double => {
                let value: f64 = text.trim().parse().map_err(|_| not("a DOUBLE"))?;
                finite_unless_asked(text, value.is_infinite(), "a DOUBLE")?;
                Ok(value.to_le_bytes().to_vec())
            }
            Self::Boolean => match text.trim() {
                "true" => Ok(vec![1]),
                "false" => Ok(vec![0]),
                _ => Err(not("true or false")),
            },
            Self::Int96 => Err(ValueError::NeedsHex("INT96")),
        }
    }

    /// The bytes Parquet hashes, given as hex: checked against the type's length.
    ///
    /// # Errors
    /// [`ValueError::BadHex`] or [`ValueError::WrongLength`].
    pub fn encode_hex(self, hex: &str) -> Result<Vec<u8>, ValueError> {
        let bytes =
            bloom_format::unhex(hex.trim()).ok_or_else(|| ValueError::BadHex(hex.to_owned()))?;
        self.check_len(bytes)
    }

    fn check_len(self, bytes: Vec<u8>) -> Result<Vec<u8>, ValueError> {
        let expected = match self {
            Self::Boolean => Some(1),
            Self::Int32 | Self::Float => Some(4),
            Self::Int64 | Self::Double => Some(8),
            Self::Int96 => Some(12),
            Self::FixedLenByteArray(len) => Some(len),
            Self::ByteArray { .. } => None,
        };
        match expected {
            Some(expected) if expected != bytes.len() => Err(ValueError::WrongLength {
                expected,
                found: bytes.len(),
            }),
            _ => Ok(bytes),
        }
    }
}

/// A number too large for its type parses as infinity: refused, unless infinity is what the
/// text says (`inf`, `-infinity`, ...).
fn finite_unless_asked(
    text: &str,
    infinite: bool,
    expected: &'static str,
) -> Result<(), ValueError> {
    if infinite && !text.trim().to_ascii_lowercase().contains("inf") {
        return Err(ValueError::OutOfRange {
            found: text.to_owned(),
            expected,
        });
    }
    Ok(())
}
