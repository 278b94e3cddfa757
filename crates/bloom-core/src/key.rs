//! [`Key`]: what every filter operation takes, so that each operation is one method whatever
//! form its key comes in.

use std::borrow::Cow;
use std::convert::Infallible;

use crate::encoding::{self, EncodedKey, KeyEncoding, KeyError};

mod sealed {
    pub trait Sealed {}
}

/// A key, in one of the three forms a filter takes:
///
/// - **text**: `str`, `String`, `Box<str>`, `Cow<str>`, encoded by the filter's
///   [`KeyEncoding`];
/// - **bytes**: `[u8]`, `[u8; N]`, `Vec<u8>`, `Cow<[u8]>`, encoded by the filter's
///   [`KeyEncoding`], which for a text encoding must find valid UTF-8;
/// - **already encoded**: [`EncodedKey`], hashed as it is (keys read back from a primary
///   store).
///
/// Every operation (`insert`, `contains`, `remove`, and the many-key `insert_all` and
/// `contains_each`) takes any of them, on every filter, store wrapper and the Redis filter,
/// as `HashSet::contains` takes any borrowed form. References to keys are keys too, so
/// `["a", "b"]`, `vec.iter()` and `vec.into_iter()` all work as many keys.
///
/// A text or encoded key is always valid, so the in-memory filters answer it directly
/// ([`Key::Answer`] is `T`); a byte key may be refused by a text encoding, so they answer it
/// with a `Result<T, KeyError>`. Operations that can fail anyway (a store, a server) return
/// their own `Result` for every form, with the key's refusal as one of their errors.
///
/// ```
/// use bloom_core::{BloomFilter, EncodedKey, Filter, KeyError};
///
/// let mut filter = BloomFilter::with_capacity(1_000, 0.01)?;
/// assert!(filter.insert("café"));                      // text: a bool
/// assert!(filter.contains(&String::from("café")));     // any text form
/// assert_eq!(filter.contains(b"caf\xc3\xa9"), Ok(true)); // bytes: a Result
/// assert!(matches!(filter.insert(b"\xff"), Err(KeyError::InvalidUtf8 { .. })));
/// let stored = filter.config().encoding().encode_str("café").into_owned();
/// assert!(filter.contains(&stored));                   // already encoded: a bool
/// # let _: &EncodedKey<'_> = &stored;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// The trait is sealed: its methods are the library's own business and may change.
pub trait Key: sealed::Sealed {
    /// Why this form of key can be refused: [`Infallible`] for text and encoded keys,
    /// [`KeyError`] for bytes.
    type Error: Into<KeyError>;

    /// What an in-memory filter's operation answers for this form of key, for an answer of
    /// type `T`: `T` itself when the key cannot be refused, `Result<T, KeyError>` when it
    /// can.
    type Answer<T>;

    /// The key's bytes as given, and their form: what lets a filter hash a key its encoding
    /// keeps as it is without encoding it (`as_is`).
    #[doc(hidden)]
    fn raw(&self) -> (&[u8], KeyForm);

    /// The key as the filter hashes it.
    #[doc(hidden)]
    fn encode(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, Self::Error>;

    /// Whether what the encoding makes of this key may depend on the Unicode tables (then a
    /// filter with foreign tables cannot answer for it exactly): keys outside ASCII, and
    /// every already-encoded key, whose encoding this build cannot tell.
    #[doc(hidden)]
    fn depends_on_tables(&self) -> bool;

    /// The key as a primary store holds it: [`Key::encode`], and for an already-encoded key
    /// a check that the encoding would make these bytes
    /// ([`KeyEncoding::check_encoded`]): committed otherwise, they would never match the
    /// same key given as text.
    #[doc(hidden)]
    fn encode_checked(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, KeyError> {
        self.encode(encoding).map_err(Into::into)
    }

    /// An answer in this form's shape.
    #[doc(hidden)]
    fn answer<T>(result: Result<T, Self::Error>) -> Self::Answer<T>;

    /// An in-memory filter's answer as a `Result`, whatever the form of key: what generic
    /// code over any `K: Key` names, since it cannot know whether `K::Answer<T>` is `T` or a
    /// `Result`.
    ///
    /// ```
    /// use bloom_core::{BloomFilter, Key, KeyError};
    ///
    /// fn seen<K: Key + ?Sized>(filter: &BloomFilter, key: &K) -> Result<bool, KeyError> {
    ///     K::into_result(filter.contains(key))
    /// }
    /// let filter = BloomFilter::with_capacity(100, 0.01)?;
    /// assert_eq!(seen(&filter, "a"), Ok(false));
    /// assert!(seen(&filter, &b"\xff"[..]).is_err());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    /// # Errors
    /// The key's refusal, for a byte key a text encoding refuses.
    fn into_result<T>(answer: Self::Answer<T>) -> Result<T, KeyError>;
}

/// Text keys.
macro_rules! text_key {
    ($($ty:ty),*) => {$(
        impl sealed::Sealed for $ty {}
        impl Key for $ty {
            type Error = Infallible;
            type Answer<T> = T;
            #[inline(always)]
            fn raw(&self) -> (&[u8], KeyForm) {
                (self.as_bytes(), KeyForm::Text)
            }
            #[inline(always)]
            fn encode(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, Infallible> {
                Ok(encoding.encode_str(self))
            }
            #[inline(always)]
            fn depends_on_tables(&self) -> bool {
                !self.is_ascii()
            }
            #[inline(always)]
            fn answer<T>(result: Result<T, Infallible>) -> T {
                match result {
                    Ok(answer) => answer,
                    Err(never) => match never {},
                }
            }
            fn into_result<T>(answer: T) -> Result<T, KeyError> {
                Ok(answer)
            }
        }
    )*};
}

/// Byte keys.
macro_rules! byte_key {
    ($([$($generics:tt)*] $ty:ty),*) => {$(
        impl<$($generics)*> sealed::Sealed for $ty {}
        impl<$($generics)*> Key for $ty {
            type Error = KeyError;
            type Answer<T> = Result<T, KeyError>;
            #[inline(always)]
            fn raw(&self) -> (&[u8], KeyForm) {
                (&self[..], KeyForm::Bytes)
            }
            #[inline(always)]
            fn encode(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, KeyError> {
                encoding.encode_bytes(self)
            }
            #[inline(always)]
            fn depends_on_tables(&self) -> bool {
                !self.is_ascii()
            }
            #[inline(always)]
            fn answer<T>(result: Result<T, KeyError>) -> Result<T, KeyError> {
                result
            }
            fn into_result<T>(answer: Result<T, KeyError>) -> Result<T, KeyError> {
                answer
            }
        }
    )*};
}

text_key!(str, String, Box<str>, Cow<'_, str>);
byte_key!([] [u8], [] Vec<u8>, [] Box<[u8]>, ['a] Cow<'a, [u8]>, [const N: usize] [u8; N]);

impl sealed::Sealed for EncodedKey<'_> {}
impl Key for EncodedKey<'_> {
    type Error = Infallible;
    type Answer<T> = T;
    #[inline(always)]
    fn raw(&self) -> (&[u8], KeyForm) {
        (self.as_bytes(), KeyForm::Encoded)
    }
    #[inline(always)]
    fn encode(&self, _: KeyEncoding) -> Result<EncodedKey<'_>, Infallible> {
        Ok(EncodedKey::from_encoded(self.as_bytes()))
    }
    #[inline(always)]
    fn depends_on_tables(&self) -> bool {
        true
    }
    fn encode_checked(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, KeyError> {
        encoding.check_encoded(self.as_bytes())?;
        Ok(EncodedKey::from_encoded(self.as_bytes()))
    }
    #[inline(always)]
    fn answer<T>(result: Result<T, Infallible>) -> T {
        <str as Key>::answer(result)
    }
    fn into_result<T>(answer: T) -> Result<T, KeyError> {
        Ok(answer)
    }
}

impl<K: Key + ?Sized> sealed::Sealed for &K {}
impl<K: Key + ?Sized> Key for &K {
    type Error = K::Error;
    type Answer<T> = K::Answer<T>;
    #[inline(always)]
    fn raw(&self) -> (&[u8], KeyForm) {
        (**self).raw()
    }
    #[inline(always)]
    fn encode(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, K::Error> {
        (**self).encode(encoding)
    }
    #[inline(always)]
    fn depends_on_tables(&self) -> bool {
        (**self).depends_on_tables()
    }
    fn encode_checked(&self, encoding: KeyEncoding) -> Result<EncodedKey<'_>, KeyError> {
        (**self).encode_checked(encoding)
    }
    #[inline(always)]
    fn answer<T>(result: Result<T, K::Error>) -> K::Answer<T> {
        K::answer(result)
    }
    fn into_result<T>(answer: K::Answer<T>) -> Result<T, KeyError> {
        K::into_result(answer)
    }
}

/// The form a key comes in ([`Key::raw`]): text, bytes, or already encoded.
#[doc(hidden)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyForm {
    /// Text: valid UTF-8.
    Text,
    /// Bytes, which a text encoding must find to be UTF-8.
    Bytes,
    /// Already encoded: hashed as it is.
    Encoded,
}

impl From<Infallible> for KeyError {
    fn from(never: Infallible) -> Self {
        match never {}
    }
}

/// What a filter does with a key's bytes before it hashes them, by the key's form, the
/// filter's encoding and whether its Unicode tables are foreign ([`Take::of`]).
///
/// Each variant is the mask of the high bits that refuse the bytes, in the OR of the words
/// of the key with bit 0 set ([`Take::admits`]): none for [`Take::AsIs`], the high bit of
/// every byte for [`Take::IfAscii`], bit 0 for [`Take::Encode`]. The default kernel ORs the
/// words of its hash's loads, so its test is an OR, an AND and a branch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u64)]
pub(crate) enum Take {
    /// Hashed as they are.
    AsIs = 0,
    /// Hashed as they are when they are ASCII, encoded first otherwise.
    IfAscii = 0x8080_8080_8080_8080,
    /// Encoded first.
    Encode = 1,
}

impl Take {
    /// What a filter of `encoding`, with foreign Unicode tables or not, does with a key of
    /// `form`.
    ///
    /// Kept as they are: every text or byte key under `bytes`, and text under `utf-8`; ASCII
    /// text and bytes under `nfc` (ASCII is in NFC already) and ASCII bytes under `utf-8`
    /// (ASCII is valid UTF-8); already-encoded keys under every encoding. With foreign
    /// Unicode tables only keys found to be ASCII are, since the others are answered
    /// *maybe*; already-encoded keys are encoded (checked), to be answered *maybe*.
    #[inline(always)]
    pub(crate) fn of(form: KeyForm, encoding: KeyEncoding, foreign_tables: bool) -> Self {
        match (form, encoding) {
            (KeyForm::Encoded, _) if foreign_tables => Self::Encode,
            (KeyForm::Encoded, _) => Self::AsIs,
            (_, KeyEncoding::Bytes) | (KeyForm::Text, KeyEncoding::Utf8) if foreign_tables => {
                Self::IfAscii
            }
            (_, KeyEncoding::Bytes) | (KeyForm::Text, KeyEncoding::Utf8) => Self::AsIs,
            (_, KeyEncoding::Utf8 | KeyEncoding::Nfc) => Self::IfAscii,
            _ => Self::Encode,
        }
    }

    /// Whether bytes may be hashed as they are, given `high`, a word with a high bit set
    /// somewhere among bits 7, 15, .., 63 if and only if a byte of them is not ASCII (the OR
    /// of their little-endian words, say).
    #[inline(always)]
    pub(crate) fn admits(self, high: u64) -> bool {
        (high | 1) & self as u64 == 0
    }

    /// [`Take::admits`] for `bytes`, scanned only when it matters.
    #[inline(always)]
    pub(crate) fn admits_bytes(self, bytes: &[u8]) -> bool {
        match self {
            Self::AsIs => true,
            Self::IfAscii => encoding::is_ascii(bytes),
            Self::Encode => false,
        }
    }
}

/// [`Take`] for each key form, decided once for a filter (or a batch): [`Take::of`] is a
/// few branches on the encoding that a one-key call should not repeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Takes([Take; 3]);

impl Takes {
    /// Every form encoded first.
    pub(crate) const ENCODE: Self = Self([Take::Encode; 3]);

    /// The takes of a filter of `encoding`, with foreign Unicode tables or not.
    pub(crate) fn new(encoding: KeyEncoding, foreign_tables: bool) -> Self {
        Self(
            [KeyForm::Text, KeyForm::Bytes, KeyForm::Encoded]
                .map(|form| Take::of(form, encoding, foreign_tables)),
        )
    }

    /// The take of a key of `form`.
    #[inline(always)]
    pub(crate) fn of(self, form: KeyForm) -> Take {
        self.0[form as usize]
    }
}

/// The bytes a filter hashes for `key` when its encoding keeps them as they are
/// ([`Take::of`]), found without building the encoded key; `None` sends the key through
/// [`Key::encode`], which gives the same bytes wherever both apply
/// (`tests::as_is_bytes_are_the_encoded_bytes`). The ASCII test is the one a text key needs
/// anyway (`encode_str`), so a key that fails it costs nothing more on the general path than
/// before.
#[inline(always)]
pub(crate) fn as_is<K: Key + ?Sized>(
    key: &K,
    encoding: KeyEncoding,
    foreign_tables: bool,
) -> Option<&[u8]> {
    let (bytes, form) = key.raw();
    Take::of(form, encoding, foreign_tables)
        .admits_bytes(bytes)
        .then_some(bytes)
}

/// Runs `f` on the bytes a filter hashes for `key` and whether a filter with foreign Unicode
/// tables cannot answer for it exactly; the key's refusal otherwise. Keys the encoding keeps
/// as they are ([`as_is`]) take a few instructions; the others are encoded out of line.
#[inline(always)]
pub(crate) fn with_bytes<K: Key + ?Sized, T>(
    key: &K,
    encoding: KeyEncoding,
    foreign_tables: bool,
    f: impl FnOnce(&[u8], bool) -> T,
) -> Result<T, K::Error> {
    match as_is(key, encoding, foreign_tables) {
        Some(bytes) => Ok(f(bytes, false)),
        None => with_encoded(key, encoding, foreign_tables, f),
    }
}

/// [`with_bytes`] for a key that must be encoded.
#[inline(never)]
fn with_encoded<K: Key + ?Sized, T>(
    key: &K,
    encoding: KeyEncoding,
    foreign_tables: bool,
    f: impl FnOnce(&[u8], bool) -> T,
) -> Result<T, K::Error> {
    let (encoded, sensitive) = prepare(key, encoding, foreign_tables)?;
    Ok(f(encoded.as_bytes(), sensitive))
}

/// A key encoded for a filter, with whether a filter with foreign Unicode tables cannot
/// answer for it exactly (`foreign_tables` and the key depends on the tables).
#[inline(always)]
pub(crate) fn prepare<K: Key + ?Sized>(
    key: &K,
    encoding: KeyEncoding,
    foreign_tables: bool,
) -> Result<(EncodedKey<'_>, bool), K::Error> {
    let encoded = key.encode(encoding)?;
    Ok((encoded, foreign_tables && key.depends_on_tables()))
}

/// A filter's one-key probe as `contains` runs it: of a key's bytes when their [`Take`]
/// lets them be hashed as they are (`None` when they must be encoded first), and of encoded
/// bytes.
///
/// Implemented by small copyable views of a filter's bits, whose methods are inlined into
/// [`probe_as_is`] and so into the caller's loop. (A closure holding the inlined hash and probe
/// was left out of line by the compiler, a call and a frame for every key.)
pub(crate) trait Probe: Copy {
    /// Whether every bit of the key of bytes `bytes` is set, unless `take` says they must be
    /// encoded first.
    fn taken(self, bytes: &[u8], take: Take) -> Option<bool>;

    /// Whether every bit of the key of encoded bytes `encoded` is set.
    fn encoded(self, encoded: &[u8]) -> bool;
}

/// `contains` for `key` from `probe`, of its bytes as they are, when their [`Take`]
/// (`takes.of` its form) allows it; `None` when they must be encoded first
/// ([`probe_encoded`]).
///
/// The encoded path is the caller's to take, out of line with what it has at hand (`&self`,
/// or a probe made once before a loop): a cold path built here, capturing the probe, was
/// written to the stack for every key.
#[inline(always)]
pub(crate) fn probe_as_is<K: Key + ?Sized>(
    key: &K,
    takes: Takes,
    probe: impl Probe,
) -> Option<bool> {
    let (bytes, form) = key.raw();
    probe.taken(bytes, takes.of(form))
}

/// `contains` for a key whose bytes must be encoded first: `probe` of its encoded bytes, or
/// *maybe* for a key a filter with foreign Unicode tables cannot answer for exactly; the
/// key's refusal otherwise. Inlined into the callers' own out-of-line functions.
#[inline(always)]
pub(crate) fn probe_encoded<K: Key + ?Sized>(
    key: &K,
    (encoding, foreign_tables): (KeyEncoding, bool),
    probe: impl Probe,
) -> Result<bool, K::Error> {
    let (encoded, sensitive) = prepare(key, encoding, foreign_tables)?;
    Ok(sensitive || probe.encoded(encoded.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys in every form, ASCII or not, valid UTF-8 or not, of every length the ASCII test
    /// branches on.
    fn samples() -> Vec<Vec<u8>> {
        let mut keys: Vec<Vec<u8>> = vec![
            b"".to_vec(),
            b"a".to_vec(),
            "café".into(),
            "Cafe\u{301}".into(),
            " Key ".into(),
            b"\xff\xfe".to_vec(),
            "ﬁ".into(),
        ];
        for len in [7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 64, 200] {
            let ascii: Vec<u8> = (0..len).map(|i| b'a' + (i % 26) as u8).collect();
            for at in [0, len / 2, len - 1] {
                let mut high = ascii.clone();
                high[at] = 0xc3;
                keys.push(high.clone());
                if at + 1 < len {
                    high[at + 1] = 0xa9;
                    keys.push(high);
                }
            }
            keys.push(ascii);
        }
        keys
    }

    #[test]
    fn as_is_bytes_are_the_encoded_bytes() {
        let encodings = [
            KeyEncoding::Bytes,
            KeyEncoding::Utf8,
            KeyEncoding::Nfc,
            KeyEncoding::NfcTrimLowercase,
            KeyEncoding::Utf16Le,
        ];
        let mut taken = 0;
        for bytes in samples() {
            for encoding in encodings {
                for foreign in [false, true] {
                    let as_bytes = as_is(&bytes[..], encoding, foreign);
                    let general = prepare(&bytes[..], encoding, foreign);
                    if let Some(fast) = as_bytes {
                        taken += 1;
                        let (encoded, sensitive) = general.as_ref().expect("as-is keys encode");
                        assert_eq!(fast, encoded.as_bytes(), "{encoding:?} {bytes:?}");
                        assert!(!sensitive, "{encoding:?} {bytes:?}");
                    }
                    let encoded = EncodedKey::from_encoded(&bytes);
                    if let Some(fast) = as_is(&encoded, encoding, foreign) {
                        assert_eq!(fast, &bytes[..]);
                        assert!(!foreign, "encoded keys are maybe under foreign tables");
                    }
                    if let Ok(text) = std::str::from_utf8(&bytes) {
                        let general = prepare(text, encoding, foreign).expect("text is valid");
                        if let Some(fast) = as_is(text, encoding, foreign) {
                            assert_eq!(fast, general.0.as_bytes(), "{encoding:?} {text:?}");
                            assert!(!general.1);
                        }
                    }
                }
            }
        }
        assert!(taken > 100, "the fast path was taken {taken} times");
        // The common case takes it: ASCII text under NFC.
        assert_eq!(
            as_is("key-0001", KeyEncoding::Nfc, false),
            Some(&b"key-0001"[..])
        );
        assert_eq!(as_is("café", KeyEncoding::Nfc, false), None);
        assert_eq!(as_is(&b"\xff"[..], KeyEncoding::Utf8, false), None);
    }

    /// The takes a filter keeps are those `Take::of` decides, and the mask test the default
    /// kernel runs on the OR of a key's words agrees with the scan, for every key.
    #[test]
    fn takes_and_their_mask_test_agree_with_the_scan() {
        let forms = [KeyForm::Text, KeyForm::Bytes, KeyForm::Encoded];
        let mut kinds = [0usize; 3];
        for encoding in KeyEncoding::ALL {
            for foreign in [false, true] {
                let takes = Takes::new(encoding, foreign);
                for form in forms {
                    let take = takes.of(form);
                    assert_eq!(take, Take::of(form, encoding, foreign));
                    kinds[match take {
                        Take::AsIs => 0,
                        Take::IfAscii => 1,
                        Take::Encode => 2,
                    }] += 1;
                    for bytes in samples() {
                        // What the kernel ORs: whole words, the high bit of a byte where
                        // the byte was.
                        let high = bytes
                            .iter()
                            .enumerate()
                            .fold(0u64, |acc, (i, &b)| acc | (u64::from(b) << (8 * (i % 8))));
                        assert_eq!(
                            take.admits(high),
                            take.admits_bytes(&bytes),
                            "{encoding:?} {foreign} {form:?} {bytes:?}"
                        );
                        assert_eq!(
                            take.admits_bytes(&bytes),
                            take.admits(if bytes.is_ascii() { 0 } else { 0x80 })
                        );
                    }
                }
            }
        }
        assert!(kinds.iter().all(|&n| n > 0), "every take occurs: {kinds:?}");
    }
}
