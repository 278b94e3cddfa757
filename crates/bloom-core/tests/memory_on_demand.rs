//! A new filter's bit array comes zeroed from the allocator as fresh pages, written by no
//! one: its memory grows as keys land, not when it is made (`BloomFilter::new`). One test in
//! its own binary, so that no other test's allocations move the process's resident size
//! while it measures.

#![cfg(target_os = "linux")]

use bloom_core::{AtomicBloomFilter, BloomFilter, Filter};

/// The process's resident set, in bytes (`VmRSS` of `/proc/self/status`).
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("procfs");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .expect("a VmRSS line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("a size in kB");
    kib * 1024
}

#[test]
fn a_new_filter_takes_memory_as_it_fills_not_when_made() {
    const MIB: u64 = 1 << 20;
    let before = resident();
    let mut plain = BloomFilter::with_capacity(200_000_000, 0.01).unwrap();
    let atomic = AtomicBloomFilter::new(plain.config().clone()).unwrap();
    let made = resident();
    let size = plain.config().params().byte_len();
    assert!(size > 200 * MIB, "a filter of {size} bytes");
    assert!(
        made.saturating_sub(before) < 16 * MIB,
        "two filters of {} MiB each made {} MiB resident",
        size / MIB,
        made.saturating_sub(before) / MIB
    );

    // Keys touch the pages they land in (how much memory that is depends on the system's
    // page size, and on whether it backs them with huge pages).
    for i in 0..1_000 {
        let key = format!("key-{i}");
        plain.insert(key.as_str());
        atomic.insert(key.as_str());
    }
    assert!(resident() > made, "keys landed in pages not yet resident");
    assert!(plain.contains("key-7") && atomic.contains("key-7"));
}
