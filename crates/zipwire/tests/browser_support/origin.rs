//! The test's origin on 127.0.0.1: HTTP/1.1 with keep-alive for the page, its stylesheet and
//! script, and a WebSocket echo on `/ws` (RFC 6455), on a runtime of its own that stops when
//! the `Origin` is dropped.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use sha1::{Digest as _, Sha1};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::{TcpListener, TcpStream};
use zipwire_testkit::origin::AcceptLoop;

use super::page::Site;

/// The longest request head or WebSocket message the origin accepts.
const LIMIT: usize = 1 << 20;
/// RFC 6455 section 1.3: the GUID appended to the client's key.
const WEBSOCKET_GUID: &str = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

/// What the origin saw: requests per path and the WebSocket text messages it echoed.
#[derive(Default)]
pub struct Seen {
    /// Requests per path (query included).
    pub hits: HashMap<String, u64>,
    /// Text messages echoed back, in order.
    pub echoed: Vec<String>,
}

/// A running origin: testkit's accept loop with this file's HTTP/1.1 and WebSocket handler.
pub struct Origin {
    seen: Arc<Mutex<Seen>>,
    // Declared before the runtime, so the loop is stopped before its runtime goes.
    accept: AcceptLoop,
    _runtime: tokio::runtime::Runtime,
}

struct Files {
    index: String,
    css: String,
    js: String,
}

impl Origin {
    /// Serves `site` on a free loopback port.
    pub fn start(site: &Site) -> Origin {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("a tokio runtime");
        let seen = Arc::new(Mutex::new(Seen::default()));
        let files = Arc::new(Files {
            index: site.index(),
            css: site.css(),
            js: site.js(),
        });
        let shared = seen.clone();
        let accept = runtime.block_on(async move {
            let listener = TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind 127.0.0.1:0");
            AcceptLoop::spawn(listener, move |stream| {
                let (files, seen) = (files.clone(), shared.clone());
                async move {
                    // A connection that breaks the protocol is just closed.
                    let _ = connection(stream, &files, &seen).await;
                }
            })
        });
        Origin {
            seen,
            accept,
            _runtime: runtime,
        }
    }

    /// The address it listens on.
    pub fn addr(&self) -> SocketAddr {
        self.accept.addr()
    }

    /// Runs `f` on what the origin has seen so far.
    pub fn seen<T>(&self, f: impl FnOnce(&Seen) -> T) -> T {
        f(&self.seen.lock().expect("origin state"))
    }
}

struct Request {
    path: String,
    headers: Vec<(String, String)>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// RFC 6455 section 4.2.1: a GET with `Upgrade: websocket` and `Connection: Upgrade`.
    fn is_websocket(&self) -> bool {
        let has = |name: &str, token: &str| {
            self.header(name)
                .is_some_and(|v| v.split(',').any(|t| t.trim().eq_ignore_ascii_case(token)))
        };
        has("upgrade", "websocket") && has("connection", "upgrade")
    }
}

async fn connection(mut stream: TcpStream, files: &Files, seen: &Mutex<Seen>) -> io::Result<()> {
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf).await? else {
            return Ok(());
        };
        *seen
            .lock()
            .expect("origin state")
            .hits
            .entry(request.path.clone())
            .or_default() += 1;
        if request.path == "/ws" && request.is_websocket() {
            let Some(key) = request.header("sec-websocket-key") else {
                return respond(&mut stream, "400 Bad Request", "text/plain", "no key").await;
            };
            let mut sha = Sha1::new();
            sha.update(key.trim().as_bytes());
            sha.update(WEBSOCKET_GUID.as_bytes());
            let accept = base64::engine::general_purpose::STANDARD.encode(sha.finalize());
            let head = format!(
                "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\
                 Connection: Upgrade\r\nSec-WebSocket-Accept: {accept}\r\n\r\n"
            );
            stream.write_all(head.as_bytes()).await?;
            return echo(stream, buf, seen).await;
        }
        let (status, kind, body) = match request.path.as_str() {
            "/" => ("200 OK", "text/html; charset=utf-8", files.index.as_str()),
            "/style.css" => ("200 OK", "text/css", files.css.as_str()),
            "/app.js" => ("200 OK", "text/javascript", files.js.as_str()),
            _ => ("404 Not Found", "text/plain", "not found"),
        };
        respond(&mut stream, status, kind, body).await?;
    }
}

async fn respond(stream: &mut TcpStream, status: &str, kind: &str, body: &str) -> io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\n\
         Cache-Control: no-store\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_owned())
}

/// Reads one request head (and drops its body, if it has a length); `None` at a clean end.
async fn read_request(stream: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Request>> {
    let end = loop {
        if let Some(at) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > LIMIT {
            return Err(invalid("request head too long"));
        }
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return if buf.is_empty() {
                Ok(None)
            } else {
                Err(invalid("connection closed mid-request"))
            };
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf.drain(..end).collect()).map_err(|_| invalid("not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or("");
    let mut parts = request_line.split(' ');
    let (Some(_method), Some(path)) = (parts.next(), parts.next()) else {
        return Err(invalid("bad request line"));
    };
    let headers: Vec<(String, String)> = lines
        .filter_map(|line| line.split_once(':'))
        .map(|(n, v)| (n.trim().to_owned(), v.trim().to_owned()))
        .collect();
    let request = Request {
        path: path.to_owned(),
        headers,
    };
    if request.header("transfer-encoding").is_some() {
        return Err(invalid("chunked request bodies are not served here"));
    }
    let length: usize = match request.header("content-length") {
        Some(v) => v.parse().map_err(|_| invalid("bad Content-Length"))?,
        None => 0,
    };
    while buf.len() < length {
        let mut chunk = [0u8; 8192];
        let n = stream.read(&mut chunk).await?;
        if n == 0 {
            return Err(invalid("connection closed mid-body"));
        }
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.drain(..length);
    Ok(Some(request))
}

/// Reads exactly `n` bytes, taking first what is left in `buf` from the upgrade request.
async fn read_exact(stream: &mut TcpStream, buf: &mut Vec<u8>, n: usize) -> io::Result<Vec<u8>> {
    while buf.len() < n {
        let mut chunk = [0u8; 8192];
        let read = stream.read(&mut chunk).await?;
        if read == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        buf.extend_from_slice(&chunk[..read]);
    }
    Ok(buf.drain(..n).collect())
}

/// Echoes every data frame back (RFC 6455 section 5.2 framing; client frames are masked,
/// section 5.3, server frames are not), answers a ping with a pong (section 5.5.2) and a
/// close with a close (section 5.5.1).
async fn echo(mut stream: TcpStream, mut buf: Vec<u8>, seen: &Mutex<Seen>) -> io::Result<()> {
    loop {
        let head = read_exact(&mut stream, &mut buf, 2).await?;
        let (fin_opcode, opcode) = (head[0], head[0] & 0x0f);
        if head[1] & 0x80 == 0 {
            return Err(invalid("client frame not masked (RFC 6455 section 5.1)"));
        }
        let length = match head[1] & 0x7f {
            126 => {
                let b = read_exact(&mut stream, &mut buf, 2).await?;
                usize::from(u16::from_be_bytes([b[0], b[1]]))
            }
            127 => {
                let b = read_exact(&mut stream, &mut buf, 8).await?;
                let mut bytes = [0u8; 8];
                bytes.copy_from_slice(&b);
                usize::try_from(u64::from_be_bytes(bytes)).unwrap_or(usize::MAX)
            }
            short => usize::from(short),
        };
        if length > LIMIT {
            return Err(invalid("frame too large"));
        }
        let mask = read_exact(&mut stream, &mut buf, 4).await?;
        let mut payload = read_exact(&mut stream, &mut buf, length).await?;
        for (i, byte) in payload.iter_mut().enumerate() {
            *byte ^= mask[i % 4];
        }
        let reply = match opcode {
            0x8 => 0x88,
            0x9 => 0x8a,
            0xa => continue,
            _ => fin_opcode,
        };
        if opcode == 0x1 {
            let text = String::from_utf8_lossy(&payload).into_owned();
            seen.lock().expect("origin state").echoed.push(text);
        }
        let mut frame = vec![reply];
        match payload.len() {
            n if n < 126 => frame.push(n as u8),
            n if n <= usize::from(u16::MAX) => {
                frame.push(126);
                frame.extend_from_slice(&(n as u16).to_be_bytes());
            }
            n => {
                frame.push(127);
                frame.extend_from_slice(&(n as u64).to_be_bytes());
            }
        }
        frame.extend_from_slice(&payload);
        stream.write_all(&frame).await?;
        if opcode == 0x8 {
            return Ok(());
        }
    }
}
