//! Test support for zipwire: the shared corpus, proptest data strategies, and external tools.
//!
//! # Brief overview
//!
//! - Corpus: [`corpus_dir`] (from `$ZIPWIRE_CORPUS`, else `../shared/corpus` beside the
//!   workspace), [`corpus_subdirs`] and [`corpus_files`].
//! - Data: [`data`], [`data_up_to`] and [`data_of`] generate random, repetitive, text-like, binary-like and
//!   mixed inputs; [`generate`] makes the same kinds deterministically for table tests;
//!   [`splits`] cuts an input into call lengths and [`split_input`] applies them.
//! - Tools: [`require_tool`] and [`run_with_stdin`] run `gzip`, `pigz`, `python3` and friends.
//! - Failures: [`save_failure`] writes a failing input to a file and prints its path.
//! - Memory: [`alloc::Counting`] counts a test binary's allocations, [`alloc::alone`] runs a
//!   test by itself in a child process.
//! - TLS: [`tls::AnyCertificate`] lets a test client accept a server's throw-away certificate.
//! - Processes: [`child::Running`] runs a program under test with its output in a log file,
//!   reads back the address it bound on port 0, signals it and kills it on drop.
//! - Origins: [`origin::serve`] answers every request with one body, for a proxy under test.
//!
//! # Missing corpus or tool
//!
//! Under `CI=true` a missing corpus or tool is a failure (a panic), never a skip: a CI run that
//! silently tested nothing is worse than a red one. Elsewhere the helpers print a note to stderr
//! and report "nothing there", so a fresh checkout without the corpus still runs the rest.
//!
//! This crate depends on no zipwire crate, so any of them can use it without a cycle.
//!
//! # Example
//!
//! ```
//! use zipwire_testkit::{generate, split_input, DataKind};
//!
//! let input = generate(DataKind::Text, 1000, 7);
//! let calls = split_input(&input, &[10, 0, 990]);
//! assert_eq!(calls.len(), 3);
//! assert_eq!(calls.concat(), input);
//! ```

#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod alloc;
pub mod child;
mod data;
pub mod origin;
pub mod tls;

pub use data::{
    data, data_and_splits, data_of, data_up_to, generate, kind, length, split_input, splits, Data,
    DataKind, MAX_DATA_LEN,
};

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{SystemTime, UNIX_EPOCH};

/// Environment variable naming the corpus directory.
pub const CORPUS_ENV: &str = "ZIPWIRE_CORPUS";

/// Whether this run is a CI run (`CI=true`), where missing corpus files and tools fail.
pub fn is_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true")
}

/// The workspace root (the directory holding the virtual manifest).
pub fn workspace_root() -> PathBuf {
    tidy(Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(".."))
}

/// The corpus directory: `$ZIPWIRE_CORPUS`, or `<workspace root>/../shared/corpus`.
pub fn corpus_dir() -> PathBuf {
    match std::env::var_os(CORPUS_ENV) {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => tidy(workspace_root().join("..").join("shared").join("corpus")),
    }
}

/// The corpus subdirectories (`canterbury`, `web`, …), sorted by name.
///
/// # Panics
///
/// Under `CI=true`, when the corpus directory is missing or unreadable; elsewhere that prints a
/// note and returns an empty list.
pub fn corpus_subdirs() -> Vec<String> {
    let dir = corpus_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(err) => {
            missing(&format!(
                "corpus directory {} ({err}); set {CORPUS_ENV}",
                dir.display()
            ));
            return Vec::new();
        }
    };
    let mut names: Vec<String> = entries
        .filter_map(Result::ok)
        .filter(|e| e.path().is_dir())
        .filter_map(|e| e.file_name().into_string().ok())
        .collect();
    names.sort();
    if names.is_empty() {
        missing(&format!("corpus subdirectories in {}", dir.display()));
    }
    names
}

/// Every regular file under `corpus_dir()/subdir` (recursively), sorted by path.
///
/// # Panics
///
/// Under `CI=true`, when the directory is missing or holds no file; elsewhere that prints a note
/// and returns an empty list, so the calling test checks nothing and passes.
pub fn corpus_files(subdir: &str) -> Vec<PathBuf> {
    let dir = corpus_dir().join(subdir);
    let mut files = Vec::new();
    if let Err(err) = collect_files(&dir, &mut files) {
        missing(&format!(
            "corpus directory {} ({err}); set {CORPUS_ENV}",
            dir.display()
        ));
        return Vec::new();
    }
    files.sort();
    if files.is_empty() {
        missing(&format!("corpus files in {}", dir.display()));
    }
    files
}

/// Reads a corpus file, at most `max` bytes of it.
///
/// # Panics
///
/// When the file cannot be read: [`corpus_files`] listed it, so that is a broken corpus.
pub fn read_corpus_file(path: &Path, max: usize) -> Vec<u8> {
    use std::io::Read;
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut buf = Vec::new();
    file.take(max as u64)
        .read_to_end(&mut buf)
        .unwrap_or_else(|e| panic!("read {}: {e}", path.display()));
    buf
}

/// Whether the external program `name` is on `PATH`.
///
/// # Panics
///
/// Under `CI=true` when it is not; elsewhere that prints a note and returns false so the caller
/// can skip.
pub fn require_tool(name: &str) -> bool {
    if find_on_path(name).is_some() {
        return true;
    }
    missing(&format!("tool `{name}` on PATH"));
    false
}

/// Runs `cmd args…` with `input` on its stdin and returns its stdout.
///
/// # Errors
///
/// A description (with stderr) if the program cannot start or exits unsuccessfully.
pub fn run_with_stdin(cmd: &str, args: &[&str], input: &[u8]) -> Result<Vec<u8>, String> {
    let describe = || format!("{cmd} {}", args.join(" "));
    let mut child = Command::new(cmd)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("{}: cannot start: {e}", describe()))?;
    let mut stdin = child
        .stdin
        .take()
        .ok_or_else(|| format!("{}: no stdin pipe", describe()))?;
    // Write from another thread: a child that fills its stdout pipe before reading all of its
    // stdin would otherwise deadlock against us.
    let output = std::thread::scope(|s| {
        let writer = s.spawn(move || stdin.write_all(input));
        let output = child.wait_with_output();
        let written = writer
            .join()
            .map_err(|_| "stdin writer panicked".to_string());
        (output, written)
    });
    let (output, written) = output;
    let output = output.map_err(|e| format!("{}: {e}", describe()))?;
    if !output.status.success() {
        return Err(format!(
            "{}: {}: {}",
            describe(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    // A broken pipe on stdin only matters if the program otherwise succeeded without reading
    // everything, which would be a tool that ignores input: report it.
    written?.map_err(|e| format!("{}: writing stdin: {e}", describe()))?;
    Ok(output.stdout)
}

/// Writes a failing input to a file in the temp directory, prints its path to stderr and
/// returns it, so a failure found by a large or random input can be replayed.
pub fn save_failure(label: &str, input: &[u8]) -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let safe: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let path = std::env::temp_dir().join(format!(
        "zipwire-failure-{safe}-{}-{nanos}.bin",
        std::process::id()
    ));
    match std::fs::write(&path, input) {
        Ok(()) => eprintln!(
            "zipwire-testkit: failing input ({label}, {} bytes) saved to {}",
            input.len(),
            path.display()
        ),
        Err(e) => eprintln!(
            "zipwire-testkit: could not save failing input ({label}) to {}: {e}",
            path.display()
        ),
    }
    path
}

fn missing(what: &str) {
    if is_ci() {
        panic!("missing {what}: CI=true, so this fails instead of skipping");
    }
    eprintln!("zipwire-testkit: note: missing {what}; skipping (this would fail under CI=true)");
}

/// Resolves `..` (and links) where the path exists, so messages show a plain path.
fn tidy(path: PathBuf) -> PathBuf {
    std::fs::canonicalize(&path).unwrap_or(path)
}

fn collect_files(dir: &Path, files: &mut Vec<PathBuf>) -> std::io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            collect_files(&path, files)?;
        } else if path.is_file() {
            files.push(path);
        }
    }
    Ok(())
}

fn find_on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| is_executable(candidate))
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_with_stdin_returns_stdout_and_reports_failure() {
        if !require_tool("cat") {
            return;
        }
        let big = generate(DataKind::Random, 1 << 20, 5);
        assert_eq!(run_with_stdin("cat", &[], &big).as_deref(), Ok(&big[..]));
        assert!(run_with_stdin("false", &[], b"").is_err());
        assert!(run_with_stdin("zipwire-no-such-tool", &[], b"").is_err());
    }

    #[test]
    fn corpus_dir_honours_the_environment_default() {
        if std::env::var_os(CORPUS_ENV).is_none() {
            assert!(corpus_dir().ends_with("shared/corpus"));
        }
    }
}
