//! The windowed encoder: levels 1-3 with up to 32 KB of history carried across calls, for
//! callers that flush often and whose ratio depends on matches into earlier calls (zlib's API:
//! OpenSSH flushes after every packet).
//!
//! # What a stream keeps, and why
//!
//! [`crate::Encoder`] keeps at most 64 bytes per stream: each call compresses only its own
//! input, so a proxy can hold 100,000 streams. That loses every match into earlier calls, which
//! for a stream of 1-16 KB packets is most of the ratio. [`WindowedEncoder`] keeps, per stream:
//!
//! - a history buffer of at most 64 KB: the last 32 KB compressed (what matches may reach) and
//!   input taken but not compressed yet (see [`history`](self::history));
//! - the match table of its level, with positions that stay valid from call to call: 32 KB
//!   (levels 1 and 2) or 64 KB of buckets of four positions (level 3), because re-inserting
//!   the history at every call would cost a small call far more than its own parse;
//! - up to 7 bits of output not yet on a byte boundary, and the counters.
//!
//! That is at most 96 KB (levels 1-2) or 128 KB (level 3) of buffers, plus the encoder value
//! itself (about 100 bytes), against zlib's 256-268 KB at
//! `windowBits` 15, `memLevel` 8; [`WindowedEncoder::memory`] says exactly. The token buffer
//! and Huffman tables hold nothing between calls: they live once per thread (a
//! `thread_local`), as in [`crate::Scratch`], which is why the calls take no scratch argument:
//! taking it out and putting it back costs about 2 ns, against 0.4 µs for the cheapest call (a
//! flushed 32-byte packet) and 3-12 µs for 64-1024-byte ones (web/, level 1, one core).
//!
//! Blocks under 64 bytes get the fixed code without pricing a dynamic one, which would cost ten
//! times the rest of such a call (interactive SSH sends such packets); the stateless encoder
//! prices every block three ways, so the two may choose differently for tiny blocks.
//!
//! `cargo run --release -p zipwire-codec --example window_bench` compares ratio and speed with
//! the stateless encoder and zlib-rs on SSH-like traffic (the corpus in flushed 1-16 KB packets).
//!
//! The matcher, block writer and Huffman code are the stateless encoder's, given a history
//! prefix. Levels 1 and 2 make the same kind of parse as the stateless ones; level 3 searches
//! buckets of four positions per hash, greedily, not the stateless level 3's lazy hash chains
//! (see `encode/lz77/bucket.rs`): on large/ in flushed packets 0.93 of zlib level 6's ratio at
//! 2.4 times its speed, where the chains kept 0.95 at 1.2 times.
//!
//! Output is raw deflate (RFC 1951): the caller writes any zlib or gzip framing and checksum.

mod history;
mod matcher;

use crate::encode::bits::BitWriter;
use crate::encode::block::write_sync_marker;
use crate::error::EncodeError;
use crate::level::Level;

use history::History;
use matcher::{with_work, Tables, Work};

/// How a [`WindowedEncoder::encode`] call ends, as zlib's flush modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum BlockEnd {
    /// `Z_NO_FLUSH`: the encoder may keep input (up to 32 KB) to compress with later calls'
    /// into larger blocks; output stops wherever it is, up to 7 bits kept in the encoder.
    Open,
    /// `Z_BLOCK`: all input so far goes out in complete blocks, with no byte alignment (up to 7
    /// bits kept in the encoder, and the last block's end may be among them).
    Block,
    /// `Z_PARTIAL_FLUSH`: as zlib, all input so far is decodable from the output so far: its
    /// blocks are followed by an empty fixed-code block (10 bits), of which up to 7 bits may
    /// stay in the encoder.
    Partial,
    /// `Z_SYNC_FLUSH`: all input so far in complete blocks, then an empty stored block
    /// (`00 00 FF FF`), so the output ends on a byte boundary.
    Sync,
    /// `Z_FULL_FLUSH`: as [`BlockEnd::Sync`], and no later match reaches before this point, so
    /// a decoder can start here with an empty window.
    Full,
}

/// A raw deflate stream (levels 1-3) whose matches reach up to 32 KB into earlier calls.
///
/// Concatenating every call's output, ending with [`WindowedEncoder::finish`], gives one raw
/// deflate stream. Unlike [`crate::Encoder`], a call may keep input for later
/// ([`BlockEnd::Open`]) and output need not end on a byte boundary; the flush modes of
/// [`BlockEnd`] say what a call guarantees.
///
/// A clone is an independent copy of the stream at that point (zlib's `deflateCopy`): history,
/// tables, pending input and bits; both go on as the original would.
#[derive(Clone)]
pub struct WindowedEncoder {
    level: Level,
    history: History,
    tables: Tables,
    /// Output bits not yet on a byte boundary: `(bits, count)`, count below 8.
    pending_bits: (u64, u32),
    total_in: u64,
    finished: bool,
}

impl WindowedEncoder {
    /// Starts a stream at `level`.
    ///
    /// # Errors
    ///
    /// [`EncodeError::InvalidLevel`] for a level above 3.
    pub fn new(level: Level) -> Result<WindowedEncoder, EncodeError> {
        check(level)?;
        Ok(WindowedEncoder {
            level,
            history: History::default(),
            tables: Tables::new(level.get()),
            pending_bits: (0, 0),
            total_in: 0,
            finished: false,
        })
    }

    /// Compresses `input`, then ends the call as `end` says.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] after [`WindowedEncoder::finish`], until a reset.
    pub fn encode(
        &mut self,
        input: &[u8],
        end: BlockEnd,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeError> {
        if self.finished {
            return Err(EncodeError::Finished);
        }
        self.total_in += input.len() as u64;
        let (bits, nbits) = self.pending_bits;
        let mut w = BitWriter::with_pending(out, bits, nbits);
        with_work(|work| {
            self.take(input, work, &mut w);
            if end != BlockEnd::Open {
                self.compress_pending(false, work, &mut w);
            }
        });
        match end {
            BlockEnd::Open | BlockEnd::Block => {}
            // RFC 1951 §3.2.6: BFINAL 0, BTYPE 01, then end-of-block, code 0000000.
            BlockEnd::Partial => w.put(0b010, 10),
            BlockEnd::Sync => write_sync_marker(&mut w),
            BlockEnd::Full => {
                write_sync_marker(&mut w);
                self.history.forget();
            }
        }
        self.pending_bits = w.suspend();
        Ok(())
    }

    /// Compresses `input` (possibly empty) and everything still kept as the final block(s),
    /// and pads the output to a byte boundary. Further calls fail until a reset.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] if the stream is already finished.
    pub fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.finished {
            return Err(EncodeError::Finished);
        }
        self.total_in += input.len() as u64;
        let (bits, nbits) = self.pending_bits;
        let mut w = BitWriter::with_pending(out, bits, nbits);
        with_work(|work| {
            self.take(input, work, &mut w);
            self.compress_pending(true, work, &mut w);
        });
        w.finish();
        self.pending_bits = (0, 0);
        self.finished = true;
        Ok(())
    }

    /// Starts the stream over (zlib's `deflateReset`): history, pending input and bits, and
    /// counters are forgotten; the level and the allocations stay.
    pub fn reset(&mut self) {
        self.history.clear();
        self.tables.clear();
        self.pending_bits = (0, 0);
        self.total_in = 0;
        self.finished = false;
    }

    /// Changes the level from the next call on (zlib's `deflateParams`); the history stays.
    /// Input kept by an [`BlockEnd::Open`] call is compressed at the new level: end the call
    /// before with [`BlockEnd::Block`] to compress it at the old one, as zlib does.
    ///
    /// # Errors
    ///
    /// [`EncodeError::InvalidLevel`] for a level above 3 (the level is then unchanged).
    pub fn set_level(&mut self, level: Level) -> Result<(), EncodeError> {
        check(level)?;
        self.level = level;
        self.tables.set_level(level.get());
        Ok(())
    }

    /// Output bits the stream holds that are not yet on a byte boundary (0-7): zlib's
    /// `deflatePending` reports them, and callers that join streams (pigz) pad by them.
    pub fn pending_bits(&self) -> u32 {
        self.pending_bits.1
    }

    /// Appends the low `bits` bits (at most 16) of `value` to the output, after what the
    /// stream has written and before what it writes next (zlib's `deflatePrime`): whole bytes
    /// go to `out`, the rest stays pending. The caller answers for what the bits mean to a
    /// decoder: pigz, for one, pads with empty fixed-code blocks up to a byte boundary.
    ///
    /// # Errors
    ///
    /// [`EncodeError::Finished`] after [`WindowedEncoder::finish`], until a reset.
    pub fn prime(&mut self, bits: u32, value: u32, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        if self.finished {
            return Err(EncodeError::Finished);
        }
        let bits = bits.min(16);
        let (pending, nbits) = self.pending_bits;
        let mut w = BitWriter::with_pending(out, pending, nbits);
        w.put(u64::from(value) & ((1 << bits) - 1), bits);
        self.pending_bits = w.suspend();
        Ok(())
    }

    /// The stream's level.
    pub fn level(&self) -> Level {
        self.level
    }

    /// Bytes of memory this stream holds, on the heap and inline (not the per-thread working
    /// memory its calls borrow).
    pub fn memory(&self) -> usize {
        std::mem::size_of::<WindowedEncoder>() + self.history.heap_size() + self.tables.heap_size()
    }

    /// Uncompressed bytes taken since the start or the last reset.
    pub fn total_in(&self) -> u64 {
        self.total_in
    }

    /// Whether [`WindowedEncoder::finish`] has been called (and no reset since).
    pub fn is_finished(&self) -> bool {
        self.finished
    }

    /// Takes `input` into the history buffer, compressing (without ending the call) whenever
    /// the buffer is full.
    fn take(&mut self, mut input: &[u8], work: &mut Work, w: &mut BitWriter<'_>) {
        while !input.is_empty() {
            if self.history.room() < input.len() && self.history.pending() == 0 {
                // Make room by dropping history out of reach, before splitting the input.
                self.history.slide();
            }
            if self.history.room() == 0 {
                self.compress_pending(false, work, w);
                self.history.slide();
            }
            let taken = self.history.append(input);
            input = &input[taken..];
        }
    }

    /// Compresses the pending input as blocks, the last one final if `is_final` (an empty final
    /// block if nothing is pending).
    fn compress_pending(&mut self, is_final: bool, work: &mut Work, w: &mut BitWriter<'_>) {
        if self.history.pending() == 0 {
            if is_final {
                work.tokens.clear();
                let plan = work.blocks.plan(&mut work.tokens, 0);
                work.blocks.emit(w, plan, &work.tokens, &[], true);
            }
            return;
        }
        let (data, start, offset) = self.history.view();
        self.tables
            .compress((data, start), offset, is_final, work, w);
        self.history.mark_parsed();
    }
}

fn check(level: Level) -> Result<(), EncodeError> {
    if level.is_stateless() {
        Ok(())
    } else {
        Err(EncodeError::InvalidLevel { level: level.get() })
    }
}

impl std::fmt::Debug for WindowedEncoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WindowedEncoder")
            .field("level", &self.level)
            .field("total_in", &self.total_in)
            .field("memory", &self.memory())
            .field("finished", &self.finished)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
