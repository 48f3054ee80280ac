//! The binary's tracing subscriber: log lines on standard error (in batches under load, see
//! [`crate::batched_stderr`]), filtered by `RUST_LOG` (`EnvFilter` syntax) and raised by `-v`.
//!
//! Without `RUST_LOG` the level is info; `-v` makes it debug and `-vv` trace. With
//! `RUST_LOG`, its directives apply and `-v` raises the default level for every target it
//! does not name.

use tracing_subscriber::filter::{EnvFilter, LevelFilter};

use crate::batched_stderr::{self, BatchedStderr};

/// Installs the subscriber for the process: level info (warn when `quiet`), raised by each
/// `-v`, with `RUST_LOG` directives on top.
///
/// Lines still held are written when the returned guard drops; keep it until the process is
/// about to exit.
///
/// # Errors
///
/// When a global subscriber is already installed.
pub fn init(verbosity: u8, quiet: bool) -> anyhow::Result<FlushOnDrop> {
    let rust_log = std::env::var("RUST_LOG").ok();
    tracing_subscriber::fmt()
        .with_env_filter(filter(verbosity, quiet, rust_log.as_deref()))
        .with_writer(BatchedStderr)
        // Colours only for a person at a terminal, never in files or pipes.
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init()
        .map_err(|err| anyhow::anyhow!("cannot install the log subscriber: {err}"))?;
    Ok(FlushOnDrop)
}

/// Writes the log lines still held when dropped.
#[must_use = "held log lines are written when this drops"]
pub struct FlushOnDrop;

impl Drop for FlushOnDrop {
    fn drop(&mut self) {
        batched_stderr::flush();
    }
}

/// The filter for `-v` given `verbosity` times and `RUST_LOG` set to `rust_log`. Invalid
/// `RUST_LOG` directives are skipped (and reported by tracing-subscriber on standard error).
fn filter(verbosity: u8, quiet: bool, rust_log: Option<&str>) -> EnvFilter {
    let level = match verbosity {
        // Subcommands that print their own report (the demo) keep the per-request access
        // log out of it unless asked.
        0 if quiet => LevelFilter::WARN,
        0 => LevelFilter::INFO,
        1 => LevelFilter::DEBUG,
        _ => LevelFilter::TRACE,
    };
    let builder = EnvFilter::builder().with_default_directive(level.into());
    match rust_log.filter(|directives| !directives.trim().is_empty()) {
        Some(directives) => {
            let filter = builder.parse_lossy(directives);
            if verbosity > 0 {
                filter.add_directive(level.into())
            } else {
                filter
            }
        }
        None => builder.parse_lossy(""),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn max_level(verbosity: u8, rust_log: Option<&str>) -> Option<LevelFilter> {
        filter(verbosity, false, rust_log).max_level_hint()
    }

    #[test]
    fn verbosity_without_rust_log() {
        assert_eq!(max_level(0, None), Some(LevelFilter::INFO));
        assert_eq!(max_level(1, None), Some(LevelFilter::DEBUG));
        assert_eq!(max_level(2, None), Some(LevelFilter::TRACE));
        assert_eq!(max_level(9, Some("  ")), Some(LevelFilter::TRACE));
    }

    #[test]
    fn rust_log_sets_the_level() {
        assert_eq!(max_level(0, Some("warn")), Some(LevelFilter::WARN));
        let filter = filter(0, false, Some("warn,zipwire_proxy=trace")).to_string();
        assert!(filter.contains("zipwire_proxy=trace"), "{filter}");
    }

    #[test]
    fn v_raises_rust_log() {
        assert_eq!(max_level(1, Some("warn")), Some(LevelFilter::DEBUG));
        let filter = filter(1, false, Some("warn,zipwire_proxy=trace")).to_string();
        assert!(filter.contains("zipwire_proxy=trace"), "{filter}");
        assert!(filter.contains("debug"), "{filter}");
    }

    #[test]
    fn quiet_subcommands_default_to_warnings_only() {
        assert_eq!(
            filter(0, true, None).max_level_hint(),
            Some(LevelFilter::WARN)
        );
        assert_eq!(
            filter(1, true, None).max_level_hint(),
            Some(LevelFilter::DEBUG)
        );
        assert_eq!(
            filter(0, true, Some("info")).max_level_hint(),
            Some(LevelFilter::INFO)
        );
    }
}
