//! The Thrift compact protocol, as far as Parquet's `BloomFilterHeader` needs it: a bounded
//! reader that skips fields it does not know, and the writer of the one header this crate
//! writes.
//!
//! The reader works on a byte slice and never allocates: every length is checked against
//! the bytes that are left, and nesting is limited, so any input ends in a header or an
//! error after at most one pass over the slice.

use crate::error::SbbfError;

/// Compact-protocol type ids (the low nibble of a field header).
const STOP: u8 = 0;
const BOOL_TRUE: u8 = 1;
const BOOL_FALSE: u8 = 2;
const BYTE: u8 = 3;
const I16: u8 = 4;
const I32: u8 = 5;
const I64: u8 = 6;
const DOUBLE: u8 = 7;
const BINARY: u8 = 8;
const LIST: u8 = 9;
const SET: u8 = 10;
const MAP: u8 = 11;
const STRUCT: u8 = 12;
const UUID: u8 = 13;

/// Structs nested deeper than this are refused (the header nests two levels, a Parquet
/// footer about eight).
const MAX_DEPTH: u32 = 32;

/// The deepest schema tree accepted in a footer: the `parquet` crate builds the tree
/// recursively, so a deeper one could exhaust the stack.
pub(crate) const MAX_SCHEMA_DEPTH: usize = 128;

/// A Thrift compact reader over a byte slice.
pub(crate) struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    pub(crate) fn new(bytes: &'a [u8]) -> Self {
        Self { bytes, at: 0 }
    }

    /// Bytes read so far.
    pub(crate) fn position(&self) -> usize {
        self.at
    }

    fn byte(&mut self) -> Result<u8, SbbfError> {
        let b = *self.bytes.get(self.at).ok_or(SbbfError::TruncatedHeader)?;
        self.at += 1;
        Ok(b)
    }

    fn skip_bytes(&mut self, n: u64) -> Result<(), SbbfError> {
        let left = (self.bytes.len() - self.at) as u64;
        if n > left {
            return Err(SbbfError::TruncatedHeader);
        }
        self.at += n as usize;
        Ok(())
    }

    /// An unsigned LEB128 varint of at most 10 bytes.
    fn varint(&mut self) -> Result<u64, SbbfError> {
        let mut value = 0u64;
        for shift in (0..70).step_by(7) {
            let b = self.byte()?;
            if shift == 63 && b > 1 {
                return Err(SbbfError::MalformedHeader("a varint longer than 64 bits"));
            }
            value |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(SbbfError::MalformedHeader("a varint longer than 64 bits"))
    }

    /// A zigzag-encoded signed varint.
    fn zigzag(&mut self) -> Result<i64, SbbfError> {
        let v = self.varint()?;
        Ok((v >> 1) as i64 ^ -((v & 1) as i64))
    }

    /// A zigzag i32.
    pub(crate) fn i32(&mut self) -> Result<i32, SbbfError> {
        i32::try_from(self.zigzag()?).map_err(|_| SbbfError::MalformedHeader("an i32 out of range"))
    }

    /// The next field header of a struct: `None` at its end, else the field id and type.
    pub(crate) fn field(&mut self, last_id: &mut i16) -> Result<Option<(i16, u8)>, SbbfError> {
        let header = self.byte()?;
        let kind = header & 0x0f;
        if kind == STOP {
            return Ok(None);
        }
        let delta = header >> 4;
        let id = if delta == 0 {
            i16::try_from(self.zigzag()?)
                .map_err(|_| SbbfError::MalformedHeader("a field id out of range"))?
        } else {
            last_id
                .checked_add(i16::from(delta))
                .ok_or(SbbfError::MalformedHeader("a field id out of range"))?
        };
        *last_id = id;
        Ok(Some((id, kind)))
    }

    /// Skips a value of type `kind`.
    pub(crate) fn skip(&mut self, kind: u8, depth: u32) -> Result<(), SbbfError> {
        if depth > MAX_DEPTH {
            return Err(SbbfError::MalformedHeader("structs nested too deeply"));
        }
        match kind {
            BOOL_TRUE | BOOL_FALSE => Ok(()),
            BYTE => self.skip_bytes(1),
            I16 | I32 | I64 => self.varint().map(drop),
            DOUBLE => self.skip_bytes(8),
            UUID => self.skip_bytes(16),
            BINARY => {
                let len = self.varint()?;
                self.skip_bytes(len)
            }
            LIST | SET => {
                let header = self.byte()?;
                let size = match header >> 4 {
                    15 => self.varint()?,
                    short => u64::from(short),
                };
                self.skip_elements(header & 0x0f, size, depth)
            }
            MAP => {
                let size = self.varint()?;
                if size == 0 {
                    return Ok(());
                }
                let kinds = self.byte()?;
                // Every entry takes at least two bytes (a boolean in a map is one byte, as in
                // a list): a size beyond the bytes left is refused before the loop.
                if size > (self.bytes.len() - self.at) as u64 / 2 {
                    return Err(SbbfError::TruncatedHeader);
                }
                for _ in 0..size {
                    self.skip_element(kinds >> 4, depth)?;
                    self.skip_element(kinds & 0x0f, depth)?;
                }
                Ok(())
            }
            STRUCT => self.skip_struct(depth + 1),
            _ => Err(SbbfError::MalformedHeader("an unknown Thrift type")),
        }
    }

    fn skip_elements(&mut self, kind: u8, size: u64, depth: u32) -> Result<(), SbbfError> {
        // Every element is at least one byte (a boolean in a list is one byte), so a size
        // beyond the bytes left is refused before the loop.
        if size > (self.bytes.len() - self.at) as u64 {
            return Err(SbbfError::TruncatedHeader);
        }
        for _ in 0..size {
            self.skip_element(kind, depth)?;
        }
        Ok(())
    }

    /// Skips one element of a list, set or map: a boolean there is a byte, not a type.
    fn skip_element(&mut self, kind: u8, depth: u32) -> Result<(), SbbfError> {
        match kind {
            BOOL_TRUE | BOOL_FALSE => self.skip_bytes(1),
            _ => self.skip(kind, depth + 1),
        }
    }

    /// Skips the rest of a struct whose header has been read.
    pub(crate) fn skip_struct(&mut self, depth: u32) -> Result<(), SbbfError> {
        let mut last = 0;
        while let Some((_, kind)) = self.field(&mut last)? {
            self.skip(kind, depth)?;
        }
        Ok(())
    }

    /// A Thrift union of empty structs (Parquet's algorithm, hash and compression): the id
    /// of the member that is set. Unknown fields inside the member are skipped.
    pub(crate) fn union_member(&mut self) -> Result<i16, SbbfError> {
        let mut last = 0;
        let mut member = None;
        while let Some((id, kind)) = self.field(&mut last)? {
            if kind == STRUCT && member.is_none() {
                member = Some(id);
            }
            self.skip(kind, 1)?;
        }
        member.ok_or(SbbfError::MalformedHeader("a union with no member set"))
    }

    /// Whether `kind` is a struct.
    pub(crate) fn is_struct(kind: u8) -> bool {
        kind == STRUCT
    }

    /// Whether `kind` is an i32.
    pub(crate) fn is_i32(kind: u8) -> bool {
        kind == I32
    }
}

/// Walks a Parquet footer (`FileMetaData`) before the `parquet` crate decodes it: every
/// struct nested at most [`MAX_DEPTH`] deep, and the schema tree (field 2, a list of
/// `SchemaElement`s whose field 5 is `num_children`) at most [`MAX_SCHEMA_DEPTH`] deep. The
/// decoder recurses over both; a stack overflow would abort the process, so deeper footers
/// are refused here, in one bounded pass without allocating more than the tree's depth.
pub(crate) fn check_footer(footer: &[u8]) -> Result<(), &'static str> {
    let mut reader = Reader::new(footer);
    let mut last = 0;
    let malformed = |_| "the footer is not valid Thrift compact protocol";
    while let Some((id, kind)) = reader.field(&mut last).map_err(malformed)? {
        if id == 2 && kind == LIST {
            check_schema(&mut reader)?;
        } else {
            reader.skip(kind, 1).map_err(|e| match e {
                SbbfError::MalformedHeader("structs nested too deeply") => {
                    "the footer nests structs too deeply"
                }
                _ => "the footer is not valid Thrift compact protocol",
            })?;
        }
    }
    Ok(())
}

/// The schema list: each element's `num_children`, and the depth of the tree they make.
fn check_schema(reader: &mut Reader<'_>) -> Result<(), &'static str> {
    let malformed = |_| "the footer's schema is not valid Thrift compact protocol";
    let header = reader.byte().map_err(malformed)?;
    let size = match header >> 4 {
        15 => reader.varint().map_err(malformed)?,
        short => u64::from(short),
    };
    if header & 0x0f != STRUCT || size > (reader.bytes.len() - reader.at) as u64 {
        return Err("the footer's schema is not a list of structs");
    }
    // Children still expected by each open group, innermost last.
    let mut open: Vec<i64> = Vec::new();
    for _ in 0..size {
        let mut children = 0i64;
        let mut last = 0;
        while let Some((id, kind)) = reader.field(&mut last).map_err(malformed)? {
            if id == 5 && kind == I32 {
                children = i64::from(reader.i32().map_err(malformed)?);
            } else {
                reader.skip(kind, 2).map_err(malformed)?;
            }
        }
        if let Some(parent) = open.last_mut() {
            *parent -= 1;
        }
        if children > 0 {
            if open.len() >= MAX_SCHEMA_DEPTH {
                return Err("the footer's schema nests groups more than 128 deep");
            }
            open.push(children);
        }
        while open.last().is_some_and(|&left| left <= 0) {
            open.pop();
        }
    }
    Ok(())
}

/// The compact encoding of Parquet's `BloomFilterHeader` for a split-block, XXH64,
/// uncompressed bitset of `num_bytes` bytes.
pub(crate) fn encode_header(num_bytes: i32) -> Vec<u8> {
    // Field 1 (i32): delta 1, type 5.
    let mut out = vec![0x15];
    let mut zigzag = ((num_bytes << 1) ^ (num_bytes >> 31)) as u32;
    loop {
        let b = (zigzag & 0x7f) as u8;
        zigzag >>= 7;
        if zigzag == 0 {
            out.push(b);
            break;
        }
        out.push(b | 0x80);
    }
    // Fields 2, 3 and 4: a struct (delta 1, type 12) holding member 1, an empty struct.
    for _ in 0..3 {
        out.extend_from_slice(&[0x1c, 0x1c, 0x00, 0x00]);
    }
    out.push(0x00);
    out
}
