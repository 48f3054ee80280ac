//! Per-stream memory through the stream's own `zalloc`/`zfree`, as zlib does: nginx hands out
//! slices of one preallocated block and logs an alert when a library asks for more than
//! zlib's formula allows, so every byte a stream holds is asked for here, in a few large
//! requests that are multiples of 512 bytes (nginx rounds any other size up to 8 KB).

use core::ffi::{c_uint, c_void};
use core::ptr;

use libz_rs_sys::z_stream;

/// zlib's default `zalloc` (`zcalloc`): the C heap, zeroed.
///
/// # Safety
///
/// Called by this library only, as a `zalloc` with any arguments.
pub(crate) unsafe extern "C" fn default_alloc(
    _opaque: *mut c_void,
    items: c_uint,
    size: c_uint,
) -> *mut c_void {
    // SAFETY: calloc accepts any sizes and returns null on overflow or failure.
    unsafe { libc::calloc(items as usize, size as usize) }
}

/// zlib's default `zfree`.
///
/// # Safety
///
/// `address` came from [`default_alloc`] and is freed once.
pub(crate) unsafe extern "C" fn default_free(_opaque: *mut c_void, address: *mut c_void) {
    // SAFETY: the address came from calloc (the caller's contract).
    unsafe { libc::free(address) }
}

/// Gives the stream zlib's default allocators where the caller left them null.
pub(crate) fn fill_defaults(strm: &mut z_stream) {
    if strm.zalloc.is_none() {
        strm.zalloc = Some(default_alloc);
        strm.opaque = ptr::null_mut();
    }
    if strm.zfree.is_none() {
        strm.zfree = Some(default_free);
    }
}

/// `size` bytes from the stream's allocator, or null.
///
/// # Safety
///
/// `strm`'s `zalloc` and `opaque` are the caller's valid allocator (zlib's contract).
pub(crate) unsafe fn alloc(strm: &z_stream, size: usize) -> *mut u8 {
    let (Some(zalloc), Ok(size)) = (strm.zalloc, c_uint::try_from(size)) else {
        return ptr::null_mut();
    };
    // SAFETY: zlib's contract: zalloc(opaque, items, size) returns memory or null.
    unsafe { zalloc(strm.opaque, 1, size).cast() }
}

/// Gives `address` (from [`alloc`] on the same stream) back; null is ignored.
///
/// # Safety
///
/// `address` came from this stream's allocator and is not used afterwards.
pub(crate) unsafe fn free(strm: &z_stream, address: *mut u8) {
    if let (Some(zfree), false) = (strm.zfree, address.is_null()) {
        // SAFETY: the caller's contract: the address came from this allocator.
        unsafe { zfree(strm.opaque, address.cast()) }
    }
}

/// Rounds a buffer size up to a multiple of 512, so nginx's allocator takes it as it is.
pub(crate) fn round512(size: usize) -> usize {
    size.div_ceil(512) * 512
}
