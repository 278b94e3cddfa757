//! `Filter::read_snapshot` and `Filter::read_file`: every filter type reads back exactly the
//! filter that wrote the snapshot, from a file and from a stream that delivers a few bytes at
//! a time; a damaged, truncated, oversized or foreign snapshot gives a typed error and no
//! filter.

use std::io::Read;
use std::path::Path;

use bloom_core::{
    AnyFilter, AtomicBloomFilter, BloomFilter, CountingBloomFilter, Filter, FilterConfig,
    FilterParams, Layout, ReadSnapshotError, ScalableBloomFilter, SnapshotError,
};
use bloom_format::{DecodeError, DecodeOptions, ReadError, SnapshotReader};

/// A reader that hands out at most `step` bytes a call: what a pipe or a socket does.
struct Trickle<'a> {
    bytes: &'a [u8],
    step: usize,
}

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.step.min(buf.len()).min(self.bytes.len());
        let (now, rest) = self.bytes.split_at(n);
        buf[..n].copy_from_slice(now);
        self.bytes = rest;
        Ok(n)
    }
}

fn keys(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("record-{i}")).collect()
}

fn plain(layout: Layout, items: u64) -> BloomFilter {
    let params = FilterParams::planned(layout, items, 0.01).unwrap();
    let mut filter = BloomFilter::new(FilterConfig::new(params)).unwrap();
    filter.insert_all(keys(items as usize / 2));
    filter
}

fn counting(items: u64) -> CountingBloomFilter {
    let params = FilterParams::for_false_positive_rate(items, 0.01).unwrap();
    let mut filter = CountingBloomFilter::new(FilterConfig::new(params)).unwrap();
    for key in keys(items as usize / 2) {
        filter.insert(key.as_str());
    }
    filter
}

fn scalable() -> ScalableBloomFilter {
    let mut chain = ScalableBloomFilter::with_capacity(1_000, 0.01).unwrap();
    chain.insert_all(keys(5_000));
    assert!(chain.stages().len() > 1, "the chain grew");
    chain
}

/// The filter's snapshot bytes, and the same in a file under `dir`.
fn saved<F: Filter>(filter: &F, dir: &Path, name: &str) -> (Vec<u8>, std::path::PathBuf) {
    let bytes = filter.to_snapshot(7).encode().to_vec();
    let path = dir.join(name);
    std::fs::write(&path, &bytes).unwrap();
    (bytes, path)
}

/// The filter read back from its file and from streams of several step sizes.
fn read_back<F: Filter>(bytes: &[u8], path: &Path) -> Vec<F>
where
    F::LoadError: std::fmt::Debug,
{
    let options = DecodeOptions::default();
    let mut read = vec![F::read_file(path, &options).unwrap()];
    for step in [1, 7, 4096, 1 << 20] {
        let stream = Trickle { bytes, step };
        let reader = SnapshotReader::new(stream, &options).unwrap();
        read.push(F::read_snapshot(reader).unwrap());
    }
    read.push(F::read_snapshot(SnapshotReader::from_bytes(bytes, &options).unwrap()).unwrap());
    read
}

#[test]
fn every_filter_type_reads_back_what_it_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let present = keys(200);
    // Sizes below the pages made ahead (64 KiB), above them, and an odd tail.
    let layouts = [
        (Layout::Standard, 1_000),
        (Layout::Standard, 100_001),
        (Layout::Blocked512, 300_000),
        (Layout::SplitBlock256, 70_000),
    ];
    for (layout, items) in layouts {
        let filter = plain(layout, items);
        let (bytes, path) = saved(&filter, dir.path(), "plain.bloom");
        for back in read_back::<BloomFilter>(&bytes, &path) {
            assert_eq!(back, filter, "{layout:?} at {items}");
            assert!(present.iter().all(|k| back.contains(k.as_str())));
        }
        for back in read_back::<AtomicBloomFilter>(&bytes, &path) {
            assert_eq!(back.to_filter().unwrap(), filter, "{layout:?} at {items}");
        }
        for back in read_back::<AnyFilter>(&bytes, &path) {
            assert!(matches!(back, AnyFilter::Plain(ref f) if *f == filter));
        }
    }

    let filter = counting(50_000);
    let (bytes, path) = saved(&filter, dir.path(), "counting.bloom");
    for back in read_back::<CountingBloomFilter>(&bytes, &path) {
        assert_eq!(back, filter);
    }
    for back in read_back::<AnyFilter>(&bytes, &path) {
        assert!(matches!(back, AnyFilter::Counting(ref f) if *f == filter));
    }

    let chain = scalable();
    let (bytes, path) = saved(&chain, dir.path(), "chain.bloom");
    for back in read_back::<ScalableBloomFilter>(&bytes, &path) {
        assert_eq!(back.to_snapshot(7), chain.to_snapshot(7));
    }
    for back in read_back::<AnyFilter>(&bytes, &path) {
        assert!(
            matches!(back, AnyFilter::Scalable(ref c) if c.to_snapshot(7) == chain.to_snapshot(7))
        );
    }
}

/// An array of more than 32 MiB: the one whose pages a helper thread makes ahead of the
/// reads (bloom-format's `prefault`), read from a file and from a stream.
#[test]
fn a_large_array_reads_back_bit_for_bit() {
    let params = FilterParams::new((40 << 20) * 8 + 3, 7).unwrap();
    let mut filter = BloomFilter::new(FilterConfig::new(params)).unwrap();
    filter.insert_all(keys(100_000));
    let dir = tempfile::tempdir().unwrap();
    let (bytes, path) = saved(&filter, dir.path(), "large.bloom");
    let options = DecodeOptions::with_max_payload_len(64 << 20);
    assert_eq!(BloomFilter::read_file(&path, &options).unwrap(), filter);
    let stream = Trickle {
        bytes: &bytes,
        step: 100_003,
    };
    let reader = SnapshotReader::new(stream, &options).unwrap();
    assert_eq!(BloomFilter::read_snapshot(reader).unwrap(), filter);
}

/// The read failure of `result`, which must be one (not a filter, not a refusal of a valid
/// snapshot).
fn read_failure<F, E: std::fmt::Debug>(result: Result<F, ReadSnapshotError<E>>) -> ReadError {
    match result {
        Err(ReadSnapshotError::Read(e)) => e,
        Err(ReadSnapshotError::Load(e)) => panic!("refused as a valid snapshot: {e:?}"),
        Ok(_) => panic!("a filter was read"),
    }
}

/// The refusal of a valid snapshot in `result`, which must be one.
fn refusal<F, E>(result: Result<F, ReadSnapshotError<E>>) -> E {
    match result {
        Err(ReadSnapshotError::Load(e)) => e,
        Err(ReadSnapshotError::Read(e)) => panic!("not read: {e}"),
        Ok(_) => panic!("a filter was read"),
    }
}

fn stream(bytes: &[u8], step: usize) -> SnapshotReader<Trickle<'_>> {
    SnapshotReader::new(Trickle { bytes, step }, &DecodeOptions::default()).unwrap()
}

#[test]
fn a_damaged_snapshot_gives_no_filter() {
    let dir = tempfile::tempdir().unwrap();
    let filter = plain(Layout::Standard, 100_001);
    let (bytes, _) = saved(&filter, dir.path(), "plain.bloom");
    let options = DecodeOptions::default();

    // One payload bit flipped, anywhere: the checksum catches it.
    for at in [bytes.len() - 1, bytes.len() / 2, bytes.len() - 70_000] {
        let mut damaged = bytes.clone();
        damaged[at] ^= 0x01;
        let path = dir.path().join("flipped.bloom");
        std::fs::write(&path, &damaged).unwrap();
        for failure in [
            read_failure(BloomFilter::read_file(&path, &options)),
            read_failure(AnyFilter::read_snapshot(stream(&damaged, 4096))),
        ] {
            assert!(
                matches!(
                    failure,
                    ReadError::Decode(DecodeError::PayloadChecksumMismatch { .. })
                ),
                "{failure:?}"
            );
        }
    }

    // Cut short: a file is refused before its payload is read; a stream when it ends.
    let short = &bytes[..bytes.len() - 1000];
    let path = dir.path().join("short.bloom");
    std::fs::write(&path, short).unwrap();
    for failure in [
        read_failure(AtomicBloomFilter::read_file(&path, &options)),
        read_failure(BloomFilter::read_snapshot(stream(short, 333))),
    ] {
        assert!(
            matches!(failure, ReadError::Decode(DecodeError::Truncated { .. })),
            "{failure:?}"
        );
    }

    // Over the reader's limit: refused before anything is allocated.
    let path = dir.path().join("plain.bloom");
    let small = DecodeOptions::with_max_payload_len(1024);
    let over = read_failure(CountingBloomFilter::read_file(&path, &small));
    assert!(matches!(over, ReadError::Decode(_)), "{over:?}");
}

#[test]
fn a_snapshot_of_another_kind_is_refused_with_what_to_load_instead() {
    let dir = tempfile::tempdir().unwrap();
    let options = DecodeOptions::default();
    let (_, plain_path) = saved(&plain(Layout::Standard, 1_000), dir.path(), "plain.bloom");
    let (_, counting_path) = saved(&counting(1_000), dir.path(), "counting.bloom");
    let (_, chain_path) = saved(&scalable(), dir.path(), "chain.bloom");

    let wrong = refusal(BloomFilter::read_file(&counting_path, &options));
    assert!(matches!(wrong, SnapshotError::IsCounting), "{wrong:?}");
    let wrong = refusal(AtomicBloomFilter::read_file(&chain_path, &options));
    assert!(matches!(wrong, SnapshotError::IsScalable), "{wrong:?}");
    let wrong = refusal(CountingBloomFilter::read_file(&plain_path, &options));
    assert!(
        matches!(wrong, SnapshotError::NotCounting { .. }),
        "{wrong:?}"
    );
    refusal(ScalableBloomFilter::read_file(&plain_path, &options));
    // The message is the cause's own, which says what to load instead.
    let message = BloomFilter::read_file(&counting_path, &options)
        .unwrap_err()
        .to_string();
    assert_eq!(message, SnapshotError::IsCounting.to_string());
}

/// A padding bit past `m` set: not a valid payload, whatever its checksum says.
#[test]
fn set_padding_bits_are_refused() {
    let filter = plain(Layout::Standard, 1_000);
    assert_ne!(filter.config().bits() % 8, 0, "the array has padding bits");
    let mut bytes = filter.to_snapshot(0).encode().to_vec();
    *bytes.last_mut().unwrap() |= 0x80;
    let options = DecodeOptions::default();
    for failure in [
        read_failure(BloomFilter::read_snapshot(
            SnapshotReader::from_bytes(&bytes, &options).unwrap(),
        )),
        read_failure(AnyFilter::read_snapshot(stream(&bytes, 5))),
        read_failure(AtomicBloomFilter::read_snapshot(stream(&bytes, 1 << 20))),
    ] {
        assert!(
            matches!(
                failure,
                ReadError::Decode(DecodeError::NonZeroPadding { .. })
            ),
            "{failure:?}"
        );
    }
}

#[test]
fn only_a_regular_file_is_read() {
    let dir = tempfile::tempdir().unwrap();
    let options = DecodeOptions::default();
    let not_file = read_failure(BloomFilter::read_file(dir.path(), &options));
    assert!(
        matches!(not_file, ReadError::NotARegularFile { .. }),
        "{not_file:?}"
    );
    let missing = read_failure(AnyFilter::read_file(
        dir.path().join("none.bloom"),
        &options,
    ));
    assert!(matches!(missing, ReadError::Io { .. }), "{missing:?}");
    let garbage = dir.path().join("garbage.bloom");
    std::fs::write(&garbage, b"not a snapshot at all").unwrap();
    let refused = read_failure(AnyFilter::read_file(&garbage, &options));
    assert!(matches!(refused, ReadError::Decode(_)), "{refused:?}");
}
