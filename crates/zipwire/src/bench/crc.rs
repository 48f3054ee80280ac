//! The CRC-32 line of `zipwire bench codec`: crc32fast, which every gzip path in zipwire
//! uses, against libdeflate's CRC-32 (libdeflater), on the benchmark's own files, in the same
//! run.
//!
//! Why it is measured here: a profile once put crc32fast at 0.43× libdeflate's speed, and a
//! carry-less-multiplication kernel of our own is worth its upkeep only where no maintained crate
//! gives libdeflate's speed. crc32fast 1.5 folds with VPCLMULQDQ on AVX-512 and AVX2 CPUs, chosen
//! at run time; this line shows on any machine whether it still falls short.
//!
//! Method: the input is cut into pieces of each size (4 KB, as a small proxy call; 64 KB; 1
//! MB, as a CLI block), and the two implementations take turns over all pieces, alternating
//! for [`ROUNDS`] rounds; each turn repeats until it has covered at least [`TURN_BYTES`]
//! (256 MB: about 5 ms at the speeds measured, so the whole line takes well under a second).
//! Both must give the same CRC of every piece, or the run fails.

use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::bail;

use super::input::File;

/// Piece sizes measured.
const PIECES: [usize; 3] = [4 * 1024, 64 * 1024, 1024 * 1024];
/// Alternating rounds per piece size.
const ROUNDS: u32 = 5;
/// Bytes each implementation hashes per turn, at least.
pub const TURN_BYTES: usize = 256 << 20;

/// One piece size's result: GB/s (10^9 bytes) of crc32fast and of libdeflate.
#[derive(Clone, Copy, Debug)]
pub struct CrcSpeed {
    /// Bytes per piece.
    pub piece: usize,
    /// crc32fast's speed.
    pub crc32fast: f64,
    /// libdeflate's speed.
    pub libdeflate: f64,
}

/// Measures both implementations on `files`, each turn hashing at least `turn_bytes`,
/// checking that they agree on every piece.
///
/// # Errors
///
/// When the two give different CRCs for a piece (one of them is wrong).
pub fn measure(files: &[File], turn_bytes: usize) -> anyhow::Result<Vec<CrcSpeed>> {
    let data: Vec<u8> = files.iter().flat_map(|f| f.data.iter().copied()).collect();
    let mut speeds = Vec::with_capacity(PIECES.len());
    // A piece size past the input would time the whole input under a wrong label.
    let sizes = PIECES
        .iter()
        .filter(|&&p| p == PIECES[0] || p <= data.len());
    for &piece in sizes {
        let pieces: Vec<&[u8]> = data.chunks(piece).filter(|p| !p.is_empty()).collect();
        for p in &pieces {
            if crc32fast::hash(p) != libdeflater::crc32(p) {
                bail!(
                    "crc32fast and libdeflate disagree on a {}-byte piece",
                    p.len()
                );
            }
        }
        let passes = turn_bytes.div_ceil(data.len().max(1)).max(1);
        let (mut fast, mut deflate) = (Duration::ZERO, Duration::ZERO);
        for round in 0..ROUNDS {
            // Alternate which goes first, so drift hits both alike.
            let order = if round % 2 == 0 { [0, 1] } else { [1, 0] };
            for which in order {
                let elapsed = time(&pieces, passes, which == 0);
                *if which == 0 { &mut fast } else { &mut deflate } += elapsed;
            }
        }
        let bytes = (data.len() * passes) as f64 * f64::from(ROUNDS);
        speeds.push(CrcSpeed {
            piece,
            crc32fast: bytes / fast.as_secs_f64().max(1e-9) / 1e9,
            libdeflate: bytes / deflate.as_secs_f64().max(1e-9) / 1e9,
        });
    }
    Ok(speeds)
}

/// Time to hash every piece `passes` times with crc32fast (`fast`) or libdeflate.
fn time(pieces: &[&[u8]], passes: usize, fast: bool) -> Duration {
    let start = Instant::now();
    let mut sink = 0u32;
    for _ in 0..passes {
        for p in pieces {
            sink ^= if fast {
                crc32fast::hash(p)
            } else {
                libdeflater::crc32(p)
            };
        }
    }
    std::hint::black_box(sink);
    start.elapsed()
}

/// Writes the CRC-32 table below the codec table.
pub fn table(out: &mut dyn Write, speeds: &[CrcSpeed]) -> std::io::Result<()> {
    writeln!(out)?;
    writeln!(
        out,
        "crc32 (gzip's CRC), same files, {ROUNDS} alternating rounds; GB/s"
    )?;
    writeln!(
        out,
        "{:>10} {:>10} {:>11} {:>8}",
        "piece", "crc32fast", "libdeflate", "ratio"
    )?;
    for s in speeds {
        writeln!(
            out,
            "{:>10} {:>10.1} {:>11.1} {:>8.2}",
            human(s.piece),
            s.crc32fast,
            s.libdeflate,
            s.crc32fast / s.libdeflate.max(1e-9)
        )?;
    }
    Ok(())
}

/// `4 KB`, `64 KB`, `1 MB`.
fn human(bytes: usize) -> String {
    if bytes >= 1 << 20 {
        format!("{} MB", bytes >> 20)
    } else {
        format!("{} KB", bytes >> 10)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_implementations_agree_and_each_piece_size_within_the_input_is_measured() {
        let files = vec![File {
            name: "sample".into(),
            data: zipwire_testkit::generate(zipwire_testkit::DataKind::Text, 1_200_000, 4),
        }];
        let speeds = measure(&files, 1 << 20).expect("the two agree");
        assert_eq!(speeds.len(), PIECES.len());
        let short = vec![File {
            name: "short".into(),
            data: vec![7; 100_000],
        }];
        let speeds_short = measure(&short, 1 << 20).expect("the two agree");
        let sizes: Vec<usize> = speeds_short.iter().map(|s| s.piece).collect();
        assert_eq!(sizes, [4 * 1024, 64 * 1024], "no piece size past the input");
        for s in &speeds {
            assert!(s.crc32fast > 0.0 && s.libdeflate > 0.0, "{s:?}");
        }
        let mut out = Vec::new();
        table(&mut out, &speeds).expect("writes to a Vec");
        let text = String::from_utf8(out).expect("ASCII");
        assert!(text.contains("4 KB") && text.contains("1 MB"), "{text}");
    }
}
