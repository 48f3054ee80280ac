//! `zipwire bench codec`: ours against zlib-rs and libdeflate on the same files, one thread,
//! and ISA-L's igzip when built with `--features isal` (a note says so when it is not).
//!
//! Method: one warm-up round (not counted) compresses every file with every engine and checks
//! that each output decompresses to its input. Then timed rounds alternate between engines:
//! in each round every engine takes one turn, in an order rotated by one each round, so slow
//! drift (turbo, thermal, noisy neighbours) hits all engines alike. A turn is one pass over all
//! files, one whole file per stream; with `--seconds`, a fast engine makes several passes per
//! turn so that every engine is timed for about the same share of the total. An engine's speed
//! is input bytes over the sum of its turns' times.
//!
//! Below the table, CRC-32 speed: crc32fast against libdeflate's, on the same files (see
//! [`super::crc`]).

use std::io::{Read, Write};
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use flate2::read::GzDecoder;

use super::crc;
use super::engine::{self, Engine};
use super::input::{self, File};
use super::report::{self, Measurement, Run};
use crate::cli::CodecArgs;

/// Total measuring time when neither `--rounds` nor `--seconds` is given.
const DEFAULT_SECONDS: f64 = 8.0;
/// The fewest timed rounds when the time target decides.
const MIN_ROUNDS: u32 = 3;
/// How long one engine's turn should last when the time target decides: long enough to time
/// well, short enough to give many alternations.
const TURN_SECONDS: f64 = 0.1;

/// Runs the benchmark and writes the table (or JSON) to `out`.
///
/// # Errors
///
/// An unreadable input, an engine error, or an output that does not decompress to its input.
pub fn run(args: &CodecArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let input = input::load(&args.files)?;
    let mut engines = engine::lineup(&args.levels)?;

    let mut warm_up = Vec::with_capacity(engines.len());
    let mut out_bytes = Vec::with_capacity(engines.len());
    let mut outputs = Vec::with_capacity(engines.len());
    for engine in &mut engines {
        let (elapsed, verified) = warm_up_and_verify(engine, &input.files)?;
        warm_up.push(elapsed);
        out_bytes.push(verified.iter().map(|output| output.len).sum::<u64>());
        outputs.push(verified);
    }

    let plan = Plan::new(args, &warm_up);
    let timed = measure(&mut engines, &input.files, &plan, &outputs)?;

    let in_bytes = input.total_bytes();
    let measurements: Vec<Measurement> = engines
        .iter()
        .enumerate()
        .map(|(i, engine)| {
            let passes = u64::from(plan.rounds) * u64::from(plan.passes[i]);
            Measurement {
                engine: engine.family().name(),
                level: engine.level(),
                mb_per_s: (in_bytes * passes) as f64 / 1e6 / timed[i].as_secs_f64().max(1e-9),
                ratio: in_bytes as f64 / out_bytes[i].max(1) as f64,
                seconds: timed[i].as_secs_f64(),
            }
        })
        .collect();

    if args.json {
        report::json(out, &measurements)?;
    } else {
        if !engine::ISAL {
            writeln!(
                out,
                "note: igzip (ISA-L) not built in; `cargo build --release -p zipwire --features \
                 isal` (needs libisal-dev) adds it"
            )?;
        }
        let run = Run {
            input: &input,
            rounds: plan.rounds,
            measurements: &measurements,
        };
        report::table(out, &run)?;
        crc::table(out, &crc::measure(&input.files, crc::TURN_BYTES)?)?;
    }
    if let Some(path) = &args.plot {
        let svg = super::plot::codec_svg(&measurements)?;
        std::fs::write(path, svg).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(ExitCode::SUCCESS)
}

/// How many timed rounds, and how many passes over all files each engine makes per turn.
struct Plan {
    rounds: u32,
    passes: Vec<u32>,
}

impl Plan {
    fn new(args: &CodecArgs, warm_up: &[Duration]) -> Plan {
        if let Some(rounds) = args.rounds {
            return Plan {
                rounds,
                passes: vec![1; warm_up.len()],
            };
        }
        let per_engine = args.seconds.unwrap_or(DEFAULT_SECONDS) / warm_up.len() as f64;
        // A turn is at least one pass, so the slowest engine's pass sets the shortest turn.
        let slowest = warm_up.iter().max().map_or(0.0, Duration::as_secs_f64);
        let rounds = ((per_engine / TURN_SECONDS.max(slowest)) as u32).max(MIN_ROUNDS);
        let turn = per_engine / f64::from(rounds);
        let passes = warm_up
            .iter()
            .map(|pass| {
                (turn / pass.as_secs_f64().max(1e-9))
                    .round()
                    .clamp(1.0, 1e6) as u32
            })
            .collect();
        Plan { rounds, passes }
    }
}

/// What a file's verified output was: every later output of the same engine must be the same
/// (each engine is deterministic), so the timed rounds need no decoding to be checked.
struct Output {
    len: u64,
    crc: u32,
}

/// Compresses every file once, untimed except for the compression calls themselves, checks
/// each output, and returns the compression time and each file's [`Output`].
fn warm_up_and_verify(
    engine: &mut Engine,
    files: &[File],
) -> anyhow::Result<(Duration, Vec<Output>)> {
    let mut elapsed = Duration::ZERO;
    let mut outputs = Vec::with_capacity(files.len());
    let mut plain = Vec::new();
    let label = engine.label();
    for file in files {
        let start = Instant::now();
        let compressed = engine
            .compress(&file.data)
            .with_context(|| format!("{}: {label}", file.name))?;
        elapsed += start.elapsed();
        outputs.push(Output {
            len: compressed.len() as u64,
            crc: crc32fast::hash(compressed),
        });

        plain.clear();
        let decoded = GzDecoder::new(compressed).read_to_end(&mut plain);
        if decoded.is_err() || plain != file.data {
            bail!(
                "{}: {} output does not decompress to the input",
                file.name,
                engine.label()
            );
        }
    }
    Ok((elapsed, outputs))
}

/// Runs the timed rounds and returns each engine's total time. Every output must have its
/// verified length (a compare, inside the timing), and after each turn the engine, warm, must
/// make the last file's verified bytes again (CRC-32): an engine that went wrong once warm
/// is not measured.
fn measure(
    engines: &mut [Engine],
    files: &[File],
    plan: &Plan,
    verified: &[Vec<Output>],
) -> anyhow::Result<Vec<Duration>> {
    let count = engines.len();
    let mut timed = vec![Duration::ZERO; count];
    for round in 0..plan.rounds as usize {
        for turn in 0..count {
            let i = (turn + round) % count;
            let engine = &mut engines[i];
            let label = engine.label();
            let mut wrong = None;
            let start = Instant::now();
            for _ in 0..plan.passes[i] {
                for (file, output) in files.iter().zip(&verified[i]) {
                    let compressed = engine
                        .compress(&file.data)
                        .with_context(|| format!("{}: {label}", file.name))?;
                    if compressed.len() as u64 != output.len {
                        wrong = Some(&file.name);
                    }
                }
            }
            timed[i] += start.elapsed();
            let last = files
                .len()
                .checked_sub(1)
                .map(|at| (&files[at], &verified[i][at]));
            if let Some((file, output)) = last {
                let compressed = engine.compress(&file.data)?;
                if crc32fast::hash(compressed) != output.crc {
                    wrong = Some(&file.name);
                }
            }
            if let Some(name) = wrong {
                bail!("{name}: {label} made other output in a timed round than the verified one");
            }
        }
    }
    Ok(timed)
}
