//! Reading keys from a file or standard input, streaming, with bounded memory: the
//! library's [`bloom_cli::keyfile`] reader (its grammar is documented there), with errors
//! that name the source.

use std::cell::Cell;
use std::fs::File;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;
use std::rc::Rc;

pub(crate) use bloom_cli::keyfile::LineFormat;
use bloom_cli::keyfile::{KeyFileError, KeyReader};

use crate::error::{CmdResult, Failure};
use crate::progress::{self, Counted};

/// The default longest key: large enough for any real record id, small enough that an
/// endless line is refused quickly.
pub(crate) const DEFAULT_MAX_KEY_BYTES: usize = 64 << 10;

/// Bytes read from a key source at a time.
const READ_BYTES: usize = 1 << 18;

/// An opened key source: the buffered reader (only its reads go through a `dyn`: lines are
/// split in its buffer), the count of bytes read through it, and the source's size when known.
type Opened = (
    BufReader<Counted<Box<dyn Read>>>,
    Rc<Cell<u64>>,
    Option<u64>,
);

/// Where keys come from.
#[derive(Clone, Debug)]
pub(crate) struct KeySource {
    /// A file, or `-` for standard input.
    pub(crate) path: PathBuf,
    pub(crate) format: LineFormat,
    pub(crate) max_key_bytes: usize,
}

impl KeySource {
    /// How errors name the source.
    pub(crate) fn name(&self) -> String {
        crate::files::shown(&self.path)
    }

    /// The key source as a buffered reader, with the count of bytes read from it and its
    /// size when known (a regular file).
    fn open(&self) -> CmdResult<Opened> {
        if crate::files::is_stdio(&self.path) {
            let (counted, read) = Counted::new(Box::new(io::stdin()) as Box<dyn Read>);
            return Ok((BufReader::with_capacity(READ_BYTES, counted), read, None));
        }
        let file = File::open(&self.path).map_err(|e| {
            Failure::environment(format!("cannot open key file {}: {e}", self.path.display()))
        })?;
        let size = file
            .metadata()
            .ok()
            .filter(std::fs::Metadata::is_file)
            .map(|m| m.len());
        let (counted, read) = Counted::new(Box::new(file) as Box<dyn Read>);
        Ok((BufReader::with_capacity(READ_BYTES, counted), read, size))
    }

    /// Calls `each` with every key (as bytes) and its 1-based line number, in order, with
    /// progress on a terminal. Stops at the first bad line with an error that names it.
    pub(crate) fn for_each(&self, mut each: impl FnMut(&[u8], u64) -> CmdResult) -> CmdResult<u64> {
        let source = self.name();
        let (input, read, size) = self.open()?;
        let bar = progress::keys_bar(size.map_or(progress::Total::Unknown, progress::Total::Bytes));
        let mut reader = KeyReader::new(input, self.format, self.max_key_bytes);
        let mut keys = 0u64;
        let walked = reader.for_each_key(|key, line| {
            each(key, line)?;
            keys += 1;
            if keys.is_multiple_of(4096) {
                progress::advance(&bar, size.is_some(), keys, read.get());
            }
            Ok(())
        });
        let outcome = match walked {
            Ok(Ok(())) => Ok(keys),
            Ok(Err(failed)) => Err(failed),
            Err(KeyFileError::Io(e)) => {
                Err(Failure::environment(format!("cannot read {source}: {e}")))
            }
            Err(e) => Err(Failure::input(format!("{source} {e}"))),
        };
        bar.finish_and_clear();
        outcome
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys_of(input: &[u8], format: LineFormat, max: usize) -> Result<Vec<Vec<u8>>, String> {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("keys");
        std::fs::write(&path, input).unwrap();
        let source = KeySource {
            path,
            format,
            max_key_bytes: max,
        };
        let mut keys = Vec::new();
        source
            .for_each(|k, _| {
                keys.push(k.to_vec());
                Ok(())
            })
            .map_err(|e| format!("{e:?}"))?;
        Ok(keys)
    }

    fn plain(input: &[u8]) -> Vec<Vec<u8>> {
        keys_of(input, LineFormat::Plain, 100).unwrap()
    }

    #[test]
    fn the_grammar() {
        let ab = vec![b"a".to_vec(), b"b".to_vec()];
        for input in [
            &b"a\nb\n"[..],
            b"a\nb",
            b"a\r\nb\r\n",
            b"a\r\nb\r",
            b"\xEF\xBB\xBFa\nb",
            b"\n\na\n\n\nb\n\n",
            b"a\r\n\r\nb",
        ] {
            assert_eq!(plain(input), ab, "{input:?}");
        }
        assert_eq!(plain(b"a\rb\n"), vec![b"a\rb".to_vec()]);
        assert_eq!(plain(b" a \n"), vec![b" a ".to_vec()]);
        assert!(plain(b"").is_empty());
        assert!(plain(b"\xEF\xBB\xBF").is_empty());
        assert!(
            keys_of(b"a\nb\0c\n", LineFormat::Plain, 100)
                .unwrap_err()
                .contains("line 2")
        );
        assert_eq!(
            keys_of(b"\"\"\n\"a\\nb\\u0000\"\r\n", LineFormat::Json, 100).unwrap(),
            vec![b"".to_vec(), b"a\nb\0".to_vec()]
        );
        assert_eq!(
            keys_of(b"{\"key_hex\": \"fffe00\"}\n", LineFormat::Json, 100).unwrap(),
            vec![vec![0xff, 0xfe, 0]]
        );
        assert!(keys_of(b"{\"key_hex\": \"f\"}\n", LineFormat::Json, 100).is_err());
        assert!(keys_of(b"{\"other\": 1}\n", LineFormat::Json, 100).is_err());
        // Huge limits do not overflow.
        assert!(
            !keys_of(b"a\n", LineFormat::Json, usize::MAX)
                .unwrap_err()
                .is_empty()
        );
        assert_eq!(
            keys_of(b"a\n", LineFormat::Plain, usize::MAX).unwrap(),
            vec![b"a".to_vec()]
        );
    }

    #[test]
    fn long_keys_are_refused_by_line_without_reading_them_whole() {
        let mut input = vec![b'x'; 10];
        input.push(b'\n');
        assert_eq!(keys_of(&input, LineFormat::Plain, 10).unwrap().len(), 1);
        let mut crlf = vec![b'x'; 10];
        crlf.extend_from_slice(b"\r\n");
        assert_eq!(
            keys_of(&crlf, LineFormat::Plain, 10).unwrap(),
            vec![vec![b'x'; 10]]
        );
        let mut long = b"ok\n".to_vec();
        long.extend(vec![b'y'; 11]);
        let err = keys_of(&long, LineFormat::Plain, 10).unwrap_err();
        assert!(
            err.contains("line 2") && err.contains("longer than 10"),
            "{err}"
        );
        long.push(b'\n');
        assert!(keys_of(&long, LineFormat::Plain, 10).is_err());
        let json = format!("\"{}\"\n", "z".repeat(11));
        assert!(keys_of(json.as_bytes(), LineFormat::Json, 10).is_err());
    }
}
