//! zipwire's gzip-compatible file tool: what `zipwire compress`, `zipwire decompress` and the
//! binary run as `gzip`, `gunzip` or `zcat` do.
//!
//! # Brief overview
//!
//! - [`run`] takes typed [`Options`] and the operands and does gzip's job on each: replace
//!   `FILE` by `FILE.gz` (or back), write to stdout, test or list, with gzip's messages and exit
//!   [`Status`].
//! - [`member`] compresses one stream into one gzip member on worker threads: the input is cut
//!   into 1 MB blocks, each compressed on its own (levels 1-3 with the stateless encoder, whose
//!   level 2 serves both `-1` and `-2`; 4-9 with zlib-rs primed with the previous 32 KB) and
//!   stitched in order with the CRC-32s combined, so the output is the same whatever the
//!   thread count and memory stays bounded.
//! - [`inflate`] decodes what `gzip -d` reads (gzip members, the first entry of a zip,
//!   compress's LZW, pack) with bounded memory, tells trailing zeros from trailing garbage,
//!   and passes unknown data through for `-cdf`.
//! - [`staged`] is how files are written: a temporary file in the target's directory, synced,
//!   then renamed into place; the input is removed only after that.
//!
//! # Why hand-written
//!
//! pigz's block-parallel scheme needs an encoder that can end a block on a byte boundary and
//! be primed with a dictionary; no crate offers the gzip command line's safety rules and
//! messages. Compression, inflate and checksums come from `zipwire-codec`, zlib-rs and
//! crc32fast (whose `combine` joins the per-block CRCs); compress's LZW and pack are decoded
//! here (their modules say why).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

/// `eprintln!` that never panics: a message to a closed stderr is dropped and the run goes
/// on (`eprintln!` panicked there, exit 101, with the output written and the input kept;
/// gzip dies of SIGPIPE instead, and loses its output).
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod blocking;
mod error;
#[doc(hidden)]
pub mod fuzzing;
pub mod inflate;
mod interrupt;
mod job;
mod list;
mod lzw;
pub mod member;
pub mod names;
mod progress;
mod ratio;
mod source;
pub mod staged;
mod stream;
mod unpack;
mod unzip;

use std::ffi::OsString;
use std::path::PathBuf;

use zipwire_codec::Level;

pub use error::{Damage, StreamError};
pub use job::run;

/// What to do with each operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Compress (gzip's default).
    Compress,
    /// Decompress (`-d`).
    Decompress,
    /// Check integrity without writing (`-t`).
    Test,
    /// Print compressed and uncompressed sizes (`-l`).
    List,
}

/// Everything a run needs, validated; the binary builds it from its flags.
#[derive(Clone, Debug)]
pub struct Options {
    /// What to do.
    pub mode: Mode,
    /// Compression level.
    pub level: Level,
    /// Write to standard output, keep the inputs (`-c`).
    pub to_stdout: bool,
    /// Keep the inputs (`-k`).
    pub keep: bool,
    /// Overwrite outputs, compress links and already-suffixed files, write compressed data to
    /// a terminal (`-f`).
    pub force: bool,
    /// Suffix of compressed files (`-S`, default `.gz`).
    pub suffix: OsString,
    /// Descend into directories (`-r`).
    pub recursive: bool,
    /// No warnings (`-q`).
    pub quiet: bool,
    /// Per-file report on stderr (`-v`).
    pub verbose: bool,
    /// Write all output to this file instead (`-o`); the input is kept.
    pub output: Option<PathBuf>,
    /// Compression threads (`-p`).
    pub threads: usize,
    /// Store the file's name and time in the header (gzip's default; `-n` turns it off).
    pub save_name: bool,
    /// When decompressing, give the output the header's name and time rather than the input
    /// file's (`-N`).
    pub restore_time: bool,
    /// Show a progress bar on a terminal for large inputs (off with `-q`).
    pub progress: bool,
    /// Name used in messages (`zipwire`, or `gzip` when run under that name).
    pub program: String,
}

/// How a run went, worst first: gzip's exit statuses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    /// Everything done.
    Success,
    /// Something was skipped or odd (trailing garbage, a directory without `-r`): exit 2.
    Warning,
    /// Something failed: exit 1.
    Failure,
    /// Standard output was closed under it (`zcat f.gz | head`): exit 141, the status a shell gives
    /// gzip, which SIGPIPE ends (128 + 13).
    BrokenPipe,
}

impl Status {
    /// The process exit code gzip uses for this status.
    pub fn exit_code(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::Failure => 1,
            Status::Warning => 2,
            Status::BrokenPipe => 141,
        }
    }
}
