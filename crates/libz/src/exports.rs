//! zlib's deflate functions and `zlibVersion`, exported under their C names: each stream goes
//! to zipwire's encoder or to zlib-rs by the level map (`config.rs`, docs/libz.md), and a stream
//! that asks for what only zlib-rs does (a dictionary, `deflatePrime`, a Huffman-only, RLE or
//! fixed strategy, a level mapped to zlib) moves to zlib-rs before its first byte.
//!
//! Every function checks its pointers as zlib does (`Z_STREAM_ERROR` on null or foreign
//! state) and runs under `catch_unwind`, so no panic crosses into C.

#![allow(non_snake_case, clippy::missing_safety_doc)]

use core::ffi::{c_char, c_int};
use core::mem::size_of;
use core::ptr;
use std::panic::{catch_unwind, AssertUnwindSafe};

use libz_rs_sys::{
    z_stream, z_streamp, Z_BLOCK, Z_BUF_ERROR, Z_DEFAULT_COMPRESSION, Z_DEFLATED, Z_FIXED,
    Z_HUFFMAN_ONLY, Z_OK, Z_RLE, Z_STREAM_ERROR, Z_VERSION_ERROR,
};

use crate::config::{self, Target};
use crate::engine::{self, set_error, Buf, Engine, Status, Wrap};
use crate::state::{Kind, State};
use zipwire_codec::{Level, WindowedEncoder};

/// The version reported: Debian 12's zlib1g, so programs comparing `zlibVersion()` with the
/// `ZLIB_VERSION` they were built against (first character, or all of it) accept it.
pub(crate) const VERSION: &[u8] = b"1.2.13\0";

/// Runs `f`, turning a panic into `Z_STREAM_ERROR` so none unwinds into C.
fn guard(f: impl FnOnce() -> c_int) -> c_int {
    catch_unwind(AssertUnwindSafe(f)).unwrap_or(Z_STREAM_ERROR)
}

/// zlib's `zlibVersion`: "1.2.13", the zlib this library stands in for.
#[no_mangle]
pub extern "C" fn zlibVersion() -> *const c_char {
    VERSION.as_ptr().cast()
}

/// zlib's `deflateInit_`: `deflateInit2_` with zlib's defaults.
///
/// # Safety
///
/// zlib's contract: `strm` null or a valid stream, `version` null or a C string.
#[no_mangle]
pub unsafe extern "C" fn deflateInit_(
    strm: z_streamp,
    level: c_int,
    version: *const c_char,
    stream_size: c_int,
) -> c_int {
    // SAFETY: the caller's contract, passed on.
    unsafe { deflateInit2_(strm, level, Z_DEFLATED, 15, 8, 0, version, stream_size) }
}

/// zlib's `deflateInit2_`: picks the engine by the level map and the strategy.
///
/// # Safety
///
/// As [`deflateInit_`].
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn deflateInit2_(
    strm: z_streamp,
    level: c_int,
    method: c_int,
    windowBits: c_int,
    memLevel: c_int,
    strategy: c_int,
    version: *const c_char,
    stream_size: c_int,
) -> c_int {
    if version.is_null()
        // SAFETY: non-null, so a C string (the caller's contract): its first byte is read.
        || unsafe { *version } != b'1' as c_char
        || stream_size != size_of::<z_stream>() as c_int
    {
        return Z_VERSION_ERROR;
    }
    if strm.is_null() {
        return Z_STREAM_ERROR;
    }
    // SAFETY: non-null and valid (the caller's contract).
    let strm = unsafe { &mut *strm };
    guard(|| {
        strm.msg = ptr::null_mut();
        crate::alloc::fill_defaults(strm);
        let level = if level == Z_DEFAULT_COMPRESSION {
            6
        } else {
            level
        };
        let (wrap, mut wbits) = match windowBits {
            w if w < 0 => (Wrap::Raw, -w),
            w if w > 15 => (Wrap::Gzip, w - 16),
            w => (Wrap::Zlib, w),
        };
        // zlib 1.2.13's checks, in its order of meaning.
        if !(1..=9).contains(&memLevel)
            || method != Z_DEFLATED
            || !(8..=15).contains(&wbits)
            || !(0..=9).contains(&level)
            || !(0..=Z_FIXED).contains(&strategy)
            || (wbits == 8 && wrap != Wrap::Zlib)
        {
            return Z_STREAM_ERROR;
        }
        if wbits == 8 {
            wbits = 9;
        }
        let config = config::get();
        let target = config.levels[level as usize];
        let zlib_only = matches!(strategy, Z_HUFFMAN_ONLY | Z_RLE | Z_FIXED);
        let args = (windowBits, memLevel, level, strategy);
        let zipwire = match target {
            Target::Zipwire(zw) if !zlib_only => zw,
            _ => {
                // SAFETY: strm is valid with a valid allocator (filled above).
                if let Err(code) = unsafe { State::install(strm, Kind::Zlib, args) } {
                    return code;
                }
                // SAFETY: the state was just installed for this stream.
                let Some((strm, state)) = (unsafe { State::of(strm) }) else {
                    return Z_STREAM_ERROR;
                };
                // SAFETY: strm owns the state.
                let ret = unsafe { state.start_zlib(strm, level, strategy) };
                if ret != Z_OK {
                    // SAFETY: our state, not used afterwards.
                    unsafe { State::destroy(strm) };
                }
                return ret;
            }
        };
        // A full window (and a level above stored) takes the windowed encoder, which keeps
        // its input itself: the pending buffer starts small and grows if a caller's output
        // buffer is smaller than a call's output. Smaller windows go in window-sized chunks.
        let windowed = match (wbits, Level::try_from(zipwire)) {
            (15, Ok(level)) if zipwire > 0 => WindowedEncoder::new(level).ok(),
            _ => None,
        };
        let (input_cap, pending_cap) = match windowed {
            Some(_) => (0, 512),
            None => {
                let chunk = Engine::chunk_for(wbits as u32);
                (chunk, Engine::pending_for(chunk))
            }
        };
        // SAFETY: the stream's allocator is valid.
        let (input, pending) = unsafe {
            (
                if input_cap == 0 {
                    Some(Buf::EMPTY)
                } else {
                    Buf::new(strm, input_cap)
                },
                Buf::new(strm, pending_cap),
            )
        };
        let (Some(mut input), Some(mut pending)) = (input, pending) else {
            return libz_rs_sys::Z_MEM_ERROR;
        };
        let (encoder, stored) = engine::encoder_for(zipwire);
        let engine = Engine {
            wrap,
            wbits: wbits as u32,
            level,
            strategy,
            encoder,
            windowed,
            stored,
            adapt: config.adapt,
            gzhead: ptr::null_mut(),
            status: Status::Init,
            last_flush: -2,
            flushed: 0,
            input: Buf::EMPTY,
            pending: Buf::EMPTY,
        };
        // SAFETY: strm is valid with a valid allocator.
        if let Err(code) = unsafe { State::install(strm, Kind::Zipwire(engine), args) } {
            // SAFETY: both buffers came from this stream's allocator.
            unsafe {
                input.release(strm);
                pending.release(strm);
            }
            return code;
        }
        // SAFETY: just installed.
        let Some((strm, state)) = (unsafe { State::of(strm) }) else {
            return Z_STREAM_ERROR;
        };
        if let Kind::Zipwire(engine) = &mut state.kind {
            engine.input = input;
            engine.pending = pending;
            engine.reset(strm);
        }
        Z_OK
    })
}

/// Runs `zw` on a zipwire stream or `zl` on zlib-rs's inner stream.
fn dispatch(
    strm: &mut z_stream,
    state: &mut State,
    zw: impl FnOnce(&mut z_stream, &mut State) -> c_int,
    zl: impl FnOnce(*mut z_stream) -> c_int,
) -> c_int {
    guard(|| match state.kind {
        Kind::Zipwire(_) => zw(strm, state),
        Kind::Zlib => state.call_zlib(strm, zl),
    })
}

/// The zipwire engine of a state dispatched to it.
fn engine_of(state: &mut State) -> &mut Engine {
    match &mut state.kind {
        Kind::Zipwire(engine) => engine,
        Kind::Zlib => unreachable!("dispatched on Kind::Zipwire"),
    }
}

/// zlib's `deflate`.
///
/// # Safety
///
/// zlib's contract: `next_in`/`next_out` valid for `avail_in`/`avail_out` bytes.
#[no_mangle]
pub unsafe extern "C" fn deflate(strm: z_streamp, flush: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |strm, state| {
            if !(0..=Z_BLOCK).contains(&flush) {
                return Z_STREAM_ERROR;
            }
            if strm.next_out.is_null() || (strm.avail_in != 0 && strm.next_in.is_null()) {
                return set_error(strm, Z_STREAM_ERROR);
            }
            engine_of(state).deflate(strm, flush)
        },
        // SAFETY: zlib-rs's live stream; the caller's buffers.
        |inner| unsafe { libz_rs_sys::deflate(inner, flush) },
    )
}

/// zlib's `deflateEnd`.
///
/// # Safety
///
/// As [`deflate`].
#[no_mangle]
pub unsafe extern "C" fn deflateEnd(strm: z_streamp) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, _)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    // SAFETY: strm owns the state, not used afterwards.
    guard(|| unsafe { State::destroy(strm) })
}

/// zlib's `deflateReset`.
///
/// # Safety
///
/// As [`deflate`].
#[no_mangle]
pub unsafe extern "C" fn deflateReset(strm: z_streamp) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |strm, state| {
            engine_of(state).reset(strm);
            Z_OK
        },
        // SAFETY: zlib-rs's live stream.
        |inner| unsafe { libz_rs_sys::deflateReset(inner) },
    )
}

/// zlib's `deflateResetKeep`: as [`deflateReset`] here.
///
/// # Safety
///
/// As [`deflate`].
#[no_mangle]
pub unsafe extern "C" fn deflateResetKeep(strm: z_streamp) -> c_int {
    // SAFETY: the caller's contract.
    unsafe { deflateReset(strm) }
}

/// zlib's `deflateParams`: a new level or strategy from the next byte on.
///
/// # Safety
///
/// As [`deflate`].
#[no_mangle]
pub unsafe extern "C" fn deflateParams(strm: z_streamp, level: c_int, strategy: c_int) -> c_int {
    let level = if level == Z_DEFAULT_COMPRESSION {
        6
    } else {
        level
    };
    if !(0..=9).contains(&level) || !(0..=Z_FIXED).contains(&strategy) {
        return Z_STREAM_ERROR;
    }
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |strm, state| {
            let target = config::get().levels[level as usize];
            let zlib_only = matches!(strategy, Z_HUFFMAN_ONLY | Z_RLE | Z_FIXED);
            let engine = engine_of(state);
            let fresh = engine.is_fresh(strm);
            // The windowed encoder has no stored level: a fresh stream asking for one goes to
            // zlib-rs like any level zipwire does not serve.
            let stored = target == Target::Zipwire(0) && engine.windowed.is_some();
            if (target == Target::Zlib || zlib_only || stored) && fresh {
                // SAFETY: strm owns the state.
                return unsafe { state.start_zlib(strm, level, strategy) };
            }
            // Mid-stream, a level zlib-rs would serve runs at zipwire's best instead:
            // the stream stays on one engine and valid. Level 0 means stored blocks
            // whichever engine serves it, not level 3: data a program knows to be
            // incompressible does not go through the matcher.
            let zipwire = match target {
                Target::Zipwire(zw) => zw,
                Target::Zlib if level == 0 => 0,
                Target::Zlib => 3,
            };
            // As zlib: once the stream has begun, a change of approach (zlib's: stored,
            // fast or lazy by level, or another strategy) first compresses the input
            // available so far at the old level, the caller's included, and ends the block
            // (`deflate(strm, Z_BLOCK)`). Input the output buffer could not take is a
            // Z_BUF_ERROR, nothing changed, for the caller to retry with more room: a Z_OK
            // that sent only the input already buffered here would lose it for a program
            // that takes Z_OK as "all my input was taken". Where zlib's approach stays
            // and only zipwire's encoder changes, the caller's input stays where it is, as
            // zlib leaves it, and what is buffered here goes out at the old level.
            let approach = |level: c_int| match level {
                0 => 0,
                1..=3 => 1,
                _ => 2,
            };
            let zlib_changes =
                approach(level) != approach(engine.level) || strategy != engine.strategy;
            let encoder_changes = zipwire != engine::zipwire_level(&engine.encoder, engine.stored);
            if !fresh && zlib_changes {
                let code = engine.deflate(strm, Z_BLOCK);
                if code == Z_STREAM_ERROR {
                    return code;
                }
                if strm.avail_in != 0 {
                    return Z_BUF_ERROR;
                }
            }
            if !fresh && (zlib_changes || encoder_changes) {
                if let Err(code) = engine.flush_input(strm) {
                    return set_error(strm, code);
                }
            }
            (engine.encoder, engine.stored) = engine::encoder_for(zipwire);
            if let Some(windowed) = engine.windowed.as_mut() {
                let level = Level::try_from(zipwire.max(1)).unwrap_or(Level::FASTEST);
                if windowed.set_level(level).is_err() {
                    return set_error(strm, Z_STREAM_ERROR);
                }
            }
            engine.level = level;
            engine.strategy = strategy;
            Z_OK
        },
        // SAFETY: zlib-rs's live stream.
        |inner| unsafe { libz_rs_sys::deflateParams(inner, level, strategy) },
    )
}

/// Moves a stream that has not started yet to zlib-rs, for what only zlib-rs does.
fn to_zlib_if_fresh(strm: &mut z_stream, state: &mut State) -> Result<(), c_int> {
    if !engine_of(state).is_fresh(strm) {
        return Err(Z_STREAM_ERROR);
    }
    let (level, strategy) = (state.level, state.strategy);
    // SAFETY: strm owns the state.
    match unsafe { state.start_zlib(strm, level, strategy) } {
        Z_OK => Ok(()),
        code => Err(code),
    }
}

mod options;
pub use options::*;
