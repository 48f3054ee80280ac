//! Ctrl-C, `SIGTERM` or `SIGHUP` while a file is being written: remove the temporary files, then
//! exit with 128 + the signal's number, as gzip does. Without this the signal's default action
//! would kill the process before any `Drop` runs and leave a partial file behind.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once};

use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
use signal_hook::iterator::Signals;

/// Temporary files being written now.
static PENDING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Starts the thread that handles the signals (once per process). If the handler cannot be
/// installed the signals keep their default action: no worse than before.
pub fn install() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(mut signals) = Signals::new([SIGINT, SIGTERM, SIGHUP]) else {
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
                std::process::exit(128 + signal);
            }
        });
    });
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
