//! Runs the real `zipwire proxy --check` binary on configuration files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn zipwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zipwire"))
}

fn example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../zipwire.toml.example")
}

/// A file under cargo's temp dir for integration tests, named per test.
fn config_file(name: &str, text: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(name);
    fs::write(&path, text).expect("temp dir is writable");
    path
}

fn check(args: &[&str], config: Option<&Path>) -> Output {
    let mut command = zipwire();
    command.args(["proxy", "--check"]).args(args);
    if let Some(config) = config {
        command.arg("--config").arg(config);
    }
    command.output().expect("the zipwire binary runs")
}

fn text(bytes: &[u8]) -> &str {
    std::str::from_utf8(bytes).expect("UTF-8 output")
}

#[test]
fn example_checks_and_prints_the_effective_configuration() {
    let output = check(&[], Some(&example()));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("\nupstreams = [\"http://127.0.0.1:9000\"]\n"),
        "{stdout}"
    );
    assert!(stdout.contains("\nlevel = 2\n"), "{stdout}");
    assert!(stdout.contains("\n[timeouts]\n"), "{stdout}");

    // The printed configuration is a configuration file that prints the same again.
    let printed = config_file("proxy-effective.toml", stdout);
    let again = check(&[], Some(&printed));
    assert!(again.status.success(), "{}", text(&again.stderr));
    assert_eq!(text(&again.stdout), stdout);
}

#[test]
fn flags_override_the_file() {
    let output = check(
        &["--level", "3", "--upstream", "http://10.0.0.1:81"],
        Some(&example()),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("\nlevel = 3\n"), "{stdout}");
    assert!(
        stdout.contains("\nupstreams = [\"http://10.0.0.1:81\"]\n"),
        "{stdout}"
    );
}

#[test]
fn a_bad_value_names_the_file_and_the_key() {
    let path = config_file(
        "proxy-bad-level.toml",
        "upstreams = [\"http://127.0.0.1:9000\"]\n[compression]\nlevel = 12\n",
    );
    let output = check(&[], Some(&path));
    assert_eq!(output.status.code(), Some(1));
    assert!(output.stdout.is_empty());
    let expected = format!(
        "zipwire: {}: compression.level: 12 is not a level 1-9\n",
        path.display()
    );
    assert_eq!(text(&output.stderr), expected);
}

#[test]
fn an_unknown_key_is_an_error() {
    let path = config_file(
        "proxy-typo.toml",
        "upstream = [\"http://127.0.0.1:9000\"]\n",
    );
    let output = check(&[], Some(&path));
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("unknown field `upstream`"),
        "{}",
        text(&output.stderr)
    );
}

#[test]
fn no_upstream_is_an_error() {
    let output = check(&[], None);
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).starts_with("zipwire: upstreams: no upstream given"));
}

#[test]
fn a_missing_file_is_an_error() {
    let output = check(&[], Some(Path::new("/nonexistent/zipwire.toml")));
    assert_eq!(output.status.code(), Some(1));
    assert!(text(&output.stderr).contains("/nonexistent/zipwire.toml: cannot read"));
}

#[test]
fn a_bad_flag_is_a_usage_error() {
    let output = check(&["--upstream", "https://origin/app"], None);
    assert_eq!(output.status.code(), Some(2));
    assert!(text(&output.stderr).contains("has a path"));
}
