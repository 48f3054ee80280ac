//! zlib's contract, checked by one C program against the system zlib and against this
//! library: random settings, `avail_in`/`avail_out` splits and flush modes over corpus files,
//! every stream inflated by the system zlib.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

use common::Link;

/// Corpus files the program deflates: text, web and incompressible data, 192 KB at most each.
fn corpus() -> Vec<PathBuf> {
    let mut files = Vec::new();
    for dir in ["canterbury", "web", "incompressible"] {
        files.extend(zipwire_testkit::corpus_files(dir).into_iter().take(12));
    }
    files
}

fn compress_and_verify(
    exe: &Path,
    verifier: &Path,
    seed: u64,
    out: &Path,
    files: &[PathBuf],
) -> String {
    std::fs::create_dir_all(out).expect("out dir");
    let report = common::run_ok(
        Command::new(exe)
            .arg("compress")
            .arg(seed.to_string())
            .arg(out)
            .args(files),
    );
    assert!(!report.contains("FAIL"), "{}: {report}", exe.display());
    let verified = common::run_ok(Command::new(verifier).arg("verify").arg(out));
    assert!(verified.contains("verified"), "{verified}");
    report
}

#[test]
fn system_zlib_and_zipwire_both_keep_zlibs_contract() {
    if !common::have_cc_and_zlib_h() {
        return;
    }
    let files = corpus();
    if files.is_empty() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let system = common::build_c("conformance.c", tmp.path(), Link::System);
    let ours = common::build_c("conformance.c", tmp.path(), Link::Zipwire);
    let which = common::run_ok(Command::new(&ours).arg("which"));
    assert!(
        which.contains("libz.so.1") && which.contains(tmp.path().to_str().unwrap_or("?")),
        "the zipwire build must take deflate() from the library: {which}"
    );
    for seed in 1..=2 {
        let dir = tmp.path().join(format!("system-{seed}"));
        compress_and_verify(&system, &system, seed, &dir, &files);
        let dir = tmp.path().join(format!("zipwire-{seed}"));
        let report = compress_and_verify(&ours, &system, seed, &dir, &files);
        // Streams copied mid-way (deflateCopy), the original and the copy both verified: at
        // windowBits 15 (the windowed encoder) among them.
        let windowed = report.lines().any(|line| {
            let words: Vec<&str> = line.split(' ').collect();
            matches!(words[..], ["copied", _, "wb", "15" | "31" | "-15", "level", level]
                if matches!(level, "-1" | "1" | "2" | "3" | "4" | "5" | "6"))
        });
        assert!(windowed, "no windowed stream copied: {report}");
    }
}

/// The adaptive option stores what samples as incompressible and still keeps the contract.
#[test]
fn adaptive_option_keeps_the_contract() {
    if !common::have_cc_and_zlib_h() {
        return;
    }
    let files = corpus();
    if files.is_empty() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let system = common::build_c("conformance.c", tmp.path(), Link::System);
    let ours = common::build_c("conformance.c", tmp.path(), Link::Zipwire);
    let out = tmp.path().join("adapt");
    std::fs::create_dir_all(&out).expect("out dir");
    let report = common::run_ok(
        Command::new(&ours)
            .env("ZIPWIRE_ZLIB_ADAPT", "1")
            .arg("compress")
            .arg("7")
            .arg(&out)
            .args(&files),
    );
    assert!(!report.contains("FAIL"), "{report}");
    common::run_ok(Command::new(&system).arg("verify").arg(&out));
}

/// A program on the system zlib that opens the library privately (`dlopen` with
/// `RTLD_LOCAL`, as a plugin or ctypes does): the library's calls among its own functions stay
/// inside it (`link.sh` binds them with `-Bsymbolic-functions`); bound through the symbol
/// table they reached the system's `deflateInit2_`, whose stream the library's `deflate`
/// refused.
#[test]
fn a_program_on_the_system_zlib_can_open_the_library_privately() {
    if !common::have_cc_and_zlib_h() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let program = common::build_c("private_load.c", tmp.path(), Link::System);
    let out = Command::new(&program)
        .arg(common::library())
        .arg(tmp.path().join("printed.gz"))
        .output()
        .expect("run private_load");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.trim() == "ok",
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Streams finished in an `atexit` handler and in a thread-key destructor, after the thread's
/// storage is gone (a logger flushing at exit, a per-thread stream): the system zlib finishes
/// them, and so must the library. Its per-thread working memory was read with `with`, which
/// panicked there: `deflate` failed and the stream was cut short.
#[test]
fn streams_finished_at_exit_and_in_thread_destructors_are_whole() {
    if !common::have_cc_and_zlib_h() || !zipwire_testkit::require_tool("gzip") {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let input: Vec<u8> = (0..100_000usize)
        .map(|i| b"hello world "[i % 12] + (i / 5000) as u8)
        .collect();
    for link in [Link::System, Link::Zipwire] {
        let program = common::build_c("at_exit.c", tmp.path(), link);
        let paths = [
            tmp.path().join(format!("{link:?}-at-exit.gz")),
            tmp.path().join(format!("{link:?}-key.gz")),
        ];
        let out = Command::new(&program)
            .args(&paths)
            .output()
            .expect("run at_exit");
        assert!(
            out.status.success() && out.stderr.is_empty(),
            "{link:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        for path in &paths {
            let plain = Command::new("gzip")
                .arg("-dc")
                .arg(path)
                .output()
                .expect("run gzip");
            assert!(plain.status.success(), "{link:?} {}", path.display());
            assert!(plain.stdout == input, "{link:?} {}", path.display());
        }
    }
}
