//! Property bodies for the fuzz targets in `fuzz/`: each takes arbitrary input, must never
//! panic on its own, and asserts the invariants of the result. Not part of the API.
//!
//! The targets that take structured input get it as a `*Case` type; with the `arbitrary`
//! feature (which the fuzz crate enables) those types derive `arbitrary::Arbitrary`, and
//! libFuzzer's bytes decode to their fields in declaration order (the order `fuzz/seed.sh`
//! writes its seeds in).

mod gzip_header;
mod inflate;
mod roundtrip;
mod window;

pub use gzip_header::gzip_header;
pub use inflate::{inflate, InflateCase};
pub use roundtrip::{roundtrip, RoundtripCase};
pub use window::{window, WindowCall, WindowCase};

use std::io::Read;

use crate::Format;

/// Decodes `data` with flate2 as `format` (gzip members back to back, as ours reads them).
fn flate2_decode(format: Format, data: &[u8]) -> std::io::Result<Vec<u8>> {
    let mut plain = Vec::new();
    match format {
        Format::Gzip => flate2::read::MultiGzDecoder::new(data).read_to_end(&mut plain)?,
        Format::Zlib => flate2::read::ZlibDecoder::new(data).read_to_end(&mut plain)?,
        Format::Raw => flate2::read::DeflateDecoder::new(data).read_to_end(&mut plain)?,
    };
    Ok(plain)
}
