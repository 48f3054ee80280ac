//! What the tunnel's binary tests share: `zipwire` processes with their logs (testkit's
//! [`Running`]), keys from `tunnel keygen`, the flags of each end, a server and client pair,
//! the address each binds on port 0, and an echo target. Each test binary uses some of it.

#![allow(dead_code)]

use std::ffi::OsStr;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::path::Path;
use std::process::Command;

pub use zipwire_testkit::child::Running;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_zipwire");

/// Starts `zipwire args`, its output in the file `log`.
pub fn start<S: AsRef<OsStr>>(args: impl IntoIterator<Item = S>, log: &Path) -> Running {
    Running::start(Command::new(BIN).args(args), log)
}

/// Keys from `zipwire tunnel keygen` in `dir/keys`; returns the pin and a path maker for the
/// files there (`cert.pem`, `key.pem`, `token`).
pub fn keygen(dir: &Path) -> (String, impl Fn(&str) -> String) {
    let keys = dir.join("keys");
    let out = Command::new(BIN)
        .args(["tunnel", "keygen", "--out"])
        .arg(&keys)
        .output()
        .unwrap();
    assert!(out.status.success(), "keygen failed");
    let pin = String::from_utf8(out.stdout).unwrap().trim().to_owned();
    (pin, move |name: &str| {
        keys.join(name).to_string_lossy().into_owned()
    })
}

/// `tunnel server` on `listen`, forwarding to `target`, with the keys `path` names.
pub fn server_args(listen: &str, target: &str, path: &impl Fn(&str) -> String) -> Vec<String> {
    let mut args: Vec<String> = ["tunnel", "server", "--listen", listen, "--forward", target]
        .map(str::to_owned)
        .to_vec();
    for (flag, file) in [
        ("--cert", "cert.pem"),
        ("--key", "key.pem"),
        ("--token-file", "token"),
    ] {
        args.extend([flag.to_owned(), path(file)]);
    }
    args
}

/// `tunnel client` on 127.0.0.1:0 to `server`, pinning `pin`, with the token `path` names.
pub fn client_args(server: &str, pin: &str, path: &impl Fn(&str) -> String) -> Vec<String> {
    let args = [
        "tunnel",
        "client",
        "--listen",
        "127.0.0.1:0",
        "--server",
        server,
    ];
    let mut args: Vec<String> = args.map(str::to_owned).to_vec();
    args.extend(["--pin".to_owned(), pin.to_owned()]);
    args.extend(["--token-file".to_owned(), path("token")]);
    args
}

/// Keys from keygen, a server forwarding to `target` and a client, both on port 0, with
/// `server` and `client` each end's extra flags; returns them and the client's address.
pub fn pair(
    dir: &Path,
    target: &str,
    server: &[&str],
    client: &[&str],
) -> (Running, Running, String) {
    let (pin, path) = keygen(dir);
    let mut args = server_args("127.0.0.1:0", target, &path);
    args.extend(server.iter().map(|flag| flag.to_string()));
    let server = start(&args, &dir.join("server.log"));
    let mut args = client_args(&listen_addr(&server), &pin, &path);
    args.extend(client.iter().map(|flag| flag.to_string()));
    let client = start(&args, &dir.join("client.log"));
    let client_addr = listen_addr(&client);
    (server, client, client_addr)
}

/// The address a tunnel server or client started with `--listen 127.0.0.1:0` is bound to:
/// the `listen=` field of its ready line.
pub fn listen_addr(end: &Running) -> String {
    end.addr(" ready", "listen=").to_string()
}

/// The address a tunnel's admin listener started on port 0 is bound to.
pub fn admin_addr(end: &Running) -> String {
    end.addr("tunnel admin listening", "addr=").to_string()
}

/// An echo target on a thread; returns its address.
pub fn echo_target() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let mut stream = stream;
                let mut buf = vec![0u8; 64 * 1024];
                while let Ok(n) = stream.read(&mut buf) {
                    if n == 0 || stream.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
                let _ = stream.shutdown(Shutdown::Write);
            });
        }
    });
    addr
}
