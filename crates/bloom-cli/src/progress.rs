//! A spinner on standard error for long key reads, shown only on a terminal.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

pub(crate) fn bar(label: &'static str) -> ProgressBar {
    let bar = ProgressBar::new_spinner();
    if std::io::stderr().is_terminal() {
        bar.set_style(
            ProgressStyle::with_template("{spinner} {msg} {human_pos} keys ({per_sec})")
                .unwrap_or_else(|_| ProgressStyle::default_spinner()),
        );
        bar.set_message(label);
        bar.enable_steady_tick(std::time::Duration::from_millis(120));
    } else {
        bar.set_draw_target(ProgressDrawTarget::hidden());
    }
    bar
}
