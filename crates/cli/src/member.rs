//! One gzip member from a stream of any length, compressed block by block on worker threads.
//!
//! The input is cut into [`BLOCK`]-sized blocks. Each block becomes a run of raw deflate blocks
//! ending on a byte boundary (a sync marker after all but the last), so the member is the
//! concatenation of the blocks' outputs between one header and one trailer; the CRC-32 is
//! computed per block and combined in order. A block's output depends only on its own bytes
//! (levels 1-3: the stateless encoder) or on its bytes and the 32 KB before it (levels 4-9:
//! zlib-rs primed with that dictionary, as pigz does), never on how many threads ran or how
//! reads were split, so the output is byte-identical whatever the thread count.
//!
//! With several threads, each one reads a block into a buffer of its own, compresses it and
//! writes it when its turn comes (`member/parallel.rs` says why). Memory is bounded by the
//! blocks in flight: one input buffer per thread and at most `2 × threads` outputs, however
//! long the input. When a member ends, its buffers stay for the next member in the process
//! (see `member/spare.rs`).

use std::io::{self, Read, Write};

use flate2::{Compress, Compression, FlushCompress};
use zipwire_codec::format::gzip;
use zipwire_codec::{Encoder, Format, Level, Scratch};

use crate::error::StreamError;

mod parallel;
mod spare;

/// Uncompressed bytes per block: large enough that starting each stateless block without a
/// dictionary costs little ratio (about 0.3 % on the large corpus), small enough that a few
/// blocks per thread stay far below the memory cap.
pub const BLOCK: usize = 1 << 20;

/// Window a stateful block is primed with: deflate's whole window.
const DICTIONARY: usize = 32 * 1024;

/// How a member is compressed.
#[derive(Clone, Debug)]
pub struct MemberOptions {
    /// Compression level, 1-3 stateless, 4-9 zlib-rs.
    pub level: Level,
    /// Threads that compress; 1 compresses on the calling thread alone.
    pub threads: usize,
    /// The member's header.
    pub header: gzip::Header,
    /// Uncompressed bytes per block: [`BLOCK`] unless a test wants many small blocks. The
    /// output depends on it, so it is fixed for a given format of output.
    pub block_size: usize,
}

/// What a member took and wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Totals {
    /// Uncompressed bytes read.
    pub bytes_in: u64,
    /// Compressed bytes written, header and trailer included.
    pub bytes_out: u64,
}

/// Compresses all of `input` into one gzip member written to `output`, calling `progress` with
/// the running totals after each block is written.
///
/// With [`MemberOptions::threads`] above 1, `input` is read, and `output` and `progress`
/// called, from whichever thread holds the block in turn (never two at once).
///
/// # Errors
///
/// [`StreamError::Read`] or [`StreamError::Write`] with the first I/O error on either side;
/// the output is then incomplete and must be discarded (it never ends with a trailer).
pub fn compress<R: Read + Send, W: Write + Send + ?Sized>(
    mut input: R,
    output: &mut W,
    options: &MemberOptions,
    progress: &mut (dyn FnMut(Totals) + Send),
) -> Result<Totals, StreamError> {
    let header = options.header.to_bytes();
    output.write_all(&header).map_err(StreamError::Write)?;
    let mut sink = Sink {
        output,
        crc: crc32fast::Hasher::new(),
        totals: Totals {
            bytes_in: 0,
            bytes_out: header.len() as u64,
        },
        progress,
    };
    let mut blocks = Blocks::new(
        &mut input,
        options.block_size.max(1),
        !options.level.is_stateless(),
    );
    let (data, out) = (blocks.input_buffer(), blocks.output_buffer());
    match blocks.next_job(data, out)? {
        Some(first) if options.threads > 1 && !first.last => {
            parallel::run(
                first,
                &mut blocks,
                &mut sink,
                options.level,
                options.threads,
            )?;
        }
        // One thread, or an input of one block: starting threads for a single block would
        // cost more than it saves (0.7 ms of a 2.6 ms run on an empty input).
        mut next => {
            let mut worker = Worker::new(options.level);
            while let Some(job) = next {
                let (done, data) = worker.run(job);
                let out = sink.write(done)?;
                next = blocks.next_job(data, out)?;
            }
        }
    }
    let crc = sink.crc.clone().finalize();
    // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
    let trailer = gzip::trailer(crc, sink.totals.bytes_in as u32);
    sink.output
        .write_all(&trailer)
        .map_err(StreamError::Write)?;
    sink.totals.bytes_out += trailer.len() as u64;
    Ok(sink.totals)
}

/// Most bytes of the next block read before a block is handed out: one read, which tells
/// whether the block is the last, so that a pipe's block goes out without waiting for the
/// whole next one. The next reader copies these bytes to the start of its own buffer.
const PEEK: usize = 4 * 1024;

/// Reads block-sized jobs, reading the start of the next block first so that the last block
/// is known to be last.
///
/// A caller hands in the buffers each job reads into and writes into: a thread keeps its own
/// from block to block, so a long input reuses a few buffers instead of faulting in fresh pages
/// for every block, and a buffer, once zeroed, is read into without being zeroed again.
struct Blocks<'r, R> {
    input: &'r mut R,
    size: usize,
    /// The start of the next block (`peeked` bytes of it): at least one byte unless the input
    /// has ended.
    peek: Vec<u8>,
    peeked: usize,
    /// The tail of the previous block, for stateful levels' dictionaries.
    tail: Vec<u8>,
    /// Levels 4-9: jobs carry a dictionary, and output buffers are not reused (see
    /// [`Worker::run`]).
    stateful: bool,
    done: bool,
    /// Input buffers no thread holds, ready for the next reads.
    spare_inputs: Vec<Vec<u8>>,
    /// Output buffers no thread holds, ready for the next jobs.
    spare_outputs: Vec<Vec<u8>>,
}

impl<'r, R: Read> Blocks<'r, R> {
    fn new(input: &'r mut R, size: usize, stateful: bool) -> Self {
        let spare = spare::take(size);
        Blocks {
            input,
            size,
            peek: vec![0; PEEK.min(size)],
            peeked: 0,
            tail: Vec::new(),
            stateful,
            done: false,
            spare_inputs: spare.inputs,
            spare_outputs: spare.outputs,
        }
    }

    /// The next block to compress, read into `data`, with `out` for its output; `None` after
    /// the last one (the two buffers are then kept as spares).
    fn next_job(
        &mut self,
        mut data: Vec<u8>,
        mut out: Vec<u8>,
    ) -> Result<Option<Job>, StreamError> {
        if self.done {
            self.spare_inputs.push(data);
            self.keep_output(out);
            return Ok(None);
        }
        // Zeroes only what a short block left out.
        data.resize(self.size, 0);
        let mut filled = self.peeked;
        data[..filled].copy_from_slice(&self.peek[..filled]);
        filled += fill(self.input, &mut data[filled..])?;
        data.truncate(filled);
        let last = filled < self.size || {
            self.peeked = read_some(self.input, &mut self.peek)?;
            self.peeked == 0
        };
        self.done = last;
        let dictionary = if self.stateful {
            let tail = data[data.len().saturating_sub(DICTIONARY)..].to_vec();
            std::mem::replace(&mut self.tail, tail)
        } else {
            Vec::new()
        };
        // Stateful levels write into buffers of their own (see `Worker::run`).
        if self.stateful {
            self.keep_output(std::mem::take(&mut out));
        }
        out.clear();
        Ok(Some(Job {
            data,
            out,
            dictionary,
            last,
        }))
    }

    /// A buffer to read a block into: a spare one, or a new one of zeroes (allocated zeroed,
    /// so that its pages are touched only where reads fill them: zeroing a block's buffer by
    /// hand cost an empty input 0.4 ms).
    fn input_buffer(&mut self) -> Vec<u8> {
        self.spare_inputs
            .pop()
            .unwrap_or_else(|| vec![0; self.size])
    }

    /// A buffer to write a block's output into: a spare one, or a new empty one.
    fn output_buffer(&mut self) -> Vec<u8> {
        self.spare_outputs.pop().unwrap_or_default()
    }

    /// Keeps an output buffer no job holds any more as a spare, at stateless levels. Stateful
    /// levels never take spare outputs, and what they hand back is each written block's own
    /// buffer: kept, those would add up to the whole output (108 MB of peak RSS for `-6` of
    /// 100 MB), so they are freed.
    fn keep_output(&mut self, out: Vec<u8>) {
        if !self.stateful {
            self.spare_outputs.push(out);
        }
    }
}

impl<R> Drop for Blocks<'_, R> {
    /// Leaves the buffers for the next member (whatever ended this one, an error too).
    fn drop(&mut self) {
        spare::keep(spare::Spare {
            inputs: std::mem::take(&mut self.spare_inputs),
            outputs: std::mem::take(&mut self.spare_outputs),
        });
    }
}

/// Reads into `buf` until it is full or the input ends; returns how many bytes it holds.
fn fill<R: Read>(input: &mut R, buf: &mut [u8]) -> Result<usize, StreamError> {
    let mut filled = 0;
    while filled < buf.len() {
        match read_some(input, &mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// One read into `buf`, repeated if a signal interrupted it: 0 only at the end of the input.
fn read_some<R: Read>(input: &mut R, buf: &mut [u8]) -> Result<usize, StreamError> {
    loop {
        match input.read(buf) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            result => return result.map_err(StreamError::Read),
        }
    }
}

/// One block to compress.
struct Job {
    data: Vec<u8>,
    /// An empty buffer for the block's output: a spare one where there is one.
    out: Vec<u8>,
    /// Up to 32 KB of input before the block (empty for the first, and at stateless levels).
    dictionary: Vec<u8>,
    last: bool,
}

/// One compressed block, with what the writer needs to account for it.
struct Done {
    deflate: Vec<u8>,
    crc: crc32fast::Hasher,
    len: u64,
}

/// Writes finished blocks in order and keeps the running CRC and totals.
struct Sink<'a, W: ?Sized> {
    output: &'a mut W,
    crc: crc32fast::Hasher,
    totals: Totals,
    progress: &'a mut (dyn FnMut(Totals) + Send),
}

impl<W: Write + ?Sized> Sink<'_, W> {
    /// Writes a finished block; returns its output buffer for reuse.
    fn write(&mut self, done: Done) -> Result<Vec<u8>, StreamError> {
        self.output
            .write_all(&done.deflate)
            .map_err(StreamError::Write)?;
        self.crc.combine(&done.crc);
        self.totals.bytes_in += done.len;
        self.totals.bytes_out += done.deflate.len() as u64;
        (self.progress)(self.totals);
        Ok(done.deflate)
    }
}

/// The codec level that serves gzip's `-1` to `-3`: `-1` and `-2` both get the codec's level 2.
/// The codec's level 1 trades ratio for speed (0.93× `pigz -1`'s ratio on the large corpus,
/// against 0.985× for level 2), and a gzip user asking for `-1` expects about `gzip -1`'s size.
fn stateless_level(level: Level) -> Level {
    level.max(Level::FAST)
}

/// A thread's compressor: the stateless encoder's scratch, or the level for zlib-rs.
enum Worker {
    Stateless {
        level: Level,
        scratch: Box<Scratch>,
    },
    /// A fresh zlib-rs stream per block: a reset stream keeps enough of its history to make
    /// the output depend on which blocks the thread compressed before (seen in the
    /// thread-count test), and allocating a stream costs nothing next to a 1 MB block.
    Stateful(Compression),
}

impl Worker {
    fn new(level: Level) -> Worker {
        if level.is_stateless() {
            Worker::Stateless {
                level: stateless_level(level),
                scratch: Box::new(Scratch::new()),
            }
        } else {
            Worker::Stateful(Compression::new(u32::from(level.get())))
        }
    }

    /// Compresses a block; returns it and the block's input buffer, for the next read.
    fn run(&mut self, mut job: Job) -> (Done, Vec<u8>) {
        let mut crc = crc32fast::Hasher::new();
        crc.update(&job.data);
        let room = job.data.len() / 2 + 1024;
        let deflate = match self {
            Worker::Stateless { level, scratch } => {
                let mut deflate = std::mem::take(&mut job.out);
                deflate.reserve(room);
                let mut encoder = Encoder::new(Format::Raw, *level).expect("level is stateless");
                let result = if job.last {
                    encoder.finish(scratch, &job.data, &mut deflate)
                } else {
                    encoder.encode(scratch, &job.data, &mut deflate)
                };
                result.expect("a fresh encoder takes one call");
                deflate
            }
            // zlib-rs's bytes depend on how much output room each of its calls gets, so a
            // block starts from a new buffer of a set size, never from a spare one whose size
            // depends on which block used it before (and so on the thread count).
            Worker::Stateful(level) => {
                let mut deflate = Vec::with_capacity(room);
                deflate_primed(*level, &job, &mut deflate);
                deflate
            }
        };
        let done = Done {
            deflate,
            crc,
            len: job.data.len() as u64,
        };
        (done, job.data)
    }
}

/// Compresses a block with zlib-rs primed with the previous 32 KB, ending with a sync flush
/// (or the final block).
fn deflate_primed(level: Compression, job: &Job, out: &mut Vec<u8>) {
    let mut compress = Compress::new(level, false);
    if !job.dictionary.is_empty() {
        compress
            .set_dictionary(&job.dictionary)
            .expect("a fresh raw stream takes a dictionary");
    }
    let flush = if job.last {
        FlushCompress::Finish
    } else {
        FlushCompress::Sync
    };
    let start_in = compress.total_in();
    loop {
        let taken = (compress.total_in() - start_in) as usize;
        out.reserve(64 * 1024);
        let status = compress
            .compress_vec(&job.data[taken..], out, flush)
            .expect("deflate cannot fail on valid parameters");
        let all_taken = (compress.total_in() - start_in) as usize == job.data.len();
        // Done once all input is in and the flush left spare room (nothing more pending).
        let drained = out.len() < out.capacity();
        if all_taken && drained && (!job.last || status == flate2::Status::StreamEnd) {
            return;
        }
    }
}

#[cfg(test)]
mod tests;
