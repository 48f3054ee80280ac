//! One member on several threads: each thread reads a block into a buffer of its own,
//! compresses it, and writes it when its turn comes.
//!
//! # Why a thread reads and writes its own blocks
//!
//! With one thread reading every block and writing every output while workers compress, every block
//! crosses between cores twice: its input is written into memory on the reading core and read on
//! the compressing one, and its output the other way round. On this project's 2-core machine (a
//! virtual machine) that cost is large and comes and goes with where the host places the two cores:
//! measured that way, `zipwire compress -1 -p2` of the 100 MB slice of `large/` took 229-257 ms of
//! CPU where one thread takes 222-226 ms. With each thread keeping its blocks it takes 225-227 ms,
//! and the run goes at 844-860 MB/s against 717-774 in alternating rounds
//! (`docs/design/notes/cli-measurements.md`, "Threads that keep their blocks").
//!
//! Reading is serialised by a lock, so blocks are handed out in input order, and so is
//! writing: a thread whose block is next writes it, together with any later blocks that other
//! threads finished first and parked; a thread whose block is not next parks it and goes on.
//! No thread starts a block `2 × threads` or more past the next one to write, which bounds the
//! parked outputs.

use std::collections::BTreeMap;
use std::io::{self, Read, Write};
use std::sync::{Condvar, Mutex, PoisonError};
use std::thread;

use zipwire_codec::Level;

use super::{Blocks, Done, Job, Sink, Worker};
use crate::error::StreamError;

/// Compresses `first` and then every block `blocks` reads on `threads` threads (this one among
/// them), writing each to `sink` in input order.
pub(super) fn run<R: Read + Send, W: Write + Send + ?Sized>(
    first: Job,
    blocks: &mut Blocks<'_, R>,
    sink: &mut Sink<'_, W>,
    level: Level,
    threads: usize,
) -> Result<(), StreamError> {
    let shared = Shared {
        reading: Mutex::new(Reading {
            blocks,
            first: Some(first),
            next: 0,
        }),
        writing: Mutex::new(Writing {
            sink,
            next: 0,
            parked: BTreeMap::new(),
            spare: Vec::new(),
            failed: None,
        }),
        written: Condvar::new(),
        depth: 2 * threads as u64,
    };
    thread::scope(|scope| {
        for _ in 1..threads {
            // Where the system refuses another thread (a process limit), the member goes on
            // with the threads it has: this one always works too, so nothing waits for a
            // thread that never started.
            if thread::Builder::new()
                .spawn_scoped(scope, || shared.work(level))
                .is_err()
            {
                break;
            }
        }
        shared.work(level);
    });
    let reading = shared
        .reading
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    let writing = shared
        .writing
        .into_inner()
        .unwrap_or_else(PoisonError::into_inner);
    if let Some(err) = writing.failed {
        return Err(err);
    }
    // Every thread stops only once the input has ended or something failed, so every block
    // handed out was written. Should that ever not hold, the member must not end as if whole.
    if writing.next != reading.next || !writing.parked.is_empty() {
        return Err(worker_lost());
    }
    for out in writing.spare {
        reading.blocks.keep_output(out);
    }
    Ok(())
}

/// What the threads share.
struct Shared<'a, 'r, 's, R, W: ?Sized> {
    reading: Mutex<Reading<'a, 'r, R>>,
    writing: Mutex<Writing<'a, 's, W>>,
    /// Signalled when blocks are written or something failed.
    written: Condvar,
    /// A block this far or further past the next one to write waits to be read.
    depth: u64,
}

/// The reading side: blocks go out in input order.
struct Reading<'a, 'r, R> {
    blocks: &'a mut Blocks<'r, R>,
    /// The first block, read before the threads started.
    first: Option<Job>,
    /// The number of the next block to hand out.
    next: u64,
}

/// The writing side: blocks go out in input order.
struct Writing<'a, 's, W: ?Sized> {
    sink: &'a mut Sink<'s, W>,
    /// The number of the next block to write.
    next: u64,
    /// Blocks finished before their turn.
    parked: BTreeMap<u64, Done>,
    /// Output buffers of written blocks, for the next jobs.
    spare: Vec<Vec<u8>>,
    /// The first error; every thread stops at it.
    failed: Option<StreamError>,
}

impl<R: Read, W: Write + ?Sized> Shared<'_, '_, '_, R, W> {
    /// One thread's part: take a block, compress it, put it out, until the input ends or
    /// something fails.
    fn work(&self, level: Level) {
        // A panicking thread leaves its block unwritten: the others must not wait for it.
        let _unwinding = OnUnwind(|| self.fail(worker_lost()));
        let mut worker = Worker::new(level);
        let mut buffers = (None, None);
        while let Some((number, job)) = self.take(buffers) {
            let (done, data) = worker.run(job);
            let Some(out) = self.put(number, done) else {
                return;
            };
            buffers = (Some(data), Some(out));
        }
    }

    /// The next block and its number, read into `data` with `out` for its output (this
    /// thread's buffers from its last block; spare ones the first time); `None` once the input
    /// has ended or something failed.
    fn take(&self, (data, out): (Option<Vec<u8>>, Option<Vec<u8>>)) -> Option<(u64, Job)> {
        let mut reading = self.reading.lock().ok()?;
        let number = reading.next;
        {
            let mut writing = self.writing.lock().ok()?;
            while writing.failed.is_none() && number >= writing.next + self.depth {
                writing = self.written.wait(writing).ok()?;
            }
            if writing.failed.is_some() {
                return None;
            }
        }
        let job = match reading.first.take() {
            Some(first) => first,
            None => {
                let blocks = &mut *reading.blocks;
                let data = data.unwrap_or_else(|| blocks.input_buffer());
                let out = out.unwrap_or_else(|| blocks.output_buffer());
                match blocks.next_job(data, out) {
                    Ok(job) => job?,
                    Err(err) => {
                        self.fail(err);
                        return None;
                    }
                }
            }
        };
        reading.next += 1;
        Some((number, job))
    }

    /// Writes block `number` if its turn has come, with the parked blocks after it, or parks
    /// it; returns a buffer for this thread's next output, `None` if something failed.
    fn put(&self, number: u64, done: Done) -> Option<Vec<u8>> {
        let mut writing = self.writing.lock().ok()?;
        if writing.failed.is_some() {
            return None;
        }
        writing.parked.insert(number, done);
        let before = writing.next;
        loop {
            let next = writing.next;
            let Some(done) = writing.parked.remove(&next) else {
                break;
            };
            match writing.sink.write(done) {
                Ok(buffer) => writing.spare.push(buffer),
                Err(err) => {
                    writing.failed = Some(err);
                    self.written.notify_all();
                    return None;
                }
            }
            writing.next += 1;
        }
        if writing.next != before {
            self.written.notify_all();
        }
        Some(writing.spare.pop().unwrap_or_default())
    }

    /// Records `err` (unless an earlier error is recorded) and wakes every waiting thread.
    fn fail(&self, err: StreamError) {
        let mut writing = self.writing.lock().unwrap_or_else(PoisonError::into_inner);
        writing.failed.get_or_insert(err);
        self.written.notify_all();
    }
}

/// Calls its function when dropped by a panic unwinding.
struct OnUnwind<F: FnMut()>(F);

impl<F: FnMut()> Drop for OnUnwind<F> {
    fn drop(&mut self) {
        if thread::panicking() {
            (self.0)();
        }
    }
}

fn worker_lost() -> StreamError {
    StreamError::Write(io::Error::other("a compression thread failed"))
}

#[cfg(test)]
mod tests {
    use zipwire_codec::{decompress, Format, Limits};
    use zipwire_testkit::{generate, DataKind};

    use super::super::tests::options;
    use super::super::{compress, Totals};
    use super::*;

    #[test]
    fn blocks_are_written_and_reported_in_input_order() {
        // Random blocks compress far faster than text ones at level 9, so later blocks often
        // finish first and wait, parked, for their turn.
        let mut data = Vec::new();
        for i in 0..24 {
            let kind = if i % 3 == 0 {
                DataKind::Text
            } else {
                DataKind::Random
            };
            data.extend(generate(kind, 20_000, i));
        }
        for (level, threads) in [(9, 3), (1, 4), (6, 2)] {
            let mut seen = Vec::new();
            let mut out = Vec::new();
            let options = options(level, threads, 20_000);
            let totals = compress(&data[..], &mut out, &options, &mut |t: Totals| {
                seen.push(t.bytes_in);
            })
            .unwrap();
            let expected: Vec<u64> = (1..=24).map(|i| i * 20_000).collect();
            assert_eq!(seen, expected, "-{level} -p{threads}");
            assert_eq!(totals.bytes_out, out.len() as u64);
            let plain = decompress(Format::Gzip, &out, Limits::default()).unwrap();
            assert!(plain == data, "-{level} -p{threads}");
        }
    }

    #[test]
    fn a_write_error_stops_every_thread_and_is_reported() {
        /// Takes `room` bytes, then fails every write.
        struct Full {
            written: Vec<u8>,
            room: usize,
        }
        impl Write for Full {
            fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
                if self.written.len() >= self.room {
                    return Err(io::Error::other("no space left on device"));
                }
                let n = buf.len().min(self.room - self.written.len());
                self.written.extend_from_slice(&buf[..n]);
                Ok(n)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let data = generate(DataKind::Text, 400_000, 9);
        for threads in [2, 3, 8] {
            for room in [0, 10, 5_000, 50_000] {
                let mut full = Full {
                    written: Vec::new(),
                    room,
                };
                let options = options(1, threads, 16_384);
                let result = compress(&data[..], &mut full, &options, &mut |_| {});
                assert!(
                    matches!(result, Err(StreamError::Write(_))),
                    "-p{threads} room {room}: {result:?}"
                );
                // What went out before the error is no complete member.
                assert!(decompress(Format::Gzip, &full.written, Limits::default()).is_err());
            }
        }
    }
}
