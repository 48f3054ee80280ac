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

fn run() -> anyhow::Result<ExitCode> {
    let cli = Cli::parse();
    let _log = logging::init(cli.verbose, matches!(cli.command, Command::Demo(_)))?;
    let mut out = io::BufWriter::new(io::stdout().lock());
    let code = match cli.command {
        Command::Bench(args) => bench::run(&args, &mut out)?,
        Command::Proxy(args) => proxy::run(&args, &mut out)?,
        Command::Demo(args) => demo::run(&args, &mut out)?,
        Command::Compress(args) => gzip::run(&args, cli.verbose > 0, "zipwire"),
        Command::Decompress(mut args) => {
            args.decompress = true;
            gzip::run(&args, cli.verbose > 0, "zipwire")
        }
        Command::Tunnel(args) => tunnel::run(&args, cli.verbose > 0, &mut out)?,
    };
    out.flush()?;
    Ok(code)
}

fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|io_err| io_err.kind() == io::ErrorKind::BrokenPipe)
    })
}
