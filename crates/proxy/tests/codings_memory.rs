//! The memory an encoder holds per stream, counted by a global allocator, against the figure
//! the memory gate takes for it (`Encode::memory`): brotli's and zlib-rs's allocations go
//! through Rust's allocator and are counted here; libzstd allocates with `malloc`, so what it
//! holds is read from glibc's statistics (`mallinfo2`) and checked to grow with the window.
//!
//! Run with `--nocapture` to print the table that `docs/config.md` quotes.

// A counting allocator needs `unsafe impl GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Mutex;

use zipwire_codec::{Format, Level};
use zipwire_proxy::codings::{BrotliEncoder, Flush, ZstdEncoder};
use zipwire_proxy::{BodyEncoder, BrotliLevel, ZstdLevel};

/// Bytes allocated and not yet freed, by every thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// One measurement at a time: the count is process-wide.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments, which meet
// `GlobalAlloc`'s contract as the caller's do; the count is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.alloc(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        LIVE.fetch_add(
            new_size as isize - layout.size() as isize,
            Ordering::Relaxed,
        );
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// Bytes `encoder` holds after a first flushed call of page-like data, counted by the
/// allocator (the output is dropped before counting), and what it reports itself.
fn held(make: impl FnOnce() -> BodyEncoder) -> (usize, usize) {
    // Enough data for every window to fill: a ring buffer grows with what it holds.
    let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 1 << 20, 1);
    let mut out = Vec::with_capacity(1 << 21);
    let before = LIVE.load(Ordering::Relaxed);
    let mut encoder = make();
    let encoder_ref = encoder.as_encode_mut();
    encoder_ref
        .encode(&data, Flush::Sync, &mut out)
        .expect("encode into memory");
    let after = LIVE.load(Ordering::Relaxed);
    let reported = encoder_ref.memory();
    drop(encoder);
    ((after - before).max(0) as usize, reported)
}

#[test]
fn brotli_state_is_what_the_gate_counts() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    println!("br level, window log: counted bytes, reported bytes");
    // Levels 0-6 (7-11 take seconds a megabyte; their rows in the table come from the same
    // measurement, run once with `0..=BrotliLevel::MAX`).
    for level in 0..=6 {
        for window_log in [10, 13, 16, 17, 18, 19] {
            let level = BrotliLevel::new(level).expect("level");
            let (counted, reported) = held(|| BrotliEncoder::new(level, window_log).into());
            println!("br-{} w{window_log}: {counted} {reported}", level.get());
            // Never less than what is held; not far more once the window is that of a page.
            assert!(
                reported >= counted,
                "br-{} window 2^{window_log}: counted {counted}, reported {reported}",
                level.get()
            );
            if window_log >= 16 {
                assert!(
                    reported as f64 <= counted as f64 * 1.3,
                    "br-{} window 2^{window_log}: counted {counted}, reported {reported}",
                    level.get()
                );
            }
        }
    }
}

#[test]
fn stateful_gzip_state_is_what_the_gate_counts() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    for level in [4u8, 6, 9] {
        let level = Level::try_from(level).expect("level");
        let (counted, reported) = held(|| BodyEncoder::new(Format::Gzip, level));
        println!("gzip-{}: {counted} {reported}", level.get());
        let (low, high) = (counted as f64 * 0.9, counted as f64 * 1.25);
        assert!(
            (low..=high).contains(&(reported as f64)),
            "gzip-{}: counted {counted}, reported {reported}",
            level.get()
        );
    }
    // The first stateless stream on a thread allocates that thread's scratch; the next holds
    // nothing of its own.
    held(|| BodyEncoder::new(Format::Gzip, Level::FAST));
    let (counted, reported) = held(|| BodyEncoder::new(Format::Gzip, Level::FAST));
    assert_eq!(reported, 0);
    assert!(counted < 1024, "stateless gzip holds {counted} bytes");
}

/// Like [`held`], for an encoder whose library allocates with `malloc` itself: the bytes
/// glibc reports in use grew by ([`zipwire_testkit::alloc::malloc_in_use`]), less what went
/// through Rust's allocator meanwhile (also `malloc`, counted by [`Counting`]).
fn held_by_malloc(make: impl FnOnce() -> BodyEncoder) -> (usize, usize) {
    let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 1 << 20, 1);
    let mut out = Vec::with_capacity(1 << 21);
    let in_use = || zipwire_testkit::alloc::malloc_in_use().expect("glibc's malloc statistics");
    let (before, live_before) = (in_use(), LIVE.load(Ordering::Relaxed));
    let mut encoder = make();
    let encoder_ref = encoder.as_encode_mut();
    encoder_ref
        .encode(&data, Flush::Sync, &mut out)
        .expect("encode into memory");
    let (after, live_after) = (in_use(), LIVE.load(Ordering::Relaxed));
    let reported = encoder_ref.memory();
    drop(encoder);
    // Signed: another thread may free Rust allocations meanwhile (a finished test's buffers),
    // which lowers both figures alike.
    let malloc = after as isize - before as isize;
    let rust = live_after - live_before;
    ((malloc - rust).max(0) as usize, reported)
}

#[test]
fn zstd_state_grows_with_the_window() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    println!("zstd level, window log: malloc'd bytes, reported bytes");
    for level in [1u8, 2, 3, 5] {
        let level = ZstdLevel::new(level).expect("level");
        let mut smallest = usize::MAX;
        let mut largest = 0;
        for window_log in [10, 12, 14, 16, 17, 18, 19] {
            let (counted, reported) = held_by_malloc(|| ZstdEncoder::new(level, window_log).into());
            println!("zstd-{} w{window_log}: {counted} {reported}", level.get());
            // What libzstd allocated holds the window, and the gate's figure covers it.
            assert!(
                counted > 1 << window_log,
                "zstd-{} window 2^{window_log}: {counted} bytes allocated",
                level.get()
            );
            // Measured within 0.2% of each other, windows 2^10 to 2^19, levels 1-5.
            let (low, high) = (counted as f64 * 0.99, counted as f64 * 1.3);
            assert!(
                (low..=high).contains(&(reported as f64)),
                "zstd-{} window 2^{window_log}: counted {counted}, reported {reported}",
                level.get()
            );
            smallest = smallest.min(counted);
            largest = largest.max(counted);
        }
        // From 1 KiB to 512 KiB windows the state grows by most of a window.
        assert!(
            largest > smallest + (1 << 18),
            "zstd-{}: {smallest} to {largest} bytes, no growth with the window",
            level.get()
        );
    }
}
