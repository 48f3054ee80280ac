//! Runs the real `zipwire proxy --check` binary on configuration files.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use zipwire_testkit::child::{addr_after, Running};
use zipwire_testkit::origin::{self, Connection};

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

// TLS: --check reads the certificates, and the running proxy reloads them on SIGHUP.

/// A self-signed certificate for `name` in `dir/stem.pem` and `dir/stem.key` (mode 0600).
fn certificate(dir: &Path, stem: &str, name: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let cert = dir.join(format!("{stem}.pem"));
    let key = dir.join(format!("{stem}.key"));
    let der = write_certificate(&cert, &key, name);
    (cert, key, der)
}

/// Writes a new certificate for `name` over `cert` and `key`; returns its DER.
fn write_certificate(cert: &Path, key: &Path, name: &str) -> Vec<u8> {
    use std::os::unix::fs::PermissionsExt;
    let generated =
        rcgen::generate_simple_self_signed(vec![name.to_owned()]).expect("generate a certificate");
    fs::write(cert, generated.cert.pem()).expect("write the certificate");
    fs::write(key, generated.signing_key.serialize_pem()).expect("write the key");
    fs::set_permissions(key, fs::Permissions::from_mode(0o600)).expect("chmod");
    generated.cert.der().to_vec()
}

fn tls_dir(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("proxy-tls-{name}"));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn tls_flags<'a>(cert: &'a Path, key: &'a Path) -> Vec<&'a std::ffi::OsStr> {
    let mut flags: Vec<&std::ffi::OsStr> = [
        "--upstream",
        "http://127.0.0.1:9000",
        "--tls-listen",
        "127.0.0.1:8443",
    ]
    .iter()
    .map(std::ffi::OsStr::new)
    .collect();
    flags.extend([
        std::ffi::OsStr::new("--tls-cert"),
        cert.as_os_str(),
        std::ffi::OsStr::new("--tls-key"),
        key.as_os_str(),
    ]);
    flags
}

fn check_tls(cert: &Path, key: &Path) -> Output {
    zipwire()
        .args(["proxy", "--check"])
        .args(tls_flags(cert, key))
        .output()
        .expect("the zipwire binary runs")
}

#[test]
fn check_prints_the_tls_listeners_and_loads_the_certificates() {
    let dir = tls_dir("check");
    let (cert, key, _) = certificate(&dir, "site", "proxy.test");
    let output = check_tls(&cert, &key);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stdout = text(&output.stdout);
    assert!(stdout.contains("\nlisten = []\n"), "{stdout}");
    let expected = format!(
        "\n[tls]\nlisten = [\"127.0.0.1:8443\"]\ncert = \"{}\"\nkey = \"{}\"\nhandshake_timeout = \"10s\"\n# hsts: off\n",
        cert.display(),
        key.display()
    );
    assert!(stdout.contains(&expected), "{stdout}");
}

#[test]
fn check_refuses_missing_unreadable_and_mismatched_certificates() {
    let dir = tls_dir("check-bad");
    let (cert, key, _) = certificate(&dir, "site", "proxy.test");
    let (_, other_key, _) = certificate(&dir, "other", "proxy.test");
    let missing = dir.join("missing.pem");
    let not_pem = config_file("proxy-tls-not-a-key.pem", "not a key\n");
    let encrypted = config_file(
        "proxy-tls-encrypted-key.pem",
        "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIBvTBXBgkqhkiG9w0BBQ0wSjApBgkqhkiG9w0BBQwwHAQI\n-----END ENCRYPTED PRIVATE KEY-----\n",
    );
    let rows: &[(&Path, &Path, String)] = &[
        (
            &missing,
            &key,
            format!(
                "zipwire: {}: cannot read a PEM certificate",
                missing.display()
            ),
        ),
        (
            &cert,
            &not_pem,
            format!(
                "zipwire: {}: cannot read a PEM private key",
                not_pem.display()
            ),
        ),
        (
            &cert,
            &encrypted,
            format!(
                "zipwire: {}: the private key is encrypted, which is not supported",
                encrypted.display()
            ),
        ),
        (
            &cert,
            &other_key,
            format!(
                "zipwire: {}: not the private key of {}",
                other_key.display(),
                cert.display()
            ),
        ),
    ];
    for (cert, key, expected) in rows {
        let output = check_tls(cert, key);
        assert_eq!(output.status.code(), Some(1), "{expected}");
        assert!(output.stdout.is_empty());
        assert!(
            text(&output.stderr).starts_with(expected.as_str()),
            "got {}\nwant {expected}",
            text(&output.stderr)
        );
    }
}

/// Starts `command`, a proxy listening on port 0, its output in the file
/// `proxy-<name>.log` under cargo's temp dir for tests; returns it and its "proxy listening"
/// line ([`listening_addr`] reads the address).
fn start_proxy(command: &mut Command, name: &str) -> (Running, String) {
    let log = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("proxy-{name}.log"));
    let running = Running::start(command, &log);
    let line = running.wait_for_line("proxy listening");
    (running, line)
}

/// An origin answering every request with a small text body, then closing.
fn origin() -> std::net::SocketAddr {
    origin::serve("text/plain", b"hello", Connection::Close)
}

mod tls_client {
    //! A blocking rustls client that accepts any certificate and reports the one shown.

    use std::io::{Read, Write};
    use std::net::{SocketAddr, TcpStream};
    use std::sync::Arc;
    use std::time::Duration;

    use rustls::pki_types::ServerName;
    use rustls::{ClientConfig, ClientConnection};
    use zipwire_testkit::tls::AnyCertificate;

    pub type Stream = rustls::StreamOwned<ClientConnection, TcpStream>;

    pub fn connect(addr: SocketAddr) -> Stream {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .expect("versions")
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
            .with_no_client_auth();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let name = ServerName::try_from("proxy.test").expect("a valid name");
        let connection = ClientConnection::new(Arc::new(config), name).expect("a client");
        let tcp = TcpStream::connect(addr).expect("connect");
        tcp.set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let mut stream = rustls::StreamOwned::new(connection, tcp);
        while stream.conn.is_handshaking() {
            stream
                .conn
                .complete_io(&mut stream.sock)
                .expect("handshake");
        }
        stream
    }

    /// The certificate the server showed.
    pub fn shown(stream: &Stream) -> Vec<u8> {
        stream.conn.peer_certificates().expect("a certificate")[0].to_vec()
    }

    /// One GET on a kept-alive connection, TLS or not; the body.
    pub fn get<S: Read + Write>(stream: &mut S) -> Vec<u8> {
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: proxy.test\r\n\r\n")
            .expect("send");
        let mut head = Vec::new();
        let mut byte = [0u8; 1];
        while !head.ends_with(b"\r\n\r\n") {
            stream.read_exact(&mut byte).expect("a response head");
            head.push(byte[0]);
        }
        let head = String::from_utf8_lossy(&head).to_ascii_lowercase();
        assert!(head.starts_with("http/1.1 200"), "{head}");
        let length: usize = head
            .lines()
            .find_map(|line| line.strip_prefix("content-length: "))
            .expect("a content-length")
            .trim()
            .parse()
            .expect("a length");
        let mut body = vec![0; length];
        stream.read_exact(&mut body).expect("the body");
        body
    }
}

/// The address in a "proxy listening" line.
fn listening_addr(line: &str) -> std::net::SocketAddr {
    addr_after(line, "local_addr=").expect("an address in the log line")
}

/// Also SIGUSR1, which must not end the proxy at once (HAProxy's soft stop, the tunnel's
/// report, nginx's log reopening: an operator may well send it).
#[test]
fn sighup_reloads_the_certificates_and_keeps_them_when_the_new_ones_are_broken() {
    let dir = tls_dir("sighup");
    let (cert, key, first) = certificate(&dir, "site", "proxy.test");
    let upstream = origin();
    let mut command = zipwire();
    command
        .args([
            "proxy",
            "--threads",
            "1",
            "--upstream",
            &format!("http://{upstream}"),
        ])
        .args(["--tls-listen", "127.0.0.1:0", "--tls-cert"])
        .arg(&cert)
        .arg("--tls-key")
        .arg(&key);
    let (proxy, line) = start_proxy(&mut command, "sighup");
    assert!(line.contains("tls=true"), "{line}");
    let addr = listening_addr(&line);

    let mut open = tls_client::connect(addr);
    assert!(tls_client::shown(&open) == first);
    assert_eq!(tls_client::get(&mut open), b"hello");

    let renewed = write_certificate(&cert, &key, "proxy.test");
    proxy.signal("HUP");
    proxy.wait_for("tls certificates reloaded");
    let mut fresh = tls_client::connect(addr);
    assert!(
        tls_client::shown(&fresh) == renewed,
        "new connections see the new certificate"
    );
    assert_eq!(tls_client::get(&mut fresh), b"hello");
    assert_eq!(
        tls_client::get(&mut open),
        b"hello",
        "the open connection goes on"
    );

    fs::write(&cert, "-----BEGIN CERTIFICATE-----\nbroken\n").expect("break the certificate");
    proxy.signal("HUP");
    let warning = proxy.wait_for_line("tls certificates not reloaded");
    assert!(warning.contains("WARN"), "{warning}");
    assert!(warning.contains(&*cert.display().to_string()), "{warning}");
    let later = tls_client::connect(addr);
    assert!(
        tls_client::shown(&later) == renewed,
        "the certificate in use is kept"
    );
    assert_eq!(tls_client::get(&mut open), b"hello");
    proxy.signal("USR1");
    proxy.wait_for("SIGUSR1 ignored");
    assert_eq!(tls_client::get(&mut open), b"hello");
    // Still running after all three signals.
    assert!(proxy.try_wait().is_none());
}

/// The anonymous resident memory of process `pid` (heap, stacks and arenas: what the
/// process allocated, not the pages of its binary and libraries it happened to touch), in
/// bytes.
fn rss_anon(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("RssAnon:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("an RssAnon line");
    kib * 1024
}

/// The descriptors process `pid` has open.
fn descriptors(pid: u32) -> u64 {
    fs::read_dir(format!("/proc/{pid}/fd"))
        .expect("/proc fd")
        .count() as u64
}

/// A gauge or counter from the proxy's admin listener at `admin` (its `/metrics` text).
fn metric(admin: std::net::SocketAddr, name: &str) -> u64 {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(admin).expect("connect to the admin listener");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("ask for /metrics");
    let mut page = String::new();
    stream.read_to_string(&mut page).expect("read /metrics");
    page.lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|value| value.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {page}"))
}

/// The resident set of process `pid`, in bytes.
fn rss(pid: u32) -> u64 {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).expect("/proc status");
    let kib: u64 = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("a VmRSS line");
    kib * 1024
}

#[test]
fn stalled_and_garbage_handshakes_keep_memory_bounded() {
    use std::io::Write;
    // Three times the connection limit; more wait on the kernel's accept queue, which here
    // takes about 200 before new connects wait for the handshake timeout to free slots.
    const CLIENTS: usize = 192;
    let dir = tls_dir("memory");
    let (cert, key, _) = certificate(&dir, "site", "proxy.test");
    let upstream = origin();
    const SLOTS: u64 = 64;
    let config = config_file(
        "proxy-tls-memory.toml",
        &format!(
            "upstreams = [\"http://{upstream}\"]\nthreads = 1\nadmin = \"127.0.0.1:0\"\n\
             [limits]\nmax_connections = {SLOTS}\n\
             [tls]\nlisten = [\"127.0.0.1:0\"]\ncert = \"{}\"\nkey = \"{}\"\nhandshake_timeout = \"2s\"\n",
            cert.display(),
            key.display()
        ),
    );
    let (running, line) = start_proxy(zipwire().args(["proxy", "--config"]).arg(&config), "memory");
    let addr = listening_addr(&line);
    let admin = running.addr("admin listening", "addr=");
    // Warm up: one full handshake and request, so the baseline holds what one client costs.
    let mut warm = tls_client::connect(addr);
    assert_eq!(tls_client::get(&mut warm), b"hello");
    drop(warm);
    let active = "zipwire_proxy_connections_active";
    wait_until(
        || metric(admin, active) == 0,
        "the warm-up connection to close",
    );
    let pid = running.pid();
    let (before, sockets) = (rss_anon(pid), descriptors(pid));

    // Clients that announce a full 16 KiB record and send a sliver of it, garbage, or
    // nothing, and hold their connections open.
    let mut held = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let Ok(mut stream) = std::net::TcpStream::connect(addr) else {
            break;
        };
        let _ = match i % 3 {
            // Half of a 16 KiB handshake record, which the proxy must buffer to parse.
            0 => stream.write_all(&[&[0x16, 0x03, 0x01, 0x40, 0x00][..], &[0x01; 8192]].concat()),
            1 => stream.write_all(&[0xa5; 512]),
            _ => Ok(()),
        };
        held.push(stream);
    }
    assert!(
        held.len() >= CLIENTS * 9 / 10,
        "only {} of {CLIENTS} clients connected: the bound below would prove nothing",
        held.len()
    );
    // Every slot is taken by a stalled client (an accepted socket each, in handshake: not
    // yet an active connection), each holding what it sent.
    wait_until(
        // Less one: the warm-up connection's socket may have closed after `sockets`.
        || descriptors(pid) + 1 >= sockets + SLOTS,
        &format!("the slots to fill ({sockets} descriptors before)"),
    );
    let during = rss_anon(pid);
    let grown = during.saturating_sub(before);
    eprintln!(
        "anonymous RSS {} KiB before, {} KiB with {} bad clients: {} bytes a slot",
        before >> 10,
        during >> 10,
        held.len(),
        grown / SLOTS
    );
    // 64 slots, a third of them with 8 KiB of a record buffered: measured 1.27 MiB, about
    // 20 KB a slot. A proxy that took three times the slots measured 1.9 MiB before its
    // other clients were even all accepted.
    assert!(
        grown < 1_600 << 10,
        "{} clients grew the proxy by {} KiB",
        held.len(),
        grown >> 10
    );
    assert!(
        descriptors(pid) <= sockets + SLOTS,
        "more clients accepted than slots"
    );
    // Served again once the stalled ones are cut (64 at a time, each after 2 s at most).
    drop(held);
    let mut later = tls_client::connect(addr);
    assert_eq!(tls_client::get(&mut later), b"hello");
}

/// Polls `done` every 10 ms until it holds, failing after 20 s with what was awaited.
fn wait_until(mut done: impl FnMut() -> bool, what: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !done() {
        assert!(
            std::time::Instant::now() < deadline,
            "waited 20 s for {what}"
        );
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

/// An origin that keeps its connections alive, answering every request with a small body.
fn keep_alive_origin() -> std::net::SocketAddr {
    origin::serve("text/plain", b"hello", Connection::KeepAlive)
}

#[test]
fn an_idle_keep_alive_connection_holds_no_buffers() {
    // hyper as patched in vendor/hyper gives back a connection's 8 KB read buffer, its 8 KB
    // write buffer and its last header map while it waits. Here an idle connection measured
    // 16.5 KB with crates.io's hyper 1.12 and 4.8 KB patched (`MODE=idle bench/proxy.sh`,
    // with the bench page's headers: 22.5 KB and 4.8 KB).
    const CLIENTS: usize = 400;
    const PER_CLIENT_MAX: u64 = 12 * 1024;
    let upstream = keep_alive_origin();
    let mut command = zipwire();
    command
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--threads",
            "1",
            "--no-access-log",
        ])
        .arg("--upstream")
        .arg(format!("http://{upstream}"));
    let (running, line) = start_proxy(&mut command, "idle");
    let addr = listening_addr(&line);
    // The first client's request warms up the pools and the upstream connection.
    let mut first = std::net::TcpStream::connect(addr).expect("connect");
    assert_eq!(tls_client::get(&mut first), b"hello");
    std::thread::sleep(std::time::Duration::from_millis(200));
    let before = rss(running.pid());
    let mut held = vec![first];
    for _ in 1..CLIENTS {
        let mut stream = std::net::TcpStream::connect(addr).expect("connect");
        assert_eq!(tls_client::get(&mut stream), b"hello");
        held.push(stream);
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let after = rss(running.pid());
    let per_client = after.saturating_sub(before) / (CLIENTS as u64 - 1);
    eprintln!("{per_client} bytes per idle connection ({CLIENTS} clients)");
    assert!(
        per_client < PER_CLIENT_MAX,
        "an idle keep-alive connection costs {per_client} bytes (at most {PER_CLIENT_MAX})"
    );
    // Every held connection is still served.
    for stream in held.iter_mut().step_by(50) {
        assert_eq!(tls_client::get(stream), b"hello");
    }
}

/// Out of descriptors, accept fails at every pause (50 ms): a warning for each failure would
/// be about 20 lines a second, so there is one per 10 s, with a count.
#[test]
fn out_of_descriptors_the_accept_loop_warns_once_per_interval() {
    let upstream = origin();
    // A hard limit of 64 descriptors: the proxy cannot raise past it.
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg("ulimit -n 64 && exec \"$0\" proxy --threads 1 --listen 127.0.0.1:0 --upstream \"$1\"")
        .arg(env!("CARGO_BIN_EXE_zipwire"))
        .arg(format!("http://{upstream}"));
    let (proxy, line) = start_proxy(&mut command, "descriptors");
    let addr = listening_addr(&line);
    let held: Vec<std::net::TcpStream> = (0..100)
        .filter_map(|_| std::net::TcpStream::connect(addr).ok())
        .collect();
    let first = proxy.wait_for_line("accept failed");
    assert!(first.contains("failed_since_last_warning=0"), "{first}");
    // Two seconds of failing accepts: about 40 attempts, at most one more warning.
    std::thread::sleep(std::time::Duration::from_secs(2));
    let log = proxy.log();
    let warnings = log.matches("accept failed").count() - 1;
    assert!(warnings <= 1, "{warnings} more warnings in 2 s:\n{log}");
    assert!(proxy.try_wait().is_none(), "the proxy exited");
    drop(held);
}
