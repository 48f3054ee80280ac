//! zlib's deflate functions that set a stream up or ask about it, rather than pass it data:
//! a preset dictionary, `deflatePrime`, the gzip header, the bound on the output, what is
//! pending, `deflateTune` and `deflateCopy`. Each stream still goes to its engine as in
//! [`super`]; those that only zlib-rs serves move it there before its first byte.

use core::ffi::{c_int, c_uint, c_ulong};
use core::ptr;

use libz_rs_sys::{gz_headerp, z_stream, z_streamp, Bytef, Z_BUF_ERROR, Z_OK, Z_STREAM_ERROR};

use super::{dispatch, engine_of, guard, to_zlib_if_fresh};
use crate::engine::{set_error, Engine, Wrap};
use crate::state::{Kind, State};

/// zlib's `deflateSetDictionary`: the stream moves to zlib-rs, which keeps a window.
///
/// # Safety
///
/// As [`deflate`](super::deflate); `dictionary` valid for `dictLength` bytes.
#[no_mangle]
pub unsafe extern "C" fn deflateSetDictionary(
    strm: z_streamp,
    dictionary: *const Bytef,
    dictLength: c_uint,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |strm, state| match to_zlib_if_fresh(strm, state) {
            Ok(()) => state.call_zlib(strm, |inner| {
                // SAFETY: zlib-rs's live stream; the caller's dictionary.
                unsafe { libz_rs_sys::deflateSetDictionary(inner, dictionary, dictLength) }
            }),
            Err(code) => code,
        },
        // SAFETY: zlib-rs's live stream; the caller's dictionary.
        |inner| unsafe { libz_rs_sys::deflateSetDictionary(inner, dictionary, dictLength) },
    )
}

/// zlib's `deflateGetDictionary`: zlib-rs streams only (zipwire keeps no window).
///
/// # Safety
///
/// As [`deflate`](super::deflate); `dictionary` null or 32 KB writable.
#[no_mangle]
pub unsafe extern "C" fn deflateGetDictionary(
    strm: z_streamp,
    dictionary: *mut Bytef,
    dictLength: *mut c_uint,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |_, _| Z_STREAM_ERROR,
        // SAFETY: zlib-rs's live stream; the caller's buffers.
        |inner| unsafe { libz_rs_sys::deflateGetDictionary(inner, dictionary, dictLength) },
    )
}

/// zlib's `deflatePrime`: the stream moves to zlib-rs if it has not started.
///
/// # Safety
///
/// As [`deflate`](super::deflate).
#[no_mangle]
pub unsafe extern "C" fn deflatePrime(strm: z_streamp, bits: c_int, value: c_int) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    // zlib's bit buffer holds 16 bits: more is Z_BUF_ERROR, on every engine (zlib-rs takes
    // up to 64, and 17 bits before a block make a stream no zlib can read).
    if !(0..=16).contains(&bits) {
        return Z_BUF_ERROR;
    }
    dispatch(
        strm,
        state,
        |strm, state| {
            if !engine_of(state).is_fresh(strm) {
                return prime_windowed(strm, engine_of(state), bits, value);
            }
            match to_zlib_if_fresh(strm, state) {
                Ok(()) => state.call_zlib(strm, |inner| {
                    // SAFETY: zlib-rs's live stream.
                    unsafe { libz_rs_sys::deflatePrime(inner, bits, value) }
                }),
                Err(code) => code,
            }
        },
        // SAFETY: zlib-rs's live stream.
        |inner| unsafe { libz_rs_sys::deflatePrime(inner, bits, value) },
    )
}

/// `deflatePrime` on a started zipwire stream: the windowed encoder takes the bits (whole
/// bytes wait in the pending buffer, as zlib's do). A stream of stateless chunks cannot: its
/// next chunk starts on a byte boundary.
fn prime_windowed(strm: &mut z_stream, engine: &mut Engine, bits: c_int, value: c_int) -> c_int {
    let Some(windowed) = engine.windowed.as_mut() else {
        return set_error(strm, Z_STREAM_ERROR);
    };
    let mut bytes = Vec::new();
    if windowed
        .prime(bits as u32, value as u32, &mut bytes)
        .is_err()
    {
        return set_error(strm, Z_STREAM_ERROR);
    }
    match engine.push_pending(strm, &bytes) {
        Ok(()) => Z_OK,
        Err(code) => set_error(strm, code),
    }
}

/// zlib's `deflateSetHeader`: the gzip header written before the first byte.
///
/// # Safety
///
/// As [`deflate`](super::deflate); `head` stays valid until the header is written.
#[no_mangle]
pub unsafe extern "C" fn deflateSetHeader(strm: z_streamp, head: gz_headerp) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |_, state| {
            let engine = engine_of(state);
            // As zlib: any time on a gzip stream; once the header is written, it is the next
            // one's, after deflateReset.
            if engine.wrap != Wrap::Gzip {
                return Z_STREAM_ERROR;
            }
            engine.gzhead = head;
            Z_OK
        },
        // SAFETY: zlib-rs's live stream; the caller's header.
        |inner| unsafe { libz_rs_sys::deflateSetHeader(inner, head) },
    )
}

/// zlib's `deflateBound`: a true bound for this stream's engine; zlib's conservative bound
/// for a null or foreign stream.
///
/// # Safety
///
/// `strm` null or valid.
#[no_mangle]
pub unsafe extern "C" fn deflateBound(strm: z_streamp, sourceLen: c_ulong) -> c_ulong {
    // SAFETY: the caller's contract.
    match unsafe { State::of(strm) } {
        Some((_, state)) => match &mut state.kind {
            // c_ulong is 32 bits on some targets.
            #[allow(clippy::useless_conversion)]
            Kind::Zipwire(engine) => engine.bound(u64::from(sourceLen)) as c_ulong,
            // SAFETY: zlib-rs's live stream.
            Kind::Zlib => unsafe { libz_rs_sys::deflateBound(&mut state.inner, sourceLen) },
        },
        // SAFETY: zlib-rs takes a null stream for its conservative bound.
        None => unsafe { libz_rs_sys::deflateBound(ptr::null_mut(), sourceLen) },
    }
}

/// zlib's `deflatePending`: output not yet handed out (whole bytes: no bits wait).
///
/// # Safety
///
/// As [`deflate`](super::deflate); `pending`/`bits` null or writable.
#[no_mangle]
pub unsafe extern "C" fn deflatePending(
    strm: z_streamp,
    pending: *mut c_uint,
    bits: *mut c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |_, state| {
            let engine = engine_of(state);
            let len = engine.pending_len() as c_uint;
            // Chunks of the stateless encoder end on a byte boundary; the windowed encoder may
            // hold up to 7 bits after a block end (pigz pads by them before joining streams).
            let held = engine.windowed.as_ref().map_or(0, |w| w.pending_bits()) as c_int;
            // SAFETY: null or writable (the caller's contract).
            unsafe {
                if !pending.is_null() {
                    *pending = len;
                }
                if !bits.is_null() {
                    *bits = held;
                }
            }
            Z_OK
        },
        // SAFETY: zlib-rs's live stream; the caller's pointers.
        |inner| unsafe { libz_rs_sys::deflatePending(inner, pending, bits) },
    )
}

/// zlib's `deflateTune`: zlib-rs streams take it; zipwire's matcher has no such knobs.
///
/// # Safety
///
/// As [`deflate`](super::deflate).
#[no_mangle]
pub unsafe extern "C" fn deflateTune(
    strm: z_streamp,
    good_length: c_int,
    max_lazy: c_int,
    nice_length: c_int,
    max_chain: c_int,
) -> c_int {
    // SAFETY: the caller's contract.
    let Some((strm, state)) = (unsafe { State::of(strm) }) else {
        return Z_STREAM_ERROR;
    };
    dispatch(
        strm,
        state,
        |_, _| Z_OK,
        // SAFETY: zlib-rs's live stream.
        |inner| unsafe {
            libz_rs_sys::deflateTune(inner, good_length, max_lazy, nice_length, max_chain)
        },
    )
}

/// zlib's `deflateCopy`.
///
/// # Safety
///
/// `dest` null or writable; `source` as [`deflate`](super::deflate).
#[no_mangle]
pub unsafe extern "C" fn deflateCopy(dest: z_streamp, source: z_streamp) -> c_int {
    if dest.is_null() {
        return Z_STREAM_ERROR;
    }
    // SAFETY: the caller's contract.
    let Some((source, state)) = (unsafe { State::of(source) }) else {
        return Z_STREAM_ERROR;
    };
    guard(|| {
        // SAFETY: dest is writable; a bitwise copy of the stream, as zlib makes.
        let dest = unsafe {
            ptr::copy_nonoverlapping(source as *const z_stream, dest, 1);
            &mut *dest
        };
        // SAFETY: source owns the state; dest is valid with source's allocator.
        unsafe { state.copy_to(dest) }
    })
}
