//! The library part of the `bloom` command: what other programs (and the fuzzers in `fuzz/`)
//! use of it where it lives.
//!
//! [`keyfile`] reads key files, one key per line or one JSON value per line, streaming with
//! bounded memory:
//!
//! ```
//! use bloom_cli::keyfile::{KeyReader, LineFormat};
//!
//! let input = "\u{feff}alice\r\n\nbob\n".as_bytes();
//! let mut reader = KeyReader::new(input, LineFormat::Plain, 1024);
//! assert_eq!(reader.next_key()?, Some((&b"alice"[..], 1)));
//! assert_eq!(reader.next_key()?, Some((&b"bob"[..], 3)));
//! assert_eq!(reader.next_key()?, None);
//! # Ok::<(), bloom_cli::keyfile::KeyFileError>(())
//! ```

pub mod keyfile;
