//! Log lines to standard error in batches, like nginx's `access_log … buffer= flush=`.
//!
//! A busy proxy logs one access line per request. Written one by one, that is a `write`
//! system call per request (3,000 a second on the bench page); batched, a few dozen. The
//! system call is the smaller part of the log's cost (formatting the line is most of it, and
//! the access log as a whole costs 2-3% of hits/s there), but it is the part a writer can
//! remove. Here a line goes out at once when the log has been
//! quiet for [`DELAY`] (so a person watching sees startup lines and the odd request as they
//! happen); under load lines are held and written together when [`BATCH_BYTES`] have gathered
//! or [`DELAY`] after the last write, by a small thread that wakes every [`DELAY`]. Warnings and
//! errors write the held lines and themselves at once, in order. [`flush`] writes what is held
//! at exit.
//!
//! tracing-appender's non-blocking writer moves every line to another thread through a
//! channel, which costs a wake-up per line on the proxy's single pinned core; this keeps the
//! write on the logging thread and only batches it.

use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, Once};
use std::thread;
use std::time::{Duration, Instant};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Longest a line waits before it is written.
pub const DELAY: Duration = Duration::from_millis(100);

/// Held bytes that make the next line write the batch.
pub const BATCH_BYTES: usize = 32 * 1024;

/// Lines held for standard error and when the last write was.
struct Batch {
    held: Vec<u8>,
    last_write: Option<Instant>,
}

impl Batch {
    const fn new() -> Batch {
        Batch {
            held: Vec::new(),
            last_write: None,
        }
    }

    /// Adds `line`; writes everything held to `sink` when the line is `urgent`, the batch is
    /// full, or nothing was written for [`DELAY`]. Returns whether lines stay held.
    fn push(&mut self, line: &[u8], urgent: bool, now: Instant, sink: &mut impl Write) -> bool {
        self.held.extend_from_slice(line);
        if urgent || self.quiet_since_last_write(now) || self.held.len() >= BATCH_BYTES {
            self.write_out(now, sink);
        }
        !self.held.is_empty()
    }

    /// Writes what is held if the last write is [`DELAY`] old.
    fn flush_due(&mut self, now: Instant, sink: &mut impl Write) {
        if self.quiet_since_last_write(now) && !self.held.is_empty() {
            self.write_out(now, sink);
        }
    }

    /// Whether nothing was written for [`DELAY`] (or ever).
    fn quiet_since_last_write(&self, now: Instant) -> bool {
        self.last_write
            .is_none_or(|last| now.duration_since(last) >= DELAY)
    }

    /// Writes everything held. A failed write drops the lines, as an unbatched log would.
    fn write_out(&mut self, now: Instant, sink: &mut impl Write) {
        let _ = sink.write_all(&self.held).and_then(|()| sink.flush());
        self.held.clear();
        // A burst of logging must not keep a large buffer for the rest of the run.
        if self.held.capacity() > 2 * BATCH_BYTES {
            self.held.shrink_to(BATCH_BYTES);
        }
        self.last_write = Some(now);
    }
}

static BATCH: Mutex<Batch> = Mutex::new(Batch::new());

fn batch() -> MutexGuard<'static, Batch> {
    // Nothing that holds the lock can panic half-way through a line; take it back anyway.
    BATCH
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Writes the lines still held; call before the process exits.
pub fn flush() {
    let mut batch = batch();
    if !batch.held.is_empty() {
        batch.write_out(Instant::now(), &mut io::stderr().lock());
    }
}

/// Starts the thread that writes held lines once they are [`DELAY`] old.
fn start_flusher() {
    static STARTED: Once = Once::new();
    STARTED.call_once(|| {
        let spawned = thread::Builder::new()
            .name("log-flush".into())
            .spawn(|| loop {
                thread::sleep(DELAY);
                batch().flush_due(Instant::now(), &mut io::stderr().lock());
            });
        if spawned.is_err() {
            // No thread: write every line at once instead of holding it.
            URGENT_ONLY.store(true, Ordering::Relaxed);
        }
    });
}

/// Set when the flusher thread could not start: every line is then written at once.
static URGENT_ONLY: AtomicBool = AtomicBool::new(false);

/// A [`MakeWriter`] for standard error that batches lines as the module describes.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchedStderr;

/// One event's line, handed to the batch when the event is done.
pub struct LineWriter {
    line: Vec<u8>,
    urgent: bool,
}

impl Write for LineWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.line.extend_from_slice(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for LineWriter {
    fn drop(&mut self) {
        if self.line.is_empty() {
            return;
        }
        let urgent = self.urgent || URGENT_ONLY.load(Ordering::Relaxed);
        let held = batch().push(&self.line, urgent, Instant::now(), &mut io::stderr().lock());
        if held {
            start_flusher();
        }
    }
}

impl<'a> MakeWriter<'a> for BatchedStderr {
    type Writer = LineWriter;

    fn make_writer(&'a self) -> LineWriter {
        LineWriter {
            line: Vec::new(),
            urgent: true,
        }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> LineWriter {
        LineWriter {
            line: Vec::with_capacity(256),
            // tracing orders levels by verbosity: WARN and ERROR are the ones at or below WARN.
            urgent: *meta.level() <= Level::WARN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(sink: &[u8]) -> Vec<&str> {
        std::str::from_utf8(sink).expect("utf-8").lines().collect()
    }

    #[test]
    fn a_line_after_a_quiet_spell_goes_out_at_once() {
        let (mut batch, mut sink, t0) = (Batch::new(), Vec::new(), Instant::now());
        assert!(!batch.push(b"first\n", false, t0, &mut sink));
        assert_eq!(lines(&sink), ["first"]);
        assert!(!batch.push(b"later\n", false, t0 + DELAY, &mut sink));
        assert_eq!(lines(&sink), ["first", "later"]);
    }

    #[test]
    fn lines_in_a_burst_are_held_until_due_or_full() {
        let (mut batch, mut sink, t0) = (Batch::new(), Vec::new(), Instant::now());
        batch.push(b"first\n", false, t0, &mut sink);
        let soon = t0 + DELAY / 2;
        assert!(batch.push(b"second\n", false, soon, &mut sink));
        assert!(batch.push(b"third\n", false, soon, &mut sink));
        assert_eq!(lines(&sink), ["first"]);
        batch.flush_due(soon, &mut sink);
        assert_eq!(lines(&sink), ["first"], "not due yet");
        batch.flush_due(t0 + DELAY, &mut sink);
        assert_eq!(lines(&sink), ["first", "second", "third"]);

        // A full batch goes out without waiting.
        let line = [b'x'; 99].iter().chain(b"\n").copied().collect::<Vec<u8>>();
        let burst = t0 + DELAY + DELAY / 2;
        let mut pushed = 0;
        while batch.push(&line, false, burst, &mut sink) {
            pushed += 1;
        }
        assert_eq!(pushed, BATCH_BYTES.div_ceil(line.len()) - 1);
        assert_eq!(lines(&sink).len(), 3 + BATCH_BYTES.div_ceil(line.len()));
    }

    #[test]
    fn a_warning_writes_the_held_lines_first() {
        let (mut batch, mut sink, t0) = (Batch::new(), Vec::new(), Instant::now());
        batch.push(b"one\n", false, t0, &mut sink);
        batch.push(b"two\n", false, t0, &mut sink);
        assert!(!batch.push(b"warning\n", true, t0, &mut sink));
        assert_eq!(lines(&sink), ["one", "two", "warning"]);
    }

    #[test]
    fn a_failed_write_drops_the_lines_and_keeps_logging() {
        struct Full;
        impl Write for Full {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::Error::other("disk full"))
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let (mut batch, t0) = (Batch::new(), Instant::now());
        assert!(!batch.push(b"lost\n", true, t0, &mut Full));
        let mut sink = Vec::new();
        batch.push(b"kept\n", true, t0, &mut sink);
        assert_eq!(lines(&sink), ["kept"]);
    }
}
