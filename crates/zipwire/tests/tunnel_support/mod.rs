//! What the tunnel's binary tests share: `zipwire` processes with their logs (testkit's
//! [`Running`]), the address each binds on port 0, and an echo target. Each test binary uses
//! some of it.

#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::path::Path;
use std::process::Command;

pub use zipwire_testkit::child::Running;

/// The binary under test.
pub const BIN: &str = env!("CARGO_BIN_EXE_zipwire");

/// Starts `zipwire args`, its output in the file `log`.
pub fn start(args: &[&str], log: &Path) -> Running {
    Running::start(Command::new(BIN).args(args), log)
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
