//! Streaming decompression of a gzip file (any number of members) with bounded memory.
//!
//! After the last member, zero bytes are padding (tape blocks, as gzip accepts them silently);
//! anything else is trailing garbage, reported so the caller can warn as gzip does.

use std::io::{Read, Write};

use zipwire_codec::{Decoder, Format};

use crate::error::StreamError;
use crate::member::Totals;

/// Input read per call.
const READ: usize = 256 * 1024;
/// Output decoded per call, then written.
const WRITE: usize = 1 << 20;

/// What followed the last gzip member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Trailing {
    /// The input ended with the last member.
    Nothing,
    /// Only zero bytes followed.
    Zeros,
    /// Other bytes followed; they were ignored.
    Garbage,
}

/// Decodes the gzip file in `input` into `output`, calling `progress` with the running totals
/// after each write.
///
/// # Errors
///
/// [`StreamError::Decode`] when the input is not gzip, is corrupt, fails its checksum or ends
/// inside a member; [`StreamError::Read`]/[`StreamError::Write`] for I/O errors. Output
/// written before the error must not be trusted.
pub fn decompress<R: Read, W: Write + ?Sized>(
    mut input: R,
    output: &mut W,
    progress: &mut dyn FnMut(Totals),
) -> Result<(Totals, Trailing), StreamError> {
    let mut decoder = Decoder::new(Format::Gzip);
    let mut inbuf = vec![0; READ];
    let mut outbuf = vec![0; WRITE];
    let (mut start, mut end) = (0, 0);
    let mut eof = false;
    loop {
        if start == end && !eof {
            start = 0;
            end = read_some(&mut input, &mut inbuf)?;
            eof = end == 0;
        }
        let step = decoder
            .decode(&inbuf[start..end], &mut outbuf)
            .map_err(StreamError::Decode)?;
        start += step.consumed;
        output
            .write_all(&outbuf[..step.produced])
            .map_err(StreamError::Write)?;
        progress(Totals {
            bytes_in: decoder.total_in(),
            bytes_out: decoder.total_out(),
        });
        if step.produced == outbuf.len() {
            continue;
        }
        let totals = Totals {
            bytes_in: decoder.total_in(),
            bytes_out: decoder.total_out(),
        };
        if start < end {
            // The decoder stopped in front of bytes that do not start a member.
            let trailing = classify(&inbuf[start..end], &mut input)?;
            return Ok((totals, trailing));
        }
        if eof {
            decoder.finish().map_err(StreamError::Decode)?;
            return Ok((totals, Trailing::Nothing));
        }
    }
}

/// Reads what follows the last member (`first`, then the rest of `input`): zeros or not.
fn classify<R: Read>(first: &[u8], input: &mut R) -> Result<Trailing, StreamError> {
    if first.iter().any(|&b| b != 0) {
        return Ok(Trailing::Garbage);
    }
    let mut buf = vec![0; READ];
    loop {
        match read_some(input, &mut buf)? {
            0 => return Ok(Trailing::Zeros),
            n if buf[..n].iter().any(|&b| b != 0) => return Ok(Trailing::Garbage),
            _ => {}
        }
    }
}

fn read_some<R: Read>(input: &mut R, buf: &mut [u8]) -> Result<usize, StreamError> {
    loop {
        match input.read(buf) {
            Err(err) if err.kind() == std::io::ErrorKind::Interrupted => continue,
            other => return other.map_err(StreamError::Read),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipwire_codec::{compress, DecodeError, Level};

    fn run(input: &[u8]) -> Result<(Vec<u8>, Trailing), StreamError> {
        let mut out = Vec::new();
        let (totals, trailing) = decompress(input, &mut out, &mut |_| {})?;
        assert_eq!(totals.bytes_out, out.len() as u64);
        Ok((out, trailing))
    }

    #[test]
    fn members_padding_and_garbage() {
        let data = zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 3 << 20, 1);
        let one = compress(Format::Gzip, Level::FASTEST, &data);
        let mut two = one.clone();
        two.extend_from_slice(&compress(Format::Gzip, Level::DEFAULT, b"tail"));
        let mut want = data.clone();
        want.extend_from_slice(b"tail");
        assert_eq!(run(&two).unwrap(), (want.clone(), Trailing::Nothing));

        let mut padded = two.clone();
        padded.extend(std::iter::repeat_n(0, 3 * READ));
        assert_eq!(run(&padded).unwrap(), (want.clone(), Trailing::Zeros));

        let mut junk = two.clone();
        junk.extend_from_slice(b"\0\0junk");
        assert_eq!(run(&junk).unwrap(), (want, Trailing::Garbage));
    }

    #[test]
    fn damage_is_told_apart() {
        let wire = compress(Format::Gzip, Level::FASTEST, &vec![7u8; 100_000]);
        let kind = |input: &[u8]| match run(input) {
            Err(StreamError::Decode(e)) => e,
            other => panic!("{other:?}"),
        };
        assert_eq!(kind(b""), DecodeError::Truncated);
        assert!(matches!(
            kind(b"plain text"),
            DecodeError::Corrupt { offset: 0 }
        ));
        assert_eq!(kind(&wire[..wire.len() - 3]), DecodeError::Truncated);
        let mut bad_crc = wire.clone();
        let at = bad_crc.len() - 6;
        bad_crc[at] ^= 1;
        assert!(matches!(
            kind(&bad_crc),
            DecodeError::ChecksumMismatch { .. }
        ));
    }
}
