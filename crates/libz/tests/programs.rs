//! Real programs with the library preloaded, the proof that it serves them: Debian's
//! nginx gzip module, OpenSSH's `ssh -C`/`scp -C` (one end preloaded, then both), and
//! Python's zlib module, pigz. Each skips with a note where its Debian package is missing and
//! fails under CI=true.

mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use zipwire_testkit::child::Running;

/// A program that must be installed (fails under CI=true when it is not).
fn have(path: &str, package: &str) -> bool {
    if Path::new(path).exists() {
        return true;
    }
    assert!(
        !zipwire_testkit::is_ci(),
        "{path} missing under CI=true: install the Debian package {package}"
    );
    eprintln!("note: {path} missing (Debian package {package}): test skipped");
    false
}

/// A port free on 127.0.0.1 a moment ago: only a candidate, see [`start_on_free_ports`].
fn candidate_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
    listener.local_addr().expect("local addr").port()
}

/// Starts the server `command` makes for `count` ports, its output in `out` and its own log
/// in `log`, and waits until it listens on all of them; returns it and the ports.
///
/// nginx and sshd take their ports from a configuration file and cannot bind port 0 and say
/// where, so the ports are picked here, free a moment before. That is race-free all the
/// same: the server counts as started only once it holds the listening sockets itself
/// ([`Running::owns_listener`]), never because something accepts on the port, and a port
/// another process took in between makes the server fail to bind and exit, which starts it
/// again on other ports. Once bound, a port is the server's alone.
fn start_on_free_ports(
    count: usize,
    out: &Path,
    log: &Path,
    command: impl Fn(&[u16]) -> Command,
) -> (Running, Vec<u16>) {
    const ATTEMPTS: usize = 5;
    for _ in 0..ATTEMPTS {
        let ports: Vec<u16> = (0..count).map(|_| candidate_port()).collect();
        let server = Running::start(&mut command(&ports), out);
        let started = Instant::now();
        loop {
            if ports.iter().all(|&port| server.owns_listener(port)) {
                return (server, ports);
            }
            if let Some(status) = server.try_wait() {
                let said = format!(
                    "{}{}",
                    server.log(),
                    std::fs::read_to_string(log).unwrap_or_default()
                );
                assert!(
                    said.contains("Address already in use"),
                    "server exited ({status}): {said}"
                );
                eprintln!("note: a port of {ports:?} was taken meanwhile; trying others");
                break;
            }
            assert!(
                started.elapsed() < Duration::from_secs(20),
                "not listening on {ports:?}: {}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    panic!("{ATTEMPTS} sets of ports taken by others before the server could bind them");
}

/// Corpus files to serve and copy.
fn pages() -> Vec<PathBuf> {
    zipwire_testkit::corpus_files("web")
        .into_iter()
        .filter(|p| std::fs::metadata(p).is_ok_and(|m| m.len() <= 1_500_000))
        .collect()
}

#[test]
fn nginx_gzip_serves_pages_curl_decodes_with_no_alert() {
    if !have("/usr/sbin/nginx", "nginx") || !have("/usr/bin/curl", "curl") {
        return;
    }
    let pages = pages();
    if pages.is_empty() {
        return;
    }
    let tmp = tempfile::tempdir().expect("temp dir");
    let root = tmp.path().join("www");
    std::fs::create_dir_all(&root).expect("www");
    for page in &pages {
        std::fs::copy(page, root.join(page.file_name().expect("a file name"))).expect("copy");
    }
    // One server per level: 1 and 6 go to zipwire by default, 9 to zlib-rs.
    let levels = [1, 6, 9];
    let t = tmp.path().display();
    let conf_path = tmp.path().join("nginx.conf");
    let log = tmp.path().join("error.log");
    let nginx = |ports: &[u16]| {
        let servers: String = levels
            .iter()
            .zip(ports)
            .map(|(level, port)| {
                format!(
                    "server {{ listen 127.0.0.1:{port}; root {root}; gzip on; \
                     gzip_comp_level {level}; gzip_types *; gzip_min_length 0; \
                     location /chunked/ {{ alias {root}/; chunked_transfer_encoding on; }} }}\n",
                    root = root.display()
                )
            })
            .collect();
        let conf = format!(
            "daemon off; master_process off; pid {t}/nginx.pid; error_log {t}/error.log warn;\n\
             events {{ worker_connections 64; }}\n\
             http {{ access_log off; client_body_temp_path {t}/body; proxy_temp_path {t}/proxy;\n\
             fastcgi_temp_path {t}/fcgi; uwsgi_temp_path {t}/uwsgi; scgi_temp_path {t}/scgi;\n\
             {servers} }}\n"
        );
        std::fs::write(&conf_path, conf).expect("nginx.conf");
        // A failed attempt's bind errors are no alerts of this run.
        let _ = std::fs::remove_file(&log);
        let mut command = Command::new("/usr/sbin/nginx");
        command
            .arg("-p")
            .arg(tmp.path())
            .arg("-c")
            .arg(&conf_path)
            .arg("-e")
            .arg(&log)
            .env("LD_PRELOAD", common::library())
            .env("ZIPWIRE_ZLIB_LOG", "1");
        command
    };
    let (server, ports) =
        start_on_free_ports(levels.len(), &tmp.path().join("nginx.out"), &log, nginx);
    // Loaded for real: a preload that fails only costs a message, and nginx would then serve
    // with the system zlib and pass every check below.
    let maps = std::fs::read_to_string(format!("/proc/{}/maps", server.pid())).expect("maps");
    assert!(
        maps.contains(&*common::library().to_string_lossy()),
        "nginx runs without the library"
    );
    let out = tmp.path().join("out");
    for (level, port) in levels.iter().zip(&ports) {
        for page in &pages {
            let name = page
                .file_name()
                .and_then(|n| n.to_str())
                .expect("utf-8 name");
            let headers = common::run_ok(
                Command::new("curl")
                    .args(["-sS", "--compressed", "-D", "-", "-o"])
                    .arg(&out)
                    .arg(format!("http://127.0.0.1:{port}/{name}")),
            )
            .to_ascii_lowercase();
            assert!(
                headers.contains("content-encoding: gzip"),
                "level {level} {name}: {headers}"
            );
            let got = std::fs::read(&out).expect("curl output");
            assert!(
                got == std::fs::read(page).expect("page"),
                "level {level}: {name} decodes to other bytes"
            );
        }
    }
    let errors = std::fs::read_to_string(&log).unwrap_or_default();
    drop(server);
    assert!(
        !errors.contains("[alert]") && !errors.contains("[crit]") && !errors.contains("[emerg]"),
        "nginx error.log: {errors}"
    );
}

/// A private sshd on a free port, its keys and config in `dir`, preloaded or not.
fn start_sshd(dir: &Path, preload: bool) -> (Running, u16) {
    let config = dir.join(format!("sshd_config-{preload}"));
    let log = dir.join(format!("sshd-{preload}.log"));
    let d = dir.display();
    // sshd wants its privilege-separation directory.
    std::fs::create_dir_all("/run/sshd").expect("/run/sshd");
    let sshd = |ports: &[u16]| {
        let port = ports[0];
        std::fs::write(
            &config,
            format!(
                "Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host_key\n\
                 AuthorizedKeysFile {d}/authorized_keys\nPidFile {d}/sshd.pid\nUsePAM no\n\
                 StrictModes no\nPermitRootLogin yes\nPasswordAuthentication no\n\
                 KbdInteractiveAuthentication no\nCompression yes\n\
                 Subsystem sftp internal-sftp\n"
            ),
        )
        .expect("sshd_config");
        let mut command = Command::new("/usr/sbin/sshd");
        command.arg("-D").arg("-f").arg(&config).arg("-E").arg(&log);
        if preload {
            command.env("LD_PRELOAD", common::library());
        }
        command
    };
    let out = dir.join(format!("sshd-{preload}.out"));
    let (server, ports) = start_on_free_ports(1, &out, &log, sshd);
    if preload {
        let maps =
            std::fs::read_to_string(format!("/proc/{}/maps", server.pid())).expect("sshd's maps");
        assert!(
            maps.contains(&*common::library().to_string_lossy()),
            "sshd does not map the library"
        );
    }
    (server, ports[0])
}

#[test]
fn ssh_and_scp_compressed_copy_files_intact_with_either_or_both_ends_preloaded() {
    for (path, package) in [
        ("/usr/sbin/sshd", "openssh-server"),
        ("/usr/bin/ssh", "openssh-client"),
        ("/usr/bin/ssh-keygen", "openssh-client"),
    ] {
        if !have(path, package) {
            return;
        }
    }
    let is_root = Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.trim_ascii() == b"0");
    if !is_root {
        assert!(
            !zipwire_testkit::is_ci(),
            "the sshd test runs as root under CI=true"
        );
        eprintln!("note: not root, a private sshd cannot log in: test skipped");
        return;
    }
    let large = zipwire_testkit::corpus_files("large");
    let Some(first) = large.first() else {
        return;
    };
    let tmp = tempfile::tempdir().expect("temp dir");
    let dir = tmp.path();
    for key in ["host_key", "client_key"] {
        common::run_ok(
            Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-f"])
                .arg(dir.join(key)),
        );
    }
    std::fs::copy(dir.join("client_key.pub"), dir.join("authorized_keys")).expect("keys");
    // 2 MB of a compressible corpus file and 200 KB of incompressible data.
    let mut data = zipwire_testkit::read_corpus_file(first, 2_000_000);
    if let Some(noise) = zipwire_testkit::corpus_files("incompressible").first() {
        data.extend(zipwire_testkit::read_corpus_file(noise, 200_000));
    }
    let src = dir.join("src.bin");
    std::fs::write(&src, &data).expect("src");
    let (_plain, plain_port) = start_sshd(dir, false);
    let (_preloaded, preloaded_port) = start_sshd(dir, true);
    let ssh_opts = |cmd: &mut Command, client_preload: bool, log_level: &str| {
        cmd.arg("-i")
            .arg(dir.join("client_key"))
            .args([
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
            ])
            .args(["-o", "BatchMode=yes", "-o", log_level, "-C"]);
        if client_preload {
            cmd.env("LD_PRELOAD", common::library())
                .env("ZIPWIRE_ZLIB_LOG", "1");
        }
    };
    // (client preloaded, server preloaded): one end, the other end, both.
    for (client, server) in [(true, false), (false, true), (true, true)] {
        let port = if server { preloaded_port } else { plain_port };
        let case = format!("client preloaded {client}, server preloaded {server}");
        // Upload: the client compresses.
        let up = dir.join("up.bin");
        let mut cmd = Command::new("ssh");
        ssh_opts(&mut cmd, client, "LogLevel=DEBUG1");
        cmd.args(["-p", &port.to_string(), "root@127.0.0.1"])
            .arg(format!("cat > {}", up.display()))
            .stdin(std::fs::File::open(&src).expect("src"));
        let out = cmd.output().expect("ssh");
        assert!(out.status.success(), "{case}: ssh upload: {out:?}");
        let said = String::from_utf8_lossy(&out.stderr);
        if client {
            assert!(
                said.contains("zipwire-libz"),
                "{case}: the client did not load the library"
            );
        }
        // Compression was agreed on, both ways (the data alone would pass without it).
        assert_eq!(
            said.matches("compression: zlib@openssh.com").count(),
            2,
            "{case}: no compression agreed:\n{said}"
        );
        assert!(
            std::fs::read(&up).expect("up") == data,
            "{case}: ssh upload differs"
        );
        // Download: the server compresses.
        let mut cmd = Command::new("ssh");
        ssh_opts(&mut cmd, client, "LogLevel=ERROR");
        cmd.args(["-p", &port.to_string(), "root@127.0.0.1"])
            .arg(format!("cat {}", src.display()));
        let out = cmd.output().expect("ssh");
        assert!(out.status.success(), "{case}: ssh download: {out:?}");
        assert!(out.stdout == data, "{case}: ssh download differs");
        // scp (over SFTP in OpenSSH 9), both directions.
        let scp_up = dir.join("scp-up.bin");
        let scp_down = dir.join("scp-down.bin");
        for (from, to) in [
            (
                src.display().to_string(),
                format!("root@127.0.0.1:{}", scp_up.display()),
            ),
            (
                format!("root@127.0.0.1:{}", src.display()),
                scp_down.display().to_string(),
            ),
        ] {
            let mut cmd = Command::new("scp");
            ssh_opts(&mut cmd, client, "LogLevel=ERROR");
            cmd.args(["-q", "-P", &port.to_string(), &from, &to]);
            let out = cmd.output().expect("scp");
            assert!(out.status.success(), "{case}: scp {from} {to}: {out:?}");
        }
        assert!(
            std::fs::read(&scp_up).expect("scp up") == data,
            "{case}: scp up differs"
        );
        assert!(
            std::fs::read(&scp_down).expect("scp down") == data,
            "{case}: scp down differs"
        );
    }
}

#[test]
fn python_zlib_module_round_trips_the_corpus_preloaded() {
    if !have("/usr/bin/python3", "python3") {
        return;
    }
    let mut files = Vec::new();
    for dir in ["canterbury", "web", "incompressible"] {
        files.extend(zipwire_testkit::corpus_files(dir));
    }
    if files.is_empty() {
        return;
    }
    let script = r#"
import sys, zlib
n = 0
for path in sys.argv[1:]:
    data = open(path, "rb").read()[:3000000]
    for level in (1, 6, 9):
        assert zlib.decompress(zlib.compress(data, level)) == data, (path, level)
        for wbits in (15, 31, -15, 9):
            c = zlib.compressobj(level, zlib.DEFLATED, wbits)
            parts = [c.compress(data[:1000]), c.flush(zlib.Z_SYNC_FLUSH),
                     c.compress(data[1000:50000]), c.flush(zlib.Z_FULL_FLUSH),
                     c.compress(data[50000:]), c.flush()]
            d = zlib.decompressobj(wbits)
            assert d.decompress(b"".join(parts)) + d.flush() == data, (path, level, wbits)
            n += 1
print("round trips", n)
"#;
    let out = Command::new("/usr/bin/python3")
        .arg("-c")
        .arg(script)
        .args(&files)
        .env("LD_PRELOAD", common::library())
        .env("ZIPWIRE_ZLIB_LOG", "1")
        .output()
        .expect("python3");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "python3: {stderr}");
    assert!(
        stderr.contains("zipwire-libz"),
        "the library was not loaded: {stderr}"
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("round trips"));
}

#[test]
fn programs_built_against_debians_zlib_load_the_library_without_a_loader_warning() {
    if !have("/usr/bin/python3", "python3") {
        return;
    }
    // Debian's python3 asks the loader for zlib's symbol versions (ZLIB_1.2.0 and later). The
    // library as link.sh makes it has them; cargo's cdylib, whose version script rustc writes,
    // has none, and the loader says so on the program's stderr (the reason link.sh exists).
    let run = |library: &Path| {
        let out = Command::new("/usr/bin/python3")
            .args([
                "-c",
                "import zlib; assert zlib.decompress(zlib.compress(b'x' * 999)) == b'x' * 999",
            ])
            .env("LD_PRELOAD", library)
            .output()
            .expect("python3");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    assert_eq!(run(&common::library()), "", "the linked library");
    assert!(
        run(&common::cargo_cdylib()).contains("no version information available"),
        "cargo's cdylib was expected to lack the versions"
    );
}

#[test]
fn pigz_preloaded_writes_files_gzip_decodes() {
    // pigz ends each block's job with Z_BLOCK, asks deflatePending how many bits are left,
    // pads with Z_SYNC_FLUSH or deflatePrime, then joins the next job's stream: the library
    // must report those bits and take the padding, or the file is corrupt with exit status 0.
    if !have("/usr/bin/pigz", "pigz") || !have("/usr/bin/gzip", "gzip") {
        return;
    }
    let mut data = Vec::new();
    for dir in ["web", "canterbury"] {
        for file in zipwire_testkit::corpus_files(dir) {
            data.extend(std::fs::read(&file).expect("corpus file"));
        }
    }
    if data.is_empty() {
        return;
    }
    data.truncate(6 << 20);
    let tmp = tempfile::tempdir().expect("temp dir");
    let plain = tmp.path().join("plain");
    std::fs::write(&plain, &data).expect("write input");
    for args in [
        &["-1", "-p", "2", "-b", "32"][..],
        &["-6", "-p", "4", "-b", "64"],
        &["-3", "-i", "-p", "2", "-b", "32"],
        &["-6", "-p", "1"],
    ] {
        let out = Command::new("/usr/bin/pigz")
            .args(args)
            .arg("-c")
            .arg(&plain)
            .env("LD_PRELOAD", common::library())
            .env("ZIPWIRE_ZLIB_LOG", "1")
            .output()
            .expect("pigz");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pigz {args:?}: {stderr}");
        assert!(stderr.contains("zipwire-libz"), "not loaded: {stderr}");
        let gz = tmp.path().join("out.gz");
        std::fs::write(&gz, &out.stdout).expect("write .gz");
        let back = Command::new("/usr/bin/gzip")
            .arg("-dc")
            .arg(&gz)
            .output()
            .expect("gzip -dc");
        assert!(
            back.status.success(),
            "pigz {args:?}: gzip -dc: {}",
            String::from_utf8_lossy(&back.stderr)
        );
        assert!(back.stdout == data, "pigz {args:?}: round trip differs");
    }
}
