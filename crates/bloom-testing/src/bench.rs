//! What the benchmarks print.

/// Prints a benchmark's paired-round values: the median and the interquartile range.
pub fn report(name: &str, mut values: Vec<f64>) {
    values.sort_by(f64::total_cmp);
    let at = |q: usize| values[(values.len() - 1) * q / 4];
    println!(
        "{name:<52} median {:>10.3}  (IQR {:.3} .. {:.3}, {} rounds)",
        at(2),
        at(1),
        at(3),
        values.len()
    );
}
