//! `zipwire tunnel`'s compression flags as users run them: `--level`, `--block-size`,
//! `--max-cpu`, `--max-memory`, and the `-v` report at exit, read from the processes' own
//! output; and what the processes do with their open files limit and with SIGHUP.

mod tunnel_support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use tunnel_support::*;

/// Sends `data` through `addr`, half-closes, reads all back.
fn exchange(addr: &str, data: &[u8]) -> Vec<u8> {
    let stream = TcpStream::connect(addr).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut writer = stream.try_clone().unwrap();
    let data = data.to_vec();
    let sending = std::thread::spawn(move || {
        writer.write_all(&data).unwrap();
        writer.shutdown(Shutdown::Write).unwrap();
    });
    let mut back = Vec::new();
    (&stream).read_to_end(&mut back).unwrap();
    sending.join().unwrap();
    back
}

/// A server forwarding to an echo target and a client, from fresh keys; `server` and
/// `client` are each end's extra flags. Returns them and the client's address.
fn tunnel(dir: &Path, server: &[&str], client: &[&str]) -> (Running, Running, String) {
    pair(dir, &echo_target(), server, client)
}

/// One method's line of the report: (method, blocks, raw bytes, the rest of the line).
type MethodLine = (String, u64, u64, String);

/// The report's lines for `direction` (`outgoing` or `incoming`): its total raw bytes and
/// its method lines.
fn report(log: &str, direction: &str) -> (u64, Vec<MethodLine>) {
    let head = format!("compress {direction}: raw data ");
    let mut lines = log.lines().skip_while(|l| !l.starts_with(&head));
    let first = lines
        .next()
        .unwrap_or_else(|| panic!("no {head:?} in:\n{log}"));
    let raw = first[head.len()..]
        .split(',')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    let methods = lines
        .take_while(|l| l.starts_with("  "))
        .map(|l| {
            let (method, rest) = l.trim().split_once(": ").unwrap();
            let mut words = rest.split_whitespace();
            let blocks = words.next().unwrap().parse().unwrap();
            let raw = words.nth(1).unwrap().parse().unwrap();
            (method.to_owned(), blocks, raw, rest.to_owned())
        })
        .collect();
    (raw, methods)
}

fn text(n: usize) -> Vec<u8> {
    (0..n as u32)
        .map(|i| b"zipwire tunnel, "[i as usize % 16] ^ (i >> 14 & 1) as u8)
        .collect()
}

#[test]
fn level_and_block_size_shape_the_frames_and_v_reports_them_at_exit() {
    let dir = tempfile::tempdir().unwrap();
    let flags = ["--level", "2", "--block-size", "16k"];
    let mut verbose = flags.to_vec();
    verbose.push("-v");
    let (server, client, addr) = tunnel(dir.path(), &flags, &verbose);
    let data = text(4 << 20);
    assert!(exchange(&addr, &data) == data);
    let log = client.terminate();
    for direction in ["outgoing", "incoming"] {
        let (raw, methods) = report(&log, direction);
        assert_eq!(raw, data.len() as u64, "{log}");
        // Level 2 is stateless deflate 2: no other codec, no other level.
        assert!(
            methods.iter().all(|(m, ..)| m == "deflate-2" || m == "raw"),
            "{direction}: {methods:?}"
        );
        let deflate: u64 = methods
            .iter()
            .filter(|(m, ..)| m == "deflate-2")
            .map(|(_, blocks, ..)| blocks)
            .sum();
        assert!(deflate > 0, "{direction}: {methods:?}");
        // Blocks of 16 KB at most: 4 MB takes at least 256 frames.
        let blocks: u64 = methods.iter().map(|(_, blocks, ..)| blocks).sum();
        assert!(blocks >= 256, "{direction}: {blocks} frames: {methods:?}");
    }
    // Without -v the server prints no report at exit.
    let log = server.terminate();
    assert!(!log.contains("compress outgoing"), "{log}");
}

/// Sends `size` bytes of text through a tunnel whose client runs with `client` and `-v`, and
/// checks they came back; returns the client's exit log, its outgoing method lines and
/// how many frames it sent.
fn uploaded(client: &[&str], size: usize) -> (String, Vec<MethodLine>, u64) {
    let dir = tempfile::tempdir().unwrap();
    let mut flags = client.to_vec();
    flags.push("-v");
    let (_server, client, addr) = tunnel(dir.path(), &[], &flags);
    let data = text(size);
    assert!(exchange(&addr, &data) == data);
    let log = client.terminate();
    let (raw, methods) = report(&log, "outgoing");
    assert_eq!(raw, data.len() as u64, "{log}");
    let blocks = methods.iter().map(|(_, blocks, ..)| blocks).sum();
    (log, methods, blocks)
}

/// The count of `reason` in the raw method's line of `methods`.
fn raw_reason(methods: &[MethodLine], reason: &str) -> u64 {
    methods
        .iter()
        .find(|(m, ..)| m == "raw")
        .and_then(|(.., rest)| rest.split(&format!("{reason} ")).nth(1))
        .and_then(|n| n.split([',', ')']).next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn max_memory_too_small_for_the_level_falls_back_to_stateless_deflate_and_the_report_says_so() {
    // zstd's level 9 holds 15.5 MB: a 4 MiB cap has no room for it, and the blocks go
    // through the stateless deflate encoder instead (a few hundred kilobytes).
    let flags = ["--level", "zstd:9", "--max-memory", "4MiB"];
    let (log, methods, blocks) = uploaded(&flags, 2 << 20);
    let deflate: u64 = methods
        .iter()
        .filter(|(m, ..)| m == "deflate-1")
        .map(|(_, blocks, ..)| blocks)
        .sum();
    assert!(
        blocks >= 16 && deflate == blocks && !methods.iter().any(|(m, ..)| m == "zstd-9"),
        "every frame deflate-1, none zstd-9:\n{log}"
    );
    assert!(
        log.contains("bytes held (cap 4194304)"),
        "the report names the cap:\n{log}"
    );
    // Under the one-connection minimum: refused, naming the flag.
    for bad in ["1MiB", "3m", "lots"] {
        let out = Command::new(BIN)
            .args([
                "tunnel",
                "client",
                &format!("--max-memory={bad}"),
                "--listen",
                "127.0.0.1:1",
            ])
            .args(["--server", "127.0.0.1:2", "--token-file", "t"])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad}: {stderr}");
        assert!(stderr.contains("--max-memory"), "{bad}: {stderr}");
    }
}

#[test]
fn max_cpu_sends_traffic_raw_once_the_budget_is_spent() {
    let (log, methods, blocks) = uploaded(&["--max-cpu", "0.01"], 4 << 20);
    let capped = raw_reason(&methods, "cpu-cap");
    assert!(
        capped * 2 >= blocks,
        "{capped} of {blocks} frames raw for the CPU cap:\n{log}"
    );
}

/// The soft and hard limits on open files of process `pid`, from `/proc/PID/limits`.
fn open_files(pid: u32) -> (u64, u64) {
    let limits = std::fs::read_to_string(format!("/proc/{pid}/limits")).unwrap();
    let line = limits
        .lines()
        .find(|l| l.starts_with("Max open files"))
        .unwrap();
    let numbers: Vec<u64> = line
        .split_whitespace()
        .filter_map(|word| word.parse().ok())
        .collect();
    (numbers[0], numbers[1])
}

#[test]
fn both_ends_raise_their_open_files_limit_and_ride_out_sighup() {
    // Started with a soft limit below the hard one (the usual 1,024 against a larger hard
    // limit), each end raises it: a forwarded connection takes four descriptors.
    use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
    let own = getrlimit(Resource::Nofile);
    let lowered = own.maximum.map_or(1024, |hard| hard.min(1024));
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(lowered),
            maximum: own.maximum,
        },
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (server, client, client_addr) = tunnel(dir.path(), &[], &[]);
    for end in [&server, &client] {
        let (soft, hard) = open_files(end.pid());
        assert_eq!(soft, hard, "soft limit left at {soft} (hard {hard})");
    }
    // SIGHUP (a service manager's reload) is logged and ignored: the tunnel goes on.
    for end in [&server, &client] {
        end.signal("HUP");
        end.wait_for("SIGHUP ignored");
    }
    let data = text(300_000);
    assert!(exchange(&client_addr, &data) == data);
    client.terminate();
    server.terminate();
}
