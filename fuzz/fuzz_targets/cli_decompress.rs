//! What `gzip -d` reads, as the CLI decodes it: gzip members, a single-member zip, compress's
//! LZW and pack, chosen by magic number, with or without `-f`'s pass-through. Must never panic
//! or hang, and must count every byte it writes.

#![no_main]

use std::io::{self, Write};

use libfuzzer_sys::fuzz_target;
use zipwire_cli::inflate::{decompress, Options};

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

fuzz_target!(|data: &[u8]| {
    let Some((&flags, input)) = data.split_first() else {
        return;
    };
    let options = Options {
        pass_through: flags & 1 == 1,
    };
    let mut out = Counter(0);
    if let Ok(decoded) = decompress(input, &mut out, options, &mut |_| {}) {
        assert_eq!(decoded.totals.bytes_out, out.0);
    }
});
