//! Damaged and hostile input: every byte string ends in a filter or a typed error, never a
//! panic, a hang or an allocation the input did not pay for.

use std::path::{Path, PathBuf};

use bloom_core::KeyEncoding;
use bloom_parquet::{
    FilterError, Limits, MAX_BITSET_BYTES, ParquetFile, ParquetFileError, SbbfError, decode,
    parse_header,
};
use proptest::prelude::*;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The header of a 1024-byte split-block XXH64 uncompressed filter.
const GOOD: [u8; 16] = [
    0x15, 0x80, 0x10, 0x1c, 0x1c, 0x00, 0x00, 0x1c, 0x1c, 0x00, 0x00, 0x1c, 0x1c, 0x00, 0x00, 0x00,
];

#[test]
fn headers_of_other_strategies_and_sizes_are_refused_by_name() {
    assert_eq!(
        parse_header(&GOOD, MAX_BITSET_BYTES).unwrap().num_bytes,
        1024
    );
    // Another member of each union: algorithm 2, hash 2 (field delta 2), compression 2.
    let mut other = GOOD;
    other[4] = 0x2c;
    assert_eq!(
        parse_header(&other, MAX_BITSET_BYTES),
        Err(SbbfError::UnsupportedAlgorithm(2))
    );
    let mut other = GOOD;
    other[8] = 0x2c;
    assert_eq!(
        parse_header(&other, MAX_BITSET_BYTES),
        Err(SbbfError::UnsupportedHash(2))
    );
    let mut other = GOOD;
    other[12] = 0x2c;
    assert_eq!(
        parse_header(&other, MAX_BITSET_BYTES),
        Err(SbbfError::UnsupportedCompression(2))
    );
    // 1000 bytes: not whole blocks; -32; 2^31 - 32, over the limit.
    let sized = |zigzag: &[u8]| {
        let mut h = vec![0x15];
        h.extend_from_slice(zigzag);
        h.extend_from_slice(&GOOD[3..]);
        h
    };
    assert_eq!(
        parse_header(&sized(&[0xd0, 0x0f]), MAX_BITSET_BYTES),
        Err(SbbfError::InvalidSize(1000))
    );
    assert_eq!(
        parse_header(&sized(&[0x3f]), MAX_BITSET_BYTES),
        Err(SbbfError::InvalidSize(-32))
    );
    assert_eq!(
        parse_header(&sized(&[0xc0, 0xff, 0xff, 0xff, 0x0f]), MAX_BITSET_BYTES),
        Err(SbbfError::TooLarge {
            found: (1 << 31) - 32,
            limit: MAX_BITSET_BYTES
        })
    );
    // A field missing; a field of the wrong type; a varint that never ends.
    assert_eq!(
        parse_header(&[0x15, 0x80, 0x10, 0x00], MAX_BITSET_BYTES),
        Err(SbbfError::MissingField("algorithm"))
    );
    assert!(matches!(
        parse_header(&[0x16, 0x02, 0x00], MAX_BITSET_BYTES),
        Err(SbbfError::MalformedHeader(_))
    ));
    assert_eq!(
        parse_header(&[0x15, 0xff, 0xff], MAX_BITSET_BYTES),
        Err(SbbfError::TruncatedHeader)
    );
    assert!(matches!(
        parse_header(&[0x15; 64].map(|_| 0xff), MAX_BITSET_BYTES),
        Err(SbbfError::MalformedHeader(_))
    ));
    // Unknown fields (a later parquet-format's) are skipped.
    let mut extended = GOOD[..15].to_vec();
    extended.extend_from_slice(&[0x18, 0x03, b'a', b'b', b'c', 0x00]);
    assert_eq!(
        parse_header(&extended, MAX_BITSET_BYTES).unwrap().num_bytes,
        1024
    );
    // A blob with fewer bitset bytes than announced.
    let mut short = GOOD.to_vec();
    short.extend_from_slice(&[0; 1000]);
    assert!(matches!(
        decode(&short, KeyEncoding::Bytes, MAX_BITSET_BYTES),
        Err(FilterError::Sbbf(SbbfError::BitsetLength {
            expected: 1024,
            found: 1000
        }))
    ));
}

#[test]
fn deeply_nested_and_huge_containers_are_refused_without_allocating() {
    // Structs nested a thousand deep inside an unknown field.
    let mut nested = vec![0x5c];
    nested.extend(std::iter::repeat_n(0x1c, 1000));
    assert!(matches!(
        parse_header(&nested, MAX_BITSET_BYTES),
        Err(SbbfError::MalformedHeader(_))
    ));
    // A list claiming 2^60 elements in a few bytes.
    let list = [
        0x59, 0xf5, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x10,
    ];
    assert_eq!(
        parse_header(&list, MAX_BITSET_BYTES),
        Err(SbbfError::TruncatedHeader)
    );
    // A map of 2^63 - 1 boolean pairs, which take a byte each: refused at once, not looped.
    let map = [
        0x5b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f, 0x11,
    ];
    assert_eq!(
        parse_header(&map, MAX_BITSET_BYTES),
        Err(SbbfError::TruncatedHeader)
    );
    // A small map of booleans (field 5 of a later header) is skipped, a byte per boolean.
    let mut small = GOOD[..15].to_vec();
    small.extend_from_slice(&[0x5b, 0x02, 0x11, 0x01, 0x00, 0x01, 0x01, 0x00]);
    assert_eq!(
        parse_header(&small, MAX_BITSET_BYTES).unwrap().num_bytes,
        1024
    );
    // A binary claiming 2^62 bytes.
    let binary = [0x58, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x40];
    assert_eq!(
        parse_header(&binary, MAX_BITSET_BYTES),
        Err(SbbfError::TruncatedHeader)
    );
}

#[test]
fn files_that_are_not_plain_parquet_are_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    assert!(matches!(
        ParquetFile::open(&empty, Limits::default()),
        Err(ParquetFileError::NotParquet { .. })
    ));
    let text = dir.path().join("text");
    std::fs::write(&text, b"this is not a parquet file at all").unwrap();
    assert!(matches!(
        ParquetFile::open(&text, Limits::default()),
        Err(ParquetFileError::NotParquet { .. })
    ));
    // A footer length beyond the file.
    let mut lying = b"PAR1".to_vec();
    lying.extend_from_slice(&[0; 8]);
    lying.extend_from_slice(&u32::MAX.to_le_bytes());
    lying.extend_from_slice(b"PAR1");
    let path = dir.path().join("lying");
    std::fs::write(&path, &lying).unwrap();
    assert!(matches!(
        ParquetFile::open(&path, Limits::default()),
        Err(ParquetFileError::FooterTooLarge {
            found: 0xffff_ffff,
            limit: 8,
            ..
        })
    ));
    // A directory, and (on Unix) a FIFO nobody writes to: refused without blocking.
    assert!(matches!(
        ParquetFile::open(dir.path(), Limits::default()),
        Err(ParquetFileError::Open(_))
    ));
    #[cfg(unix)]
    {
        let fifo = dir.path().join("fifo");
        assert!(
            std::process::Command::new("mkfifo")
                .arg(&fifo)
                .status()
                .unwrap()
                .success()
        );
        assert!(matches!(
            ParquetFile::open(&fifo, Limits::default()),
            Err(ParquetFileError::Open(_))
        ));
    }
    // A footer over the caller's limit.
    let real = data("parquet-testing/data_index_bloom_encoding_with_length.parquet");
    let tight = Limits {
        max_footer_bytes: 16,
        ..Limits::default()
    };
    assert!(matches!(
        ParquetFile::open(&real, tight),
        Err(ParquetFileError::FooterTooLarge { limit: 16, .. })
    ));
    // A filter over the caller's limit.
    let small = Limits {
        max_filter_bytes: 1024,
        ..Limits::default()
    };
    let mut file = ParquetFile::open(&real, small).unwrap();
    let column = file.column("String").unwrap();
    assert!(matches!(
        file.filter(0, &column),
        Err(ParquetFileError::Filter {
            cause: SbbfError::TooLarge {
                found: 2048,
                limit: 1024
            },
            ..
        })
    ));
    // Filters read over and over (row groups may all name the same bytes) stop at the
    // file's budget.
    let budget = Limits {
        max_total_filter_bytes: 5000,
        ..Limits::default()
    };
    let mut file = ParquetFile::open(&real, budget).unwrap();
    assert!(matches!(file.filter(0, &column), Ok(Some(_))));
    assert!(matches!(file.filter(0, &column), Ok(Some(_))));
    assert_eq!(file.filter_bytes_read(), 4096);
    assert!(matches!(
        file.filter(0, &column),
        Err(ParquetFileError::FilterBudget { limit: 5000, .. })
    ));
}

/// A Parquet file of one INT32 column `x` inside `depth` nested groups, no row groups: the
/// footer is Thrift compact protocol written by hand.
fn nested_file(depth: usize) -> Vec<u8> {
    fn varint(mut v: u64, out: &mut Vec<u8>) {
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return;
            }
            out.push(b | 0x80);
        }
    }
    let group = |name: &[u8], repeated: bool, out: &mut Vec<u8>| {
        if repeated {
            out.extend_from_slice(&[0x35, 0x00]); // 3: repetition_type REQUIRED
            out.push(0x18); // 4: name
        } else {
            out.push(0x48); // 4: name
        }
        out.push(name.len() as u8);
        out.extend_from_slice(name);
        out.extend_from_slice(&[0x15, 0x02, 0x00]); // 5: num_children 1; stop
    };
    let mut schema = Vec::new();
    group(b"root", false, &mut schema);
    for _ in 0..depth {
        group(b"g", true, &mut schema);
    }
    // The leaf: 1: type INT32, 3: REQUIRED, 4: name "x".
    schema.extend_from_slice(&[0x15, 0x02, 0x25, 0x00, 0x18, 0x01, b'x', 0x00]);
    let mut footer = vec![0x15, 0x02, 0x19, 0xfc]; // 1: version 1; 2: list of structs
    varint(depth as u64 + 2, &mut footer);
    footer.extend_from_slice(&schema);
    footer.extend_from_slice(&[0x16, 0x00, 0x19, 0x0c, 0x00]); // 3: num_rows 0; 4: []; stop
    let mut file = b"PAR1".to_vec();
    file.extend_from_slice(&footer);
    file.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    file.extend_from_slice(b"PAR1");
    file
}

#[test]
fn a_footer_nested_too_deeply_for_the_decoder_is_refused_before_it_runs() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("nested.parquet");
    // Nested 10 deep: decoded.
    std::fs::write(&path, nested_file(10)).unwrap();
    let file = ParquetFile::open(&path, Limits::default()).unwrap();
    assert_eq!(file.column_paths().len(), 1);
    assert_eq!(file.row_groups(), 0);
    // 100,000 deep (1.3 MB): the parquet crate's recursive decoder would overflow the stack
    // and abort the process; it is refused first.
    std::fs::write(&path, nested_file(100_000)).unwrap();
    match ParquetFile::open(&path, Limits::default()) {
        Err(ParquetFileError::Metadata { detail, .. }) => {
            assert!(detail.contains("more than 128 deep"), "{detail}");
        }
        other => panic!("{other:?}"),
    }
    // Structs nested deeper than any footer's, in a field the decoder would skip.
    let mut deep = b"PAR1".to_vec();
    let mut footer = vec![0x15, 0x02, 0xfc];
    footer.extend(std::iter::repeat_n(0x1c, 10_000));
    deep.extend_from_slice(&footer);
    deep.extend_from_slice(&(footer.len() as u32).to_le_bytes());
    deep.extend_from_slice(b"PAR1");
    std::fs::write(&path, &deep).unwrap();
    assert!(matches!(
        ParquetFile::open(&path, Limits::default()),
        Err(ParquetFileError::Metadata { .. })
    ));
}

/// Opens a damaged copy of a real file and reads every filter: any outcome but a panic.
fn read_all(bytes: &[u8]) -> Result<usize, ParquetFileError> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("damaged.parquet");
    std::fs::write(&path, bytes).unwrap();
    let mut file = ParquetFile::open(&path, Limits::default())?;
    let mut read = 0;
    for name in file.column_paths() {
        let column = file.column(&name)?;
        for rg in 0..file.row_groups() {
            read += usize::from(file.filter(rg, &column)?.is_some());
        }
    }
    Ok(read)
}

#[test]
fn a_filter_whose_place_or_size_lies_is_refused() {
    let real = std::fs::read(data(
        "parquet-testing/data_index_bloom_encoding_with_length.parquet",
    ))
    .unwrap();
    assert_eq!(read_all(&real).unwrap(), 1);
    // The filter's header is at offset 253: damage its size so that it runs past the file.
    assert_eq!(&real[253..256], &[0x15, 0x80, 0x20]);
    let mut past = real.clone();
    past[255] = 0x7f; // 2048 -> 1040384 bytes
    assert!(matches!(
        read_all(&past),
        Err(ParquetFileError::Filter {
            cause: SbbfError::BitsetLength { .. },
            ..
        })
    ));
    // The footer's bloom_filter_length (2064, zigzag varint a0 20 at 2456) made 2065, or
    // -2065: refused, naming both lengths.
    assert_eq!(&real[2455..2458], &[0x15, 0xa0, 0x20]);
    for (byte, footer) in [(0xa2, 2065), (0xa1, -2065)] {
        let mut lying = real.clone();
        lying[2456] = byte;
        match read_all(&lying) {
            Err(ParquetFileError::Filter {
                cause:
                    SbbfError::FooterLength {
                        footer: f,
                        filter: 2064,
                    },
                ..
            }) => assert_eq!(f, footer),
            other => panic!("{other:?}"),
        }
    }
    // The deprecated binary header at the filter's place: refused by name.
    let mut deprecated = real.clone();
    deprecated[253..265].copy_from_slice(&[0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]);
    assert!(matches!(
        read_all(&deprecated),
        Err(ParquetFileError::Filter {
            cause: SbbfError::Deprecated,
            ..
        })
    ));
    // Another hash strategy in a file.
    let mut other = real.clone();
    // Field 3 (hash) at 260, its member at 261: member 2 instead of XXH64.
    assert_eq!(&other[260..262], &[0x1c, 0x1c]);
    other[261] = 0x2c;
    assert!(matches!(
        read_all(&other),
        Err(ParquetFileError::Filter {
            cause: SbbfError::UnsupportedHash(2),
            ..
        })
    ));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn any_header_bytes_end_in_a_header_or_an_error(bytes in prop::collection::vec(any::<u8>(), 0..64)) {
        if let Ok(header) = parse_header(&bytes, MAX_BITSET_BYTES) {
            prop_assert!(header.num_bytes > 0 && header.num_bytes % 32 == 0);
            prop_assert!(header.header_len <= bytes.len());
        }
        let _ = decode(&bytes, KeyEncoding::Bytes, MAX_BITSET_BYTES);
    }

    #[test]
    fn damaged_files_end_in_filters_or_errors(
        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
    ) {
        let mut bytes = std::fs::read(data("parquet-testing/data_index_bloom_encoding_with_length.parquet")).unwrap();
        for (at, value) in flips {
            let i = at.index(bytes.len());
            bytes[i] = value;
        }
        if truncate {
            bytes.truncate(cut.index(bytes.len()));
        }
        let _ = read_all(&bytes);
    }
}
