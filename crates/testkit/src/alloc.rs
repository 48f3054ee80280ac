//! Memory a test can measure as its own: a counting global allocator, glibc's count of what
//! `malloc` hands out (C libraries such as libzstd allocate there, not through Rust), and
//! [`alone`], which runs one test by itself in a child process so that nothing else in its
//! test binary adds to what it measures.
//!
//! A test binary installs the allocator with
//!
//! ```
//! #[global_allocator]
//! static COUNTING: zipwire_testkit::alloc::Counting = zipwire_testkit::alloc::Counting;
//! # fn main() {
//! #     let before = zipwire_testkit::alloc::live();
//! #     let held = vec![0u8; 1 << 20];
//! #     assert!(zipwire_testkit::alloc::live() - before >= 1 << 20);
//! #     drop(held);
//! # }
//! ```
//!
//! and reads [`live`] and [`peak`] around what it measures.

// A global allocator needs `unsafe impl GlobalAlloc`; it only forwards to `System`.
#![allow(unsafe_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::Command;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Bytes allocated through [`Counting`] and not yet freed, by every thread.
static LIVE: AtomicIsize = AtomicIsize::new(0);

/// The most [`LIVE`] has been since [`reset_peak`].
static PEAK: AtomicIsize = AtomicIsize::new(0);

/// The environment variable that tells a child started by [`alone`] which test it runs.
const ALONE_ENV: &str = "ZIPWIRE_TEST_ALONE";

/// A global allocator that forwards to [`System`] and counts the bytes live ([`live`]) and
/// their high-water mark ([`peak`]).
#[derive(Debug, Clone, Copy)]
pub struct Counting;

fn grew(by: usize) {
    let now = LIVE.fetch_add(by as isize, Ordering::Relaxed) + by as isize;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

fn shrank(by: usize) {
    LIVE.fetch_sub(by as isize, Ordering::Relaxed);
}

// SAFETY: every method forwards to `System` with the caller's arguments, which meet
// `GlobalAlloc`'s contract as the caller's do; the count is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let ptr = unsafe { System.alloc(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        shrank(layout.size());
        // SAFETY: forwarded as received (see the impl).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let ptr = unsafe { System.alloc_zeroed(layout) };
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded as received (see the impl).
        let moved = unsafe { System.realloc(ptr, layout, new_size) };
        if !moved.is_null() {
            if new_size >= layout.size() {
                grew(new_size - layout.size());
            } else {
                shrank(layout.size() - new_size);
            }
        }
        moved
    }
}

/// Bytes allocated through [`Counting`] and not yet freed (0 where it is not the global
/// allocator).
pub fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

/// The most bytes live at once since the last [`reset_peak`].
pub fn peak() -> isize {
    PEAK.load(Ordering::Relaxed)
}

/// Starts a new high-water mark at what is live now, and returns that.
pub fn reset_peak() -> isize {
    let now = live();
    PEAK.store(now, Ordering::Relaxed);
    now
}

/// Bytes glibc's `malloc` has handed out and not taken back, in every arena and as `mmap`ed
/// blocks: what C libraries hold as well as Rust's allocations (`System` is `malloc`).
/// `None` where the C library is not glibc.
pub fn malloc_in_use() -> Option<usize> {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: `mallinfo2` takes no arguments, only reads the allocator's statistics under
        // its own locks, and returns a plain struct by value.
        let info = unsafe { libc::mallinfo2() };
        Some(info.uordblks + info.hblkhd)
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        None
    }
}

/// Runs the test `name` (its path in the test binary, as `cargo test` lists it) alone in a
/// child process of this test binary, so that what it measures process-wide is its own.
///
/// Returns `true` in that child, where the caller goes on with the test, and `false` in
/// the parent once the child has passed; the caller then returns.
///
/// # Panics
///
/// In the parent, when the child cannot be started or fails (its output is in the message).
pub fn alone(name: &str) -> bool {
    if std::env::var(ALONE_ENV).is_ok_and(|running| running == name) {
        return true;
    }
    let exe = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(exe)
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(ALONE_ENV, name)
        .output()
        .expect("start the test binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(
        output.status.success(),
        "{name} alone: {}\n{text}",
        output.status
    );
    assert!(
        text.contains("1 passed"),
        "{name} alone ran no test:\n{text}"
    );
    eprint!("{text}");
    false
}
