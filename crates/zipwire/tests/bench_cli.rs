//! Runs the real `zipwire bench codec` binary on small inputs.

use std::fs;
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

fn zipwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zipwire"))
}

/// A small text-like file under cargo's temp dir for integration tests, named per test.
fn small_file(name: &str) -> PathBuf {
    let mut text = String::new();
    let mut n: u32 = 7;
    while text.len() < 40_000 {
        n = n.wrapping_mul(1_103_515_245).wrapping_add(12_345);
        text.push_str(
            ["gzip ", "proxy ", "stream ", "tunnel ", "window\n"][(n >> 16) as usize % 5],
        );
    }
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    fs::write(&path, text).expect("temp dir is writable");
    path
}

fn run(command: &mut Command) -> Output {
    command.output().expect("the zipwire binary runs")
}

#[test]
fn json_lists_every_engine_with_positive_numbers() {
    let file = small_file("bench-json.txt");
    let output = run(zipwire()
        .args(["bench", "codec", "--json", "--seconds", "1"])
        .arg(&file));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let rows: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("stdout is only JSON");
    let rows = rows.as_array().expect("a JSON array");
    let engines: Vec<(&str, u64)> = rows
        .iter()
        .map(|row| {
            (
                row["engine"].as_str().expect("engine"),
                row["level"].as_u64().expect("level"),
            )
        })
        .collect();
    assert_eq!(
        engines,
        [
            ("zipwire", 1),
            ("zipwire", 2),
            ("zipwire", 3),
            ("zlib-rs", 1),
            ("zlib-rs", 6),
            ("libdeflate", 1),
            ("libdeflate", 6)
        ]
    );
    for row in rows {
        for key in ["mb_per_s", "ratio"] {
            let value = row[key].as_f64().expect("a number");
            assert!(value.is_finite() && value > 0.0, "{key} in {row}");
        }
    }
}

#[test]
fn table_on_builtin_sample_shows_state_size() {
    let output = run(zipwire()
        .args(["bench", "codec", "--rounds", "1", "--levels", "1"])
        .env("ZIPWIRE_CORPUS", "/nonexistent/zipwire-corpus"));
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );

    let table = String::from_utf8(output.stdout).expect("UTF-8 table");
    assert!(table.contains("built-in sample"), "{table}");
    assert!(table.contains("per-stream state: "), "{table}");
    assert!(table.contains("100,000 open streams: "), "{table}");
    assert!(table.contains("vs libdeflate-1"), "{table}");
    let rows = table.lines().filter(|line| {
        let mut cells = line.split_whitespace();
        cells.next() == Some("zipwire")
            && cells
                .next()
                .is_some_and(|level| level.parse::<u8>().is_ok())
    });
    assert_eq!(rows.count(), 1, "only the level asked for: {table}");
}

#[test]
fn unreadable_file_fails_with_one_line_naming_it() {
    let missing = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("no-such-input.txt");
    let output = run(zipwire()
        .args(["bench", "codec", "--rounds", "1"])
        .arg(&missing));
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());

    let stderr = String::from_utf8(output.stderr).expect("UTF-8 error");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(stderr.starts_with("zipwire: "), "{stderr}");
    assert!(stderr.contains(&missing.display().to_string()), "{stderr}");
}

#[test]
fn closed_stdout_exits_quietly() {
    let file = small_file("bench-pipe.txt");
    let mut child = zipwire()
        .args(["bench", "codec", "--rounds", "1"])
        .arg(&file)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the zipwire binary runs");
    // Close the reading end before the report is written, as `| head -0` would.
    drop(child.stdout.take());
    let output = child
        .wait_with_output()
        .expect("the zipwire binary finishes");
    assert!(output.status.success(), "{output:?}");
    assert!(
        output.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn rounds_and_seconds_conflict() {
    let output = run(zipwire().args(["bench", "codec", "--rounds", "2", "--seconds", "1"]));
    assert_eq!(output.status.code(), Some(2));
}
