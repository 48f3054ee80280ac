//! A drop-in `libz.so.1`: zlib's C API and ABI, with deflate through zipwire's encoder for the
//! levels it serves and everything else through zlib-rs.
//!
//! # Brief overview
//!
//! - [`exports`]: the deflate functions and `zlibVersion`; each stream picks its engine at
//!   `deflateInit2` by the level map (`state`), and zipwire's side keeps zlib's streaming
//!   rules around the stateless encoder (`engine`).
//! - [`delegate`]: inflate, `gz*`, checksums, `compress`/`uncompress` — zlib-rs's C API,
//!   exported under zlib's names.
//! - `config`: the level map, the adaptive option and the log line, read once per process.
//!
//! # Design
//!
//! libz-rs-sys is used without its `export-symbols` feature: its functions are ordinary Rust
//! functions, so the library exports exactly one set of zlib symbols and nothing clashes,
//! whether it is preloaded over the system zlib or stands in for it as `libz.so.1` (the
//! soname, set in `build.rs`). Every byte of per-stream state comes from the stream's
//! `zalloc`, in sizes that fit zlib's own memory formula, because nginx preallocates by that
//! formula; the encoder's working memory is per thread and shared by all streams.
//!
//! This crate and the codec are the only ones allowed `unsafe`: the C ABI needs it. Every
//! unsafe block says why it holds.

#![allow(unsafe_code)]
#![warn(missing_docs)]

mod alloc;
mod config;
pub mod delegate;
mod engine;
pub mod exports;
mod framing;
pub mod printf;
mod state;
#[cfg(test)]
mod tests;
mod windowed;

/// Reads the settings (and prints the log line, if asked) when the library is loaded, so
/// `ZIPWIRE_ZLIB_LOG=1` names it even in a program that only inflates.
extern "C" fn on_load() {
    let _ = std::panic::catch_unwind(config::get);
}

#[used]
#[link_section = ".init_array"]
static ON_LOAD: extern "C" fn() = on_load;
