//! A deflate stream's state: which engine serves it, allocated through the stream's own
//! allocator, and the check that a `z_stream` really is one of ours.
//!
//! A stream served by zlib-rs keeps an inner `z_stream` inside this state; each call copies
//! the caller's buffers and counters in, calls zlib-rs, and copies them back, so zlib-rs sees
//! a stream at a fixed address (it checks its state's back pointer) whatever the caller does.

use core::ffi::{c_char, c_int};
use core::mem::size_of;
use core::ptr;

use libz_rs_sys::{z_stream, Z_MEM_ERROR, Z_OK};

use crate::alloc;
use crate::engine::{Buf, Engine};

const MAGIC: u64 = 0x7a69_7077_6972_655a;

/// The version string handed to zlib-rs's init functions.
const RS_VERSION: &[u8] = b"1.2.13\0";

/// Which engine a stream runs on.
// The state is one allocation through zalloc either way; boxing the engine would add one.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Kind {
    Zipwire(Engine),
    /// zlib-rs through the inner stream.
    Zlib,
}

/// What `strm->state` points to for every deflate stream of this library.
pub(crate) struct State {
    /// The stream this state belongs to (zlib's `deflateStateCheck`).
    strm: *mut z_stream,
    magic: u64,
    pub(crate) kind: Kind,
    /// zlib-rs's stream when `kind` is `Zlib`.
    pub(crate) inner: z_stream,
    /// Where `inner`'s memory comes from (its `opaque`).
    budget: alloc::Budget,
    /// The caller's deflateInit2 arguments, to start zlib-rs with them later.
    pub(crate) window_bits: c_int,
    pub(crate) mem_level: c_int,
    pub(crate) level: c_int,
    pub(crate) strategy: c_int,
}

impl State {
    /// Puts a new state, served by `kind`, into `strm` (allocated with its allocator).
    ///
    /// # Safety
    ///
    /// `strm` is valid with a valid allocator.
    pub(crate) unsafe fn install(
        strm: &mut z_stream,
        kind: Kind,
        args: (c_int, c_int, c_int, c_int),
    ) -> Result<(), c_int> {
        // SAFETY: the caller's contract.
        let raw = unsafe { alloc::alloc(strm, size_of::<State>()) }.cast::<State>();
        if raw.is_null() {
            return Err(Z_MEM_ERROR);
        }
        let (window_bits, mem_level, level, strategy) = args;
        let state = State {
            strm,
            magic: MAGIC,
            kind,
            inner: z_stream::default(),
            budget: alloc::Budget::NONE,
            window_bits,
            mem_level,
            level,
            strategy,
        };
        // SAFETY: raw is a fresh allocation of size_of::<State>() bytes, aligned as malloc's
        // (nginx hands out slices at multiples of 512 of an aligned block).
        unsafe { raw.write(state) };
        strm.state = raw.cast();
        Ok(())
    }

    /// The state of `strm` if it is a live deflate stream of this library.
    ///
    /// # Safety
    ///
    /// `strm` is null or points to a `z_stream` whose `state` is null or was set by a zlib
    /// implementation (whose state also begins with its stream's address).
    pub(crate) unsafe fn of<'a>(strm: *mut z_stream) -> Option<(&'a mut z_stream, &'a mut State)> {
        if strm.is_null() {
            return None;
        }
        // SAFETY: the caller's contract: strm is a valid stream.
        let stream = unsafe { &mut *strm };
        let state = stream.state.cast::<State>();
        // SAFETY: a non-null state begins with the stream's address, in ours and in zlib's;
        // the magic is read only once that matched.
        if state.is_null() || unsafe { (*state).strm } != strm || unsafe { (*state).magic } != MAGIC
        {
            return None;
        }
        // SAFETY: checked above: our state, owned by this stream.
        Some((stream, unsafe { &mut *state }))
    }

    /// Starts zlib-rs for this stream with the caller's settings at `level`/`strategy`.
    ///
    /// # Safety
    ///
    /// `strm` owns this state.
    pub(crate) unsafe fn start_zlib(
        &mut self,
        strm: &mut z_stream,
        level: c_int,
        strategy: c_int,
    ) -> c_int {
        self.budget = alloc::Budget::new(strm, self.window_bits, self.mem_level);
        self.inner = z_stream {
            zalloc: Some(alloc::budget_alloc),
            zfree: Some(alloc::budget_free),
            opaque: (&mut self.budget as *mut alloc::Budget).cast(),
            ..z_stream::default()
        };
        // SAFETY: inner is a valid, zeroed stream at a fixed address (inside this state)
        // with the caller's allocator.
        let ret = unsafe {
            libz_rs_sys::deflateInit2_(
                &mut self.inner,
                level,
                libz_rs_sys::Z_DEFLATED,
                self.window_bits,
                self.mem_level,
                strategy,
                RS_VERSION.as_ptr().cast::<c_char>(),
                size_of::<z_stream>() as c_int,
            )
        };
        if ret != Z_OK {
            return ret;
        }
        let gzhead = match &mut self.kind {
            Kind::Zipwire(engine) => {
                // SAFETY: the buffers came from this stream's allocator.
                unsafe {
                    engine.input.release(strm);
                    engine.pending.release(strm);
                }
                engine.gzhead
            }
            Kind::Zlib => ptr::null_mut(),
        };
        self.kind = Kind::Zlib;
        self.level = level;
        self.strategy = strategy;
        if !gzhead.is_null() {
            // SAFETY: the header pointer the caller gave deflateSetHeader, still alive.
            unsafe { libz_rs_sys::deflateSetHeader(&mut self.inner, gzhead) };
        }
        // zlib-rs has reset its counters: the caller's stream starts from them.
        strm.total_in = self.inner.total_in;
        strm.total_out = self.inner.total_out;
        strm.adler = self.inner.adler;
        strm.data_type = self.inner.data_type;
        strm.msg = ptr::null_mut();
        Z_OK
    }

    /// Calls zlib-rs on the inner stream with the caller's buffers and counters.
    pub(crate) fn call_zlib(
        &mut self,
        strm: &mut z_stream,
        f: impl FnOnce(*mut z_stream) -> c_int,
    ) -> c_int {
        let inner = &mut self.inner;
        inner.next_in = strm.next_in;
        inner.avail_in = strm.avail_in;
        inner.total_in = strm.total_in;
        inner.next_out = strm.next_out;
        inner.avail_out = strm.avail_out;
        inner.total_out = strm.total_out;
        inner.data_type = strm.data_type;
        inner.adler = strm.adler;
        inner.msg = strm.msg;
        let ret = f(inner);
        strm.next_in = inner.next_in;
        strm.avail_in = inner.avail_in;
        strm.total_in = inner.total_in;
        strm.next_out = inner.next_out;
        strm.avail_out = inner.avail_out;
        strm.total_out = inner.total_out;
        strm.data_type = inner.data_type;
        strm.adler = inner.adler;
        strm.msg = inner.msg;
        ret
    }

    /// Frees everything the stream holds and clears `strm->state`.
    ///
    /// # Safety
    ///
    /// `strm` owns this state; the state is not used afterwards.
    pub(crate) unsafe fn destroy(strm: &mut z_stream) -> c_int {
        let raw = strm.state.cast::<State>();
        // SAFETY: the caller's contract: our live state.
        let state = unsafe { &mut *raw };
        let ret = match &mut state.kind {
            Kind::Zipwire(engine) => {
                let busy = engine.status == crate::engine::Status::Busy;
                // SAFETY: the buffers came from this stream's allocator.
                unsafe {
                    engine.input.release(strm);
                    engine.pending.release(strm);
                }
                if busy {
                    libz_rs_sys::Z_DATA_ERROR
                } else {
                    Z_OK
                }
            }
            // SAFETY: inner is zlib-rs's live stream.
            Kind::Zlib => unsafe { libz_rs_sys::deflateEnd(&mut state.inner) },
        };
        // SAFETY: the state was written by install() and is dropped once.
        unsafe {
            ptr::drop_in_place(raw);
            alloc::free(strm, raw.cast());
        }
        strm.state = ptr::null_mut();
        ret
    }

    /// Makes `dest` (a bitwise copy of `source`'s stream) an independent copy of it.
    ///
    /// # Safety
    ///
    /// `dest` is valid and `source` owns this state.
    pub(crate) unsafe fn copy_to(&mut self, dest: &mut z_stream) -> c_int {
        // SAFETY: dest has the source's (valid) allocator.
        let raw = unsafe { alloc::alloc(dest, size_of::<State>()) }.cast::<State>();
        if raw.is_null() {
            return Z_MEM_ERROR;
        }
        let kind = match &self.kind {
            Kind::Zipwire(engine) => {
                // SAFETY: dest's allocator is valid.
                let bufs = unsafe {
                    (
                        // A windowed stream has no input buffer (its encoder keeps the input).
                        if engine.input.cap == 0 {
                            Some(Buf::EMPTY)
                        } else {
                            Buf::new(dest, engine.input.cap)
                        },
                        Buf::new(dest, engine.pending.cap),
                    )
                };
                let (Some(mut input), Some(mut pending)) = bufs else {
                    // SAFETY: whichever was allocated came from dest's allocator.
                    unsafe {
                        for mut buf in [bufs.0, bufs.1].into_iter().flatten() {
                            buf.release(dest);
                        }
                        alloc::free(dest, raw.cast());
                    }
                    return Z_MEM_ERROR;
                };
                // SAFETY: same capacities; distinct allocations; an empty input buffer (null)
                // is not touched.
                unsafe {
                    if engine.input.len > 0 {
                        ptr::copy_nonoverlapping(engine.input.ptr, input.ptr, engine.input.len);
                    }
                    ptr::copy_nonoverlapping(engine.pending.ptr, pending.ptr, engine.pending.cap);
                }
                (input.len, input.start) = (engine.input.len, engine.input.start);
                (pending.len, pending.start) = (engine.pending.len, engine.pending.start);
                Kind::Zipwire(Engine {
                    encoder: engine.encoder.clone(),
                    // History, tables and pending bits: the copy goes on as the original.
                    windowed: engine.windowed.clone(),
                    input,
                    pending,
                    ..*engine
                })
            }
            Kind::Zlib => Kind::Zlib,
        };
        let copy = State {
            strm: dest,
            magic: MAGIC,
            kind,
            inner: z_stream::default(),
            budget: alloc::Budget::new(dest, self.window_bits, self.mem_level),
            window_bits: self.window_bits,
            mem_level: self.mem_level,
            level: self.level,
            strategy: self.strategy,
        };
        // SAFETY: a fresh allocation of the right size.
        unsafe { raw.write(copy) };
        dest.state = raw.cast();
        // SAFETY: raw is the state just written.
        let copy = unsafe { &mut *raw };
        if matches!(copy.kind, Kind::Zlib) {
            // zlib-rs allocates the copy with the source's allocator: point it at the copy's
            // budget for the call.
            self.inner.opaque = (&mut copy.budget as *mut alloc::Budget).cast();
            // SAFETY: inner of the source is zlib-rs's live stream; the copy's inner is at a
            // fixed address.
            let ret = unsafe { libz_rs_sys::deflateCopy(&mut copy.inner, &mut self.inner) };
            self.inner.opaque = (&mut self.budget as *mut alloc::Budget).cast();
            if ret != Z_OK {
                // SAFETY: the copy's state is ours and dropped once.
                unsafe {
                    ptr::drop_in_place(raw);
                    alloc::free(dest, raw.cast());
                }
                dest.state = ptr::null_mut();
                return ret;
            }
        }
        Z_OK
    }
}
