//! The binary's tracing subscriber: log lines on standard error, filtered by `RUST_LOG`
//! (`EnvFilter` syntax) and raised by `-v`.
//!
//! Without `RUST_LOG` the level is info; `-v` makes it debug and `-vv` trace. With
//! `RUST_LOG`, its directives apply and `-v` raises the default level for every target it
//! does not name.

use tracing_subscriber::filter::{EnvFilter, LevelFilter};

/// Installs the subscriber for the process.
///
/// # Errors
///
/// When a global subscriber is already installed.
pub fn init(verbosity: u8) -> anyhow::Result<()> {
    let rust_log = std::env::var("RUST_LOG").ok();
    tracing_subscriber::fmt()
        .with_env_filter(filter(verbosity, rust_log.as_deref()))
        .with_writer(std::io::stderr)
        .try_init()
        .map_err(|err| anyhow::anyhow!("cannot install the log subscriber: {err}"))
}

/// The filter for `-v` given `verbosity` times and `RUST_LOG` set to `rust_log`. Invalid
/// `RUST_LOG` directives are skipped (and reported by tracing-subscriber on standard error).
fn filter(verbosity: u8, rust_log: Option<&str>) -> EnvFilter {
    let level = match verbosity {
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
        filter(verbosity, rust_log).max_level_hint()
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
        let filter = filter(0, Some("warn,zipwire_proxy=trace")).to_string();
        assert!(filter.contains("zipwire_proxy=trace"), "{filter}");
    }

    #[test]
    fn v_raises_rust_log() {
        assert_eq!(max_level(1, Some("warn")), Some(LevelFilter::DEBUG));
        let filter = filter(1, Some("warn,zipwire_proxy=trace")).to_string();
        assert!(filter.contains("zipwire_proxy=trace"), "{filter}");
        assert!(filter.contains("debug"), "{filter}");
    }
}
