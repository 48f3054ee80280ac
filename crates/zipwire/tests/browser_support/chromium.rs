//! Headless Chromium (Debian's `chromium`) run as a command, for `--screenshot`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use zipwire_testkit::child::Running;

/// Longest a Chromium run may take before the test fails (a loaded 2-core machine included).
const RUN_LIMIT: Duration = Duration::from_secs(60);
/// A Chromium binary.
pub struct Chromium {
    path: PathBuf,
}

/// Chromium, or `None` with a printed note where there is none; panics where `CI=true`,
/// since CI installs it (.ci/run) and a missing browser must not pass as a skip.
pub fn require() -> Option<Chromium> {
    let candidates = ["chromium", "chromium-browser", "google-chrome"];
    let found = std::env::var_os("ZIPWIRE_CHROMIUM")
        .map(PathBuf::from)
        .into_iter()
        .chain(candidates.iter().filter_map(|name| find_on_path(name)))
        .find(|path| path.is_file());
    match found {
        Some(path) => Some(Chromium { path }),
        None if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("chromium is missing and CI=true: install it (apt-get install chromium)")
        }
        None => {
            eprintln!(
                "note: skipping the browser test: no chromium on PATH (apt-get install \
                 chromium, or set ZIPWIRE_CHROMIUM)"
            );
            None
        }
    }
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// What a Chromium run printed.
pub struct Output {
    /// Standard output and error together, for failure messages.
    pub log: String,
}

impl Chromium {
    /// The flags of every run (see [`Chromium::run`]).
    pub const FLAGS: [&'static str; 11] = [
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--no-proxy-server",
        "--ignore-certificate-errors",
    ];

    /// The binary.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Writes a PNG screenshot of the page to `png`.
    pub fn screenshot(&self, url: &str, png: &Path) -> Output {
        let target = format!("--screenshot={}", png.display());
        self.run(&[&target, "--window-size=640,480", "--hide-scrollbars", url])
    }

    /// Runs Chromium headless with a fresh profile. The flags: no sandbox (CI runs as root),
    /// no GPU, no QUIC (the proxy speaks TCP only), and none of the background connections
    /// that a closed network refuses; the certificate is the test's own self-signed one.
    fn run(&self, args: &[&str]) -> Output {
        let dir = tempfile::tempdir().expect("a temporary directory");
        let child = Running::start(
            Command::new(&self.path)
                .args(Self::FLAGS)
                .arg(format!(
                    "--user-data-dir={}",
                    dir.path().join("profile").display()
                ))
                .args(args),
            &dir.path().join("chromium.log"),
        );
        let status = child.exits_within(RUN_LIMIT);
        let output = Output { log: child.log() };
        assert!(
            status.success(),
            "chromium failed ({status}); its output:\n{}",
            output.log
        );
        output
    }
}
