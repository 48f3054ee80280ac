//! The benchmark's output: a table for people, or JSON for scripts.

use std::fs;
use std::io::{self, Write};

use serde_json::json;

use super::input::Input;

/// Streams in the "many open streams" memory line: a busy proxy's connection count.
const OPEN_STREAMS: u64 = 100_000;
/// zlib's deflate memory at its defaults, from zconf.h: `(1 << (windowBits + 2)) +
/// (1 << (memLevel + 9))` with windowBits 15 and memLevel 8, that is 128 KiB + 128 KiB.
const ZLIB_STREAM_BYTES: u64 = (1 << (15 + 2)) + (1 << (8 + 9));
/// The row every other row is compared with.
const BASELINE: (&str, u8) = ("libdeflate", 1);

/// One engine's result.
pub struct Measurement {
    /// `zipwire`, `zlib-rs` or `libdeflate`.
    pub engine: &'static str,
    /// The compression level.
    pub level: u8,
    /// Input megabytes (10^6 bytes) per second.
    pub mb_per_s: f64,
    /// Total input bytes over total output bytes.
    pub ratio: f64,
    /// Seconds the engine was timed for.
    pub seconds: f64,
}

/// Everything the table describes.
pub struct Run<'a> {
    /// What was compressed.
    pub input: &'a Input,
    /// Timed rounds.
    pub rounds: u32,
    /// One row per engine.
    pub measurements: &'a [Measurement],
}

/// Writes only a JSON array of `{engine, level, mb_per_s, ratio}`.
pub fn json(out: &mut dyn Write, measurements: &[Measurement]) -> io::Result<()> {
    let rows: Vec<serde_json::Value> = measurements
        .iter()
        .map(|m| {
            json!({"engine": m.engine, "level": m.level, "mb_per_s": m.mb_per_s, "ratio": m.ratio})
        })
        .collect();
    serde_json::to_writer_pretty(&mut *out, &rows)?;
    writeln!(out)
}

/// Writes the human-readable report: setting, table, memory per stream.
pub fn table(out: &mut dyn Write, run: &Run<'_>) -> io::Result<()> {
    let input = run.input;
    writeln!(
        out,
        "zipwire bench codec: gzip, one whole file per stream, one thread"
    )?;
    writeln!(out, "machine: {}, {} CPUs online", cpu_model(), cpus())?;
    writeln!(
        out,
        "input:   {} file{}, {} bytes from {}",
        input.files.len(),
        if input.files.len() == 1 { "" } else { "s" },
        grouped(input.total_bytes()),
        input.origin
    )?;
    let (least, most) = run
        .measurements
        .iter()
        .fold((f64::MAX, 0.0_f64), |(lo, hi), m| {
            (lo.min(m.seconds), hi.max(m.seconds))
        });
    writeln!(
        out,
        "timing:  1 warm-up + {} timed round{}, engine order rotated each round, \
         {least:.2}-{most:.2} s per engine",
        run.rounds,
        if run.rounds == 1 { "" } else { "s" }
    )?;
    writeln!(
        out,
        "checked: warm-up outputs decompressed (flate2) and compared with the input; timed ones match them"
    )?;
    if cfg!(debug_assertions) {
        writeln!(
            out,
            "note:    debug build, speeds are not representative (use --release)"
        )?;
    }
    writeln!(out)?;

    let baseline = run
        .measurements
        .iter()
        .find(|m| (m.engine, m.level) == BASELINE)
        .map(|m| (m.mb_per_s, m.ratio));
    writeln!(
        out,
        "{:<11} {:>5} {:>10} {:>7}   vs {}-{}",
        "engine", "level", "MB/s", "ratio", BASELINE.0, BASELINE.1
    )?;
    writeln!(
        out,
        "{:<11} {:>5} {:>10} {:>7}   {:>6} {:>7}",
        "", "", "", "", "speed×", "ratio×"
    )?;
    for m in run.measurements {
        write!(
            out,
            "{:<11} {:>5} {:>10.1} {:>7.3}",
            m.engine, m.level, m.mb_per_s, m.ratio
        )?;
        match baseline {
            Some((speed, ratio)) => writeln!(
                out,
                "   {:>6.2} {:>7.3}",
                m.mb_per_s / speed,
                m.ratio / ratio
            )?,
            None => writeln!(out)?,
        }
    }
    writeln!(out)?;

    let state = std::mem::size_of::<zipwire_codec::Encoder>() as u64;
    writeln!(
        out,
        "per-stream state: {state} bytes (size_of::<zipwire_codec::Encoder>())"
    )?;
    let scratch = {
        // Touch every level so the scratch holds all the tables it ever allocates.
        let mut scratch = zipwire_codec::Scratch::new();
        for level in 1..=3 {
            let level = zipwire_codec::Level::try_from(level).expect("stateless level");
            let mut enc = zipwire_codec::Encoder::new(zipwire_codec::Format::Raw, level)
                .expect("stateless level");
            let _ = enc.finish(&mut scratch, b"scratch size probe", &mut Vec::new());
        }
        scratch.memory_size() as u64
    };
    writeln!(
        out,
        "per-thread scratch: {} (shared by every stream the thread serves)",
        decimal(scratch)
    )?;
    writeln!(
        out,
        "{} open streams: {} of zipwire stream state, plus one scratch per thread",
        grouped(OPEN_STREAMS),
        decimal(OPEN_STREAMS * state)
    )?;
    writeln!(
        out,
        "zlib for comparison (estimate, not measured): ~{} KiB per stream at default settings, \
         {} for {} streams",
        ZLIB_STREAM_BYTES / 1024,
        decimal(OPEN_STREAMS * ZLIB_STREAM_BYTES),
        grouped(OPEN_STREAMS)
    )
}

/// The CPU model from /proc/cpuinfo, where there is one.
fn cpu_model() -> String {
    fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .filter_map(|line| line.split_once(':'))
                .find(|(key, _)| key.trim() == "model name")
                .map(|(_, value)| value.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".to_string())
}

fn cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// `13717939` as `13,717,939`.
fn grouped(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, digit) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// Bytes in decimal units (kB = 10^3 bytes, MB = 10^6, GB = 10^9).
fn decimal(bytes: u64) -> String {
    let bytes = bytes as f64;
    if bytes >= 1e9 {
        format!("{:.1} GB", bytes / 1e9)
    } else if bytes >= 1e6 {
        format!("{:.1} MB", bytes / 1e6)
    } else if bytes >= 1e3 {
        format!("{:.1} kB", bytes / 1e3)
    } else {
        format!("{bytes} bytes")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grouped_digits() {
        assert_eq!(grouped(0), "0");
        assert_eq!(grouped(999), "999");
        assert_eq!(grouped(1_000), "1,000");
        assert_eq!(grouped(13_717_939), "13,717,939");
    }

    #[test]
    fn zlib_estimate_is_256_kib() {
        assert_eq!(ZLIB_STREAM_BYTES, 256 * 1024);
        assert_eq!(decimal(OPEN_STREAMS * ZLIB_STREAM_BYTES), "26.2 GB");
    }
}
