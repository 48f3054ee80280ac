//! `zipwire`: compression offload for data in transit.
//!
//! The binary only parses flags, dispatches to a subcommand and maps errors to exit codes; the
//! work lives in the library crates. Subcommands today: `demo`, `proxy`, `compress`,
//! `decompress`, `tunnel`, `bench codec`; run as `gzip`, `gunzip` or `zcat` it is that command.

#![forbid(unsafe_code)]

mod batched_stderr;
mod bench;
mod cli;
mod demo;
mod gzip;
mod logging;
mod proxy;
mod sample;
mod tunnel;
mod value;

use std::io::{self, Write};
use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

fn main() -> ExitCode {
    let argv0 = std::env::args_os().next().unwrap_or_default();
    if let Some(personality) = gzip::Personality::from_argv0(&argv0) {
        return gzip::run_as(personality);
    }
    match run() {
        Ok(code) => code,
        // Someone closed our stdout (`zipwire bench codec | head`): nothing left to say.
        Err(err) if is_broken_pipe(&err) => ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("zipwire: {err:#}");
            ExitCode::FAILURE
        }
    }
}

/// Runs `command` writing to `out`, then flushes it.
fn with<W: Write>(
    mut out: W,
    command: impl FnOnce(&mut W) -> anyhow::Result<ExitCode>,
) -> anyhow::Result<ExitCode> {
    let code = command(&mut out)?;
    out.flush()?;
    Ok(code)
}

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let _log = logging::init(cli.verbose, matches!(cli.command, Command::Demo(_)))?;
    // Not for compress and decompress: their threads write to stdout themselves, and a lock
    // held here would keep them waiting for ever.
    let out = || io::BufWriter::new(io::stdout().lock());
    let code = match cli.command {
        Command::Bench(args) => with(out(), |out| bench::run(&args, out))?,
        Command::Proxy(args) => with(out(), |out| proxy::run(&args, out))?,
        Command::Demo(args) => with(out(), |out| demo::run(&args, out))?,
        Command::Compress(args) => gzip::run(&args, cli.verbose > 0, "zipwire"),
        Command::Decompress(mut args) => {
            args.decompress = true;
            gzip::run(&args, cli.verbose > 0, "zipwire")
        }
        Command::Tunnel(args) => with(out(), |out| tunnel::run(&args, cli.verbose > 0, out))?,
    };
    Ok(code)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io_err| io_err.kind() == io::ErrorKind::BrokenPipe)
    })
}
