//! Plans a filter, fills it, and compares the measured false-positive rate with the plan.
//!
//! `cargo run --release -p bloom-core --example plan -- [ITEMS] [FPR]`

use bloom_core::{BloomFilter, Filter, FilterConfig, FilterParams};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let items: u64 = args.next().map_or(Ok(100_000), |a| a.parse())?;
    let fpr: f64 = args.next().map_or(Ok(0.01), |a| a.parse())?;
    let params = FilterParams::for_false_positive_rate(items, fpr)?;
    let mut filter = BloomFilter::new(FilterConfig::new(params))?;
    for i in 0..items {
        filter.insert(&format!("record-{i}"));
    }
    let queries = 100_000u64;
    let hits = (0..queries)
        .filter(|i| filter.contains(&format!("absent-{i}")))
        .count();
    println!("items            {items}");
    println!("bits (m)         {}", params.bits());
    println!("positions (k)    {}", params.hashes());
    println!("bytes            {}", params.byte_len());
    println!(
        "predicted fpr    {:.5}",
        params.predicted_false_positive_rate(items)
    );
    println!(
        "measured fpr     {:.5} ({hits} of {queries} absent keys)",
        hits as f64 / queries as f64
    );
    println!("estimated items  {:.0}", filter.estimated_items());
    Ok(())
}
