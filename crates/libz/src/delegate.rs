//! Everything zipwire does not do better, exported under zlib's names and handed to zlib-rs:
//! inflate, the `gz*` file functions, checksums and their combine functions, one-shot
//! `compress*`/`uncompress*`, `zError` and `zlibCompileFlags`.
//!
//! libz-rs-sys is built without its `export-symbols` feature, so its functions are plain Rust
//! functions with mangled names: the only unmangled `inflate` in the library is the one below,
//! and nothing clashes. `gzprintf`/`gzvprintf` take variadic arguments, which need an
//! unstable Rust feature, so they are C, in `csrc/gzprintf.c`, over this `gzwrite`.

use core::ffi::{c_char, c_int, c_long, c_uchar, c_uint, c_ulong, c_void};

use libz_rs_sys::{
    gzFile, gz_headerp, in_func, out_func, z_off64_t, z_off_t, z_stream, z_streamp, Bytef,
    Z_STREAM_ERROR,
};

use crate::state::State;

/// Exports each listed function under its zlib name, calling libz-rs-sys's function of the
/// same name and signature.
macro_rules! delegate {
    ($( fn $name:ident($($arg:ident : $ty:ty),* $(,)?) -> $ret:ty; )*) => {$(
        #[doc = concat!("zlib's `", stringify!($name), "`, served by zlib-rs.")]
        ///
        /// # Safety
        ///
        /// The caller keeps zlib's contract for this function (valid pointers and lengths).
        #[no_mangle]
        #[allow(unused_unsafe, non_snake_case, clippy::missing_safety_doc)]
        pub unsafe extern "C" fn $name($($arg: $ty),*) -> $ret {
            // SAFETY: zlib-rs implements the same C contract as zlib for this function, and
            // the caller keeps that contract; the arguments are passed through unchanged.
            unsafe { libz_rs_sys::$name($($arg),*) }
        }
    )*};
}

/// [`delegate!`] for inflate's functions on an open stream, named by `$stream`: a deflate
/// stream of this library passed to one of them gets `$bad`, zlib's answer to a stream that
/// is not an inflate stream. zlib-rs checks only that the state points back to its stream,
/// which ours does too: it would take our deflate state for its own, and `inflate` on it
/// panic across the C boundary and abort the program (`inflateEnd` would free it as its own).
macro_rules! delegate_inflate {
    ($( fn $name:ident($stream:ident : $sty:ty $(, $arg:ident : $ty:ty)* $(,)?) -> $ret:ty = $bad:expr; )*) => {$(
        #[doc = concat!("zlib's `", stringify!($name), "`, served by zlib-rs.")]
        ///
        /// # Safety
        ///
        /// The caller keeps zlib's contract for this function (valid pointers and lengths).
        #[no_mangle]
        #[allow(unused_unsafe, non_snake_case, clippy::missing_safety_doc)]
        pub unsafe extern "C" fn $name($stream: $sty $(, $arg: $ty)*) -> $ret {
            // SAFETY: the caller's stream, null or valid, with a state set by a zlib.
            if unsafe { State::of($stream as *mut z_stream) }.is_some() {
                return $bad;
            }
            // SAFETY: zlib-rs implements the same C contract as zlib for this function, and
            // the caller keeps that contract; the arguments are passed through unchanged.
            unsafe { libz_rs_sys::$name($stream $(, $arg)*) }
        }
    )*};
}

delegate_inflate! {
    fn inflateEnd(strm: *mut z_stream) -> i32 = Z_STREAM_ERROR;
    fn inflateBack(strm: z_streamp, in_: Option<in_func>, in_desc: *mut c_void, out: Option<out_func>, out_desc: *mut c_void) -> c_int = Z_STREAM_ERROR;
    fn inflateBackEnd(strm: z_streamp) -> c_int = Z_STREAM_ERROR;
    fn inflateMark(strm: *const z_stream) -> c_long = -(1 << 16);
    fn inflateSync(strm: *mut z_stream) -> i32 = Z_STREAM_ERROR;
    fn inflateSyncPoint(strm: *mut z_stream) -> i32 = Z_STREAM_ERROR;
    fn inflatePrime(strm: *mut z_stream, bits: i32, value: i32) -> i32 = Z_STREAM_ERROR;
    fn inflateReset(strm: *mut z_stream) -> i32 = Z_STREAM_ERROR;
    fn inflateReset2(strm: *mut z_stream, windowBits: c_int) -> i32 = Z_STREAM_ERROR;
    fn inflateSetDictionary(strm: *mut z_stream, dictionary: *const u8, dictLength: c_uint) -> c_int = Z_STREAM_ERROR;
    fn inflateGetHeader(strm: z_streamp, head: gz_headerp) -> c_int = Z_STREAM_ERROR;
    fn inflateUndermine(strm: *mut z_stream, subvert: i32) -> c_int = Z_STREAM_ERROR;
    fn inflateValidate(strm: *mut z_stream, check: i32) -> c_int = Z_STREAM_ERROR;
    fn inflateResetKeep(strm: *mut z_stream) -> c_int = Z_STREAM_ERROR;
    fn inflateCodesUsed(strm: *mut z_stream) -> c_ulong = c_ulong::MAX;
    fn inflateGetDictionary(strm: *const z_stream, dictionary: *mut c_uchar, dictLength: *mut c_uint) -> c_int = Z_STREAM_ERROR;
}

/// zlib's `inflateCopy`, served by zlib-rs; a deflate stream of this library as the source
/// gets `Z_STREAM_ERROR` (see `delegate_inflate!`).
///
/// # Safety
///
/// The caller keeps zlib's contract for `inflateCopy`.
#[no_mangle]
pub unsafe extern "C" fn inflateCopy(dest: *mut z_stream, source: *const z_stream) -> i32 {
    // SAFETY: the caller's stream, null or valid, with a state set by a zlib.
    if unsafe { State::of(source.cast_mut()) }.is_some() {
        return Z_STREAM_ERROR;
    }
    // SAFETY: the caller's contract, passed through unchanged.
    unsafe { libz_rs_sys::inflateCopy(dest, source) }
}

/// zlib's `inflate`, served by zlib-rs, with zlib's counters: `total_in` and `total_out` grow
/// by what the call took and wrote, from whatever they held. zlib-rs 0.6.8 sets `total_out`
/// from a count of its own, which `inflateSync` zeroes: past damage, a synced stream would
/// report fewer bytes than it had written (and a program that zeroed `total_out` would get
/// the old count back).
///
/// # Safety
///
/// The caller keeps zlib's contract for `inflate`.
#[no_mangle]
pub unsafe extern "C" fn inflate(strm: *mut z_stream, flush: c_int) -> c_int {
    // SAFETY: the caller's stream, null or valid, with a state set by a zlib. A null stream
    // gets Z_STREAM_ERROR, as from zlib, and so does one of this library's deflate streams
    // (see `delegate_inflate!`).
    if strm.is_null() || unsafe { State::of(strm) }.is_some() {
        return Z_STREAM_ERROR;
    }
    // SAFETY: not null, and the caller's stream, valid for reads and writes.
    let (avail_in, avail_out, total_in, total_out) = unsafe {
        let s = &*strm;
        (s.avail_in, s.avail_out, s.total_in, s.total_out)
    };
    // SAFETY: the caller's contract, passed through unchanged.
    let code = unsafe { libz_rs_sys::inflate(strm, flush) };
    // SAFETY: as above; zlib-rs has returned and holds no reference to it.
    let s = unsafe { &mut *strm };
    s.total_in = total_in.wrapping_add(c_ulong::from(avail_in.wrapping_sub(s.avail_in)));
    s.total_out = total_out.wrapping_add(c_ulong::from(avail_out.wrapping_sub(s.avail_out)));
    code
}

delegate! {
    fn crc32_z(crc: c_ulong, buf: *const Bytef, len: usize) -> c_ulong;
    fn crc32(crc: c_ulong, buf: *const Bytef, len: c_uint) -> c_ulong;
    fn crc32_combine(crc1: c_ulong, crc2: c_ulong, len2: z_off_t) -> c_ulong;
    fn crc32_combine64(crc1: c_ulong, crc2: c_ulong, len2: z_off64_t) -> c_ulong;
    fn get_crc_table() -> *const [u32; 256];
    fn crc32_combine_gen64(len2: z_off64_t) -> c_ulong;
    fn crc32_combine_gen(len2: z_off_t) -> c_ulong;
    fn crc32_combine_op(crc1: c_ulong, crc2: c_ulong, op: c_ulong) -> c_ulong;
    fn adler32_z(adler: c_ulong, buf: *const Bytef, len: usize) -> c_ulong;
    fn adler32(adler: c_ulong, buf: *const Bytef, len: c_uint) -> c_ulong;
    fn adler32_combine(adler1: c_ulong, adler2: c_ulong, len2: z_off_t) -> c_ulong;
    fn adler32_combine64(adler1: c_ulong, adler2: c_ulong, len2: z_off64_t) -> c_ulong;
    fn uncompress(dest: *mut u8, destLen: *mut c_ulong, source: *const u8, sourceLen: c_ulong) -> c_int;
    fn uncompress2(dest: *mut u8, destLen: *mut c_ulong, source: *const u8, sourceLen: *mut c_ulong) -> c_int;
    fn inflateBackInit_(strm: z_streamp, windowBits: c_int, window: *mut c_uchar, version: *const c_char, stream_size: c_int) -> c_int;
    fn inflateInit_(strm: z_streamp, version: *const c_char, stream_size: c_int) -> c_int;
    fn inflateInit2_(strm: z_streamp, windowBits: c_int, version: *const c_char, stream_size: c_int) -> c_int;
    fn compress(dest: *mut Bytef, destLen: *mut c_ulong, source: *const Bytef, sourceLen: c_ulong) -> c_int;
    fn compress2(dest: *mut Bytef, destLen: *mut c_ulong, source: *const Bytef, sourceLen: c_ulong, level: c_int) -> c_int;
    fn compressBound(sourceLen: c_ulong) -> c_ulong;
    fn zError(err: c_int) -> *const c_char;
    fn zlibCompileFlags() -> c_ulong;
    fn gzopen64(path: *const c_char, mode: *const c_char) -> gzFile;
    fn gzopen(path: *const c_char, mode: *const c_char) -> gzFile;
    fn gzdopen(fd: c_int, mode: *const c_char) -> gzFile;
    fn gzclose(file: gzFile) -> c_int;
    fn gzclose_r(file: gzFile) -> c_int;
    fn gzclose_w(file: gzFile) -> c_int;
    fn gzbuffer(file: gzFile, size: c_uint) -> c_int;
    fn gzerror(file: gzFile, errnum: *mut c_int) -> *const c_char;
    fn gzclearerr(file: gzFile) -> ();
    fn gzeof(file: gzFile) -> c_int;
    fn gzdirect(file: gzFile) -> c_int;
    fn gzread(file: gzFile, buf: *mut c_void, len: c_uint) -> c_int;
    fn gzfread(buf: *mut c_void, size: usize, nitems: usize, file: gzFile) -> usize;
    fn gzwrite(file: gzFile, buf: *const c_void, len: c_uint) -> c_int;
    fn gzfwrite(buf: *const c_void, size: usize, nitems: usize, file: gzFile) -> usize;
    fn gzflush(file: gzFile, flush: c_int) -> c_int;
    fn gztell64(file: gzFile) -> z_off64_t;
    fn gztell(file: gzFile) -> z_off_t;
    fn gzoffset64(file: gzFile) -> z_off64_t;
    fn gzoffset(file: gzFile) -> z_off_t;
    fn gzputc(file: gzFile, c: c_int) -> c_int;
    fn gzputs(file: gzFile, s: *const c_char) -> c_int;
    fn gzgetc(file: gzFile) -> c_int;
    fn gzgetc_(file: gzFile) -> c_int;
    fn gzungetc(c: c_int, file: gzFile) -> c_int;
    fn gzgets(file: gzFile, buf: *mut c_char, len: c_int) -> *mut c_char;
    fn gzsetparams(file: gzFile, level: c_int, strategy: c_int) -> c_int;
    fn gzseek64(file: gzFile, offset: z_off64_t, whence: c_int) -> z_off64_t;
    fn gzseek(file: gzFile, offset: z_off_t, whence: c_int) -> z_off_t;
    fn gzrewind(file: gzFile) -> c_int;
}
