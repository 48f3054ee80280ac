//! Speed and ratio of each coding and level on the files given, one core, each body encoded
//! as the proxy encodes a page: zstd and brotli in one call for a body of up to two
//! flush-policy calls, gzip in two equal calls, longer bodies in calls of 64 KiB. The figures in `docs/config.md` ("Codings and levels") come from it:
//!
//! ```text
//! cargo run --release -p zipwire-proxy --example codings -- FILE...
//! ```

use std::time::{Duration, Instant};

use zipwire_codec::{Format, Level};
use zipwire_proxy::codings::{window_log_for, BrotliEncoder, ZstdEncoder};
use zipwire_proxy::{BodyEncoder, BrotliLevel, ZstdLevel};

fn main() {
    let files: Vec<(String, Vec<u8>)> = std::env::args()
        .skip(1)
        .filter_map(|path| std::fs::read(&path).ok().map(|data| (path, data)))
        .collect();
    if files.is_empty() {
        eprintln!("usage: codings FILE...");
        std::process::exit(2);
    }
    let total: usize = files.iter().map(|(_, data)| data.len()).sum();
    println!("{} files, {} bytes", files.len(), total);
    println!("{:<10} {:>8} {:>8}", "coding", "MB/s", "ratio");
    let mut rows: Vec<(String, MakeEncoder)> = Vec::new();
    for level in 1..=3u8 {
        let level = Level::try_from(level).expect("1-3 are levels");
        rows.push((
            format!("gzip-{}", level.get()),
            Box::new(move |_| BodyEncoder::new(Format::Gzip, level)),
        ));
    }
    for level in [1u8, 2, 3, 4, 5] {
        let level = ZstdLevel::new(level).expect("1-5 are zstd levels");
        rows.push((
            format!("zstd-{}", level.get()),
            Box::new(move |len| ZstdEncoder::new(level, window_log_for(Some(len as u64))).into()),
        ));
    }
    for level in [0u8, 1, 2, 3, 4, 5, 6] {
        let level = BrotliLevel::new(level).expect("0-6 are brotli levels");
        rows.push((
            format!("br-{}", level.get()),
            Box::new(move |len| BrotliEncoder::new(level, window_log_for(Some(len as u64))).into()),
        ));
    }
    // The same gzip-2 calls straight into the codec, without the `Encode` trait: the cost of
    // dispatch is the difference with the gzip-2 row.
    let direct = time_direct(&files);
    println!(
        "{:<10} {:>8.1} {:>8.3}",
        "gzip-2*",
        total as f64 / direct.0 / 1e6,
        total as f64 / direct.1 as f64
    );
    for (name, make) in rows {
        let (seconds, out) = time(&files, &make);
        println!(
            "{:<10} {:>8.1} {:>8.3}",
            name,
            total as f64 / seconds / 1e6,
            total as f64 / out as f64
        );
    }
}

/// Builds the encoder for a body of the given length.
type MakeEncoder = Box<dyn Fn(usize) -> BodyEncoder>;

/// Seconds per pass over every file, and the bytes one pass produces.
fn time(files: &[(String, Vec<u8>)], make: &dyn Fn(usize) -> BodyEncoder) -> (f64, usize) {
    let mut passes = 0u32;
    let mut out_len = 0;
    let started = Instant::now();
    while passes < 3 || started.elapsed() < Duration::from_millis(700) {
        out_len = 0;
        for (_, data) in files {
            out_len += encode(make(data.len()), data);
        }
        passes += 1;
    }
    (started.elapsed().as_secs_f64() / f64::from(passes), out_len)
}

/// As [`time`], for gzip level 2 called through `zipwire_codec` directly.
fn time_direct(files: &[(String, Vec<u8>)]) -> (f64, usize) {
    let mut scratch = zipwire_codec::Scratch::new();
    let level = Level::try_from(2).expect("2 is a level");
    let mut passes = 0u32;
    let mut out_len = 0;
    let started = Instant::now();
    while passes < 3 || started.elapsed() < Duration::from_millis(700) {
        out_len = 0;
        for (_, data) in files {
            let mut encoder = zipwire_codec::Encoder::new(Format::Gzip, level).expect("stateless");
            let call = if data.len() <= 128 * 1024 {
                data.len().div_ceil(2).max(1)
            } else {
                64 * 1024
            };
            let mut out = Vec::new();
            let mut chunks = data.chunks(call).peekable();
            while let Some(chunk) = chunks.next() {
                out.clear();
                let result = if chunks.peek().is_some() {
                    encoder.encode(&mut scratch, chunk, &mut out)
                } else {
                    encoder.finish(&mut scratch, chunk, &mut out)
                };
                result.expect("encoding into memory");
                out_len += out.len();
            }
        }
        passes += 1;
    }
    (started.elapsed().as_secs_f64() / f64::from(passes), out_len)
}

/// Encodes `data` as the proxy would, returning the encoded length.
fn encode(mut encoder: BodyEncoder, data: &[u8]) -> usize {
    let encoder = encoder.as_encode_mut();
    let mut out = Vec::new();
    // Windowed codings get a page in one call; gzip in two equal ones (as `CompressBody`).
    let call = match (data.len() <= 128 * 1024, encoder.is_windowed()) {
        (true, true) => data.len().max(1),
        (true, false) => data.len().div_ceil(2).max(1),
        (false, _) => 64 * 1024,
    };
    let mut chunks = data.chunks(call).peekable();
    let mut len = 0;
    while let Some(chunk) = chunks.next() {
        out.clear();
        let result = if chunks.peek().is_some() {
            encoder.encode(chunk, zipwire_proxy::codings::Flush::Continue, &mut out)
        } else {
            encoder.finish(chunk, &mut out)
        };
        result.expect("encoding into memory");
        len += out.len();
    }
    if data.is_empty() {
        encoder.finish(&[], &mut out).expect("encoding into memory");
        len += out.len();
    }
    len
}
