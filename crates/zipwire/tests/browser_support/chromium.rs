//! Headless Chromium (Debian's `chromium`) run as a command, for `--screenshot`.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    /// Standard output.
    pub stdout: String,
    /// Standard error, for failure messages.
    pub stderr: String,
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
        let profile = tempfile::tempdir().expect("a temporary profile directory");
        let mut child = Command::new(&self.path)
            .args(Self::FLAGS)
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", self.path.display()));
        let mut stdout = child.stdout.take().expect("piped stdout");
        let mut stderr = child.stderr.take().expect("piped stderr");
        let out = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stdout.read_to_string(&mut text);
            text
        });
        let err = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        let started = Instant::now();
        let status = loop {
            if let Some(status) = child.try_wait().expect("wait for chromium") {
                break status;
            }
            if started.elapsed() > RUN_LIMIT {
                let _ = child.kill();
                let _ = child.wait();
                let stderr = err.join().unwrap_or_default();
                panic!("chromium ran past {RUN_LIMIT:?}; its stderr:\n{stderr}");
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        let output = Output {
            stdout: out.join().unwrap_or_default(),
            stderr: err.join().unwrap_or_default(),
        };
        assert!(
            status.success(),
            "chromium failed ({status}); its stderr:\n{}",
            output.stderr
        );
        output
    }
}
