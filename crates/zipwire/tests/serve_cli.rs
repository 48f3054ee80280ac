//! The binary's long-running subcommands, run for real: `zipwire proxy` in front of a tiny
//! origin, and `zipwire demo`.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;
use std::time::Duration;

use zipwire_codec::{decompress, Format, Limits};
use zipwire_testkit::child::Running;
use zipwire_testkit::origin::{self, Connection};

fn zipwire() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zipwire"))
}

/// A page worth compressing.
fn page() -> Vec<u8> {
    (0..2_000)
        .flat_map(|i| format!("<li>row {i} of the zipwire test page</li>\n").into_bytes())
        .collect()
}

/// An origin that answers every request with `page()` as text/html, then closes.
fn origin() -> SocketAddr {
    origin::serve("text/html", &page(), Connection::Close)
}

#[test]
fn proxy_serves_gzip_and_stops_on_sigterm() {
    let upstream = origin();
    let dir = tempfile::tempdir().expect("temp dir");
    // Port 0, the bound address read back from the log: no other test can race for it.
    let proxy = Running::start(
        zipwire().args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &format!("http://{upstream}"),
            // One thread runs on a current-thread runtime (the demo test covers several).
            "--threads",
            "1",
        ]),
        &dir.path().join("proxy.log"),
    );
    let listen = proxy.addr("proxy listening", "local_addr=");

    // Ask for the page on a connection that closes after it (the body comes chunked: HTTP/1.0
    // clients get no compression).
    let mut stream = TcpStream::connect(listen).expect("connect to the proxy");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    stream
        .write_all(
            b"GET /page HTTP/1.1\r\nHost: test\r\nConnection: close\r\nAccept-Encoding: gzip\r\n\r\n",
        )
        .expect("send");
    let mut response = Vec::new();
    stream.read_to_end(&mut response).expect("read response");
    let split = response
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    let head = String::from_utf8_lossy(&response[..split]).to_ascii_lowercase();
    assert!(
        head.starts_with("http/1.0 200") || head.starts_with("http/1.1 200"),
        "{head}"
    );
    assert!(head.contains("content-encoding: gzip"), "{head}");
    assert!(head.contains("transfer-encoding: chunked"), "{head}");
    let gzipped = dechunk(&response[split..]);
    let body = decompress(Format::Gzip, &gzipped, Limits::default()).expect("gzip body");
    assert_eq!(body, page());
    assert!(gzipped.len() < page().len() / 3, "compressed");

    // SIGTERM: graceful shutdown, exit status 0.
    proxy.terminate();
}

#[test]
fn proxy_without_upstream_fails_with_a_clear_message() {
    let output = zipwire()
        .args(["proxy", "--listen", "127.0.0.1:0"])
        .output()
        .expect("run");
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("upstream"), "{stderr}");
}

/// Runs `command` (a `zipwire demo`), checks that it succeeded and found no mismatch, and
/// returns its standard output and error.
fn demo_passes(command: &mut Command) -> (String, String) {
    let output = command.output().expect("run demo");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{stdout}\n{stderr}");
    assert!(stdout.contains(" 0 mismatches"), "{stdout}");
    (stdout, stderr)
}

#[test]
fn demo_runs_every_scenario_and_checks_every_response() {
    let (stdout, stderr) =
        demo_passes(zipwire().args(["demo", "--seconds", "0.3", "--connections", "2"]));
    for row in [
        "compression off",
        "zipwire level 1",
        "zipwire level 2",
        "zipwire level 3",
        "zipwire level 6",
    ] {
        assert!(stdout.contains(row), "missing {row}:\n{stdout}");
    }
    assert!(stdout.contains("zipwire proxy --listen"), "{stdout}");
    // The access log stays out of the demo's output unless asked for.
    assert!(!stderr.contains("access"));
}

/// Client, proxy and origin share the demo's process, four descriptors per connection: under
/// the usual soft limit of 1,024 open files, 300 connections would get 502s from the proxy
/// unless the demo raises the limit as `zipwire proxy` does.
#[test]
fn demo_with_many_connections_fits_the_usual_open_files_limit() {
    demo_passes(
        Command::new("sh")
            .arg("-c")
            .arg("ulimit -S -n 1024 && exec \"$0\" \"$@\"")
            .arg(env!("CARGO_BIN_EXE_zipwire"))
            .args(["demo", "--seconds", "0.3", "--connections", "300"]),
    );
}

/// The payload of a chunked body (RFC 9112 §7.1), its last chunk included.
fn dechunk(mut wire: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = wire
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a chunk size line");
        let size = std::str::from_utf8(&wire[..line]).expect("ascii size");
        let size = usize::from_str_radix(size.split(';').next().unwrap_or(""), 16).expect("hex");
        wire = &wire[line + 2..];
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&wire[..size]);
        wire = &wire[size + 2..];
    }
}
