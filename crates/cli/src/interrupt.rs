//! Ctrl-C, `SIGTERM`, `SIGHUP`, `SIGXFSZ` or `SIGXCPU` while a file is being written: remove the
//! temporary files, then die of the signal, as gzip does (its default action, raised again: a
//! shell running a loop stops only when the child was killed by the SIGINT, not when it
//! exited 130). Without this the signal's default action would kill the process before any
//! `Drop` runs and leave a partial file behind.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGXCPU, SIGXFSZ};
use signal_hook::iterator::Signals;

/// Temporary files being written now.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Starts the thread that handles the signals (once per process). If the handler cannot be
/// installed the signals keep their default action: no worse than before. A signal the
/// process was started ignoring stays ignored, as gzip leaves it (`nohup gzip big &` must
/// survive the logout, a background job in a script the terminal's Ctrl-C).
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let ignored = ignored_signals();
        // SIGXFSZ and SIGXCPU: `ulimit -f` and `ulimit -t` (their default action would leave a
        // temporary file).
        let wanted: Vec<i32> = [SIGINT, SIGTERM, SIGHUP, SIGXFSZ, SIGXCPU]
            .into_iter()
            .filter(|&signal| !is_ignored(ignored, signal))
            .collect();
        if wanted.is_empty() {
            return;
        }
        let Ok(mut signals) = Signals::new(wanted) else {
            return;
        };
        std::thread::spawn(move || {
            if let Some(signal) = signals.forever().next() {
                let pending = PENDING
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                for path in pending.iter() {
                    let _ = std::fs::remove_file(path);
                }
                // The default action (termination) with the handler out of the way; the exit
                // status is only the fallback should the signal somehow not end the process.
                let _ = signal_hook::low_level::emulate_default_handler(signal);
                std::process::exit(128 + signal);
            }
        });
    });
}

/// The signals this process ignores, as the kernel reports them (`SigIgn` in
/// `/proc/self/status`, bit `n - 1` for signal `n`); none where that cannot be read.
fn ignored_signals() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))
        .and_then(|mask| u64::from_str_radix(mask.trim(), 16).ok())
        .unwrap_or(0)
}

fn is_ignored(mask: u64, signal: i32) -> bool {
    (1..=64).contains(&signal) && mask >> (signal - 1) & 1 == 1
}

/// Notes a temporary file to remove if a signal comes.
pub(crate) fn register(path: &Path) {
    let mut pending = PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    pending.push(path.to_owned());
}

/// Forgets a temporary file: it was moved into place or removed.
pub(crate) fn unregister(path: &Path) {
    let mut pending = PENDING
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    pending.retain(|p| p != path);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ignored_signals_are_read_from_the_kernels_mask() {
        // SIGHUP is 1, SIGINT 2, SIGTERM 15.
        let mask = 0b11;
        assert!(is_ignored(mask, SIGHUP) && is_ignored(mask, SIGINT));
        assert!(!is_ignored(mask, SIGTERM) && !is_ignored(mask, 0) && !is_ignored(mask, 65));
        // This test process ignores none of the three (cargo's harness leaves them alone).
        let ours = ignored_signals();
        assert!(!is_ignored(ours, SIGTERM), "{ours:x}");
    }
}
