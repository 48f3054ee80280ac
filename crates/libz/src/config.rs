//! Which engine serves each zlib level, read once per process from the environment and an
//! optional config file (as IBM's libnxz reads `/etc/nx.conf`).
//!
//! - `ZIPWIRE_ZLIB_LEVELS`: comma-separated `zlib=target` entries, `zlib` a level 0-9 or a
//!   range `a-b`, `target` a zipwire level 0-3 (0: stored blocks) or `zlib` (zlib-rs), e.g.
//!   `1-6=1,7-9=zlib`. Entries not given keep the default: 1-3 → 2, 4-6 → 3, 0 and
//!   7-9 → zlib (zipwire's level 2 compresses the corpus better than its level 1 at the
//!   same speed; docs/libz.md has the figures).
//! - `ZIPWIRE_ZLIB_ADAPT=1`: blocks the sampled-entropy check judges incompressible go out
//!   stored, without a compression attempt.
//! - `ZIPWIRE_ZLIB_LOG=1`: names the library once on stderr.
//! - `ZIPWIRE_ZLIB_CONFIG`: a file of `key = value` lines (`levels`, `adapt`, `log`; `#`
//!   comments), default `/etc/zipwire/libz.conf`; the environment overrides it.

use std::sync::OnceLock;

/// Where a zlib level goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Target {
    /// zipwire's stateless encoder at this level (0: stored blocks only).
    Zipwire(u8),
    /// zlib-rs, with the caller's level.
    Zlib,
}

/// The process-wide settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Config {
    /// Indexed by zlib level 0-9.
    pub(crate) levels: [Target; 10],
    /// Stored blocks for data that samples as incompressible.
    pub(crate) adapt: bool,
    /// Name the library on stderr once.
    pub(crate) log: bool,
}

impl Default for Config {
    fn default() -> Config {
        let mut levels = [Target::Zlib; 10];
        for level in &mut levels[1..=3] {
            *level = Target::Zipwire(2);
        }
        for level in &mut levels[4..=6] {
            *level = Target::Zipwire(3);
        }
        Config {
            levels,
            adapt: false,
            log: false,
        }
    }
}

impl Config {
    /// Applies one `key = value` setting; returns false for an unknown key or a bad value
    /// (the setting is then ignored, entries before the bad one kept).
    pub(crate) fn apply(&mut self, key: &str, value: &str) -> bool {
        match key {
            "levels" => self.apply_levels(value),
            "adapt" => parse_bool(value).map(|b| self.adapt = b).is_some(),
            "log" => parse_bool(value).map(|b| self.log = b).is_some(),
            _ => false,
        }
    }

    fn apply_levels(&mut self, value: &str) -> bool {
        let mut ok = true;
        for entry in value.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let parsed = entry.split_once('=').and_then(|(from, to)| {
                let (lo, hi) = match from.trim().split_once('-') {
                    Some((lo, hi)) => (lo.trim().parse::<usize>().ok()?, hi.trim().parse().ok()?),
                    None => {
                        let level = from.trim().parse::<usize>().ok()?;
                        (level, level)
                    }
                };
                let target = match to.trim() {
                    "zlib" | "zlib-rs" => Target::Zlib,
                    level => match level.parse::<u8>().ok()? {
                        level @ 0..=3 => Target::Zipwire(level),
                        _ => return None,
                    },
                };
                (lo <= hi && hi <= 9).then_some((lo, hi, target))
            });
            match parsed {
                Some((lo, hi, target)) => self.levels[lo..=hi].fill(target),
                None => ok = false,
            }
        }
        ok
    }

    /// Reads a config file's text.
    fn apply_file(&mut self, text: &str) -> Vec<String> {
        let mut bad = Vec::new();
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let applied = line
                .split_once('=')
                .is_some_and(|(k, v)| self.apply(k.trim(), v.trim()));
            if !applied {
                bad.push(line.to_owned());
            }
        }
        bad
    }

    /// The settings of this process: the file, then the environment over it. A program
    /// that runs with more privilege than its caller (setuid, setgid, file capabilities) reads
    /// the file at its default path alone, as `secure_getenv` would have it: where the
    /// library stands in for the system's libz, the caller's environment would otherwise
    /// choose a file the caller may not read and have its lines printed as bad settings.
    fn load() -> Config {
        let mut config = Config::default();
        let var = |name: &str| {
            if privileged() {
                None
            } else {
                std::env::var(name).ok()
            }
        };
        let path =
            var("ZIPWIRE_ZLIB_CONFIG").unwrap_or_else(|| "/etc/zipwire/libz.conf".to_owned());
        let mut bad = match std::fs::read_to_string(&path) {
            Ok(text) => config.apply_file(&text),
            Err(_) => Vec::new(),
        };
        for (name, key) in [
            ("ZIPWIRE_ZLIB_LEVELS", "levels"),
            ("ZIPWIRE_ZLIB_ADAPT", "adapt"),
            ("ZIPWIRE_ZLIB_LOG", "log"),
        ] {
            if let Some(value) = var(name) {
                if !config.apply(key, &value) {
                    bad.push(format!("{name}={value}"));
                }
            }
        }
        if config.log {
            let levels: Vec<String> = config
                .levels
                .iter()
                .enumerate()
                .map(|(level, target)| match target {
                    Target::Zipwire(z) => format!("{level}=zipwire{z}"),
                    Target::Zlib => format!("{level}=zlib-rs"),
                })
                .collect();
            // One write per line: stderr is unbuffered, and `eprintln!` with arguments may
            // write a line in pieces, which interleave with those of other processes that
            // load the library at the same moment (a program and its children).
            let mut text = format!(
                "zipwire-libz {}: zlib API served by zipwire (deflate) and zlib-rs (the rest); \
                 levels {}; adapt {}\n",
                env!("CARGO_PKG_VERSION"),
                levels.join(","),
                if config.adapt { "on" } else { "off" },
            );
            for setting in bad {
                text.push_str(&format!("zipwire-libz: ignored setting {setting:?}\n"));
            }
            let _ = std::io::Write::write_all(&mut std::io::stderr().lock(), text.as_bytes());
        }
        config
    }
}

/// Whether the kernel marked this process as running with more privilege than its caller
/// (`AT_SECURE`: setuid, setgid or file capabilities), as glibc's `secure_getenv` asks.
fn privileged() -> bool {
    // SAFETY: getauxval reads the auxiliary vector the kernel gave the process; it takes a
    // plain integer and has no preconditions.
    unsafe { libc::getauxval(libc::AT_SECURE) != 0 }
}

fn parse_bool(value: &str) -> Option<bool> {
    match value.trim() {
        "1" | "yes" | "on" | "true" => Some(true),
        "0" | "no" | "off" | "false" => Some(false),
        _ => None,
    }
}

/// The settings, loaded (and logged, if asked) on first use.
pub(crate) fn get() -> &'static Config {
    static CONFIG: OnceLock<Config> = OnceLock::new();
    CONFIG.get_or_init(Config::load)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_map_sends_1_to_6_to_zipwire_and_7_to_9_to_zlib() {
        let config = Config::default();
        assert_eq!(config.levels[0], Target::Zlib);
        assert_eq!(config.levels[1], Target::Zipwire(2));
        assert_eq!(config.levels[6], Target::Zipwire(3));
        assert!(config.levels[7..].iter().all(|t| *t == Target::Zlib));
    }

    #[test]
    fn levels_setting_takes_ranges_and_single_levels() {
        let mut config = Config::default();
        assert!(config.apply("levels", "1-6=1, 9=3,0=0"));
        assert_eq!(config.levels[0], Target::Zipwire(0));
        assert!(config.levels[1..=6]
            .iter()
            .all(|t| *t == Target::Zipwire(1)));
        assert_eq!(config.levels[7], Target::Zlib);
        assert_eq!(config.levels[9], Target::Zipwire(3));
    }

    #[test]
    fn bad_entries_are_refused_and_good_ones_kept() {
        let mut config = Config::default();
        assert!(!config.apply("levels", "1=4,2=zlib,7-3=1,x=1"));
        assert_eq!(config.levels[1], Target::Zipwire(2));
        assert_eq!(config.levels[2], Target::Zlib);
        assert!(!config.apply("adapt", "maybe"));
        assert!(!config.apply("colour", "1"));
    }

    #[test]
    fn file_lines_apply_in_order_with_comments() {
        let mut config = Config::default();
        let bad = config.apply_file("# libz\nlevels = 1-9=zlib\nadapt = on # why not\nnope\n");
        assert_eq!(bad, vec!["nope".to_owned()]);
        assert!(config.levels.iter().all(|t| *t == Target::Zlib));
        assert!(config.adapt);
    }
}
