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

/// Where zlib-rs's memory for one stream comes from: the caller's allocator while it fits
/// zlib 1.2.13's own formula for the stream's settings, the C heap beyond.
///
/// zlib-rs asks for its window, hash chains and buffers in one block larger than zlib's
/// (about 380 KB at windowBits 15, memLevel 8, against zlib's 270 KB), which nginx, sizing
/// its preallocation by zlib's formula, would answer with an alert per response. The part
/// that does not fit is taken from the C heap and given back by `deflateEnd`.
#[derive(Debug)]
pub(crate) struct Budget {
    zalloc: Option<libz_rs_sys::alloc_func>,
    zfree: Option<libz_rs_sys::free_func>,
    opaque: *mut c_void,
    /// Bytes of the formula not yet taken.
    left: usize,
    /// Blocks taken from the C heap, to free them there.
    heap: [*mut c_void; 8],
}

impl Budget {
    /// An empty budget (no allocator yet).
    pub(crate) const NONE: Budget = Budget {
        zalloc: None,
        zfree: None,
        opaque: ptr::null_mut(),
        left: 0,
        heap: [ptr::null_mut(); 8],
    };

    /// zlib's formula for `window_bits` (any form) and `mem_level`, less the 8 KB slot this
    /// library's own state takes, over `strm`'s allocator.
    pub(crate) fn new(strm: &z_stream, window_bits: i32, mem_level: i32) -> Budget {
        let w = match window_bits {
            w if w < 0 => -w,
            w if w > 15 => w - 16,
            w => w,
        }
        .clamp(8, 15);
        let formula = 8192 + 16 + (1usize << (w + 2)) + (1usize << (mem_level.clamp(1, 9) + 9));
        Budget {
            zalloc: strm.zalloc,
            zfree: strm.zfree,
            opaque: strm.opaque,
            left: formula.saturating_sub(8192),
            heap: [ptr::null_mut(); 8],
        }
    }
}

/// The `zalloc` of zlib-rs's inner stream; `opaque` is its [`Budget`].
///
/// # Safety
///
/// `opaque` points to the live `Budget` of the stream.
pub(crate) unsafe extern "C" fn budget_alloc(
    opaque: *mut c_void,
    items: c_uint,
    size: c_uint,
) -> *mut c_void {
    // SAFETY: the caller's contract; one call at a time per stream.
    let budget = unsafe { &mut *opaque.cast::<Budget>() };
    let bytes = items as usize * size as usize;
    // nginx rounds odd sizes up to a page: charge as much.
    let charged = bytes.div_ceil(4096) * 4096;
    if let (Some(zalloc), true) = (budget.zalloc, charged <= budget.left) {
        budget.left -= charged;
        // SAFETY: the caller's allocator, as zlib's contract has it.
        return unsafe { zalloc(budget.opaque, items, size) };
    }
    let Some(slot) = budget.heap.iter().position(|p| p.is_null()) else {
        return ptr::null_mut();
    };
    // SAFETY: calloc accepts any sizes.
    let p = unsafe { libc::calloc(items as usize, size as usize) };
    budget.heap[slot] = p;
    p
}

/// The `zfree` of zlib-rs's inner stream.
///
/// # Safety
///
/// `opaque` points to the live `Budget`; `address` came from [`budget_alloc`] on it.
pub(crate) unsafe extern "C" fn budget_free(opaque: *mut c_void, address: *mut c_void) {
    // SAFETY: the caller's contract.
    let budget = unsafe { &mut *opaque.cast::<Budget>() };
    if address.is_null() {
        return;
    }
    if let Some(slot) = budget.heap.iter().position(|&p| p == address) {
        budget.heap[slot] = ptr::null_mut();
        // SAFETY: this block came from calloc.
        unsafe { libc::free(address) };
    } else if let Some(zfree) = budget.zfree {
        // SAFETY: this block came from the caller's allocator.
        unsafe { zfree(budget.opaque, address) };
    }
}
