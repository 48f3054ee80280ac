//! Raw-socket helpers for framing tests: an origin that writes canned bytes, and a client
//! that reads one response at a time off a kept-alive connection.

use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

/// How long one response may take to arrive whole.
const RESPONSE_LIMIT: Duration = Duration::from_secs(5);

/// An origin on 127.0.0.1:0 that hands each connection to `serve`.
pub struct RawOrigin {
    pub addr: SocketAddr,
    /// Connections whose request side reached its end (the proxy closed or reset it).
    pub ended: Arc<AtomicUsize>,
    /// Every request head received, as text.
    pub heads: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

/// What `serve` gets: the connection and the origin's records.
pub struct RawConn {
    pub stream: TcpStream,
    buffered: Vec<u8>,
    ended: Arc<AtomicUsize>,
    heads: Arc<Mutex<Vec<String>>>,
}

impl RawOrigin {
    pub async fn start<F, Fut>(serve: F) -> RawOrigin
    where
        F: Fn(RawConn) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind origin");
        let addr = listener.local_addr().expect("origin address");
        let ended = Arc::new(AtomicUsize::new(0));
        let heads = Arc::new(Mutex::new(Vec::new()));
        let (ended_c, heads_c) = (ended.clone(), heads.clone());
        let serve = Arc::new(serve);
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let conn = RawConn {
                    stream,
                    buffered: Vec::new(),
                    ended: ended_c.clone(),
                    heads: heads_c.clone(),
                };
                tokio::spawn(serve(conn));
            }
        });
        RawOrigin {
            addr,
            ended,
            heads,
            task,
        }
    }

    /// An origin that answers every request on a connection with `reply`.
    pub async fn replying(reply: Vec<u8>) -> RawOrigin {
        let reply = Arc::new(reply);
        RawOrigin::start(move |mut conn| {
            let reply = reply.clone();
            async move {
                while conn.read_head().await.is_some() {
                    if conn.stream.write_all(&reply).await.is_err() {
                        return;
                    }
                }
            }
        })
        .await
    }

    pub fn upstream(&self) -> zipwire_proxy::Upstream {
        crate::support::upstream(self.addr)
    }

    pub fn ended(&self) -> usize {
        self.ended.load(Ordering::SeqCst)
    }
}

impl Drop for RawOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RawConn {
    /// Reads one request head (recorded); `None` at the end of the connection.
    pub async fn read_head(&mut self) -> Option<String> {
        loop {
            if let Some(end) = find(&self.buffered, b"\r\n\r\n") {
                let head: Vec<u8> = self.buffered.drain(..end + 4).collect();
                let text = String::from_utf8_lossy(&head).into_owned();
                self.heads.lock().expect("not poisoned").push(text.clone());
                return Some(text);
            }
            if !self.fill().await {
                return None;
            }
        }
    }

    /// Reads and drops what comes until the connection ends.
    pub async fn drain(&mut self) {
        while self.fill().await {
            self.buffered.clear();
        }
    }

    async fn fill(&mut self) -> bool {
        let mut buf = [0u8; 16 * 1024];
        match self.stream.read(&mut buf).await {
            Ok(n) if n > 0 => {
                self.buffered.extend_from_slice(&buf[..n]);
                true
            }
            _ => {
                self.ended.fetch_add(1, Ordering::SeqCst);
                false
            }
        }
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// `body` in chunked framing, cut in chunks of `size`, with its last chunk.
pub fn chunked(body: &[u8], size: usize) -> Vec<u8> {
    let mut out = Vec::new();
    for chunk in body.chunks(size) {
        out.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
        out.extend_from_slice(chunk);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"0\r\n\r\n");
    out
}

/// One response as read off the wire.
#[derive(Debug)]
pub struct RawResponse {
    /// The status line and the fields, lower-cased.
    pub head: String,
    /// The body without its framing.
    pub body: Vec<u8>,
    /// Whether the body was delimited by the end of the connection.
    pub closed: bool,
}

impl RawResponse {
    pub fn status(&self) -> u16 {
        self.head
            .split(' ')
            .nth(1)
            .and_then(|code| code.parse().ok())
            .expect("a status line")
    }

    /// The value of field `name` (lower case), if present once or more (the first).
    pub fn field(&self, name: &str) -> Option<&str> {
        self.head.lines().skip(1).find_map(|line| {
            let (field, value) = line.split_once(':')?;
            (field.trim() == name).then(|| value.trim())
        })
    }
}

/// A client connection that reads responses one by one, framed as their heads say.
pub struct RawClient {
    pub stream: TcpStream,
    buffered: Vec<u8>,
}

impl RawClient {
    pub async fn connect(addr: SocketAddr) -> RawClient {
        RawClient {
            stream: TcpStream::connect(addr).await.expect("connect"),
            buffered: Vec::new(),
        }
    }

    pub async fn send(&mut self, raw: &[u8]) {
        self.stream.write_all(raw).await.expect("write");
    }

    /// Reads the next response (skipping none: a 1xx comes back as itself); `head_only` for
    /// a response to HEAD.
    pub async fn response(&mut self, head_only: bool) -> RawResponse {
        tokio::time::timeout(RESPONSE_LIMIT, self.read_response(head_only))
            .await
            .expect("a whole response in time")
    }

    /// Whether the proxy closes the connection within `limit` (reading nothing more).
    pub async fn closed_within(&mut self, limit: Duration) -> bool {
        let mut buf = [0u8; 1024];
        matches!(
            tokio::time::timeout(limit, self.stream.read(&mut buf)).await,
            Ok(Ok(0)) | Ok(Err(_))
        )
    }

    async fn read_response(&mut self, head_only: bool) -> RawResponse {
        let end = loop {
            if let Some(end) = find(&self.buffered, b"\r\n\r\n") {
                break end;
            }
            assert!(self.fill().await, "closed before a whole head");
        };
        let head: Vec<u8> = self.buffered.drain(..end + 4).collect();
        let mut response = RawResponse {
            head: String::from_utf8_lossy(&head[..end]).to_lowercase(),
            body: Vec::new(),
            closed: false,
        };
        let status = response.status();
        if head_only || (100..200).contains(&status) || status == 204 || status == 304 {
            return response;
        }
        if response.field("transfer-encoding") == Some("chunked") {
            response.body = self.read_chunked().await;
        } else if let Some(length) = response.field("content-length") {
            let length: usize = length.parse().expect("a length");
            while self.buffered.len() < length {
                assert!(self.fill().await, "closed before the whole body");
            }
            response.body = self.buffered.drain(..length).collect();
        } else {
            while self.fill().await {}
            response.body = std::mem::take(&mut self.buffered);
            response.closed = true;
        }
        response
    }

    async fn read_chunked(&mut self) -> Vec<u8> {
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(end) = find(&self.buffered, b"\r\n") {
                    break end;
                }
                assert!(self.fill().await, "closed inside a chunk size");
            };
            let line: Vec<u8> = self.buffered.drain(..line_end + 2).collect();
            let text = String::from_utf8_lossy(&line[..line_end]);
            let size = usize::from_str_radix(text.split(';').next().unwrap_or("").trim(), 16)
                .expect("a chunk size");
            if size == 0 {
                // No trailers expected: the blank line that ends the message.
                while self.buffered.len() < 2 {
                    assert!(self.fill().await, "closed before the end of the message");
                }
                self.buffered.drain(..2);
                return body;
            }
            while self.buffered.len() < size + 2 {
                assert!(self.fill().await, "closed inside a chunk");
            }
            body.extend(self.buffered.drain(..size));
            self.buffered.drain(..2);
        }
    }

    async fn fill(&mut self) -> bool {
        let mut buf = [0u8; 16 * 1024];
        match self.stream.read(&mut buf).await {
            Ok(n) if n > 0 => {
                self.buffered.extend_from_slice(&buf[..n]);
                true
            }
            _ => false,
        }
    }
}
