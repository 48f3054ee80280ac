//! The sandbox the CLI tests run the binary in: a temporary directory, the binary's path, and
//! what a run printed and returned.

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use zipwire_testkit::{generate, DataKind};

pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_zipwire");

/// A temporary directory to run the binary in.
pub(crate) struct Sandbox {
    pub(crate) dir: tempfile::TempDir,
}

/// What a run printed and returned.
pub(crate) struct Run {
    pub(crate) code: i32,
    pub(crate) stdout: Vec<u8>,
    pub(crate) stderr: String,
}

impl Sandbox {
    pub(crate) fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().expect("temp dir"),
        }
    }

    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub(crate) fn write(&self, name: &str, data: &[u8]) -> PathBuf {
        let path = self.path(name);
        fs::write(&path, data).unwrap();
        path
    }

    pub(crate) fn read(&self, name: &str) -> Vec<u8> {
        fs::read(self.path(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
    }

    pub(crate) fn exists(&self, name: &str) -> bool {
        self.path(name).exists()
    }

    /// Every name in the directory, sorted: catches stray temporary files.
    pub(crate) fn names(&self) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(self.dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    pub(crate) fn run(&self, args: &[&str]) -> Run {
        self.run_program(BIN, args, None)
    }

    pub(crate) fn run_with_input(&self, args: &[&str], input: &[u8]) -> Run {
        self.run_program(BIN, args, Some(input))
    }

    pub(crate) fn run_program(&self, program: &str, args: &[&str], input: Option<&[u8]>) -> Run {
        let mut child = Command::new(program)
            .args(args)
            .current_dir(self.dir.path())
            .stdin(if input.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{program}: {e}"));
        let stdin = child.stdin.take();
        let output: Output = std::thread::scope(|s| {
            if let (Some(mut stdin), Some(input)) = (stdin, input) {
                s.spawn(move || {
                    let _ = stdin.write_all(input);
                });
            }
            child.wait_with_output().unwrap()
        });
        Run {
            code: output.status.code().unwrap_or(-1),
            stdout: output.stdout,
            stderr: String::from_utf8_lossy(&output.stderr).into_owned(),
        }
    }
}

pub(crate) fn text(len: usize, seed: u64) -> Vec<u8> {
    generate(DataKind::Text, len, seed)
}

pub(crate) fn gunzip_with(tool: &str, wire: &[u8]) -> Vec<u8> {
    zipwire_testkit::run_with_stdin(tool, &["-d", "-c"], wire).unwrap()
}
