//! `zipwire demo`: the proxy on a built-in site, measured under load, with no setup.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use zipwire_demo::{run_demo, DemoOptions};

use crate::cli::DemoArgs;

/// Runs every demo scenario and prints the report.
///
/// # Errors
///
/// The runtime cannot start, the site or a proxy cannot listen, or a response did not match
/// what the site served (the demo checks every body).
pub fn run(args: &DemoArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let options = DemoOptions {
        connections: usize::from(args.connections),
        duration: Duration::from_secs_f64(args.seconds),
        ..DemoOptions::default()
    };
    writeln!(
        out,
        "zipwire demo: a built-in site behind the proxy, {} connections, {:.1} s per scenario, \
         every response decoded and checked\n",
        options.connections, args.seconds
    )?;
    out.flush()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let report = runtime.block_on(run_demo(options)).context("demo")?;
    write!(out, "{report}")?;
    Ok(ExitCode::SUCCESS)
}
