//! The progress bar on stderr: bytes, speed, ratio so far and time left, for large inputs on a
//! terminal only.

use std::io::IsTerminal;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::member::Totals;

/// Inputs smaller than this finish too soon for a bar to help.
pub const MIN_SIZE: u64 = 4 << 20;

/// A progress display for one file; a no-op when disabled.
#[derive(Debug)]
pub struct Progress {
    bar: Option<ProgressBar>,
    compressing: bool,
}

impl Progress {
    /// A bar for an input of `size` bytes (`None`: unknown), shown only if `enabled`, stderr is
    /// a terminal and the input is at least [`MIN_SIZE`].
    pub fn new(label: &str, size: Option<u64>, compressing: bool, enabled: bool) -> Progress {
        let show = enabled && std::io::stderr().is_terminal() && size.unwrap_or(0) >= MIN_SIZE;
        let bar = show.then(|| {
            let bar = ProgressBar::with_draw_target(size, ProgressDrawTarget::stderr());
            let style = ProgressStyle::with_template(
                "{prefix} [{wide_bar}] {bytes}/{total_bytes} {bytes_per_sec} {msg} ETA {eta}",
            )
            .expect("the template is valid")
            .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(label.to_owned());
            bar
        });
        Progress { bar, compressing }
    }

    /// Shows the running totals; the bar follows the input side.
    pub fn update(&self, totals: Totals) {
        let Some(bar) = &self.bar else { return };
        let (read, written) = (totals.bytes_in, totals.bytes_out);
        let (position, plain, packed) = if self.compressing {
            (read, read, written)
        } else {
            (read, written, read)
        };
        bar.set_position(position);
        if packed > 0 {
            bar.set_message(format!("ratio {:.2}", plain as f64 / packed as f64));
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
