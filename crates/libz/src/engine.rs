//! The zipwire side of a deflate stream: zlib's streaming rules around zipwire's encoders.
//!
//! A stream at windowBits 15 runs the windowed encoder (`windowed.rs`), which keeps 32 KB of
//! history across calls; smaller windows run the stateless encoder as below.
//!
//! zlib's contract is kept as zlib 1.2.13's `deflate()` keeps it: output that does not fit in
//! `avail_out` waits in a pending buffer; `Z_BUF_ERROR` when no progress is possible; a flush
//! is complete when the call returns with `avail_out != 0`. Input is collected into chunks of
//! the stream's window size (`2^windowBits`, at most 32 KB): the stateless encoder matches
//! only inside the call's own input, so no match can reach further back than the window the
//! header announces, whatever `windowBits` the caller chose. Every chunk ends byte-aligned
//! with an empty stored block (RFC 1951 section 3.2.4), which is exactly what
//! `Z_SYNC_FLUSH`/`Z_FULL_FLUSH` promise; the header and trailer (RFC 1950, RFC 1952) are
//! written here, around raw deflate.

use core::ffi::c_int;
use core::ptr;
use std::cell::Cell;

use libz_rs_sys::{
    gz_header, z_stream, Z_BUF_ERROR, Z_FINISH, Z_FULL_FLUSH, Z_MEM_ERROR, Z_NO_FLUSH, Z_OK,
    Z_STREAM_END, Z_STREAM_ERROR, Z_SYNC_FLUSH,
};
use zipwire_adapt::sniff::{self, Verdict};
use zipwire_codec::{BlockEnd, Encoder, Format, Level, Scratch, WindowedEncoder};

use crate::alloc;
use crate::framing::{adler32, crc32};

/// The largest chunk: deflate's own window (RFC 1951 section 2), so a chunk's matches are
/// always within reach of any decoder.
pub(crate) const MAX_CHUNK: usize = 32 * 1024;

/// An empty non-final stored block starting on a byte boundary: the sync marker.
const SYNC_MARKER: [u8; 5] = [0x00, 0x00, 0x00, 0xff, 0xff];

/// The stream's container (RFC 1950 zlib, RFC 1952 gzip, or raw deflate).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wrap {
    Raw,
    Zlib,
    Gzip,
}

/// Where the stream stands, as zlib's `INIT_STATE`/`BUSY_STATE`/`FINISH_STATE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Status {
    /// No header written yet: `deflateSetHeader` and dictionaries are still allowed.
    Init,
    Busy,
    Finished,
}

/// A byte buffer from the stream's allocator.
#[derive(Debug)]
pub(crate) struct Buf {
    pub(crate) ptr: *mut u8,
    pub(crate) cap: usize,
    pub(crate) start: usize,
    pub(crate) len: usize,
}

impl Buf {
    pub(crate) const EMPTY: Buf = Buf {
        ptr: ptr::null_mut(),
        cap: 0,
        start: 0,
        len: 0,
    };

    /// A buffer of `cap` bytes from `strm`'s allocator.
    ///
    /// # Safety
    ///
    /// `strm`'s allocator is valid.
    pub(crate) unsafe fn new(strm: &z_stream, cap: usize) -> Option<Buf> {
        // SAFETY: the caller's contract.
        let ptr = unsafe { alloc::alloc(strm, cap) };
        (!ptr.is_null()).then_some(Buf {
            ptr,
            cap,
            start: 0,
            len: 0,
        })
    }

    /// Gives the memory back to `strm`'s allocator.
    ///
    /// # Safety
    ///
    /// `strm` is the stream whose allocator made this buffer.
    pub(crate) unsafe fn release(&mut self, strm: &z_stream) {
        // SAFETY: the pointer came from this stream's allocator (the caller's contract).
        unsafe { alloc::free(strm, self.ptr) };
        *self = Buf::EMPTY;
    }
}

/// The zipwire half of a stream's state.
pub(crate) struct Engine {
    pub(crate) wrap: Wrap,
    /// Window bits 9-15 (8 is taken as 9, as zlib does).
    pub(crate) wbits: u32,
    /// The caller's zlib level and strategy, for the header's level flags.
    pub(crate) level: c_int,
    pub(crate) strategy: c_int,
    pub(crate) encoder: Encoder,
    /// The windowed encoder (32 KB of history across calls) of a stream at windowBits 15;
    /// `None` for smaller windows, served in window-sized stateless chunks.
    pub(crate) windowed: Option<WindowedEncoder>,
    /// zipwire level 0: stored blocks only.
    pub(crate) stored: bool,
    pub(crate) adapt: bool,
    pub(crate) gzhead: *mut gz_header,
    pub(crate) status: Status,
    pub(crate) last_flush: c_int,
    /// The strongest flush written since the last input came, as [`rank`] orders them (0:
    /// none). A flush no stronger is not written again (a call repeated because the output
    /// ran out); a stronger one is (`Z_BLOCK`, then `Z_SYNC_FLUSH` for the byte boundary).
    pub(crate) flushed: c_int,
    pub(crate) input: Buf,
    pub(crate) pending: Buf,
}

/// The encoder's working memory and a buffer for its output.
pub(crate) type Work = (Scratch, Vec<u8>);

thread_local! {
    /// One [`Work`] per thread, shared by every stream of the thread: taken out for a call and
    /// put back after it.
    static WORK: Cell<Option<Box<Work>>> = const { Cell::new(None) };
}

/// Runs `f` with this thread's [`Work`], or with a fresh one where the thread's is in use (a
/// call made from inside another, through a custom allocator) or already torn down. A stream
/// finished in an `atexit` handler, a C++ static destructor or a thread-key destructor runs
/// after the thread's storage is gone: `WORK.with` would panic there and `deflate` fail with
/// the stream cut short, where the system zlib finishes such streams.
pub(crate) fn with_work<R>(f: impl FnOnce(&mut Work) -> R) -> R {
    let mut work = WORK
        .try_with(Cell::take)
        .ok()
        .flatten()
        .unwrap_or_else(|| Box::new((Scratch::new(), Vec::new())));
    let r = f(&mut work);
    // Fails only while the thread is being torn down: the memory is then simply freed.
    let _ = WORK.try_with(|cell| cell.set(Some(work)));
    r
}

/// How a chunk ends.
#[derive(Clone, Copy, PartialEq, Eq)]
enum End {
    /// Byte-aligned, more to come (`Z_NO_FLUSH`, `Z_PARTIAL_FLUSH`, `Z_BLOCK`).
    Open,
    /// Ends with the sync marker (`Z_SYNC_FLUSH`, `Z_FULL_FLUSH`).
    Sync,
    /// The final block.
    Final,
}

/// zlib's ordering of flush values, to tell a repeated flush from a stronger one:
/// `Z_NO_FLUSH` 0, `Z_BLOCK` 1, `Z_PARTIAL_FLUSH` 2, `Z_SYNC_FLUSH` 4, `Z_FULL_FLUSH` 6,
/// `Z_FINISH` 8.
pub(crate) fn rank(flush: c_int) -> c_int {
    flush * 2 - if flush > 4 { 9 } else { 0 }
}

/// The encoder for zipwire level `level` (0-3) on raw deflate.
pub(crate) fn encoder_for(level: u8) -> (Encoder, bool) {
    let stateless = Level::try_from(level.max(1)).unwrap_or(Level::FASTEST);
    // Levels 1-3 are the stateless encoder's own: new() cannot fail for them.
    let encoder = Encoder::new(Format::Raw, stateless)
        .or_else(|_| Encoder::new(Format::Raw, Level::FASTEST))
        .unwrap_or_else(|_| unreachable!("level 1 is stateless"));
    (encoder, level == 0)
}

/// zlib's message for an error code, as a static C string.
pub(crate) fn set_error(strm: &mut z_stream, code: c_int) -> c_int {
    let msg: &'static [u8] = match code {
        Z_STREAM_ERROR => b"stream error\0",
        Z_BUF_ERROR => b"buffer error\0",
        Z_MEM_ERROR => b"insufficient memory\0",
        _ => b"data error\0",
    };
    strm.msg = msg.as_ptr().cast_mut().cast();
    code
}

impl Engine {
    /// The chunk size: the window, so no match reaches past it.
    pub(crate) fn chunk_for(wbits: u32) -> usize {
        (1usize << wbits).min(MAX_CHUNK)
    }

    /// The pending buffer's size: one chunk's worst output and a header.
    pub(crate) fn pending_for(chunk: usize) -> usize {
        alloc::round512(chunk + chunk_overhead(chunk) + 64)
    }

    /// A true bound on the output of compressing `n` bytes in one `Z_FINISH` call.
    pub(crate) fn bound(&self, n: u64) -> u64 {
        let chunk = if self.windowed.is_some() {
            MAX_CHUNK
        } else {
            self.input.cap.max(1)
        } as u64;
        let chunks = n.div_ceil(chunk).max(1);
        n + chunks * chunk_overhead(chunk as usize) as u64 + 8 + self.wrap_len()
    }

    pub(crate) fn initial_checksum(&self) -> u32 {
        match self.wrap {
            Wrap::Gzip => 0,
            _ => 1,
        }
    }

    /// Forgets the stream (deflateReset).
    pub(crate) fn reset(&mut self, strm: &mut z_stream) {
        strm.total_in = 0;
        strm.total_out = 0;
        strm.msg = ptr::null_mut();
        strm.data_type = libz_rs_sys::Z_UNKNOWN;
        strm.adler = self.initial_checksum().into();
        self.status = Status::Init;
        self.last_flush = -2;
        self.flushed = 0;
        self.input.start = 0;
        self.input.len = 0;
        self.pending.start = 0;
        self.pending.len = 0;
        let level = zipwire_level(&self.encoder, self.stored);
        (self.encoder, self.stored) = encoder_for(level);
        if let Some(windowed) = self.windowed.as_mut() {
            windowed.reset();
        }
    }

    /// Appends `bytes` to the pending output, growing the buffer through the stream's
    /// allocator if it cannot hold them (a long gzip header).
    pub(crate) fn push_pending(&mut self, strm: &z_stream, bytes: &[u8]) -> Result<(), c_int> {
        let p = &mut self.pending;
        if p.start + p.len + bytes.len() > p.cap {
            if p.len + bytes.len() > p.cap {
                // SAFETY: the stream's allocator is valid (zlib's contract).
                let mut bigger = unsafe { Buf::new(strm, alloc::round512(p.len + bytes.len())) }
                    .ok_or(Z_MEM_ERROR)?;
                // SAFETY: both regions are valid for p.len bytes and distinct allocations.
                unsafe { ptr::copy_nonoverlapping(p.ptr.add(p.start), bigger.ptr, p.len) };
                bigger.len = p.len;
                // SAFETY: the old buffer came from this stream's allocator.
                unsafe { p.release(strm) };
                *p = bigger;
            } else {
                // SAFETY: within one allocation of cap bytes; regions may overlap.
                unsafe { ptr::copy(p.ptr.add(p.start), p.ptr, p.len) };
                p.start = 0;
            }
        }
        // SAFETY: start + len + bytes.len() <= cap, checked above; bytes is another buffer.
        unsafe {
            ptr::copy_nonoverlapping(bytes.as_ptr(), p.ptr.add(p.start + p.len), bytes.len())
        };
        p.len += bytes.len();
        Ok(())
    }

    /// Writes `bytes` to `next_out` as far as it has room and nothing waits before them; the
    /// rest waits in the pending buffer.
    pub(crate) fn emit(&mut self, strm: &mut z_stream, bytes: &[u8]) -> Result<(), c_int> {
        let mut bytes = bytes;
        if self.pending.len == 0 {
            let n = bytes.len().min(strm.avail_out as usize);
            // SAFETY: next_out has avail_out writable bytes (zlib's contract), n <= avail_out;
            // bytes is our buffer.
            unsafe {
                ptr::copy_nonoverlapping(bytes.as_ptr(), strm.next_out, n);
                strm.next_out = strm.next_out.add(n);
            }
            strm.avail_out -= n as u32;
            strm.total_out += n as core::ffi::c_ulong;
            bytes = &bytes[n..];
        }
        if bytes.is_empty() {
            return Ok(());
        }
        self.push_pending(strm, bytes)
    }

    /// Moves pending output to `next_out`.
    pub(crate) fn drain(&mut self, strm: &mut z_stream) {
        let p = &mut self.pending;
        let n = p.len.min(strm.avail_out as usize);
        if n == 0 {
            return;
        }
        // SAFETY: next_out has avail_out writable bytes (zlib's contract); the pending bytes
        // are ours.
        unsafe {
            ptr::copy_nonoverlapping(p.ptr.add(p.start), strm.next_out, n);
            strm.next_out = strm.next_out.add(n);
        }
        strm.avail_out -= n as u32;
        strm.total_out += n as core::ffi::c_ulong;
        p.start += n;
        p.len -= n;
        if p.len == 0 {
            p.start = 0;
        }
    }

    /// Takes `n` bytes from `next_in`, updating the checksum and `total_in`.
    ///
    /// # Safety
    ///
    /// `n <= avail_in` and `next_in` holds `avail_in` readable bytes; the slice is used
    /// before the caller's buffer changes (within this deflate call).
    pub(crate) unsafe fn consume<'a>(&self, strm: &mut z_stream, n: usize) -> &'a [u8] {
        if n == 0 {
            return &[];
        }
        // SAFETY: the caller's contract.
        let data = unsafe { std::slice::from_raw_parts(strm.next_in, n) };
        // SAFETY: n <= avail_in.
        strm.next_in = unsafe { strm.next_in.add(n) };
        strm.avail_in -= n as u32;
        strm.total_in += n as core::ffi::c_ulong;
        let sum = strm.adler as u32;
        strm.adler = match self.wrap {
            Wrap::Gzip => crc32(sum, data),
            Wrap::Zlib => adler32(sum, data),
            Wrap::Raw => sum,
        }
        .into();
        data
    }

    /// Copies what fits of `next_in` into the input buffer.
    fn take_input(&mut self, strm: &mut z_stream) {
        let n = (strm.avail_in as usize).min(self.input.cap - self.input.len);
        if n == 0 {
            return;
        }
        // SAFETY: n <= avail_in; next_in is readable for avail_in bytes.
        let data = unsafe { self.consume(strm, n) };
        // SAFETY: len + n <= cap of our buffer; data is the caller's, a different buffer.
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), self.input.ptr.add(self.input.len), n) };
        self.input.len += n;
        self.flushed = 0;
    }

    /// Compresses `data` (all of it) into the pending buffer.
    fn compress(&mut self, strm: &mut z_stream, data: &[u8], end: End) -> Result<(), c_int> {
        let store = self.stored
            || (self.adapt && !data.is_empty() && sniff::inspect(data) != Verdict::Compressible);
        self.encoder.set_store_only(store);
        with_work(|work| {
            let (scratch, out) = work;
            out.clear();
            let done = if end == End::Final {
                self.encoder.finish(scratch, data, out)
            } else {
                self.encoder.encode(scratch, data, out)
            };
            done.map_err(|_| Z_STREAM_ERROR)?;
            // Stored blocks end byte-aligned without the marker a sync flush promises, and no
            // input gives no output at all: every chunk ends on a byte boundary, so the
            // marker (an empty stored block) follows as bytes.
            if end == End::Sync && (store || data.is_empty()) {
                out.extend_from_slice(&SYNC_MARKER);
            }
            self.emit(strm, out)
        })
    }

    /// Compresses the input buffer.
    fn compress_input(&mut self, strm: &mut z_stream, end: End) -> Result<(), c_int> {
        // SAFETY: the input buffer's bytes are valid and not touched while compressing;
        // the slice does not borrow self.
        let data = unsafe { std::slice::from_raw_parts(self.input.ptr, self.input.len) };
        self.compress(strm, data, end)?;
        self.input.len = 0;
        Ok(())
    }

    /// Writes whatever waits in the input buffer as a non-final chunk: a level change
    /// (deflateParams) applies from the next byte.
    pub(crate) fn flush_input(&mut self, strm: &mut z_stream) -> Result<(), c_int> {
        if self.windowed.is_some() {
            self.write_header_if_needed(strm)?;
            return self.compress_windowed(strm, &[], Some(BlockEnd::Block));
        }
        if self.input.len > 0 {
            self.write_header_if_needed(strm)?;
            self.compress_input(strm, End::Open)?;
        }
        Ok(())
    }

    fn write_header_if_needed(&mut self, strm: &mut z_stream) -> Result<(), c_int> {
        if self.status == Status::Init {
            let header = self.header();
            self.emit(strm, &header)?;
            self.status = Status::Busy;
        }
        Ok(())
    }

    /// zlib's `deflate()` over the stateless encoder.
    pub(crate) fn deflate(&mut self, strm: &mut z_stream, flush: c_int) -> c_int {
        match self.deflate_inner(strm, flush) {
            Ok(code) => {
                if code == Z_OK && strm.avail_out == 0 {
                    // As zlib: a call that filled the output buffer is followed by another
                    // with the same flush, which must not be taken for no progress.
                    self.last_flush = -1;
                }
                code
            }
            Err(code) => set_error(strm, code),
        }
    }

    fn deflate_inner(&mut self, strm: &mut z_stream, flush: c_int) -> Result<c_int, c_int> {
        if self.status == Status::Finished && flush != Z_FINISH {
            return Err(Z_STREAM_ERROR);
        }
        if strm.avail_out == 0 {
            return Err(Z_BUF_ERROR);
        }
        let old_flush = self.last_flush;
        self.last_flush = flush;
        if self.pending.len != 0 {
            self.drain(strm);
            if strm.avail_out == 0 {
                // Called again with the same flush, this must not be taken for no progress.
                self.last_flush = -1;
                return Ok(Z_OK);
            }
        } else if strm.avail_in == 0 && rank(flush) <= rank(old_flush) && flush != Z_FINISH {
            return Err(Z_BUF_ERROR);
        }
        if self.status == Status::Finished {
            return if strm.avail_in != 0 {
                Err(Z_BUF_ERROR)
            } else {
                Ok(Z_STREAM_END)
            };
        }
        self.write_header_if_needed(strm)?;
        if self.windowed.is_some() {
            return self.deflate_windowed(strm, flush);
        }
        let chunk = self.input.cap;
        loop {
            if self.pending.len != 0 {
                self.drain(strm);
                if self.pending.len != 0 {
                    self.last_flush = -1;
                    return Ok(Z_OK);
                }
            }
            if self.input.len == 0 && strm.avail_in as usize > chunk {
                // A whole chunk straight from the caller's buffer, no copy.
                // SAFETY: chunk < avail_in.
                let data = unsafe { self.consume(strm, chunk) };
                self.flushed = 0;
                self.compress(strm, data, End::Open)?;
                continue;
            }
            self.take_input(strm);
            if self.input.len == chunk && strm.avail_in > 0 {
                self.compress_input(strm, End::Open)?;
                continue;
            }
            break;
        }
        match flush {
            Z_NO_FLUSH => return Ok(Z_OK),
            Z_FINISH => {
                self.compress_input(strm, End::Final)?;
                let trailer = self.trailer(strm);
                self.emit(strm, &trailer)?;
                self.status = Status::Finished;
                self.drain(strm);
                return Ok(if self.pending.len == 0 {
                    Z_STREAM_END
                } else {
                    self.last_flush = -1;
                    Z_OK
                });
            }
            _ => {}
        }
        if rank(flush) > self.flushed {
            let marker = flush == Z_SYNC_FLUSH || flush == Z_FULL_FLUSH;
            if self.input.len > 0 || marker {
                let end = if marker { End::Sync } else { End::Open };
                self.compress_input(strm, end)?;
            }
            self.flushed = rank(flush);
        }
        self.drain(strm);
        if self.pending.len != 0 {
            self.last_flush = -1;
        }
        Ok(Z_OK)
    }

    /// Bytes of pending output (deflatePending).
    pub(crate) fn pending_len(&self) -> usize {
        self.pending.len
    }

    /// Whether no byte has been taken or written yet: the stream can still change engine.
    pub(crate) fn is_fresh(&self, strm: &z_stream) -> bool {
        self.status == Status::Init && self.input.len == 0 && strm.total_in == 0
    }
}

/// The zipwire level an encoder runs at.
pub(crate) fn zipwire_level(encoder: &Encoder, stored: bool) -> u8 {
    if stored {
        0
    } else {
        encoder.level().get()
    }
}

/// Worst-case bytes a chunk of `chunk` bytes adds beyond its length: stored-block headers
/// (RFC 1951 section 3.2.4, one per 65535 bytes), the sync marker, and a partial byte.
fn chunk_overhead(chunk: usize) -> usize {
    5 * chunk.div_ceil(65_535).max(1) + SYNC_MARKER.len() + 8
}
