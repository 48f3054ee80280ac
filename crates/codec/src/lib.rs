//! zipwire's codec: a stateless streaming deflate encoder with gzip, zlib and raw framing,
//! stateful levels through zlib-rs, and a bounded streaming decoder.
//!
//! # Brief overview
//!
//! - [`Encoder`] (levels 1-3) keeps at most 64 bytes per stream between calls. Each call
//!   compresses only its own input (no dictionary from earlier calls, as libslz does), so the
//!   hash table, tokens and Huffman tables live in a [`Scratch`] that one thread reuses for all
//!   the streams it serves. Every [`Encoder::encode`] call ends on a byte boundary with non-final
//!   blocks (sync-flush semantics); [`Encoder::finish`] writes the final block and the trailer.
//! - [`WindowedEncoder`] (levels 1-3, raw deflate) keeps up to 32 KB of history per stream
//!   (at most 128 KB of buffers in all, plus about 100 bytes of the encoder's own) so that
//!   matches reach into earlier calls, with zlib's flush modes ([`BlockEnd`]): for callers
//!   that flush after every small message, as zlib's API allows.
//! - [`StatefulEncoder`] (levels 4-9) keeps a 32 KB window across calls for better ratio; it is
//!   flate2 with the zlib-rs backend, which no hand-written code here tries to beat.
//! - [`Decoder`] decodes gzip (multi-member), zlib and raw deflate through zlib-rs with optional
//!   limits on output size and inflate ratio, and typed [`DecodeError`]s.
//!
//! # Why hand-written
//!
//! No maintained crate offers a deflate encoder without per-stream window state: zlib, zlib-rs,
//! miniz_oxide and libdeflate all either keep a window per stream or need the whole input at
//! once. The stateless encoder is what lets a proxy hold 100,000 open compressed streams in a
//! few megabytes, so it is written here; everything else (checksums, inflate, stateful deflate)
//! comes from libraries.
//!
//! # Example
//!
//! ```
//! use zipwire_codec::{Decoder, Encoder, Format, Level, Scratch};
//!
//! let mut scratch = Scratch::new();
//! let mut enc = Encoder::new(Format::Gzip, Level::FASTEST).unwrap();
//! let mut wire = Vec::new();
//! enc.encode(&mut scratch, b"hello, hello, hello ", &mut wire).unwrap();
//! enc.finish(&mut scratch, b"world", &mut wire).unwrap();
//!
//! let plain = zipwire_codec::decompress(Format::Gzip, &wire, Default::default()).unwrap();
//! assert_eq!(plain, b"hello, hello, hello world");
//! # let _ = Decoder::new(Format::Gzip);
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

mod decode;
mod encode;
mod error;
pub mod format;
#[doc(hidden)]
pub mod fuzzing;
mod level;
mod stateful;
mod window;

pub use decode::{decompress, Decoder, Limits, Progress};
pub use encode::{compress, Encoder, Scratch};
pub use error::{DecodeError, EncodeError};
pub use format::Format;
pub use level::Level;
pub use stateful::StatefulEncoder;
pub use window::{BlockEnd, WindowedEncoder};
