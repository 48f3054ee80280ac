//! Command-line flags (clap). Each subcommand's arguments are a struct of their own, so adding
//! `proxy`, `tunnel`, `compress` or `decompress` is one more [`Command`] variant.

use std::path::PathBuf;

use clap::{value_parser, ArgAction, Args, Parser, Subcommand};

/// Compression offload for data in transit.
#[derive(Debug, Parser)]
#[command(name = "zipwire", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,

    /// Log more: -v for debug, -vv for trace (on top of RUST_LOG; default info).
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure zipwire against other implementations.
    Bench(BenchArgs),
}

/// `zipwire bench`: which benchmark to run.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The benchmark.
    #[command(subcommand)]
    pub target: BenchTarget,
}

/// The benchmarks.
#[derive(Debug, Subcommand)]
pub enum BenchTarget {
    /// Compress whole files in memory with zipwire, zlib-rs and libdeflate (gzip format, one
    /// thread) and print speed and ratio.
    Codec(CodecArgs),
}

/// `zipwire bench codec`.
#[derive(Debug, Args)]
pub struct CodecArgs {
    /// Files, or directories whose regular files are used [default: the `web` and `canterbury`
    /// sets of $ZIPWIRE_CORPUS (../shared/corpus), else built-in sample data]
    pub files: Vec<PathBuf>,

    /// Print only a JSON array of {engine, level, mb_per_s, ratio}.
    #[arg(long)]
    pub json: bool,

    /// Number of timed rounds (after one warm-up round); each engine makes one pass over all
    /// files per round.
    #[arg(long, value_name = "N", conflicts_with = "seconds",
          value_parser = value_parser!(u32).range(1..))]
    pub rounds: Option<u32>,

    /// Target total measuring time in seconds, shared equally by all engines [default: 8]
    #[arg(long, value_name = "S", value_parser = parse_seconds)]
    pub seconds: Option<f64>,

    /// zipwire levels to measure, comma-separated [default: 1,2,3]
    #[arg(long, value_name = "LEVELS", value_delimiter = ',', default_values_t = [1u8, 2, 3],
          hide_default_value = true,
          value_parser = value_parser!(u8).range(1..=3))]
    pub levels: Vec<u8>,
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!(
            "expected a positive number of seconds, got `{text}`"
        )),
    }
}
