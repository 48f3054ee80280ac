//! `zipwire proxy`: the compressing reverse proxy's configuration.
//!
//! Configuration comes in two stages (see `docs/config.md`): the TOML file named by
//! `--config` and the flags are read into one [`RawConfig`] each, the flags laid over the file
//! ([`RawConfig::overlay`]); then `TryFrom<RawConfig> for ProxyConfig` checks every value,
//! names the key of any it rejects, and applies the defaults. `--check` prints the effective
//! configuration and exits, like `nginx -t`.

mod raw;
mod render;
mod typed;

#[cfg(test)]
mod tests;

use std::fs;
use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use zipwire_proxy::{Hurry, ProxyConfig, TlsReloader};

use crate::cli::ProxyArgs;
use crate::proxy::raw::{
    Listen, Quantity, RawBudget, RawCompression, RawConfig, RawDictionaries, RawTimeouts, RawTls,
};

pub use self::render::render;
pub use self::typed::{MIN_GATHER_MEMORY, MIN_MAX_MEMORY};

/// Runs `zipwire proxy --check`: validates the configuration and writes the effective
/// configuration to `out`. (clap requires `--check` until the server is wired to this
/// command.)
pub fn run(args: &ProxyArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let config = load(args)?;
    if args.check {
        // The certificate files are read as the server would read them, so that a missing
        // file, an unreadable key or a key of another certificate fails here.
        if !config.tls.listen.is_empty() {
            zipwire_proxy::check_certificates(&config.tls)?;
        }
        out.write_all(render(&config).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    out.flush()?;
    zipwire_proxy::run_blocking_with(config, |server| {
        signals(server.tls_reloader(), server.hurry())
    })
    .context("proxy")?;
    Ok(ExitCode::SUCCESS)
}

/// Completes on SIGTERM or SIGINT (see [`shutdown_signal`]), after which a second one resets the
/// connections still open at once ([`Hurry`]); until then each SIGHUP reloads the TLS certificates,
/// as it makes nginx reload its configuration, and SIGUSR1 (the tunnel's stats report, HAProxy's
/// soft stop, nginx's log reopening) is logged and ignored, since its default action would end the
/// proxy at once, cutting every response. Called inside the runtime before the first client is
/// accepted, so the handlers are in place by then.
fn signals(reloader: Option<TlsReloader>, hurry: Hurry) -> impl std::future::Future<Output = ()> {
    #[cfg(unix)]
    let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    #[cfg(unix)]
    let user1 = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::user_defined1());
    let shutdown = async move {
        shutdown_signal().await;
        tokio::spawn(async move {
            shutdown_signal().await;
            tracing::warn!("second stop signal: resetting the connections still open");
            hurry.now();
        });
    };
    async move {
        #[cfg(unix)]
        let ignore_user1 = async {
            if let Ok(mut user1) = user1 {
                while user1.recv().await.is_some() {
                    tracing::info!(
                        "SIGUSR1 ignored: the proxy's counters are at the admin listener's /stats"
                    );
                }
            }
            // Never a reason to stop.
            std::future::pending::<()>().await;
        };
        #[cfg(unix)]
        let shutdown = async {
            tokio::select! {
                () = shutdown => {}
                () = ignore_user1 => {}
            }
        };
        #[cfg(unix)]
        if let Ok(mut hangup) = hangup {
            let reload = async {
                while hangup.recv().await.is_some() {
                    match &reloader {
                        // A failure is logged as a warning by the reloader, which keeps the
                        // certificates in use. The files are read on a blocking thread: this
                        // future is polled by the accept loop, which a slow read (a FIFO, a
                        // hung network mount) would stop.
                        Some(reloader) => {
                            let reloader = reloader.clone();
                            let _ = tokio::task::spawn_blocking(move || reloader.reload()).await;
                        }
                        None => tracing::info!("SIGHUP: no TLS certificates to reload"),
                    }
                }
            };
            tokio::select! {
                () = shutdown => {}
                () = reload => {}
            }
            return;
        }
        #[cfg(not(unix))]
        let _ = reloader;
        shutdown.await;
    }
}

/// Completes on SIGTERM or Ctrl-C (SIGINT): the server then finishes in-flight requests
/// within its grace period.
async fn shutdown_signal() {
    let interrupt = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = interrupt => {}
                    _ = terminate.recv() => {}
                }
            }
            Err(_) => {
                let _ = interrupt.await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = interrupt.await;
    }
}

/// Reads the file (if any), lays the flags over it and checks the result.
///
/// # Errors
///
/// The file cannot be read or is not valid TOML for this configuration, or a value is
/// rejected (the error names the file and the key).
pub fn load(args: &ProxyArgs) -> anyhow::Result<ProxyConfig> {
    let file = match &args.config {
        Some(path) => {
            let text = fs::read_to_string(path)
                .with_context(|| format!("{}: cannot read", path.display()))?;
            RawConfig::from_toml(&text).with_context(|| path.display().to_string())?
        }
        None => RawConfig::default(),
    };
    let flags = flags(args);
    let config = ProxyConfig::try_from(file.overlay(flags.clone()));
    match (config, &args.config) {
        (Ok(config), _) => Ok(config),
        // A key the flags gave is the command line's, not the file's, to blame.
        (Err(error), Some(_)) if set_by_flags(&flags, error.key()) => {
            Err(anyhow::Error::from(error).context("command line"))
        }
        (Err(error), Some(path)) => {
            Err(anyhow::Error::from(error).context(path.display().to_string()))
        }
        (Err(error), None) => Err(error.into()),
    }
}

/// Whether `flags` gave the key an error names (`listen[1]` is `listen`'s): the flags
/// replace the file's value of every key they give.
fn set_by_flags(flags: &RawConfig, key: &str) -> bool {
    let (c, b, t) = (&flags.compression, &flags.budget, &flags.tls);
    match key.split('[').next().unwrap_or(key) {
        "listen" => flags.listen.is_some(),
        "upstreams" => flags.upstreams.is_some(),
        "threads" => flags.threads.is_some(),
        "admin" => flags.admin.is_some(),
        "compression.level" => c.level.is_some(),
        "compression.encodings" => c.encodings.is_some(),
        "compression.zstd_level" => c.zstd_level.is_some(),
        "compression.br_level" => c.br_level.is_some(),
        "compression.min_length" => c.min_length.is_some(),
        "budget.max_cpu" => b.max_cpu.is_some(),
        "budget.max_rate" => b.max_rate.is_some(),
        "budget.max_memory" => b.max_memory.is_some(),
        "budget.gather_memory" => b.gather_memory.is_some(),
        "timeouts.client_body" => flags.timeouts.client_body.is_some(),
        "dictionaries.mode" => flags.dictionaries.mode.is_some(),
        // These three are checked together ("tls.cert is given without its key" is told
        // under tls.key): a flag that gave any of them is what made the set incomplete.
        "tls.listen" | "tls.cert" | "tls.key" => {
            t.listen.is_some() || t.cert.is_some() || t.key.is_some()
        }
        _ => false,
    }
}

/// The flags as a raw configuration, to lay over the file. clap has already checked each
/// value with the same parsers the file's values go through, so they are written back in the
/// file's syntax.
fn flags(args: &ProxyArgs) -> RawConfig {
    RawConfig {
        listen: (!args.listen.is_empty())
            .then(|| Listen::Many(args.listen.iter().map(ToString::to_string).collect())),
        upstreams: (!args.upstreams.is_empty()).then(|| {
            args.upstreams
                .iter()
                .map(|upstream| upstream.to_string())
                .collect()
        }),
        threads: args.threads.map(i64::from),
        admin: args.admin.map(|addr| addr.to_string()),
        access_log: args.no_access_log.then_some(false),
        compression: RawCompression {
            level: args.level.map(i64::from),
            encodings: args.encodings.clone(),
            zstd_level: args.zstd_level.map(i64::from),
            br_level: args.br_level.map(i64::from),
            min_length: args.min_length.map(quantity),
            ..RawCompression::default()
        },
        budget: RawBudget {
            max_cpu: args.max_cpu,
            max_rate: args.max_rate.map(quantity),
            max_memory: args.max_memory.map(quantity),
            gather_memory: args.gather_memory.map(quantity),
            ..RawBudget::default()
        },
        timeouts: RawTimeouts {
            client_body: args
                .client_body_timeout
                .map(|t| Quantity::Text(crate::value::format_duration(t))),
            ..RawTimeouts::default()
        },
        dictionaries: RawDictionaries {
            mode: args.dictionaries.clone(),
            ..RawDictionaries::default()
        },
        tls: RawTls {
            listen: (!args.tls_listen.is_empty())
                .then(|| args.tls_listen.iter().map(ToString::to_string).collect()),
            cert: args.tls_cert.clone(),
            key: args.tls_key.clone(),
            ..RawTls::default()
        },
        ..RawConfig::default()
    }
}

fn quantity(bytes: u64) -> Quantity {
    Quantity::Text(bytes.to_string())
}
