//! `zipwire tunnel keygen|server|client`: flags, the runtime, signals and the stats report.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Subcommand};
use zipwire_adapt::{Budget, BudgetSpec};
use zipwire_tunnel::drain::Drain;
use zipwire_tunnel::endpoint::{Client, Server};
use zipwire_tunnel::frame::{Codec, Method};
use zipwire_tunnel::keepalive::Keepalive;
use zipwire_tunnel::policy::Choice;
use zipwire_tunnel::relay::Shared;
use zipwire_tunnel::startups::{self, Limits};
use zipwire_tunnel::stats::Stats;
use zipwire_tunnel::tls::{self, Fingerprint};

mod admin;

use crate::value::{parse_duration, parse_percent, parse_size, parse_socket_addr};

/// `zipwire tunnel`: which end.
#[derive(Debug, Args)]
pub struct TunnelArgs {
    /// The end to run.
    #[command(subcommand)]
    pub role: Role,
}

/// The tunnel's subcommands.
#[derive(Debug, Subcommand)]
pub enum Role {
    /// Write DIR/cert.pem (mode 0644), DIR/key.pem (0600) and DIR/token (0600) in DIR (created
    /// 0700) and print the certificate's fingerprint, for the client's --pin. The files are
    /// written under temporary names and put in place only once all three are complete; a
    /// symlink is never followed.
    Keygen {
        /// Directory to write to (created if missing).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// Replace existing files.
        #[arg(long)]
        force: bool,
    },
    /// Accept tunnel connections and forward each to --forward.
    Server(ServerArgs),
    /// Accept local connections and carry each through the tunnel to the server's target.
    Client(ClientArgs),
}

/// What both ends share.
#[derive(Debug, Args)]
pub struct Common {
    /// File holding the shared token (from keygen; at least 16 bytes).
    #[arg(long, value_name = "FILE")]
    pub token_file: PathBuf,

    /// Accept a token shorter than 16 bytes (guessable: for tests only).
    #[arg(long)]
    pub allow_weak_token: bool,

    /// Compression: auto (adaptive), raw, 1-3 (stateless deflate), 4-9 (deflate with a
    /// window) or zstd:N (1-19). An end at raw also accepts only raw frames from its peer.
    ///
    /// Security: data is compressed, then encrypted. Within one forwarded connection,
    /// bytes an attacker chooses and secret bytes can share a compression window, and the
    /// encrypted lengths then leak the secret (CRIME). Connections never share a window. For
    /// traffic that mixes attacker-chosen input with secrets (cookies, tokens), run
    /// --level raw on both ends.
    #[arg(long, value_name = "LEVEL", default_value = "auto", value_parser = parse_choice)]
    pub level: Choice,

    /// Percent of one core compression may use; past it blocks go raw [default: no limit]
    #[arg(long, value_name = "PCT", value_parser = parse_percent)]
    pub max_cpu: Option<f64>,

    /// Bytes all forwarded connections' compressors and decompressors may hold together (0
    /// for no limit; else at least 4MiB). A compressing connection takes at most an equal
    /// share, never less than 4MiB: past it, auto compresses at a lower level, and what has
    /// no room for even that (or for a fixed level) goes through stateless deflate, raw only
    /// when that too has none (zstd's level 19 holds 94 MB, level 3 3.7 MB).
    #[arg(long, value_name = "BYTES", default_value = "256MiB", value_parser = parse_max_memory)]
    pub max_memory: u64,

    /// Bytes per block, 16k to 256k.
    #[arg(long, value_name = "BYTES", default_value = "128k", value_parser = parse_block)]
    pub block_size: usize,

    /// On SIGTERM or SIGINT, time the forwarded connections get to finish (e.g. 30s, 500ms)
    /// before those left are aborted: reset, with an abort sent to the peer, so that no
    /// application takes a cut transfer for a complete one.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_duration)]
    pub shutdown_grace: Duration,

    /// Ping the peer inside the tunnel after this much silence (e.g. 15s; at least 100ms, 0
    /// for off), and reset a forwarded connection whose peer stays silent for 3 intervals
    /// more (as ssh's ServerAliveInterval). TCP keepalive is on in any case. [default: off]
    #[arg(long, value_name = "DURATION", value_parser = parse_keepalive_interval)]
    pub keepalive_interval: Option<Duration>,

    /// Serve /stats (JSON), /metrics (Prometheus) and a live dashboard (/dashboard) over
    /// HTTP on this PORT of 127.0.0.1, or on ADDR:PORT. It answers anyone who connects: keep
    /// it on loopback or a management network. [default: off]
    #[arg(long, value_name = "[ADDR:]PORT", value_parser = admin::parse_admin)]
    pub admin: Option<SocketAddr>,
}

/// `zipwire tunnel server`.
#[derive(Debug, Args)]
pub struct ServerArgs {
    /// Address to accept tunnel connections on.
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub listen: SocketAddr,
    /// The one target every tunnel connection is forwarded to (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_host_port)]
    pub forward: String,
    /// The server's certificate (PEM).
    #[arg(long, value_name = "FILE")]
    pub cert: PathBuf,
    /// The certificate's private key (PEM; warned about unless mode 0600 or stricter).
    #[arg(long, value_name = "FILE")]
    pub key: PathBuf,
    /// Most connections in the TLS handshake or the hello at once (as ssh's MaxStartups);
    /// past it, the oldest is closed.
    #[arg(long, value_name = "N", default_value_t = startups::DEFAULT_MAX_STARTUPS, value_parser = parse_startups)]
    pub max_startups: usize,
    /// Time a connection has for the TLS handshake and the hello together (as ssh's
    /// LoginGraceTime; 0 for no limit, as there).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = parse_login_grace)]
    pub login_grace: Duration,
    #[command(flatten)]
    /// Flags both ends share.
    pub common: Common,
}

/// `zipwire tunnel client`.
#[derive(Debug, Args)]
pub struct ClientArgs {
    /// Local address to accept connections on.
    #[arg(long, value_name = "ADDR", value_parser = parse_socket_addr)]
    pub listen: SocketAddr,
    /// The tunnel server (HOST:PORT).
    #[arg(long, value_name = "HOST:PORT", value_parser = parse_host_port)]
    pub server: String,
    /// The server certificate's fingerprint, `SHA256:<hex>`, as keygen printed it.
    #[arg(long, value_name = "SHA256:HEX", value_parser = parse_pin)]
    pub pin: Fingerprint,
    #[command(flatten)]
    /// Flags both ends share.
    pub common: Common,
}

/// The shortest `--keepalive-interval`: below it the pings would be most of an idle link's
/// traffic, and a peer a few scheduler delays late would be declared dead.
const MIN_KEEPALIVE_INTERVAL: Duration = Duration::from_millis(100);

/// `--keepalive-interval`: 0 is off, as ssh's `ServerAliveInterval 0` (not the shortest
/// interval: 10 ms pings would be about 90 a second); otherwise at least
/// [`MIN_KEEPALIVE_INTERVAL`].
fn parse_keepalive_interval(text: &str) -> Result<Duration, String> {
    let interval = parse_duration(text)?;
    if !interval.is_zero() && interval < MIN_KEEPALIVE_INTERVAL {
        return Err(format!(
            "'{text}' is shorter than {MIN_KEEPALIVE_INTERVAL:?} (0 turns the pings off)"
        ));
    }
    Ok(interval)
}

/// `--login-grace`: 0 is no limit, as ssh's `LoginGraceTime 0` (not a zero deadline, which
/// would close every connection at once); `--max-startups` still bounds the connections
/// waiting.
fn parse_login_grace(text: &str) -> Result<Duration, String> {
    let grace = parse_duration(text)?;
    Ok(if grace.is_zero() {
        Duration::MAX
    } else {
        grace
    })
}

/// `HOST:PORT`: a name or an address (IPv6 in brackets) and a port 1-65535, checked at start
/// as ssh checks `-L`'s forwarding, not at the first connection.
fn parse_host_port(text: &str) -> Result<String, String> {
    let bad = || format!("'{text}' is not HOST:PORT (a name or address, and a port 1-65535)");
    let (host, port) = text.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let host_ok = match host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        Some(v6) => v6.parse::<std::net::Ipv6Addr>().is_ok(),
        None => {
            !host.is_empty()
                && host
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_')
        }
    };
    if port == 0 || !host_ok {
        return Err(bad());
    }
    Ok(text.to_owned())
}

fn parse_pin(text: &str) -> Result<Fingerprint, String> {
    text.parse()
}

/// `auto`, `raw` (or 0), `1`-`9`, `zstd:N`.
fn parse_choice(text: &str) -> Result<Choice, String> {
    let bad = || format!("'{text}' is not auto, raw, 1-9 or zstd:1-19");
    let method = match text {
        "auto" => return Ok(Choice::Auto),
        "raw" | "0" => Method::RAW,
        _ => {
            if let Some(level) = text.strip_prefix("zstd:") {
                let level = level.parse().map_err(|_| bad())?;
                Method::new(Codec::Zstd, level).ok_or_else(bad)?
            } else {
                let level: u8 = text.parse().map_err(|_| bad())?;
                let codec = if level <= 3 {
                    Codec::Deflate
                } else {
                    Codec::DeflateWindow
                };
                Method::new(codec, level).ok_or_else(bad)?
            }
        }
    };
    Ok(Choice::Fixed(method))
}

fn parse_startups(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(n) if n >= 1 => Ok(n),
        _ => Err(format!(
            "'{text}' is not a number of connections (1 or more)"
        )),
    }
}

fn parse_block(text: &str) -> Result<usize, String> {
    let size = parse_size(text)?;
    if (16 * 1024..=256 * 1024).contains(&size) {
        Ok(size as usize)
    } else {
        Err(format!("block size {text} is not within 16k-256k"))
    }
}

fn parse_max_memory(text: &str) -> Result<u64, String> {
    match parse_size(text)? {
        0 => Ok(0),
        size if size >= zipwire_tunnel::memory::MIN_SHARE => Ok(size),
        _ => Err(format!(
            "{text} cannot hold one compressing connection: 0 (no limit) or at least 4MiB"
        )),
    }
}

/// Runs a tunnel subcommand.
pub fn run(args: &TunnelArgs, verbose: bool, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    match &args.role {
        Role::Keygen { out: dir, force } => {
            let fp = zipwire_tunnel::keygen::keygen(dir, *force)
                .with_context(|| format!("writing keys to {}", dir.display()))?;
            writeln!(out, "{fp}")?;
            Ok(ExitCode::SUCCESS)
        }
        Role::Server(a) => {
            let tls = tls::server_config(&a.cert, &a.key)?;
            let (token, shared) = prepare(&a.common)?;
            let runtime = runtime()?;
            let mut server = runtime
                .block_on(Server::bind(
                    a.listen,
                    a.forward.clone(),
                    tls,
                    token,
                    shared,
                ))
                .with_context(|| format!("listening on {}", a.listen))?;
            server.set_limits(Limits {
                max_startups: a.max_startups,
                login_grace: a.login_grace,
            });
            tracing::info!(listen = %server.local_addr()?, forward = a.forward, "tunnel server ready");
            let (stats, drain) = (server.stats(), server.drain());
            if let Some(addr) = a.common.admin {
                admin::start(&runtime, addr, stats.clone())?;
            }
            let grace = a.common.shutdown_grace;
            serve(&runtime, server.run(), (&stats, &drain, grace), verbose)
        }
        Role::Client(a) => {
            let tls = tls::client_config(a.pin)?;
            let (token, shared) = prepare(&a.common)?;
            let runtime = runtime()?;
            let client = runtime
                .block_on(Client::bind(a.listen, a.server.clone(), tls, token, shared))
                .with_context(|| format!("listening on {}", a.listen))?;
            tracing::info!(listen = %client.local_addr()?, server = a.server, "tunnel client ready");
            let (stats, drain) = (client.stats(), client.drain());
            if let Some(addr) = a.common.admin {
                admin::start(&runtime, addr, stats.clone())?;
            }
            let grace = a.common.shutdown_grace;
            serve(&runtime, client.run(), (&stats, &drain, grace), verbose)
        }
    }
}

fn prepare(common: &Common) -> anyhow::Result<(Vec<u8>, Shared)> {
    let token =
        zipwire_tunnel::keygen::read_token(Path::new(&common.token_file), common.allow_weak_token)?;
    let budget = common.max_cpu.map(|max_cpu| {
        Budget::new(BudgetSpec {
            max_cpu: Some(max_cpu),
            ..BudgetSpec::default()
        })
    });
    let max_memory = (common.max_memory > 0).then_some(common.max_memory);
    let mut shared =
        Shared::new(common.level.clone(), common.block_size, budget).with_max_memory(max_memory);
    shared.keepalive = common
        .keepalive_interval
        .filter(|interval| !interval.is_zero())
        .map(Keepalive::every);
    Ok((token, shared))
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    raise_open_files();
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the runtime")
}

/// Raises the soft limit on open files to the hard limit. A forwarded connection takes four
/// descriptors at either end (the tunnel's socket, two more handles on it for the link probe
/// and the relay, and the forwarded socket), so the usual soft limit of 1,024 would refuse
/// the 257th connection (`EMFILE`). The tunnel has no connection limit to size the raise
/// from, as the proxy has `max_connections`, so it takes what the hard limit allows, as Go
/// programs do at start since Go 1.19.
fn raise_open_files() {
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    /// Linux's default `fs.nr_open`: the most a process may have, for a hard limit of
    /// "unlimited", which the soft limit of open files cannot take.
    const NR_OPEN: u64 = 1 << 20;
    let limit = getrlimit(Resource::Nofile);
    let target = limit.maximum.unwrap_or(NR_OPEN);
    if limit.current.is_none_or(|current| current >= target) {
        return;
    }
    let raised = Rlimit {
        current: Some(target),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::debug!(open_files = target, "open files limit raised"),
        Err(error) => tracing::warn!(%error, "cannot raise the open files limit"),
    }
}

/// Runs `endpoint` until SIGINT/SIGTERM (printing the stats on SIGUSR1, and logging and
/// ignoring SIGHUP), then stops accepting, gives the forwarded connections `grace` to finish
/// (less if a second SIGINT/SIGTERM comes) and aborts the rest (see [`Drain`]); with -v it
/// prints the stats at exit.
fn serve(
    runtime: &tokio::runtime::Runtime,
    endpoint: impl std::future::Future<Output = std::io::Result<()>>,
    (stats, drain, grace): (&Arc<Stats>, &Arc<Drain>, Duration),
    verbose: bool,
) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{signal, SignalKind};
    let result = runtime.block_on(async {
        let mut usr1 = signal(SignalKind::user_defined1())?;
        let mut term = signal(SignalKind::terminate())?;
        let mut hangup = signal(SignalKind::hangup())?;
        let report = stats.clone();
        let reporter = async move {
            loop {
                tokio::select! {
                    Some(()) = usr1.recv() => eprint!("{}", report.report()),
                    // Its default action would end the tunnel at once, cutting every
                    // forwarded connection: a service manager's `kill -HUP` reload must not
                    // do that.
                    Some(()) = hangup.recv() => tracing::info!(
                        "SIGHUP ignored: the tunnel reads its certificate, key and token at start; restart it to change them"
                    ),
                    else => break,
                }
            }
            // Never a reason to stop.
            std::future::pending::<()>().await;
        };
        tokio::select! {
            result = endpoint => result,
            () = reporter => Ok(()),
            _ = tokio::signal::ctrl_c() => Ok(()),
            _ = term.recv() => Ok(()),
        }
    });
    // The endpoint's future, and with it its listener, is gone: nothing new comes in.
    let open = drain.live();
    tracing::info!(
        open,
        grace_s = grace.as_secs_f64(),
        "shutting down: no new connections"
    );
    // A second SIGINT or SIGTERM cuts what is left at once, as the proxy's does.
    let outcome = runtime.block_on(async {
        let second = async {
            match signal(SignalKind::terminate()) {
                Ok(mut term) => tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                },
                Err(_) => std::future::pending().await,
            }
        };
        tokio::select! {
            outcome = drain.shutdown(grace) => outcome,
            () = second => {
                tracing::warn!("second stop signal: cutting the forwarded connections still open");
                let mut outcome = drain.shutdown(Duration::ZERO).await;
                outcome.open = open;
                outcome
            }
        }
    });
    if outcome.cut > 0 {
        tracing::warn!(
            cut = outcome.cut,
            finished = outcome.open.saturating_sub(outcome.cut),
            stuck = outcome.stuck,
            "shutdown cut {} forwarded connection(s): reset, abort sent to the peer",
            outcome.cut
        );
    } else {
        tracing::info!(
            finished = outcome.open,
            "shut down; no forwarded connection cut"
        );
    }
    if verbose {
        eprint!("{}", stats.report());
    }
    result.context("tunnel")?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zero_means_what_it_means_to_ssh() {
        assert_eq!(parse_keepalive_interval("0s"), Ok(Duration::ZERO));
        assert_eq!(parse_keepalive_interval("15s"), Ok(Duration::from_secs(15)));
        assert!(parse_keepalive_interval("5ms").is_err());
        assert_eq!(parse_login_grace("0s"), Ok(Duration::MAX));
        assert_eq!(parse_login_grace("30s"), Ok(Duration::from_secs(30)));
    }

    #[test]
    fn forward_and_server_are_host_and_port() {
        for good in ["127.0.0.1:22", "db.internal:5432", "[::1]:22", "my_host:1"] {
            assert_eq!(parse_host_port(good), Ok(good.to_owned()));
        }
        for bad in [
            "nonsense",
            "host:0",
            "host:70000",
            ":22",
            "::1:22",
            "a b:22",
            "h/x:1",
            "[zz]:1",
        ] {
            assert!(parse_host_port(bad).is_err(), "{bad}");
        }
    }
}
