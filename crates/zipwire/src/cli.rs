//! Command-line flags (clap). Each subcommand's arguments are a struct of their own, so a new
//! subcommand is one more [`Command`] variant.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{value_parser, ArgAction, Args, Parser, Subcommand};

use crate::gzip::FileArgs;
use crate::tunnel::TunnelArgs;
use crate::value::{parse_duration, parse_percent, parse_size, parse_socket_addr, parse_upstream};

/// Compression offload for data in transit.
#[derive(Debug, Parser)]
#[command(name = "zipwire", version, about)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,

    /// Log more: -v for debug, -vv for trace (on top of RUST_LOG; default info). With
    /// compress and decompress, gzip's -v instead: each file's name and ratio.
    #[arg(short, long, action = ArgAction::Count, global = true)]
    pub verbose: u8,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure zipwire against other implementations.
    Bench(BenchArgs),
    /// HTTP reverse proxy that compresses responses for its clients (nginx `gzip on` in front
    /// of HAProxy, in one process). Flags override the configuration file's keys.
    Proxy(ProxyArgs),
    /// Demonstrate the proxy with no setup: a built-in site, the proxy in front of it and a
    /// load of gzip-accepting clients, with compression off and at several levels.
    Demo(DemoArgs),
    /// Compress files like gzip (FILE becomes FILE.gz), in parallel on large inputs.
    #[command(infer_long_args = true)]
    Compress(FileArgs),
    /// Decompress files like gunzip (FILE.gz becomes FILE); same flags as compress.
    #[command(infer_long_args = true)]
    Decompress(FileArgs),
    /// Encrypted TCP tunnel (like `ssh -L -C`) that compresses only when it pays.
    Tunnel(TunnelArgs),
}

/// `zipwire demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Seconds of load per scenario.
    #[arg(long, default_value_t = 3.0, value_parser = parse_demo_seconds)]
    pub seconds: f64,

    /// Concurrent client connections.
    #[arg(long, default_value_t = 32, value_parser = value_parser!(u16).range(1..=1024))]
    pub connections: u16,
}

/// Seconds for `demo --seconds`: more than 0, at most 60.
fn parse_demo_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(s) if s > 0.0 && s <= 60.0 => Ok(s),
        _ => Err(format!("'{text}' is not a number of seconds in (0, 60]")),
    }
}

/// `zipwire proxy`. Sizes take k, m and g suffixes (64k); see docs/config.md for every key.
#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// TOML configuration file (see zipwire.toml.example).
    #[arg(short, long, value_name = "FILE")]
    pub config: Option<PathBuf>,

    /// Address to accept cleartext HTTP clients on; repeat for several. Replaces the file's
    /// listen [default: 127.0.0.1:8080, or none when TLS listeners are given]
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub listen: Vec<SocketAddr>,

    /// Address to accept TLS (HTTPS) clients on; repeat for several. Replaces the file's
    /// tls.listen [default: none]
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub tls_listen: Vec<SocketAddr>,

    /// The TLS certificate chain, PEM, leaf first (nginx `ssl_certificate`); the default for
    /// clients whose SNI names no `[[tls.certificates]]` entry
    #[arg(long, value_name = "FILE")]
    pub tls_cert: Option<PathBuf>,

    /// The private key of --tls-cert, PEM (nginx `ssl_certificate_key`)
    #[arg(long, value_name = "FILE")]
    pub tls_key: Option<PathBuf>,

    /// Origin server, http://HOST:PORT or https://HOST:PORT; repeat for several
    /// (round-robin). Replaces the file's upstreams.
    #[arg(long = "upstream", value_name = "URL", value_parser = parse_upstream)]
    pub upstreams: Vec<zipwire_proxy::Upstream>,

    /// Worker threads [default: the number of cores]
    #[arg(long, value_name = "N", value_parser = value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,

    /// Compression level, 1 (fastest, stateless) to 9 [default: 2]
    #[arg(long, value_name = "N", value_parser = value_parser!(u8).range(1..=9))]
    pub level: Option<u8>,

    /// Codings produced, most preferred first; the client's q-values decide, this order
    /// breaks ties [default: zstd,br,gzip,deflate]
    #[arg(long, value_name = "LIST", value_delimiter = ',', value_parser = parse_coding_name)]
    pub encodings: Option<Vec<String>>,

    /// zstd level, 1 (fastest) to 19 [default: 2]
    #[arg(long, value_name = "N", value_parser = value_parser!(u8).range(1..=19))]
    pub zstd_level: Option<u8>,

    /// brotli level, 0 (fastest) to 11 [default: 3]
    #[arg(long, value_name = "N", value_parser = value_parser!(u8).range(0..=11))]
    pub br_level: Option<u8>,

    /// Compression dictionaries (RFC 9842): auto (mark versioned assets, use what the origin
    /// marks), origin (only what the origin marks) or off [default: auto]
    #[arg(long, value_name = "MODE", value_parser = ["auto", "origin", "off"])]
    pub dictionaries: Option<String>,

    /// Address of the admin listener (/stats, /metrics) [default: off]
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub admin: Option<SocketAddr>,

    /// No access log line per request (nginx `access_log off`) [default: on]
    #[arg(long)]
    pub no_access_log: bool,

    /// Responses with a known length below this many bytes pass uncompressed [default: 256]
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    pub min_length: Option<u64>,

    /// Percent of one core compression may use before new responses pass uncompressed
    /// [default: no limit]
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub max_cpu: Option<f64>,

    /// Input bytes per second compression may take [default: no limit]
    #[arg(long, value_name = "BYTES", value_parser = parse_positive_size)]
    pub max_rate: Option<u64>,

    /// Total bytes of compression buffers, at least 1MiB [default: no limit]
    #[arg(long, value_name = "BYTES", value_parser = |text: &str| parse_size_at_least(text, crate::proxy::MIN_MAX_MEMORY))]
    pub max_memory: Option<u64>,

    /// Input bytes all responses together may hold while gathering encoder calls; past it a
    /// response waits with its input unread upstream; at least 64KiB [default: 4MiB per
    /// thread]
    #[arg(long, value_name = "BYTES", value_parser = |text: &str| parse_size_at_least(text, crate::proxy::MIN_GATHER_MEMORY))]
    pub gather_memory: Option<u64>,

    /// Longest pause between two reads of a request body before the upload is abandoned (408)
    /// [default: 60s]
    #[arg(long, value_name = "DURATION", value_parser = parse_positive_duration)]
    pub client_body_timeout: Option<std::time::Duration>,

    /// Check the configuration, print the effective configuration (every key, defaults
    /// included) and exit.
    #[arg(long)]
    pub check: bool,
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
    /// Draw an SVG from a benchmark's tab-separated table (bench/proxy*.sh write one with
    /// TSV=; bench/cli.sh and bench/tunnel.sh beside their PLOT, ending .tsv).
    Plot(PlotArgs),
}

/// `zipwire bench plot`.
#[derive(Debug, Args)]
pub struct PlotArgs {
    /// Which benchmark wrote the table.
    #[arg(value_enum)]
    pub kind: PlotKind,

    /// The tab-separated table: a header row of column names, then one row per measurement.
    pub table: PathBuf,

    /// Where to write the SVG [default: the table's path ending in .svg]
    #[arg(short, long, value_name = "FILE")]
    pub output: Option<PathBuf>,

    /// The plot's title [default: the benchmark's name]
    #[arg(long)]
    pub title: Option<String>,
}

/// What a table holds, and so what its plot shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PlotKind {
    /// bench/proxy.sh: hits/s and ratio per proxy (columns proxy, hits/s, ratio).
    Proxy,
    /// bench/cli.sh: MB/s against ratio per command (columns command, MB/s, ratio).
    Cli,
    /// zipwire bench codec: MB/s against ratio per engine and level.
    Codec,
    /// bench/tunnel.sh: payload MB/s per link and data kind (columns link, data, methods).
    Tunnel,
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

    /// Also draw MB/s against ratio per engine and level into this SVG file.
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,

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

/// A size of at least `min` bytes: the same floor the file's key has, so that the flag's
/// error names the flag rather than the file.
fn parse_size_at_least(text: &str, min: u64) -> Result<u64, String> {
    match parse_size(text)? {
        bytes if bytes < min => Err(format!(
            "must be at least {}",
            crate::value::format_size(min)
        )),
        bytes => Ok(bytes),
    }
}

/// A coding the proxy produces, refused here so that the flag is named (exit 2), as every
/// other bad flag value is; a name listed twice is the file check's.
fn parse_coding_name(text: &str) -> Result<String, String> {
    match zipwire_proxy::Coding::from_name(text.as_bytes()) {
        Some(_) => Ok(text.to_owned()),
        None => Err(format!(
            "'{text}' is not a coding the proxy produces (zstd, br, gzip, deflate)"
        )),
    }
}

fn parse_positive_duration(text: &str) -> Result<std::time::Duration, String> {
    match parse_duration(text)? {
        duration if duration.is_zero() => Err("must be longer than zero".to_owned()),
        duration => Ok(duration),
    }
}

fn parse_positive_size(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Err("must be above zero".to_owned()),
        bytes => Ok(bytes),
    }
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(seconds) if seconds.is_finite() && seconds > 0.0 => Ok(seconds),
        _ => Err(format!(
            "expected a positive number of seconds, got `{text}`"
        )),
    }
}
