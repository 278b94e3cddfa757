//! Key-encoding rules: the defined byte string that a key becomes before it is hashed.
//!
//! The rules are applied inside the library so that no caller can forget them. Each rule has a
//! stable numeric id and a version; both are written into snapshots.

use std::borrow::Cow;
use std::fmt;
use std::str::FromStr;

use bloom_format::{KeyEncodingId, UnicodeVersion};
use unicode_normalization::{IsNormalized, UnicodeNormalization, is_nfc_quick};

/// How a key is turned into the bytes that are hashed.
///
/// The numeric ids are part of the snapshot format and never change or get reused.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum KeyEncoding {
    /// The key's bytes as given. Text keys are their UTF-8 bytes. Id 1.
    Bytes,
    /// UTF-8 text as given, with no normalization: `"é"` as one code point and as `e` plus a
    /// combining accent are different keys. Byte keys must be valid UTF-8. Id 2.
    Utf8,
    /// Unicode Normalization Form C. Canonically equivalent spellings are the same key. Id 3.
    Nfc,
    /// NFC, then surrounding Unicode `White_Space` trimmed, then the full Unicode lowercase
    /// mapping (`str::to_lowercase`, which applies the one context rule of Unicode's
    /// `SpecialCasing`: a capital sigma at the end of a word becomes final sigma `ς`), then
    /// NFC again. `"  Straße "` and `"STRASSE"` are *not* the same key (this is
    /// lowercasing, not case folding), but `"Record-1 "` and `"record-1"` are. Id 4.
    NfcTrimLowercase,
    /// The text's UTF-16 code units, each as two little-endian bytes, with no normalization:
    /// what Guava's `Funnels.unencodedCharsFunnel()` hashes for a Java `String`. Byte keys
    /// must be valid UTF-8. Id 5.
    Utf16Le,
}

/// A key that could not be encoded.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum KeyError {
    /// A text encoding was given bytes that are not UTF-8.
    #[error(
        "key is not valid UTF-8 (first bad byte at offset {valid_up_to}); the {encoding} encoding takes text keys"
    )]
    InvalidUtf8 {
        /// Length of the valid UTF-8 prefix.
        valid_up_to: usize,
        /// The encoding that refused the key.
        encoding: KeyEncoding,
    },
    /// Bytes given as an already-encoded key are not what the encoding makes of them (not
    /// normalized, not lowercased, not trimmed, or not UTF-8): committed as they are, they
    /// would never match the same key given as text.
    #[error(
        "the key bytes are not in the {encoding} encoding: give the key as text (or as raw bytes to encode), or encode it first"
    )]
    NotEncoded {
        /// The encoding the bytes should be in.
        encoding: KeyEncoding,
    },
}

/// The error of parsing an encoding or rule name.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {found:?}; expected one of: {expected}")]
pub struct UnknownNameError {
    /// What was being parsed.
    pub kind: &'static str,
    /// The name that was given.
    pub found: String,
    /// The accepted names, comma separated.
    pub expected: &'static str,
}

/// The Unicode versions of the tables a key encoding applied: what a snapshot records.
///
/// Under two different versions of the tables, a key made only of characters that both
/// versions assign is normally encoded the same, but Unicode does not promise it for every
/// table, and a key with a character assigned in only one of them can be encoded
/// differently. bloom takes no chance: a filter whose recorded tables are not this build's
/// ([`FilterConfig::has_foreign_tables`](crate::FilterConfig::has_foreign_tables)) answers
/// *maybe* for every key with a character outside ASCII. ASCII keys are encoded the same by
/// every version of every table (NFC leaves them alone, ASCII white space and ASCII
/// lowercase never change), so they keep exact answers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct UnicodeTables {
    /// The normalization tables' version; `None` when the encoding uses none or when it was
    /// not recorded.
    pub normalization: Option<UnicodeVersion>,
    /// The case-mapping and `White_Space` tables' version; `None` when the encoding uses
    /// none or when it was not recorded (format version 1 recorded one version only).
    pub casing: Option<UnicodeVersion>,
}

impl UnicodeTables {
    /// Tables with these versions.
    #[must_use]
    pub const fn new(
        normalization: Option<UnicodeVersion>,
        casing: Option<UnicodeVersion>,
    ) -> Self {
        Self {
            normalization,
            casing,
        }
    }
}

impl fmt::Display for UnicodeTables {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let show = |v: Option<UnicodeVersion>| {
            v.map_or_else(|| "not recorded".to_owned(), |v| v.to_string())
        };
        write!(
            f,
            "normalization {}, casing {}",
            show(self.normalization),
            show(self.casing)
        )
    }
}

/// A key after its encoding rule was applied: the exact bytes that positions are computed from,
/// and the bytes a primary store should hold.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct EncodedKey<'a>(Cow<'a, [u8]>);

impl<'a> EncodedKey<'a> {
    /// Wraps bytes that already are the output of the filter's encoding rule, such as keys read
    /// back from a primary store that stored [`EncodedKey::as_bytes`]. No rule is applied.
    #[must_use]
    pub fn from_encoded(bytes: &'a [u8]) -> Self {
        Self(Cow::Borrowed(bytes))
    }

    /// The encoded bytes.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }

    /// An owned copy.
    #[must_use]
    pub fn into_owned(self) -> EncodedKey<'static> {
        EncodedKey(Cow::Owned(self.0.into_owned()))
    }
}

impl AsRef<[u8]> for EncodedKey<'_> {
    fn as_ref(&self) -> &[u8] {
        self.as_bytes()
    }
}

impl KeyEncoding {
    /// Every rule, in id order.
    pub const ALL: [Self; 5] = [
        Self::Bytes,
        Self::Utf8,
        Self::Nfc,
        Self::NfcTrimLowercase,
        Self::Utf16Le,
    ];

    /// The names accepted by [`KeyEncoding::from_str`].
    pub const NAMES: &'static str = "bytes, utf8, nfc, nfc-trim-lower, utf16le";

    /// The stable identifier written into snapshots (its number is in `bloom-format`'s
    /// append-only table).
    #[must_use]
    pub const fn id(self) -> KeyEncodingId {
        match self {
            Self::Bytes => KeyEncodingId::Bytes,
            Self::Utf8 => KeyEncodingId::Utf8,
            Self::Nfc => KeyEncodingId::Nfc,
            Self::NfcTrimLowercase => KeyEncodingId::NfcTrimLowercase,
            Self::Utf16Le => KeyEncodingId::Utf16Le,
        }
    }

    /// The rule with this identifier, if this build implements it.
    #[must_use]
    pub const fn from_id(id: KeyEncodingId) -> Option<Self> {
        match id {
            KeyEncodingId::Bytes => Some(Self::Bytes),
            KeyEncodingId::Utf8 => Some(Self::Utf8),
            KeyEncodingId::Nfc => Some(Self::Nfc),
            KeyEncodingId::NfcTrimLowercase => Some(Self::NfcTrimLowercase),
            KeyEncodingId::Utf16Le => Some(Self::Utf16Le),
            _ => None,
        }
    }

    /// The version of the rule this build applies. A change in what a rule does gets a new
    /// version, so an old snapshot is never read with a different rule.
    #[must_use]
    pub const fn version(self) -> u16 {
        self.id().latest_version()
    }

    /// The short name used by the CLI and in dumps.
    #[must_use]
    pub const fn name(self) -> &'static str {
        self.id().name()
    }

    /// The Unicode versions of the tables this rule uses in this build: the normalization
    /// tables of the `unicode-normalization` crate (pinned by `Cargo.lock`) for
    /// [`KeyEncoding::Nfc`] and [`KeyEncoding::NfcTrimLowercase`], and the standard library's
    /// case-mapping and `White_Space` tables (`char::UNICODE_VERSION`, fixed by the Rust
    /// toolchain) for [`KeyEncoding::NfcTrimLowercase`].
    #[must_use]
    pub fn build_tables(self) -> UnicodeTables {
        let (major, minor, update) = unicode_normalization::UNICODE_VERSION;
        let normalization = UnicodeVersion::new(major, minor, update);
        let (major, minor, update) = char::UNICODE_VERSION;
        let casing = UnicodeVersion::new(major, minor, update);
        UnicodeTables {
            normalization: self
                .id()
                .uses_normalization_tables()
                .then_some(normalization),
            casing: self.id().uses_casing_tables().then_some(casing),
        }
    }

    /// Applies the rule to a text key. Borrows when the rule leaves the key unchanged.
    ///
    /// An ASCII key costs a scan for non-ASCII bytes and nothing more: it is already in NFC,
    /// and its trimming and lowercasing need no Unicode tables.
    #[must_use]
    #[inline(always)]
    pub fn encode_str(self, key: &str) -> EncodedKey<'_> {
        match self {
            Self::Bytes | Self::Utf8 => EncodedKey(Cow::Borrowed(key.as_bytes())),
            // Every ASCII string is in NFC already.
            Self::Nfc if is_ascii(key.as_bytes()) => EncodedKey(Cow::Borrowed(key.as_bytes())),
            _ => self.encode_str_with_tables(key),
        }
    }

    /// The paths of [`KeyEncoding::encode_str`] that may need Unicode tables, out of line so
    /// that the common ones inline into every probe.
    #[inline(never)]
    fn encode_str_with_tables(self, key: &str) -> EncodedKey<'_> {
        EncodedKey(match self {
            Self::Bytes | Self::Utf8 => Cow::Borrowed(key.as_bytes()),
            Self::Utf16Le => Cow::Owned(key.encode_utf16().flat_map(u16::to_le_bytes).collect()),
            Self::Nfc => match nfc(key) {
                Cow::Borrowed(s) => Cow::Borrowed(s.as_bytes()),
                Cow::Owned(s) => Cow::Owned(s.into_bytes()),
            },
            Self::NfcTrimLowercase if is_ascii(key.as_bytes()) => ascii_trim_lower(key),
            Self::NfcTrimLowercase => {
                let normalized = nfc(key);
                let lowered = normalized.trim().to_lowercase();
                Cow::Owned(match nfc(&lowered) {
                    Cow::Borrowed(_) => lowered.into_bytes(),
                    Cow::Owned(s) => s.into_bytes(),
                })
            }
        })
    }

    /// Applies the rule to a byte key. Text rules require valid UTF-8.
    ///
    /// # Errors
    /// [`KeyError::InvalidUtf8`] when a text rule is given bytes that are not UTF-8.
    pub fn encode_bytes(self, key: &[u8]) -> Result<EncodedKey<'_>, KeyError> {
        if self == Self::Bytes {
            return Ok(EncodedKey(Cow::Borrowed(key)));
        }
        let text = std::str::from_utf8(key).map_err(|e| KeyError::InvalidUtf8 {
            valid_up_to: e.valid_up_to(),
            encoding: self,
        })?;
        Ok(self.encode_str(text))
    }
}

impl KeyEncoding {
    /// Checks that `key` is already in this encoding: what [`KeyEncoding::encode_bytes`]
    /// makes of it is `key` itself. Keys read back from a store pass; bytes from elsewhere
    /// may not.
    ///
    /// # Errors
    /// [`KeyError::NotEncoded`], or [`KeyError::InvalidUtf8`] for non-UTF-8 bytes under a
    /// text encoding.
    pub(crate) fn check_encoded(self, key: &[u8]) -> Result<(), KeyError> {
        let not = KeyError::NotEncoded { encoding: self };
        if self == Self::Utf16Le {
            // The encoded form is UTF-16 code units: whole ones, with paired surrogates.
            let (units, rest) = key.as_chunks::<2>();
            let valid = rest.is_empty()
                && char::decode_utf16(units.iter().map(|u| u16::from_le_bytes(*u)))
                    .all(|c| c.is_ok());
            return if valid { Ok(()) } else { Err(not) };
        }
        let encoded = self.encode_bytes(key).map_err(|_| not.clone())?;
        if encoded.as_bytes() == key {
            Ok(())
        } else {
            Err(not)
        }
    }
}

/// Whether `bytes` are all ASCII: a word at a time, with no alignment prologue (keys are
/// short, and `[u8]::is_ascii` spends more on aligning than on testing them).
#[inline(always)]
pub(crate) fn is_ascii(bytes: &[u8]) -> bool {
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let word = |w: &[u8; 8]| u64::from_le_bytes(*w);
    // The usual key length first: four overlapping words cover 16 to 32 bytes (one
    // comparison for the range, then four loads ORed together).
    if bytes.len().wrapping_sub(16) <= 16
        && let (Some((a, b)), Some((c, d))) = (
            bytes.first_chunk::<16>().map(|w| w.split_at(8)),
            bytes.last_chunk::<16>().map(|w| w.split_at(8)),
        )
        && let (Ok(a), Ok(b), Ok(c), Ok(d)) =
            (a.try_into(), b.try_into(), c.try_into(), d.try_into())
    {
        return (word(a) | word(b) | word(c) | word(d)) & HIGH == 0;
    }
    let (Some(first), Some(last)) = (bytes.first_chunk::<8>(), bytes.last_chunk::<8>()) else {
        // Shorter than a word: byte by byte.
        return bytes.iter().fold(0u8, |acc, b| acc | b) < 0x80;
    };
    let high = match bytes.len() {
        ..16 => word(first) | word(last),
        _ => {
            let (words, _) = bytes.as_chunks::<8>();
            words.iter().fold(word(last), |acc, w| acc | word(w))
        }
    };
    high & HIGH == 0
}

#[inline]
fn nfc(key: &str) -> Cow<'_, str> {
    if is_ascii(key.as_bytes()) {
        // Every ASCII string is in NFC (no ASCII character decomposes or composes).
        return Cow::Borrowed(key);
    }
    match is_nfc_quick(key.chars()) {
        IsNormalized::Yes => Cow::Borrowed(key),
        IsNormalized::No | IsNormalized::Maybe => Cow::Owned(key.nfc().collect()),
    }
}

/// `nfc-trim-lower` of an ASCII key: exactly what the general path gives it (ASCII is in
/// NFC; the ASCII characters with the `White_Space` property are TAB, LF, VT, FF, CR and
/// SPACE; ASCII lowercasing is the full mapping restricted to ASCII), without the tables.
fn ascii_trim_lower(key: &str) -> Cow<'_, [u8]> {
    let trimmed = trim_ascii_white_space(key.as_bytes());
    if trimmed.iter().any(u8::is_ascii_uppercase) {
        Cow::Owned(trimmed.to_ascii_lowercase())
    } else {
        Cow::Borrowed(trimmed)
    }
}

/// Removes leading and trailing ASCII `White_Space` (VT included, which `trim_ascii` keeps).
fn trim_ascii_white_space(mut bytes: &[u8]) -> &[u8] {
    let space = |b: &u8| matches!(b, b'\t' | b'\n' | 0x0B | 0x0C | b'\r' | b' ');
    while let [first, rest @ ..] = bytes {
        if space(first) {
            bytes = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = bytes {
        if space(last) {
            bytes = rest;
        } else {
            break;
        }
    }
    bytes
}

impl fmt::Display for KeyEncoding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for KeyEncoding {
    type Err = UnknownNameError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|e| e.name() == s)
            .ok_or_else(|| UnknownNameError {
                kind: "key encoding",
                found: s.to_owned(),
                expected: Self::NAMES,
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NFC_E: &str = "caf\u{e9}";
    const NFD_E: &str = "cafe\u{301}";

    #[test]
    fn only_bytes_the_encoding_makes_pass_as_encoded() {
        let not = |encoding| Err(KeyError::NotEncoded { encoding });
        assert_eq!(KeyEncoding::Nfc.check_encoded(NFC_E.as_bytes()), Ok(()));
        assert_eq!(
            KeyEncoding::Nfc.check_encoded(NFD_E.as_bytes()),
            not(KeyEncoding::Nfc)
        );
        assert_eq!(
            KeyEncoding::Nfc.check_encoded(b"\xff"),
            not(KeyEncoding::Nfc)
        );
        assert_eq!(
            KeyEncoding::NfcTrimLowercase.check_encoded(b" Abc"),
            not(KeyEncoding::NfcTrimLowercase)
        );
        assert_eq!(KeyEncoding::NfcTrimLowercase.check_encoded(b"abc"), Ok(()));
        assert_eq!(KeyEncoding::Bytes.check_encoded(b"\xff\x00"), Ok(()));
        assert_eq!(KeyEncoding::Utf8.check_encoded(NFD_E.as_bytes()), Ok(()));
        let utf16 = KeyEncoding::Utf16Le.encode_str("z\u{1F600}");
        assert_eq!(KeyEncoding::Utf16Le.check_encoded(utf16.as_bytes()), Ok(()));
        assert_eq!(
            KeyEncoding::Utf16Le.check_encoded(b"abc"),
            not(KeyEncoding::Utf16Le)
        );
        assert_eq!(
            KeyEncoding::Utf16Le.check_encoded(&[0x00, 0xd8]),
            not(KeyEncoding::Utf16Le)
        );
    }

    #[test]
    fn ids_are_pinned() {
        let ids: Vec<(u16, &str)> = KeyEncoding::ALL
            .iter()
            .map(|e| (e.id().value(), e.name()))
            .collect();
        assert_eq!(
            ids,
            [
                (1, "bytes"),
                (2, "utf8"),
                (3, "nfc"),
                (4, "nfc-trim-lower"),
                (5, "utf16le")
            ]
        );
        for e in KeyEncoding::ALL {
            assert_eq!(KeyEncoding::from_id(e.id()), Some(e));
            assert_eq!(e.name().parse::<KeyEncoding>(), Ok(e));
            assert_eq!(e.version(), 1);
        }
        for &id in KeyEncodingId::ALL {
            assert_eq!(KeyEncoding::from_id(id).map(KeyEncoding::id), Some(id));
            assert_eq!(
                KeyEncoding::from_id(id).map(KeyEncoding::version),
                Some(id.latest_version())
            );
        }
        assert!("NFC".parse::<KeyEncoding>().is_err());
    }

    #[test]
    fn nfc_unifies_canonically_equivalent_keys() {
        assert_ne!(NFC_E.as_bytes(), NFD_E.as_bytes());
        assert_eq!(
            KeyEncoding::Nfc.encode_str(NFC_E),
            KeyEncoding::Nfc.encode_str(NFD_E)
        );
        assert_eq!(
            KeyEncoding::Nfc.encode_str(NFD_E).as_bytes(),
            NFC_E.as_bytes()
        );
        assert_ne!(
            KeyEncoding::Utf8.encode_str(NFC_E),
            KeyEncoding::Utf8.encode_str(NFD_E)
        );
    }

    #[test]
    fn trim_lower_rule() {
        let e = KeyEncoding::NfcTrimLowercase;
        assert_eq!(e.encode_str("  Record-1\t\n").as_bytes(), b"record-1");
        assert_eq!(
            e.encode_str(" CAFE\u{301} ").as_bytes(),
            "caf\u{e9}".as_bytes()
        );
        assert_eq!(
            e.encode_str("\u{3000}中文\u{a0}").as_bytes(),
            "中文".as_bytes()
        );
        assert_eq!(e.encode_str("   ").as_bytes(), b"");
        // Lowercasing, not case folding.
        assert_ne!(e.encode_str("Straße"), e.encode_str("STRASSE"));
    }

    #[test]
    fn byte_keys_under_text_rules_must_be_utf8() {
        assert_eq!(
            KeyEncoding::Nfc.encode_bytes(b"ok\xff"),
            Err(KeyError::InvalidUtf8 {
                valid_up_to: 2,
                encoding: KeyEncoding::Nfc
            })
        );
        assert_eq!(
            KeyEncoding::Bytes
                .encode_bytes(b"ok\xff")
                .unwrap()
                .as_bytes(),
            b"ok\xff"
        );
        assert_eq!(
            KeyEncoding::Utf8
                .encode_bytes("é".as_bytes())
                .unwrap()
                .as_bytes(),
            "é".as_bytes()
        );
    }

    #[test]
    fn table_versions_are_reported_for_the_tables_a_rule_uses() {
        assert_eq!(KeyEncoding::Bytes.build_tables(), UnicodeTables::default());
        assert_eq!(KeyEncoding::Utf8.build_tables(), UnicodeTables::default());
        let nfc = KeyEncoding::Nfc.build_tables();
        let v = nfc.normalization.unwrap();
        assert!(v.major >= 15, "{v}");
        assert_eq!(nfc.casing, None);
        let lower = KeyEncoding::NfcTrimLowercase.build_tables();
        assert_eq!(lower.normalization, Some(v));
        let (major, minor, update) = char::UNICODE_VERSION;
        assert_eq!(
            lower.casing,
            Some(UnicodeVersion::new(major, minor, update))
        );
    }

    /// The ASCII fast path gives exactly the bytes of the general path, for every ASCII
    /// character at both ends and inside.
    #[test]
    fn the_ascii_fast_path_equals_the_general_rule() {
        let general = |key: &str| {
            let normalized = nfc_slow(key);
            let lowered = normalized.trim().to_lowercase();
            nfc_slow(&lowered).into_bytes()
        };
        for c in 0u8..128 {
            let c = char::from(c);
            for key in [
                format!("{c}"),
                format!("{c}Key{c}"),
                format!("  {c}MiXeD {c} case\t"),
                format!("{c}{c}"),
            ] {
                assert!(key.is_ascii());
                assert_eq!(
                    KeyEncoding::NfcTrimLowercase.encode_str(&key).as_bytes(),
                    general(&key).as_slice(),
                    "{key:?}"
                );
                assert_eq!(
                    KeyEncoding::Nfc.encode_str(&key).as_bytes(),
                    nfc_slow(&key).as_bytes()
                );
            }
        }
        // Borrowed when nothing changes.
        assert!(matches!(
            KeyEncoding::NfcTrimLowercase.encode_str("plain").0,
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            KeyEncoding::Nfc.encode_str("plain").0,
            Cow::Borrowed(_)
        ));
    }

    fn nfc_slow(key: &str) -> String {
        key.nfc().collect()
    }

    #[test]
    fn the_ascii_test_agrees_with_the_standard_library() {
        let mut data: Vec<u8> = (0..=127).collect();
        for len in 0..data.len() {
            assert!(is_ascii(&data[..len]));
        }
        for at in 0..data.len() {
            data[at] |= 0x80;
            for len in 0..=data.len() {
                assert_eq!(is_ascii(&data[..len]), data[..len].is_ascii(), "{at} {len}");
            }
            data[at] &= 0x7f;
        }
    }

    #[test]
    fn empty_key_is_a_key() {
        for e in KeyEncoding::ALL {
            assert_eq!(e.encode_str("").as_bytes(), b"");
        }
    }
}
