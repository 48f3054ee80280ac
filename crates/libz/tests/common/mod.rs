//! Helpers of the libz tests: the built library, C programs compiled against zlib.h, and a
//! directory where the library answers to `libz.so.1`.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The library as docs/libz.md installs it: `crates/libz/link.sh` run over the static library
/// cargo built beside this test binary (with the cdylib), once per test process.
pub fn library() -> PathBuf {
    static LINKED: OnceLock<PathBuf> = OnceLock::new();
    LINKED
        .get_or_init(|| {
            let dir = built_dir("libzipwire_z.a");
            let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("link.sh");
            let out = Command::new("sh")
                .arg(&script)
                .arg(&dir)
                .output()
                .expect("run link.sh");
            assert!(
                out.status.success(),
                "link.sh: {}",
                String::from_utf8_lossy(&out.stderr)
            );
            dir.join("libzipwire_z.versioned.so")
        })
        .clone()
}

/// The cdylib as cargo links it: rustc's own version script, so without zlib's symbol versions.
pub fn cargo_cdylib() -> PathBuf {
    built_dir("libzipwire_z.so").join("libzipwire_z.so")
}

/// The directory beside this test binary where cargo put `name`.
fn built_dir(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test binary has a path");
    let deps = exe.parent().expect("the test binary lies in a directory");
    for dir in [deps, deps.parent().unwrap_or(deps)] {
        if dir.join(name).is_file() {
            return dir.to_path_buf();
        }
    }
    panic!("{name} not found beside {}", exe.display());
}

/// A directory holding `libz.so.1` → the library, for `-Wl,-rpath` or `LD_LIBRARY_PATH`.
pub fn libz_dir(tmp: &Path) -> PathBuf {
    let dir = tmp.join("libz");
    std::fs::create_dir_all(&dir).expect("create libz dir");
    let link = dir.join("libz.so.1");
    let _ = std::fs::remove_file(&link);
    std::os::unix::fs::symlink(library(), &link).expect("symlink libz.so.1");
    dir
}

/// Which zlib a C program links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    System,
    Zipwire,
}

/// Compiles `tests/c/<source>` with the system `cc` against zlib.h, linked to `link`.
pub fn build_c(source: &str, tmp: &Path, link: Link) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(source);
    let exe = tmp.join(format!(
        "{}-{}",
        source.trim_end_matches(".c"),
        if link == Link::System {
            "system"
        } else {
            "zipwire"
        }
    ));
    let mut cmd = Command::new("cc");
    cmd.arg("-O1").arg("-Wall").arg("-o").arg(&exe).arg(&src);
    match link {
        Link::System => {
            cmd.arg("-lz");
        }
        Link::Zipwire => {
            let dir = libz_dir(tmp);
            cmd.arg(format!("-L{}", dir.display()))
                .arg("-l:libz.so.1")
                .arg(format!("-Wl,-rpath,{}", dir.display()));
        }
    }
    cmd.arg("-ldl").arg("-pthread");
    let out = cmd.output().expect("run cc");
    assert!(
        out.status.success(),
        "cc {source}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    exe
}

/// Whether the system compiler and zlib.h are here (fails under CI=true when not).
pub fn have_cc_and_zlib_h() -> bool {
    if !Path::new("/usr/include/zlib.h").is_file() {
        assert!(
            !zipwire_testkit::is_ci(),
            "zlib.h missing (zlib1g-dev) under CI=true"
        );
        eprintln!("note: /usr/include/zlib.h missing (zlib1g-dev): test skipped");
        return false;
    }
    zipwire_testkit::require_tool("cc")
}

/// Runs a command, asserting success, and returns its stdout.
pub fn run_ok(cmd: &mut Command) -> String {
    let out: Output = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}
