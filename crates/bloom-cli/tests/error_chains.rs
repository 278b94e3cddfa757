//! Every public error type of the library crates shows its cause once: in its message or as
//! its `source()`, never both (a report that prints the message and then walks the chain, as
//! anyhow and the examples' `main` do, would print the cause twice).
//!
//! Each type is built here at least once, and each variant that holds another error, through
//! a real failing call where one is at hand (a missing file, garbage bytes, a refused
//! connection) and by its constructor otherwise. The last test checks that no public error
//! type of the library crates was left out. `cargo xtask tidy` checks the same rule on the
//! `#[error]` messages; this test sees what is really printed.

use std::collections::BTreeSet;
use std::error::Error;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bloom_core::{
    AllocError, BitsError, BloomFilter, BuildError, ConfigError, CountingBloomFilter,
    CountingError, Filter, FilterParams, IncompatibleFilters, KeyEncoding, KeyError, Layout,
    Mismatch, ParamsError, PositionRule, RandomSaltError, ReadSnapshotError, RemoveError, Salt,
    SaltTooLong, ScalableError, SnapshotError, UnknownNameError,
};
use bloom_format::{
    DecodeError, DecodeOptions, EncodeError, GuavaError, GuavaFunnel, LegacyError, LockError,
    ReadError, Snapshot, SnapshotLock, SnapshotReader, StreamWriteError, WriteError,
};
use bloom_parquet::{FilterError, Limits, NotParquet, ParquetFile, ParquetFileError, SbbfError};
use bloom_postgres::PostgresStoreError;
use bloom_postgres::testing::ServerError;
use bloom_redis::{RedisFilter, RedisFilterError, RedisTarget, SharedError};
use bloom_store::coalesce::OpenError;
use bloom_store::{
    BypassReason, CoalescedError, Incompatibility, MemoryStoreError, OptionsError, SqliteStore,
    SqliteStoreError, StoreError,
};

/// The public error types no caller can build, with why: their values come only from a
/// failure of the operating system's random source.
const CANNOT_BUILD: &[(&str, &str)] = &[(
    "bloom_store::IdentityError",
    "its field is private; only a failing random source makes one",
)];

/// The error types checked so far, as `crate::Name`.
static CHECKED: Mutex<BTreeSet<String>> = Mutex::new(BTreeSet::new());

/// Checks that `error` and every error below it show their cause once: the message of each
/// `source()` is not part of the message of the error above it.
fn shown_once<E: Error>(error: &E) {
    record::<E>();
    let mut above: &dyn Error = error;
    while let Some(source) = above.source() {
        let (text, shown) = (above.to_string(), source.to_string());
        assert!(
            !text.contains(&shown),
            "{text:?} shows its source {shown:?} already; the report would show it twice \
             ({:?})",
            error
        );
        above = source;
    }
}

/// Like [`shown_once`], for an error that prints its cause, so returns none.
fn prints_cause<E: Error>(error: &E, cause: &dyn Error) {
    assert!(
        error.to_string().contains(&cause.to_string()),
        "{error} does not show {cause}"
    );
    assert!(error.source().is_none(), "{error:?} returns a source too");
    shown_once(error);
}

fn record<E>() {
    let full = std::any::type_name::<E>();
    let path = full.split('<').next().unwrap_or(full);
    let krate = path.split("::").next().unwrap_or(path);
    let name = path.rsplit("::").next().unwrap_or(path);
    CHECKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .insert(format!("{krate}::{name}"));
}

fn io() -> io::Error {
    io::Error::other("the disk is gone")
}

/// A reader that fails at once.
struct Failing;

impl Read for Failing {
    fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
        Err(io())
    }
}

fn alloc() -> AllocError {
    AllocError { bytes: 1 << 62 }
}

fn decode_error() -> DecodeError {
    Snapshot::decode(
        b"not a bloom snapshot at all".to_vec(),
        &DecodeOptions::default(),
    )
    .unwrap_err()
}

fn key_error() -> KeyError {
    KeyError::InvalidUtf8 {
        valid_up_to: 3,
        encoding: KeyEncoding::Utf8,
    }
}

fn config_error() -> ConfigError {
    ConfigError::Salt(SaltTooLong { found: 40 })
}

/// A missing file read, a garbage file decoded and a directory opened, in `dir`.
fn read_errors(dir: &Path) -> [ReadError; 3] {
    let missing = SnapshotReader::open(dir.join("missing.bloom"), &DecodeOptions::default());
    let garbage = dir.join("garbage.bloom");
    std::fs::write(&garbage, b"these bytes are not a snapshot, not even close").unwrap();
    let decoded = SnapshotReader::open(&garbage, &DecodeOptions::default());
    let directory = SnapshotReader::open(dir, &DecodeOptions::default());
    [missing, decoded, directory].map(|r| r.expect_err("reading fails"))
}

fn write_error(dir: &Path) -> WriteError {
    bloom_format::write_atomic(dir.join("no/such/dir/out.bloom"), b"bytes").unwrap_err()
}

#[test]
fn binding_errors() {
    // Garbage bytes, a missing file, a refused key: each error of the C and Python bindings.
    let garbage = bloom_ffi::load(bloom_ffi::Source::Bytes(b"garbage"), 1 << 20).unwrap_err();
    assert_eq!(garbage.kind(), bloom_ffi::ErrorKind::NotASnapshot);
    shown_once(&garbage);
    let missing = bloom_ffi::verify(
        bloom_ffi::Source::Path(Path::new("/nonexistent/seen.bloom")),
        1 << 20,
    )
    .unwrap_err();
    assert_eq!(missing.kind(), bloom_ffi::ErrorKind::Io);
    shown_once(&missing);
    let key = bloom_ffi::Error::from(KeyError::InvalidUtf8 {
        valid_up_to: 0,
        encoding: KeyEncoding::Nfc,
    });
    shown_once(&key);
}

#[test]
fn core_errors_show_their_cause_once() {
    let params = FilterParams::new(0, 3).unwrap_err();
    shown_once(&params);
    shown_once(&ParamsError::ZeroItems);
    let salt = Salt::new(&[7; 40]).unwrap_err();
    shown_once(&salt);
    shown_once(&ConfigError::Params(ParamsError::ZeroItems));
    shown_once(&config_error());
    shown_once(&ConfigError::SaltNotSupported {
        rule: PositionRule::Sha256Split4,
    });
    shown_once(&CountingError::Alloc(alloc()));
    shown_once(&CountingError::Layout(Layout::Blocked512));
    shown_once(&BitsError::Alloc(alloc()));
    shown_once(&BitsError::Padding { bits: 9 });
    shown_once(&alloc());
    shown_once(&BuildError::Params(ParamsError::ZeroHashes));
    shown_once(&BuildError::Config(config_error()));
    shown_once(&BuildError::Counting(CountingError::Rule(
        PositionRule::Sha256Split4,
    )));
    shown_once(&BuildError::Alloc(alloc()));
    shown_once(&RemoveError::Absent);
    shown_once(&RemoveError::Key(key_error()));
    shown_once(&key_error());
    let unknown: UnknownNameError = "no-such-encoding".parse::<KeyEncoding>().unwrap_err();
    shown_once(&unknown);
    shown_once(&RandomSaltError("no entropy".into()));
    shown_once(&IncompatibleFilters {
        mismatch: Mismatch::Bits,
    });
    shown_once(&ScalableError::Build(BuildError::Params(
        ParamsError::ZeroItems,
    )));
    shown_once(&ScalableError::Build(BuildError::Config(config_error())));
    shown_once(&ScalableError::Build(BuildError::Alloc(alloc())));
    shown_once(&ScalableError::Snapshot(SnapshotError::IsCounting));
    shown_once(&ScalableError::Growth { found: 0, max: 8 });
    // Through real failing reads: a stream cut short, and a snapshot of another kind.
    let plain = BloomFilter::with_capacity(100, 0.01)
        .unwrap()
        .to_snapshot(0)
        .encode();
    let cut = SnapshotReader::new(&plain[..plain.len() - 1], &DecodeOptions::default()).unwrap();
    shown_once(&BloomFilter::read_snapshot(cut).unwrap_err());
    let counting = CountingBloomFilter::new(bloom_core::FilterConfig::new(
        FilterParams::new(64, 3).unwrap(),
    ))
    .unwrap()
    .to_snapshot(0)
    .encode();
    let reader = SnapshotReader::from_bytes(&counting, &DecodeOptions::default()).unwrap();
    let refused = BloomFilter::read_snapshot(reader).unwrap_err();
    assert!(matches!(
        refused,
        ReadSnapshotError::Load(SnapshotError::IsCounting)
    ));
    shown_once(&refused);
    prints_cause(&SnapshotError::Config(config_error()), &config_error());
    prints_cause(
        &SnapshotError::Bits(BitsError::Padding { bits: 9 }),
        &BitsError::Padding { bits: 9 },
    );
    prints_cause(
        &SnapshotError::Counting(CountingError::Alloc(alloc())),
        &alloc(),
    );
}

#[test]
fn format_errors_show_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    shown_once(&decode_error());
    let [missing, decoded, directory] = read_errors(dir.path());
    assert!(matches!(missing, ReadError::Io { .. }), "{missing:?}");
    assert!(matches!(decoded, ReadError::Decode(_)), "{decoded:?}");
    shown_once(&missing);
    shown_once(&decoded);
    shown_once(&directory);
    prints_cause(
        &ReadError::Io {
            path: Some(PathBuf::from("x.bloom")),
            cause: io(),
        },
        &io(),
    );
    shown_once(&write_error(dir.path()));
    prints_cause(
        &WriteError::Io {
            path: PathBuf::from("x.bloom"),
            action: "renaming",
            cause: io(),
        },
        &io(),
    );
    let lock = SnapshotLock::acquire(dir.path().join("no/such/dir/x.bloom"), false).unwrap_err();
    shown_once(&lock);
    prints_cause(
        &LockError::Io {
            target: PathBuf::from("x.bloom"),
            lock: PathBuf::from("x.bloom.lock"),
            cause: io(),
        },
        &io(),
    );
    let guava_io =
        bloom_format::import_guava(Failing, GuavaFunnel::Bytes, &DecodeOptions::default())
            .unwrap_err();
    assert!(matches!(guava_io, GuavaError::Io(_)), "{guava_io:?}");
    shown_once(&guava_io);
    let truncated =
        bloom_format::import_guava(&b"\x01"[..], GuavaFunnel::Bytes, &DecodeOptions::default())
            .unwrap_err();
    shown_once(&truncated);
    let legacy: LegacyError = bloom_format::import_seed_raw(&[0; 3]).unwrap_err();
    shown_once(&legacy);
    let encode = EncodeError::Invalid(decode_error());
    shown_once(&encode);
    shown_once(&StreamWriteError::Invalid(EncodeError::Invalid(
        decode_error(),
    )));
    prints_cause(&StreamWriteError::from(io()), &io());
}

#[test]
fn store_errors_show_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let [missing, ..] = read_errors(dir.path());
    type Store = StoreError<io::Error>;
    prints_cause(&Store::Store(io()), &io());
    shown_once(&Store::Key(key_error()));
    shown_once(&Store::Options(OptionsError::from(ParamsError::ZeroItems)));
    shown_once(&Store::Alloc(alloc()));
    shown_once(&Store::Write(write_error(dir.path())));
    shown_once(&Store::InUse);
    shown_once(&bloom_store::ClaimRefused::InUse);
    shown_once(&bloom_store::ClaimRefused::EncodingMismatch {
        store: "nfc v1".into(),
        wrapper: "bytes v1".into(),
    });
    let unreadable = BypassReason::Unreadable(Arc::new(missing));
    shown_once(&Store::NotTrusted(unreadable.clone()));
    prints_cause(
        &OptionsError::Params(ParamsError::ZeroItems),
        &ParamsError::ZeroItems,
    );
    prints_cause(&OptionsError::Config(config_error()), &config_error());
    prints_cause(
        &OptionsError::Counting(CountingError::Alloc(alloc())),
        &alloc(),
    );
    shown_once(&OptionsError::Salt(RandomSaltError("no entropy".into())));
    shown_once(&Incompatibility::Unsupported(SnapshotError::IsScalable));
    shown_once(&Incompatibility::Salted);
    shown_once(&unreadable);
    shown_once(&BypassReason::Incompatible(Incompatibility::Unsupported(
        SnapshotError::IsCounting,
    )));
    let shared: Arc<dyn Error + Send + Sync> = Arc::new(io());
    prints_cause(&BypassReason::CatchUpFailed(shared), &io());
    shown_once(&BypassReason::NoSnapshot);
    let garbage = dir.path().join("garbage.sqlite");
    std::fs::write(&garbage, vec![b'x'; 4096]).unwrap();
    let sqlite = SqliteStore::open(&garbage).expect_err("garbage is no database");
    assert!(matches!(sqlite, SqliteStoreError::Sqlite(_)), "{sqlite:?}");
    shown_once(&sqlite);
    prints_cause(
        &SqliteStoreError::Lock {
            path: PathBuf::from("db-bloom.lock"),
            cause: io(),
        },
        &io(),
    );
    shown_once(&MemoryStoreError);
    type Coalesced = CoalescedError<io::Error>;
    shown_once(&Coalesced::Key(key_error()));
    shown_once(&Coalesced::Batch(Arc::new(io())));
    shown_once(&Coalesced::Stopped);
    shown_once(&OpenError::<io::Error, io::Error>::Open(io()));
    shown_once(&OpenError::<io::Error, io::Error>::Coalesced(
        Coalesced::Stopped,
    ));
}

#[test]
fn redis_errors_show_their_cause_once() {
    // Nothing listens on port 1: the connection is refused.
    let target = RedisTarget::single("redis://127.0.0.1:1/").with_timeout(Duration::from_secs(5));
    let refused = refusal(&target);
    shown_once(&refused);
    let invalid = RedisFilter::open(&target, "no spaces").expect_err("a bad name");
    shown_once(&invalid);
    let snapshot = SnapshotError::IsCounting;
    prints_cause(
        &RedisFilterError::Config {
            name: "f".into(),
            cause: snapshot.clone(),
        },
        &snapshot,
    );
    prints_cause(
        &RedisFilterError::Invalid {
            name: "f".into(),
            cause: decode_error(),
        },
        &decode_error(),
    );
    shown_once(&RedisFilterError::Key(key_error()));
    let dir = tempfile::tempdir().unwrap();
    let [missing, decoded, _] = read_errors(dir.path());
    shown_once(&RedisFilterError::Read(missing));
    shown_once(&RedisFilterError::Read(decoded));
    shown_once(&RedisFilterError::Write(write_error(dir.path())));
    shown_once(&RedisFilterError::Stream(StreamWriteError::from(io())));
    type Shared = SharedError<io::Error>;
    prints_cause(&Shared::Store(io()), &io());
    let timeout = || RedisFilterError::Timeout {
        timeout: Duration::from_secs(1),
    };
    prints_cause(&Shared::Filter(timeout()), &timeout());
    prints_cause(&Shared::CommittedWithoutBits(timeout()), &timeout());
    prints_cause(&Shared::Rebuild(timeout()), &timeout());
    prints_cause(&Shared::Create(timeout()), &timeout());
    prints_cause(&Shared::Rebuild(refused), &refusal(&target));
    shown_once(&Shared::Key(key_error()));
    shown_once(&Shared::InUse);
}

/// The error of opening a filter where nothing listens (made twice where it is compared
/// with itself: the errors are not `Clone`).
fn refusal(target: &RedisTarget) -> RedisFilterError {
    RedisFilter::open(target, "f").expect_err("nothing listens")
}

#[test]
fn postgres_errors_show_their_cause_once() {
    let client = || {
        "host=127.0.0.1 port=not-a-port"
            .parse::<bloom_postgres::postgres::Config>()
            .unwrap_err()
    };
    prints_cause(&PostgresStoreError::from(client()), &client());
    shown_once(&PostgresStoreError::Unreachable("127.0.0.1:1".into()));
    prints_cause(&ServerError::from(client()), &client());
    prints_cause(
        &ServerError::Io {
            what: "running initdb".into(),
            cause: io(),
        },
        &io(),
    );
    shown_once(&ServerError::NotInstalled);
}

#[test]
fn parquet_errors_show_their_cause_once() {
    let dir = tempfile::tempdir().unwrap();
    let missing = ParquetFile::open(&dir.path().join("missing.parquet"), Limits::default())
        .expect_err("a missing file");
    assert!(matches!(missing, ParquetFileError::Open(_)), "{missing:?}");
    shown_once(&missing);
    let text = dir.path().join("text.parquet");
    std::fs::write(&text, b"this is a text file, no Parquet file at all").unwrap();
    let not_parquet = ParquetFile::open(&text, Limits::default()).expect_err("no Parquet");
    shown_once(&not_parquet);
    prints_cause(
        &ParquetFileError::Io {
            path: text.clone(),
            cause: io(),
        },
        &io(),
    );
    let sbbf = || bloom_parquet::parse_header(&[0x15], 1024).unwrap_err();
    shown_once(&sbbf());
    prints_cause(
        &ParquetFileError::Filter {
            path: text.clone(),
            column: "c".into(),
            row_group: 0,
            cause: sbbf(),
        },
        &sbbf(),
    );
    prints_cause(
        &ParquetFileError::Alloc {
            path: text,
            cause: alloc(),
        },
        &alloc(),
    );
    let decoded = bloom_parquet::decode(&[0x15], KeyEncoding::Bytes, 1024).unwrap_err();
    assert!(matches!(decoded, FilterError::Sbbf(_)), "{decoded:?}");
    shown_once(&decoded);
    shown_once(&FilterError::Alloc(alloc()));
    shown_once(&SbbfError::Deprecated);
    shown_once(&bloom_parquet::ValueError::BadHex("xyz".into()));
    shown_once(&NotParquet {
        layout: Layout::Standard,
        rule: PositionRule::Sha256Double,
        salted: true,
        bits: 64,
    });
}

#[test]
fn cli_errors_show_their_cause_once() {
    use bloom_cli::keyfile::{KeyFileError, KeyReader, LineFormat};
    let mut failing = KeyReader::new(io::BufReader::new(Failing), LineFormat::Plain, 16);
    let failed = failing.next_key().unwrap_err();
    assert!(matches!(failed, KeyFileError::Io(_)), "{failed:?}");
    shown_once(&failed);
    let mut long = KeyReader::new(
        &b"a key much longer than four bytes\n"[..],
        LineFormat::Plain,
        4,
    );
    shown_once(&long.next_key().unwrap_err());
}

/// The public error types (`pub` items deriving `thiserror::Error`) of the library crates,
/// as `crate::Name`.
fn public_error_types() -> BTreeSet<String> {
    let crates = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut found = BTreeSet::new();
    for krate in [
        "bloom-core",
        "bloom-format",
        "bloom-store",
        "bloom-redis",
        "bloom-postgres",
        "bloom-parquet",
        "bloom-cli",
        "bloom-ffi",
    ] {
        let mut files = Vec::new();
        rust_files(&crates.join(krate).join("src"), &mut files);
        for file in files {
            let text = std::fs::read_to_string(&file).unwrap();
            let mut rest = text.as_str();
            while let Some(at) = rest.find("thiserror::Error") {
                rest = &rest[at + 1..];
                // The item the derive is on: its first line that is not an attribute.
                let item = rest.lines().map(str::trim).find_map(|line| {
                    let public = line.starts_with("pub ");
                    let line = line.strip_prefix("pub ").unwrap_or(line);
                    let name = line
                        .strip_prefix("enum ")
                        .or_else(|| line.strip_prefix("struct "))?;
                    Some((public, name))
                });
                if let Some((true, name)) = item {
                    let name: String = name
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    found.insert(format!("{}::{name}", krate.replace('-', "_")));
                }
            }
        }
    }
    found
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn every_public_error_type_is_walked() {
    // The other tests of this file, run here too so that all of them are recorded whatever
    // order the harness runs them in.
    core_errors_show_their_cause_once();
    format_errors_show_their_cause_once();
    store_errors_show_their_cause_once();
    redis_errors_show_their_cause_once();
    postgres_errors_show_their_cause_once();
    parquet_errors_show_their_cause_once();
    cli_errors_show_their_cause_once();
    let checked = CHECKED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();
    let exempt: BTreeSet<String> = CANNOT_BUILD.iter().map(|(t, _)| (*t).to_owned()).collect();
    let missing: Vec<String> = public_error_types()
        .into_iter()
        .filter(|t| !checked.contains(t) && !exempt.contains(t))
        .collect();
    assert!(
        missing.is_empty(),
        "public error types this test does not build: {missing:?}; build one of each (and \
         each variant that holds another error) in tests/error_chains.rs, or list it in \
         CANNOT_BUILD with the reason"
    );
}
