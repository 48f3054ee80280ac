//! Sniffing: cheap checks that say a block will not compress before any compressor runs on
//! it. The tunnel's policy and the drop-in libz (`ZIPWIRE_ZLIB_ADAPT`) both ask it, so it
//! lives here, with no dependency, where neither pulls in the other.
//!
//! Two tests, as filesystems with transparent compression do: a look at the first bytes for
//! the magic numbers of compressed and encrypted formats (TLS records included, so forwarded
//! HTTPS is never compressed), and an order-0 entropy estimate on a sample of the block. A
//! compressed or encrypted stream sits near 8 bits per byte; text, code and most binaries sit
//! at 4.5-6.5. The sample is 64 runs of 64 bytes spread over the block, so the check costs the
//! same small amount whatever the block's size.

/// Entropy (bits per byte) above which a sample is taken for already-compressed data. A
/// random 4 KB sample estimates ~7.95; deflate or zstd output of text ~7.9-8.0.
pub const ENTROPY_LIMIT: f64 = 7.5;

const RUNS: usize = 64;
const RUN_LEN: usize = 64;

/// What a block looks like before compressing it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Verdict {
    /// Worth a try.
    Compressible,
    /// Starts like a compressed or encrypted format: the name of the format.
    Magic(&'static str),
    /// The sample's entropy (bits per byte) says it is already compressed or encrypted.
    HighEntropy(f64),
}

/// Inspects a block.
pub fn inspect(block: &[u8]) -> Verdict {
    if let Some(name) = magic(block) {
        return Verdict::Magic(name);
    }
    let bits = sample_entropy(block);
    if bits > ENTROPY_LIMIT {
        Verdict::HighEntropy(bits)
    } else {
        Verdict::Compressible
    }
}

/// The format whose magic number `block` starts with, among those not worth compressing.
pub fn magic(block: &[u8]) -> Option<&'static str> {
    const MAGICS: &[(&[u8], &str)] = &[
        (&[0x1f, 0x8b], "gzip"),
        (&[0x28, 0xb5, 0x2f, 0xfd], "zstd"),
        (&[0xfd, b'7', b'z', b'X', b'Z', 0], "xz"),
        (b"BZh", "bzip2"),
        (b"PK\x03\x04", "zip"),
        (&[b'7', b'z', 0xbc, 0xaf, 0x27, 0x1c], "7z"),
        (&[0x89, b'P', b'N', b'G'], "png"),
        (&[0xff, 0xd8, 0xff], "jpeg"),
        (b"GIF8", "gif"),
        (b"OggS", "ogg"),
        (b"wOF2", "woff2"),
        (&[0x04, 0x22, 0x4d, 0x18], "lz4"),
    ];
    for &(prefix, name) in MAGICS {
        if block.starts_with(prefix) {
            return Some(name);
        }
    }
    if block.len() >= 12 && &block[..4] == b"RIFF" && &block[8..12] == b"WEBP" {
        return Some("webp");
    }
    if block.len() >= 8 && &block[4..8] == b"ftyp" {
        return Some("mp4");
    }
    // A TLS record: content type 20-23, version 3.1-3.4 (3.1 also in TLS 1.3's records).
    if let [kind @ 20..=23, 3, minor @ 0..=4, ..] = block {
        let _ = (kind, minor);
        return Some("tls");
    }
    None
}

/// Order-0 entropy in bits per byte of a sample of `block`: all of it when it is short,
/// else 64 runs of 64 bytes spread evenly over it.
pub fn sample_entropy(block: &[u8]) -> f64 {
    let mut counts = [0u32; 256];
    let mut total = 0u32;
    if block.len() <= RUNS * RUN_LEN {
        for &b in block {
            counts[usize::from(b)] += 1;
        }
        total = block.len() as u32;
    } else {
        let stride = block.len() / RUNS;
        for run in 0..RUNS {
            let start = run * stride;
            for &b in &block[start..start + RUN_LEN] {
                counts[usize::from(b)] += 1;
            }
        }
        total += (RUNS * RUN_LEN) as u32;
    }
    if total == 0 {
        return 0.0;
    }
    let total = f64::from(total);
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / total;
            -p * p.log2()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(n: usize) -> Vec<u8> {
        let mut state = 0x9e37_79b9u32;
        (0..n)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state >> 8) as u8
            })
            .collect()
    }

    #[test]
    fn text_is_compressible_and_noise_and_compressed_data_are_not() {
        let text = b"GET /index.html HTTP/1.1\r\nHost: example.com\r\n\r\n".repeat(2000);
        assert_eq!(inspect(&text), Verdict::Compressible);
        assert!(matches!(inspect(&noise(200_000)), Verdict::HighEntropy(_)));
        let gz = zipwire_codec::compress(
            zipwire_codec::Format::Raw,
            zipwire_codec::Level::BEST,
            &noise(1000),
        );
        assert!(sample_entropy(&gz) > 7.0);
    }

    #[test]
    fn magic_numbers_are_recognised() {
        assert_eq!(magic(&[0x17, 3, 3, 0x40, 0]), Some("tls"));
        assert_eq!(magic(&[0x1f, 0x8b, 8, 0]), Some("gzip"));
        assert_eq!(magic(b"\0\0\0\x18ftypmp42"), Some("mp4"));
        assert_eq!(magic(b"<!doctype html>"), None);
        assert_eq!(magic(b""), None);
    }
}
