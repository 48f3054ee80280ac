//! `zipwire bench`: side-by-side measurements against other implementations.

mod codec;
mod crc;
mod engine;
mod input;
mod plot;
mod report;

use std::io::Write;
use std::process::ExitCode;

use crate::cli::{BenchArgs, BenchTarget};

/// Runs the chosen benchmark, writing its report to `out`.
pub fn run(args: &BenchArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &args.target {
        BenchTarget::Codec(codec_args) => codec::run(codec_args, out),
        BenchTarget::Plot(plot_args) => plot::run(plot_args, out),
    }
}
