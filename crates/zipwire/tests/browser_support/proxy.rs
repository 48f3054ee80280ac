//! `zipwire proxy` under test: TLS and cleartext listeners in front of the test's origin, a
//! generated self-signed certificate, zstd, br and gzip offered, and the admin listener.

use std::io::{Read as _, Write as _};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long the proxy may take to listen (a loaded 2-core machine included).
const START_LIMIT: Duration = Duration::from_secs(20);

/// A running proxy, stopped when dropped.
pub struct Proxy {
    child: Child,
    /// The cleartext listener (HTTP/1.1).
    pub listen: SocketAddr,
    /// The TLS listener (ALPN h2 and http/1.1).
    pub tls: SocketAddr,
    /// The admin listener (/stats).
    pub admin: SocketAddr,
    log: PathBuf,
    _dir: tempfile::TempDir,
}

/// Where the proxy's log says a listener is bound: the address after `key=` on the first
/// line holding `needle`.
fn logged_addr(log: &str, needle: &str, key: &str) -> Option<SocketAddr> {
    let line = log.lines().find(|line| line.contains(needle))?;
    let at = line.find(key)? + key.len();
    line[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
        .collect::<String>()
        .parse()
        .ok()
}

fn binary() -> Command {
    Command::new(env!("CARGO_BIN_EXE_zipwire"))
}

impl Proxy {
    /// Starts the proxy in front of `origin` and waits until both listeners accept.
    pub fn start(origin: SocketAddr) -> Result<Proxy, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("temp dir: {e}"))?;
        let certified = rcgen::generate_simple_self_signed(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
        ])
        .map_err(|e| format!("rcgen: {e}"))?;
        let (cert, key) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
        std::fs::write(&cert, certified.cert.pem()).map_err(|e| e.to_string())?;
        std::fs::write(&key, certified.signing_key.serialize_pem()).map_err(|e| e.to_string())?;
        // A key readable by others gets a warning; this one is the owner's only.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
        }
        // Port 0 for every listener, each bound address read back from the log: no port is
        // released and bound again, where a parallel test could take it.
        let any = "127.0.0.1:0";
        let log = dir.path().join("proxy.log");
        let log_file = std::fs::File::create(&log).map_err(|e| e.to_string())?;
        let child = binary()
            .arg("proxy")
            .args(["--listen", any])
            .args(["--tls-listen", any])
            .arg("--tls-cert")
            .arg(&cert)
            .arg("--tls-key")
            .arg(&key)
            .args(["--upstream", &format!("http://{origin}")])
            .args(["--admin", any])
            .args(["--encodings", "zstd,br,gzip"])
            .args(["--threads", "2"])
            .stdin(Stdio::null())
            .stdout(log_file.try_clone().map_err(|e| e.to_string())?)
            .stderr(log_file)
            .spawn()
            .map_err(|e| format!("cannot start zipwire: {e}"))?;
        let unbound: SocketAddr = any.parse().expect("valid");
        let mut proxy = Proxy {
            child,
            listen: unbound,
            tls: unbound,
            admin: unbound,
            log,
            _dir: dir,
        };
        let started = Instant::now();
        loop {
            if let Ok(Some(status)) = proxy.child.try_wait() {
                return Err(format!("zipwire proxy exited ({status}):\n{}", proxy.log()));
            }
            let text = proxy.log();
            let bound = (
                logged_addr(&text, "tls=false", "local_addr="),
                logged_addr(&text, "tls=true", "local_addr="),
                logged_addr(&text, "admin listening", "addr="),
            );
            if let (Some(listen), Some(tls), Some(admin)) = bound {
                (proxy.listen, proxy.tls, proxy.admin) = (listen, tls, admin);
                return Ok(proxy);
            }
            if started.elapsed() > START_LIMIT {
                return Err(format!(
                    "zipwire proxy did not log its listeners within {START_LIMIT:?}:\n{}",
                    proxy.log()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// What the proxy has logged so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// The admin listener's `/stats` document.
    pub fn stats(&self) -> serde_json::Value {
        let mut stream = TcpStream::connect(self.admin).expect("connect to the admin listener");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("read timeout");
        let request = format!(
            "GET /stats HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            self.admin
        );
        stream
            .write_all(request.as_bytes())
            .expect("send the stats request");
        let mut response = String::new();
        stream
            .read_to_string(&mut response)
            .expect("read the stats response");
        let (head, body) = response
            .split_once("\r\n\r\n")
            .unwrap_or_else(|| panic!("no end of head in the stats response: {response}"));
        assert!(head.starts_with("HTTP/1.1 200"), "/stats answered: {head}");
        serde_json::from_str(body).unwrap_or_else(|e| panic!("/stats is not JSON ({e}): {body}"))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
