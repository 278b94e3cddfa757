//! The Rust side of `crates/bloom-py/benches/batch_ratio.py`: times the batch API
//! (`insert_all` into a new filter, then `contains_each` collected into a `Vec<bool>`) over the same keys the Python bench
//! uses, `key-` and a 20-digit number (24 bytes), and prints nanoseconds per key.
//!
//! ```sh
//! cargo run --release -p bloom-ffi --example batch_timing -- 1000000
//! ```

use std::time::Instant;

use bloom_ffi::{FilterOptions, create};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let n: usize = std::env::args()
        .nth(1)
        .map_or(Ok(1_000_000), |a| a.parse())?;
    let keys: Vec<String> = (0..n).map(|i| format!("key-{i:020}")).collect();
    let mut filter = create(&FilterOptions::new(n as u64, 0.01))?;

    let start = Instant::now();
    let added = filter.insert_all(keys.iter().map(String::as_str));
    let insert = start.elapsed();

    // The answers kept, one per key, as Python's `contains_all` keeps them in a list.
    let start = Instant::now();
    let answers: Vec<bool> = filter
        .contains_each(keys.iter().map(String::as_str))
        .collect();
    let contains = start.elapsed();
    let found = answers.iter().filter(|&&maybe| maybe).count();

    assert_eq!(found, n, "every inserted key is found");
    let per_key = |d: std::time::Duration| d.as_nanos() as f64 / n as f64;
    println!(
        "{{\"keys\": {n}, \"added\": {added}, \"insert_ns_per_key\": {:.2}, \"contains_ns_per_key\": {:.2}}}",
        per_key(insert),
        per_key(contains)
    );
    Ok(())
}
