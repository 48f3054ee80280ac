//! Unit tests through the exported functions: the adaptive option, deflateBound, and the
//! memory a stream takes through its allocator.

use core::ffi::{c_int, c_uint, c_void};
use core::mem::size_of;
use std::sync::atomic::{AtomicUsize, Ordering};

use libz_rs_sys::{z_stream, Z_DEFLATED, Z_FINISH, Z_OK, Z_STREAM_END, Z_SYNC_FLUSH};

use crate::exports::{deflate, deflateBound, deflateEnd, deflateInit2_, VERSION};
use crate::state::{Kind, State};

/// Bytes handed out by [`counting_alloc`] for the stream whose opaque is the counter.
unsafe extern "C" fn counting_alloc(
    opaque: *mut c_void,
    items: c_uint,
    size: c_uint,
) -> *mut c_void {
    let bytes = items as usize * size as usize;
    // SAFETY: the tests pass an AtomicUsize as opaque.
    unsafe { &*(opaque as *const AtomicUsize) }.fetch_add(bytes, Ordering::Relaxed);
    // SAFETY: plain calloc.
    unsafe { libc::calloc(items as usize, size as usize) }
}

unsafe extern "C" fn plain_free(_: *mut c_void, p: *mut c_void) {
    // SAFETY: p came from calloc.
    unsafe { libc::free(p) }
}

fn init(strm: &mut z_stream, level: c_int, window_bits: c_int) {
    // SAFETY: a valid stream and the library's own version string.
    let ret = unsafe {
        deflateInit2_(
            strm,
            level,
            Z_DEFLATED,
            window_bits,
            8,
            0,
            VERSION.as_ptr().cast(),
            size_of::<z_stream>() as c_int,
        )
    };
    assert_eq!(ret, Z_OK);
}

/// Deflates `input` in one call with `flush`; returns the output.
fn deflate_all(strm: &mut z_stream, input: &[u8], flush: c_int) -> Vec<u8> {
    let mut out = vec![0u8; input.len() * 2 + 1024];
    strm.next_in = input.as_ptr();
    strm.avail_in = input.len() as c_uint;
    strm.next_out = out.as_mut_ptr();
    strm.avail_out = out.len() as c_uint;
    // SAFETY: the buffers above outlive the call.
    let ret = unsafe { deflate(strm, flush) };
    assert!(ret == Z_OK || ret == Z_STREAM_END, "deflate: {ret}");
    out.truncate(out.len() - strm.avail_out as usize);
    out
}

fn text(len: usize) -> Vec<u8> {
    b"the quick brown fox jumps over the lazy dog; "
        .iter()
        .cycle()
        .take(len)
        .copied()
        .collect()
}

/// With the adaptive option, a block the sampled check judges incompressible (here: it opens
/// with gzip's magic) goes out stored, though it would compress; without it, it compresses.
#[test]
fn adaptive_option_stores_blocks_judged_incompressible() {
    let mut input = vec![0x1f, 0x8b];
    input.extend(text(20_000));
    let mut sizes = Vec::new();
    for adapt in [false, true] {
        let mut strm = z_stream::default();
        init(&mut strm, 1, -15);
        // SAFETY: the stream was just initialised by this library.
        let (_, state) = unsafe { State::of(&mut strm) }.expect("our stream");
        let Kind::Zipwire(engine) = &mut state.kind else {
            panic!("level 1 is served by zipwire")
        };
        engine.adapt = adapt;
        let out = deflate_all(&mut strm, &input, Z_SYNC_FLUSH);
        // RFC 1951 section 3.2.3: BTYPE, bits 1-2 of the first byte, 00 = stored.
        assert_eq!(
            out[0] & 0b110 == 0,
            adapt,
            "first block stored: {:x}",
            out[0]
        );
        sizes.push(out.len());
        // SAFETY: our stream.
        unsafe { deflateEnd(&mut strm) };
    }
    assert!(
        sizes[0] * 10 < input.len(),
        "compressed without the option: {sizes:?}"
    );
    assert!(sizes[1] > input.len(), "stored with it: {sizes:?}");
}

/// deflateBound is a true bound for the zipwire engine, on incompressible data of many sizes
/// and every window size (each window size sets the chunk size).
#[test]
fn deflate_bound_holds_for_incompressible_data() {
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let noise: Vec<u8> = (0..300_000)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect();
    for window_bits in [9, 12, 15, 31, -15] {
        for len in [
            0, 1, 511, 512, 513, 4096, 32_768, 65_535, 65_536, 100_000, 300_000,
        ] {
            let mut strm = z_stream::default();
            init(&mut strm, 1, window_bits);
            // SAFETY: our stream.
            let bound = unsafe { deflateBound(&mut strm, len as _) } as usize;
            let mut out = vec![0u8; bound];
            strm.next_in = noise.as_ptr();
            strm.avail_in = len as c_uint;
            strm.next_out = out.as_mut_ptr();
            strm.avail_out = bound as c_uint;
            // SAFETY: buffers outlive the call.
            let ret = unsafe { deflate(&mut strm, Z_FINISH) };
            assert_eq!(
                ret, Z_STREAM_END,
                "bound {bound} for {len} bytes, wb {window_bits}"
            );
            // SAFETY: our stream.
            assert_eq!(unsafe { deflateEnd(&mut strm) }, Z_OK);
        }
    }
}

/// What a stream takes from its allocator at level 6: at most half of zlib's 256 KB (the
/// library's memory target), counted at the allocator.
#[test]
fn a_level_6_stream_takes_at_most_half_of_zlibs_memory() {
    let counter = AtomicUsize::new(0);
    let mut strm = z_stream {
        zalloc: Some(counting_alloc),
        zfree: Some(plain_free),
        opaque: (&counter as *const AtomicUsize).cast_mut().cast(),
        ..z_stream::default()
    };
    init(&mut strm, 6, 31);
    let out = deflate_all(&mut strm, &text(200_000), Z_FINISH);
    assert!(!out.is_empty());
    // What the stream took through zalloc, and what the windowed encoder holds on the heap.
    // SAFETY: our stream.
    let (_, state) = unsafe { State::of(&mut strm) }.expect("our stream");
    let Kind::Zipwire(engine) = &state.kind else {
        panic!("level 6 is served by zipwire")
    };
    let windowed = engine.windowed.as_ref().map_or(0, |w| w.memory());
    assert!(
        windowed > 0,
        "a windowBits 15 stream runs the windowed encoder"
    );
    let taken = counter.load(Ordering::Relaxed) + windowed;
    // zlib 1.2.13 at level 6, windowBits 15, memLevel 8: window 64 KB + prev 64 KB + head
    // 64 KB + pending 64 KB + state ~6 KB.
    let zlib = 4 * 65_536 + 5_920;
    assert!(taken * 2 <= zlib, "{taken} bytes against zlib's {zlib}");
    // SAFETY: our stream.
    assert_eq!(unsafe { deflateEnd(&mut strm) }, Z_OK);
}
