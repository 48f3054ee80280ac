//! A minimal PNG writer for the demo site's image.
//!
//! The image data goes into stored (uncompressed) deflate blocks: valid PNG that every decoder
//! reads, without pulling an image or deflate crate into the proxy. Its only job in the demo is
//! to be a response the proxy must leave alone (`image/png` is not a compressible type).

use zipwire_adapt::rng::SplitMix64;

/// The 8-byte PNG signature.
pub(crate) const SIGNATURE: [u8; 8] = [0x89, b'P', b'N', b'G', b'\r', b'\n', 0x1a, b'\n'];

/// A `width` × `height` RGBA image: a diagonal gradient with some noise, as PNG bytes.
pub(crate) fn gradient(width: u32, height: u32, rng: &mut SplitMix64) -> Vec<u8> {
    let mut raw = Vec::with_capacity((height * (1 + 4 * width)) as usize);
    for y in 0..height {
        raw.push(0); // filter type None
        for x in 0..width {
            let noise = (rng.next_u64() & 0x1f) as u32;
            let r = (x * 255 / width.max(1) + noise).min(255) as u8;
            let g = (y * 255 / height.max(1)).min(255) as u8;
            let b = ((x + y) * 127 / (width + height).max(1) + 128) as u8;
            raw.extend_from_slice(&[r, g, b, 255]);
        }
    }
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    // Bit depth 8, colour type 6 (RGBA), deflate, adaptive filtering, no interlace.
    ihdr.extend_from_slice(&[8, 6, 0, 0, 0]);

    let mut png = SIGNATURE.to_vec();
    chunk(&mut png, b"IHDR", &ihdr);
    chunk(&mut png, b"IDAT", &zlib_stored(&raw));
    chunk(&mut png, b"IEND", &[]);
    png
}

/// Appends one chunk: length, type, data, CRC-32 of type and data.
fn chunk(png: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    let len = u32::try_from(data.len()).expect("demo PNG chunks are far below 4 GiB");
    png.extend_from_slice(&len.to_be_bytes());
    png.extend_from_slice(kind);
    png.extend_from_slice(data);
    let mut crc = crc32fast::Hasher::new();
    crc.update(kind);
    crc.update(data);
    png.extend_from_slice(&crc.finalize().to_be_bytes());
}

/// A zlib stream of stored deflate blocks holding `data`.
fn zlib_stored(data: &[u8]) -> Vec<u8> {
    // CMF 0x78 (deflate, 32 KB window), FLG 0x01: no dictionary, fastest, (CMF*256+FLG) % 31 == 0.
    let mut out = vec![0x78, 0x01];
    let mut blocks = data.chunks(u16::MAX as usize).peekable();
    if blocks.peek().is_none() {
        out.extend_from_slice(&[1, 0, 0, 0xff, 0xff]);
    }
    while let Some(block) = blocks.next() {
        let last = u8::from(blocks.peek().is_none());
        let len = block.len() as u16; // chunks() bounds it by u16::MAX
        out.push(last); // BFINAL, BTYPE 00 (stored)
        out.extend_from_slice(&len.to_le_bytes());
        out.extend_from_slice(&(!len).to_le_bytes());
        out.extend_from_slice(block);
    }
    out.extend_from_slice(&adler32(data).to_be_bytes());
    out
}

fn adler32(data: &[u8]) -> u32 {
    const MOD: u32 = 65521;
    let (mut a, mut b) = (1u32, 0u32);
    // 5552 is the most bytes before `b` can overflow a u32 (zlib's NMAX).
    for block in data.chunks(5552) {
        for &byte in block {
            a += u32::from(byte);
            b += a;
        }
        a %= MOD;
        b %= MOD;
    }
    (b << 16) | a
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adler32_known_value() {
        // RFC 1950's example value for "Wikipedia".
        assert_eq!(adler32(b"Wikipedia"), 0x11e6_0398);
        assert_eq!(adler32(b""), 1);
    }

    #[test]
    fn stored_stream_decodes() {
        let data: Vec<u8> = (0..70_000u32).map(|i| (i % 251) as u8).collect();
        let stream = zlib_stored(&data);
        let decoded = zipwire_codec::decompress(
            zipwire_codec::Format::Zlib,
            &stream,
            zipwire_codec::Limits::default(),
        )
        .unwrap();
        assert_eq!(decoded, data);
    }
}
