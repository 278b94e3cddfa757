//! Progress on standard error for long key reads, shown only on a terminal: a bar with the
//! percentage, the rate and the time left when the input's size is known (a file), a
//! spinner with the count and the rate otherwise (standard input).

use std::cell::Cell;
use std::io::{IsTerminal, Read};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

/// A count shown as people read it: `999`, `12.3K`, `4.56M`, `7.89G`.
pub(crate) fn human(count: f64) -> String {
    let (value, unit) = if count >= 1e9 {
        (count / 1e9, "G")
    } else if count >= 1e6 {
        (count / 1e6, "M")
    } else if count >= 1e4 {
        (count / 1e3, "K")
    } else {
        return format!("{count:.0}");
    };
    let digits = if value >= 100.0 {
        0
    } else if value >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.digits$}{unit}")
}

/// Set by a command whose report goes to standard output as the keys are read (`check`,
/// `remove`): a bar on the same terminal would be drawn into the report's lines.
static REPORTS_ON_STDOUT: AtomicBool = AtomicBool::new(false);

/// Says that the command reports on standard output while it reads keys: progress is then
/// drawn only when standard output is not the terminal standard error is.
pub(crate) fn reports_on_stdout() {
    REPORTS_ON_STDOUT.store(true, Ordering::Relaxed);
}

/// What a bar's length counts.
#[derive(Clone, Copy)]
pub(crate) enum Total {
    /// Bytes of a key file of known size.
    Bytes(u64),
    /// Keys, when their number is known.
    Keys(u64),
    /// Nothing known: a spinner.
    Unknown,
}

/// The progress of reading keys: a bar when their total is known, a spinner otherwise;
/// hidden unless standard error is a terminal.
pub(crate) fn keys_bar(total: Total) -> ProgressBar {
    let bar = match total {
        Total::Bytes(n) | Total::Keys(n) => ProgressBar::new(n),
        Total::Unknown => ProgressBar::new_spinner(),
    };
    let drawn = std::io::stderr().is_terminal()
        && !(REPORTS_ON_STDOUT.load(Ordering::Relaxed) && std::io::stdout().is_terminal());
    if !drawn {
        bar.set_draw_target(ProgressDrawTarget::hidden());
        return bar;
    }
    let template = match total {
        Total::Bytes(_) => {
            "{spinner} [{bar:30}] {percent:>3}%  {msg} keys  {binary_bytes_per_sec}  {eta} left"
        }
        Total::Keys(_) => "{spinner} [{bar:30}] {percent:>3}%  {msg} keys  {key_rate}  {eta} left",
        Total::Unknown => "{spinner} {msg} keys  {key_rate}",
    };
    // `key_rate` appears only where the position counts keys.
    let started = std::time::Instant::now();
    let style = ProgressStyle::with_template(template)
        .unwrap_or_else(|_| ProgressStyle::default_spinner())
        .with_key(
            "key_rate",
            move |state: &ProgressState, out: &mut dyn std::fmt::Write| {
                let seconds = started.elapsed().as_secs_f64().max(1e-3);
                let _ = write!(out, "{} keys/s", human(state.pos() as f64 / seconds));
            },
        )
        .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message("0");
    bar.enable_steady_tick(Duration::from_millis(120));
    bar
}

/// Updates a bar: its position (bytes read so far for a [`Total::Bytes`] bar, keys
/// otherwise), and the key count.
pub(crate) fn advance(bar: &ProgressBar, counts_bytes: bool, keys: u64, bytes: u64) {
    if bar.is_hidden() {
        return;
    }
    bar.set_position(if counts_bytes { bytes } else { keys });
    bar.set_message(human(keys as f64));
}

/// A reader that counts the bytes read through it, for a progress bar.
pub(crate) struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R> Counted<R> {
    /// `inner`, and the count it adds to.
    pub(crate) fn new(inner: R) -> (Self, Rc<Cell<u64>>) {
        let read = Rc::new(Cell::new(0));
        (
            Self {
                inner,
                read: Rc::clone(&read),
            },
            read,
        )
    }
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_read_as_people_read_them() {
        assert_eq!(human(0.0), "0");
        assert_eq!(human(9_999.0), "9999");
        assert_eq!(human(12_345.0), "12.3K");
        assert_eq!(human(3_020_790.951_2), "3.02M");
        assert_eq!(human(456_000_000.0), "456M");
        assert_eq!(human(7.891e9), "7.89G");
    }

    #[test]
    fn a_counted_reader_counts_what_passes() {
        let (mut reader, read) = Counted::new(&b"hello world"[..]);
        let mut buf = [0u8; 4];
        assert_eq!(reader.read(&mut buf).unwrap(), 4);
        let mut rest = Vec::new();
        reader.read_to_end(&mut rest).unwrap();
        assert_eq!(read.get(), 11);
    }
}
