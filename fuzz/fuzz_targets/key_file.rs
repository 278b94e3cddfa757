//! The CLI's key-file reader where it lives (`bloom_cli::keyfile`): the first byte picks the
//! format and the key limit, the rest is the file. Every key is within the limit, plain keys
//! hold no line feed and no NUL, line numbers grow, and the reader ends (an error or the end
//! of the input) without reading past a limit.

#![no_main]

use bloom_cli::keyfile::{KeyFileError, KeyReader, LineFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, input)) = data.split_first() else {
        return;
    };
    let format = if selector & 1 == 0 {
        LineFormat::Plain
    } else {
        LineFormat::Json
    };
    let limit = [0usize, 1, 3, 16, 64 << 10][usize::from(selector >> 1) % 5];
    let mut reader = KeyReader::new(input, format, limit);
    let mut last_line = 0u64;
    let mut keys = 0usize;
    loop {
        match reader.next_key() {
            Ok(Some((key, line))) => {
                assert!(key.len() <= limit, "{} > {limit}", key.len());
                assert!(line > last_line);
                last_line = line;
                if format == LineFormat::Plain {
                    assert!(!key.is_empty());
                    assert!(!key.contains(&b'\n') && !key.contains(&0));
                }
                keys += 1;
                assert!(keys <= input.len());
            }
            Ok(None) => break,
            Err(KeyFileError::Io(e)) => panic!("a slice cannot fail to read: {e}"),
            Err(e) => {
                assert!(e.to_string().starts_with("line "), "{e}");
                break;
            }
        }
    }
    assert_eq!(reader.next_key().unwrap(), None);
});
