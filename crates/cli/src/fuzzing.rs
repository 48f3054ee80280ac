//! Property bodies for the `cli_decompress` fuzz target in `fuzz/`: each takes arbitrary
//! bytes, must never panic on its own, and asserts the invariants of the result. Not part of
//! the API.

use std::io::{self, Write};

use crate::inflate::Options;

/// Counts what it is given and keeps none of it: an LZW stream can expand a thousandfold.
struct Counter(u64);

impl Write for Counter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0 += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// What `gzip -d` reads, as the CLI decodes it: gzip members, a single-member zip, compress's
/// LZW and pack, chosen by magic number, with `-f`'s pass-through when bit 0 of the first byte
/// is set (the rest is the file). Must never panic or hang, and must count every byte it
/// writes.
///
/// # Panics
///
/// When the decoder reports another output length than it wrote.
pub fn decompress(data: &[u8]) {
    let Some((&flags, input)) = data.split_first() else {
        return;
    };
    let options = Options {
        pass_through: flags & 1 == 1,
    };
    let mut out = Counter(0);
    if let Ok(decoded) = crate::inflate::decompress(input, &mut out, options, &mut |_| {}) {
        assert_eq!(decoded.totals.bytes_out, out.0);
    }
}

#[cfg(test)]
mod tests {
    use super::decompress;

    #[test]
    fn valid_truncated_and_empty_files_pass() {
        let plain = b"hello, hello, hello world, ".repeat(40);
        let gzip = zipwire_codec::compress(
            zipwire_codec::Format::Gzip,
            zipwire_codec::Level::DEFAULT,
            &plain,
        );
        for flags in [0, 1] {
            let file = [&[flags][..], &gzip].concat();
            decompress(&file);
            decompress(&file[..file.len() / 2]);
            decompress(&[flags]);
            decompress(&[&[flags][..], b"plain text, no magic"].concat());
            // compress's magic and a block-mode byte with nothing after it.
            decompress(&[flags, 0x1f, 0x9d, 0x90]);
        }
        decompress(&[]);
    }
}
