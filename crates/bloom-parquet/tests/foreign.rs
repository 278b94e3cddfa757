//! Filters written by other implementations answer here bit for bit as in their own reader.
//!
//! - parquet-mr's files from apache/parquet-testing (`tests/data/parquet-testing`), whose
//!   values the suite's README gives;
//! - a file written by arrow-rs (the `parquet` crate's writer) with a column of every type
//!   that takes a filter, over three row groups, committed as `tests/data/arrow-rs-types.parquet`
//!   and written afresh by every run.
//!
//! Each filter's bitset is compared byte for byte with the `parquet` crate's own reader
//! (`Sbbf::write_bitset`), and every probe's answer with its `Sbbf::check`; the answers of
//! the committed files are also frozen in insta snapshots.

use std::fmt::Write as _;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bloom_core::{BloomFilter, Filter, KeyEncoding, Layout, PositionRule};
use bloom_parquet::{ColumnKind, Limits, ParquetFile, ParquetFileError, SbbfError};
use parquet::bloom_filter::Sbbf;
use parquet::data_type::{ByteArray, FixedLenByteArray};
use parquet::file::properties::{ReaderProperties, WriterProperties};
use parquet::file::reader::{FileReader, SerializedFileReader};
use parquet::file::serialized_reader::ReadOptionsBuilder;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::parser::parse_message_type;

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The `parquet` crate's own filters of a file, by row group and column.
fn their_filters(path: &Path) -> Vec<Vec<Option<Sbbf>>> {
    let options = ReadOptionsBuilder::new()
        .with_reader_properties(
            ReaderProperties::builder()
                .set_read_bloom_filter(true)
                .build(),
        )
        .build();
    let reader =
        SerializedFileReader::new_with_options(File::open(path).unwrap(), options).unwrap();
    (0..reader.num_row_groups())
        .map(|rg| {
            let group = reader.get_row_group(rg).unwrap();
            (0..group.num_columns())
                .map(|c| group.get_column_bloom_filter(c).cloned())
                .collect()
        })
        .collect()
}

fn bitset(sbbf: &Sbbf) -> Vec<u8> {
    let mut out = Vec::new();
    sbbf.write_bitset(&mut out).unwrap();
    out
}

/// Checks every filter of `column` in `path` against the parquet crate's, bit for bit and
/// answer for answer over `probes` (plain-encoded values), and returns the answers: one line
/// per probe with the row groups that may hold it.
fn compare(
    path: &Path,
    column: &str,
    probes: &[Vec<u8>],
    shown: impl Fn(&[u8]) -> String,
) -> String {
    let mut ours = ParquetFile::open(path, Limits::default()).unwrap();
    let col = ours.column(column).unwrap();
    let filters = ours.filters(&col).unwrap();
    let theirs = their_filters(path);
    let mut answers = String::new();
    for probe in probes {
        let mut groups = Vec::new();
        for (rg, filter) in filters.iter().enumerate() {
            let theirs = theirs[rg][col.index].as_ref();
            assert_eq!(filter.is_some(), theirs.is_some(), "{column} rg {rg}");
            let (Some(filter), Some(theirs)) = (filter, theirs) else {
                groups.push(format!("{rg} (no filter)"));
                continue;
            };
            let config = filter.config();
            assert_eq!(
                (config.layout(), config.rule(), config.hashes()),
                (Layout::SplitBlock256, PositionRule::Xxh64, 8)
            );
            assert_eq!(config.encoding(), col.kind.key_encoding());
            assert_eq!(
                filter.to_bytes(),
                bitset(theirs),
                "{column} rg {rg}: the bitset"
            );
            let encoded = config.encoding().encode_bytes(probe).unwrap();
            let maybe = filter.contains(&encoded);
            assert_eq!(
                maybe,
                theirs.check(&probe[..]),
                "{column} rg {rg}: {}",
                shown(probe)
            );
            if maybe {
                groups.push(rg.to_string());
            }
        }
        writeln!(
            answers,
            "{}: {}",
            shown(probe),
            if groups.is_empty() {
                "absent".into()
            } else {
                groups.join(", ")
            }
        )
        .unwrap();
    }
    answers
}

const PARQUET_MR_VALUES: [&str; 14] = [
    "Hello",
    "This is",
    "a",
    "test",
    "How",
    "are you",
    "doing ",
    "today",
    "the quick",
    "brown fox",
    "jumps",
    "over",
    "the lazy",
    "dog",
];

fn text_probes() -> Vec<Vec<u8>> {
    PARQUET_MR_VALUES
        .iter()
        .map(|v| v.as_bytes().to_vec())
        .chain(["hello", "doing", "Dog", "", "the", "absent"].map(|v| v.as_bytes().to_vec()))
        .collect()
}

fn as_text(bytes: &[u8]) -> String {
    format!("{:?}", String::from_utf8_lossy(bytes))
}

#[test]
fn parquet_mr_files_answer_as_parquet_does() {
    for name in [
        "data_index_bloom_encoding_stats.parquet",
        "data_index_bloom_encoding_with_length.parquet",
    ] {
        let path = data(&format!("parquet-testing/{name}"));
        let answers = compare(&path, "String", &text_probes(), as_text);
        // Every value written is in the filter.
        for value in PARQUET_MR_VALUES {
            assert!(
                answers.contains(&format!("{value:?}: 0\n")),
                "{value:?} in {name}:\n{answers}"
            );
        }
        insta::assert_snapshot!(name, answers);
        let file = ParquetFile::open(&path, Limits::default()).unwrap();
        let col = file.column("String").unwrap();
        assert_eq!(col.kind, ColumnKind::ByteArray { utf8: true });
        assert_eq!(col.kind.key_encoding(), KeyEncoding::Utf8);
    }
}

#[test]
fn the_filter_blob_of_parquet_testing_answers_its_documented_values() {
    let blob = std::fs::read(data("parquet-testing/bloom_filter.xxhash.bin")).unwrap();
    let filter =
        bloom_parquet::decode(&blob, KeyEncoding::Utf8, bloom_parquet::MAX_BITSET_BYTES).unwrap();
    let theirs = Sbbf::from_bytes(&blob).unwrap();
    assert_eq!(filter.to_bytes(), bitset(&theirs));
    for value in ["hello", "parquet", "bloom", "filter"] {
        assert!(filter.contains(value), "{value}");
    }
    for probe in (0..2000).map(|i| format!("probe-{i}")) {
        assert_eq!(
            filter.contains(probe.as_str()),
            theirs.check(probe.as_str()),
            "{probe}"
        );
    }
    // And back: the blob this crate writes for the filter is the one parquet-mr wrote.
    assert_eq!(bloom_parquet::encode(&filter).unwrap(), blob);

    let deprecated = std::fs::read(data("parquet-testing/bloom_filter.bin")).unwrap();
    assert!(matches!(
        bloom_parquet::decode(
            &deprecated,
            KeyEncoding::Utf8,
            bloom_parquet::MAX_BITSET_BYTES
        ),
        Err(bloom_parquet::FilterError::Sbbf(SbbfError::Deprecated))
    ));
}

#[test]
fn an_encrypted_footer_is_refused_by_name() {
    let path = data("parquet-testing/encrypt_columns_and_footer_bloom_filter.parquet.encrypted");
    assert!(matches!(
        ParquetFile::open(&path, Limits::default()),
        Err(ParquetFileError::Encrypted { .. })
    ));
}

/// The schema of the arrow-rs file: every physical type that takes a filter, and a column
/// without one.
const SCHEMA: &str = "message types {
    required binary name (UTF8);
    required binary raw;
    required int32 small;
    required int64 large;
    required float ratio;
    required double amount;
    required fixed_len_byte_array(16) uuid;
    required int32 unfiltered;
}";

/// Values of row `i` of the arrow-rs file.
fn row(i: u32) -> (String, Vec<u8>, i32, i64, f32, f64, [u8; 16]) {
    let mut uuid = [0u8; 16];
    uuid[..4].copy_from_slice(&i.to_le_bytes());
    uuid[15] = 0xab;
    (
        format!("name-{i}"),
        vec![(i % 251) as u8, (i / 251) as u8, 0xff],
        i as i32 * 7 - 5000,
        i64::from(i) * 1_000_000_007 - (1 << 40),
        i as f32 * 0.25 - 100.0,
        f64::from(i) * 1.5e-3,
        uuid,
    )
}

/// Writes three row groups of 700, 700 and 300 rows with arrow-rs, every column but the
/// last with a filter planned for 500 values at 5% (so the later groups' filters are fuller
/// and false positives occur).
fn write_arrow_rs_file(path: &Path) {
    let schema = Arc::new(parse_message_type(SCHEMA).unwrap());
    let mut props =
        WriterProperties::builder().set_created_by("bloom test helper (parquet crate)".into());
    for name in ["name", "raw", "small", "large", "ratio", "amount", "uuid"] {
        let path = parquet::schema::types::ColumnPath::from(name);
        props = props
            .set_column_bloom_filter_fpp(path.clone(), 0.05)
            .set_column_bloom_filter_max_ndv(path, 500);
    }
    let props = props.build();
    let mut writer =
        SerializedFileWriter::new(File::create(path).unwrap(), schema, Arc::new(props)).unwrap();
    for range in [0..700u32, 700..1400, 1400..1700] {
        let rows: Vec<_> = range.clone().map(row).collect();
        let mut group = writer.next_row_group().unwrap();
        let mut index = 0;
        while let Some(mut column) = group.next_column().unwrap() {
            use parquet::column::writer::ColumnWriter as W;
            match (index, column.untyped()) {
                (0, W::ByteArrayColumnWriter(w)) => {
                    let v: Vec<ByteArray> =
                        rows.iter().map(|r| ByteArray::from(r.0.as_str())).collect();
                    w.write_batch(&v, None, None).unwrap();
                }
                (1, W::ByteArrayColumnWriter(w)) => {
                    let v: Vec<ByteArray> =
                        rows.iter().map(|r| ByteArray::from(r.1.clone())).collect();
                    w.write_batch(&v, None, None).unwrap();
                }
                (2, W::Int32ColumnWriter(w)) => {
                    w.write_batch(&rows.iter().map(|r| r.2).collect::<Vec<_>>(), None, None)
                        .unwrap();
                }
                (3, W::Int64ColumnWriter(w)) => {
                    w.write_batch(&rows.iter().map(|r| r.3).collect::<Vec<_>>(), None, None)
                        .unwrap();
                }
                (4, W::FloatColumnWriter(w)) => {
                    w.write_batch(&rows.iter().map(|r| r.4).collect::<Vec<_>>(), None, None)
                        .unwrap();
                }
                (5, W::DoubleColumnWriter(w)) => {
                    w.write_batch(&rows.iter().map(|r| r.5).collect::<Vec<_>>(), None, None)
                        .unwrap();
                }
                (6, W::FixedLenByteArrayColumnWriter(w)) => {
                    let v: Vec<FixedLenByteArray> = rows
                        .iter()
                        .map(|r| FixedLenByteArray::from(r.6.to_vec()))
                        .collect();
                    w.write_batch(&v, None, None).unwrap();
                }
                (7, W::Int32ColumnWriter(w)) => {
                    w.write_batch(&rows.iter().map(|r| r.2).collect::<Vec<_>>(), None, None)
                        .unwrap();
                }
                (i, _) => panic!("column {i} has an unexpected type"),
            }
            column.close().unwrap();
            index += 1;
        }
        group.close().unwrap();
    }
    writer.close().unwrap();
}

/// The probes of a column: the values of rows 0..1700 step 97 (in the file), and of rows
/// 1700..2300 step 3 (not in it), as the bytes Parquet hashes, through `ColumnKind`'s text
/// form where it has one.
fn typed_probes(kind: ColumnKind, column: usize) -> Vec<Vec<u8>> {
    let rows = (0..1700).step_by(97).chain((1700..2300).step_by(3));
    rows.map(|i| {
        let r = row(i);
        match column {
            0 => kind.encode_text(&r.0).unwrap(),
            1 => kind.encode_hex(&bloom_format::hex(&r.1)).unwrap(),
            2 => kind.encode_text(&r.2.to_string()).unwrap(),
            3 => kind.encode_text(&r.3.to_string()).unwrap(),
            4 => kind.encode_text(&r.4.to_string()).unwrap(),
            5 => kind.encode_text(&r.5.to_string()).unwrap(),
            _ => kind.encode_hex(&bloom_format::hex(&r.6)).unwrap(),
        }
    })
    .collect()
}

fn check_typed_file(path: &Path) -> String {
    let file = ParquetFile::open(path, Limits::default()).unwrap();
    assert_eq!(file.row_groups(), 3);
    let mut all = String::new();
    for (index, name) in ["name", "raw", "small", "large", "ratio", "amount", "uuid"]
        .into_iter()
        .enumerate()
    {
        let kind = file.column(name).unwrap().kind;
        let answers = compare(path, name, &typed_probes(kind, index), |b| {
            bloom_format::hex(b)
        });
        // Values of rows in the file are in their row group's filter.
        for (probe, i) in answers.lines().zip((0..1700).step_by(97)) {
            let group = if i < 700 {
                "0"
            } else if i < 1400 {
                "1"
            } else {
                "2"
            };
            assert!(
                probe
                    .split(": ")
                    .nth(1)
                    .unwrap()
                    .split(", ")
                    .any(|g| g == group),
                "{name} row {i}: {probe}"
            );
        }
        writeln!(all, "[{name}: {}]\n{answers}", kind.name()).unwrap();
    }
    let mut file = ParquetFile::open(path, Limits::default()).unwrap();
    let unfiltered = file.column("unfiltered").unwrap();
    let got = file.filter(0, &unfiltered);
    assert!(matches!(got, Ok(None)), "{got:?}");
    assert!(matches!(
        file.filters(&unfiltered),
        Err(ParquetFileError::NoFilters { row_groups: 3, .. })
    ));
    assert!(matches!(
        file.filter(3, &unfiltered),
        Err(ParquetFileError::NoSuchRowGroup {
            index: 3,
            count: 3,
            ..
        })
    ));
    assert!(matches!(
        file.column("missing"),
        Err(ParquetFileError::NoSuchColumn { .. })
    ));
    all
}

#[test]
fn arrow_rs_filters_of_every_type_answer_as_parquet_does() {
    // A file written now by the parquet crate in this build...
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.parquet");
    write_arrow_rs_file(&fresh);
    let fresh_answers = check_typed_file(&fresh);
    // ...and the committed one, whose answers are frozen. (`BLOOM_REGENERATE_FOREIGN=1`
    // writes it again, for a reviewed change of the writer.)
    let committed = data("arrow-rs-types.parquet");
    if std::env::var_os("BLOOM_REGENERATE_FOREIGN").is_some() {
        write_arrow_rs_file(&committed);
    }
    let answers = check_typed_file(&committed);
    assert_eq!(
        fresh_answers, answers,
        "the writer of this build fills filters as the committed file's did"
    );
    // Some absent values answer "maybe" (false positives), the same ones as in Parquet.
    assert!(answers.lines().filter(|l| !l.starts_with('[')).count() > 1000);
    insta::assert_snapshot!("arrow-rs-types", answers);
}

/// Snapshots of the filters answer as the files do.
#[test]
fn a_filter_becomes_a_snapshot_that_answers_identically() {
    let path = data("parquet-testing/data_index_bloom_encoding_with_length.parquet");
    let mut file = ParquetFile::open(&path, Limits::default()).unwrap();
    let col = file.column("String").unwrap();
    let filter = file.filter(0, &col).unwrap().unwrap();
    let bytes = filter.to_snapshot(0).encode();
    let snapshot =
        bloom_format::Snapshot::decode(bytes, &bloom_format::DecodeOptions::default()).unwrap();
    let restored = BloomFilter::from_snapshot(&snapshot).unwrap();
    assert_eq!(restored, filter);
    for value in PARQUET_MR_VALUES {
        assert!(restored.contains(value));
    }
}
