//! Loading a large snapshot file from the page cache, in process, against reading the same
//! file through a small reused buffer (what `cat` does) and against `std::fs::read` (the
//! bytes alone into new memory, a page fault per page). Each round times every subject once,
//! in an order that rotates from round to round; the report gives each one's median and
//! fastest round, and their ratios to the buffered read's.
//!
//! - `read_file`: `Filter::read_file`, the payload read straight into the words with their
//!   pages made ahead of the reads;
//! - `chunked`: `Filter::from_payload` fed by `SnapshotReader::read_payload_with`, a chunk
//!   copied into words that fault a page at a time (how bloom-store and bloom-ffi loaded
//!   before `read_snapshot`).
//!
//! Making fresh pages (the kernel zeroes each) is most of a load into new memory; on a
//! virtual machine its cost varies from round to round with the host, which the fastest
//! round leaves out. The buffered read makes no new memory.
//!
//! `cargo bench -p bloom-core --bench load_ratio` (`BLOOM_LOAD_MIB` sets the payload size,
//! 1024 by default; `BLOOM_LOAD_ROUNDS` the rounds, 7 by default).

use std::hint::black_box;
use std::io::Read;
use std::path::Path;
use std::time::{Duration, Instant};

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams};
use bloom_format::{
    AtomicFile, DecodeOptions, ReadError, SnapshotReader, SnapshotWriter, WriteOptions,
};

fn env(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// Writes a snapshot of a filter of `bytes` bytes, a few keys set, to `path`.
fn write_snapshot(path: &Path, bytes: u64) {
    let params = FilterParams::new(bytes * 8, 7).expect("params");
    let mut filter = BloomFilter::new(FilterConfig::new(params)).expect("memory for the filter");
    filter.insert_all((0..100_000).map(|i| format!("record-{i}")));
    let header = filter.header(0);
    let file = AtomicFile::create_with(path, WriteOptions::for_snapshot(&header)).expect("create");
    let mut writer = SnapshotWriter::new(file, header).expect("header");
    filter
        .for_each_payload_chunk(|chunk| writer.write_payload(chunk))
        .expect("payload");
    writer.finish().expect("finish").commit().expect("commit");
}

/// Reads the file through one 128 KiB buffer, keeping nothing.
fn buffered_read(path: &Path) -> u64 {
    let mut file = std::fs::File::open(path).expect("open");
    let mut buf = vec![0u8; 128 << 10];
    let mut total = 0u64;
    loop {
        let n = file.read(&mut buf).expect("read");
        if n == 0 {
            return total;
        }
        total += n as u64;
        black_box(&buf);
    }
}

fn chunked(path: &Path, options: &DecodeOptions) -> BloomFilter {
    let reader = SnapshotReader::open(path, options).expect("open");
    let header = reader.header().clone();
    BloomFilter::from_payload(&header, |sink| {
        reader
            .read_payload_with(|chunk| {
                sink(chunk);
                Ok::<(), ReadError>(())
            })
            .map(drop)
            .map_err(Box::<dyn std::error::Error>::from)
    })
    .expect("load")
}

fn main() {
    let mib = env("BLOOM_LOAD_MIB", 1024).max(1);
    let rounds = env("BLOOM_LOAD_ROUNDS", 7).max(1);
    let dir = tempfile::tempdir().expect("temporary directory");
    let path = dir.path().join("large.bloom");
    write_snapshot(&path, (mib as u64) << 20);
    let options = DecodeOptions::with_max_payload_len((mib as u64) << 21);
    // Into the page cache, and checked once.
    assert_eq!(
        BloomFilter::read_file(&path, &options).expect("load"),
        chunked(&path, &options)
    );

    type Subject<'a> = (&'a str, Box<dyn Fn() + 'a>);
    let subjects: [Subject<'_>; 4] = [
        (
            "buffered read (cat)",
            Box::new(|| {
                black_box(buffered_read(&path));
            }),
        ),
        (
            "std::fs::read",
            Box::new(|| drop(black_box(std::fs::read(&path).expect("read")))),
        ),
        (
            "Filter::read_file",
            Box::new(|| {
                drop(black_box(
                    BloomFilter::read_file(&path, &options).expect("load"),
                ))
            }),
        ),
        (
            "chunked from_payload",
            Box::new(|| drop(black_box(chunked(&path, &options)))),
        ),
    ];
    let mut times = vec![Vec::with_capacity(rounds); subjects.len()];
    for round in 0..rounds {
        for i in 0..subjects.len() {
            let at = (round + i) % subjects.len();
            let start = Instant::now();
            (subjects[at].1)();
            times[at].push(start.elapsed());
        }
    }
    for t in &mut times {
        t.sort();
    }
    let median = |t: &[Duration]| t[t.len() / 2];
    let fastest = |t: &[Duration]| t[0];
    println!("== a {mib} MiB snapshot from the page cache, {rounds} rounds");
    for ((name, _), t) in subjects.iter().zip(&times) {
        println!(
            "{name:24} median {:8.1} ms {:5.2}x, fastest {:8.1} ms {:5.2}x the buffered read's",
            median(t).as_secs_f64() * 1e3,
            median(t).as_secs_f64() / median(&times[0]).as_secs_f64(),
            fastest(t).as_secs_f64() * 1e3,
            fastest(t).as_secs_f64() / fastest(&times[0]).as_secs_f64(),
        );
    }
}
