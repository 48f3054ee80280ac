//! Origin servers for tests, on ports the kernel picked (port 0, read back):
//!
//! - [`serve`]: a blocking origin for tests that run a proxy as a process; every request gets
//!   the same `200 OK`, on a thread per connection.
//! - [`AcceptLoop`]: the accept loop of an async origin, each connection handed to the test's
//!   own handler on a task of its own. The proxy crate's origin (paths, streamed and failing
//!   bodies, over hyper) and the browser tests' (a page and a WebSocket echo, by hand) are
//!   handlers on it: what differs between them is what they answer, not how they listen.

use std::future::Future;
use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// An async accept loop: every connection accepted on its listener goes to a handler on a
/// task of its own, and is counted. Dropping it stops accepting (connections already handed
/// over run on).
#[derive(Debug)]
pub struct AcceptLoop {
    addr: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    task: tokio::task::AbortHandle,
}

impl AcceptLoop {
    /// Accepts on `listener`, calling `handle` with each connection, on the runtime of the
    /// caller's context.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime, or when the listener has no local address.
    pub fn spawn<F, Fut>(listener: tokio::net::TcpListener, handle: F) -> AcceptLoop
    where
        F: Fn(tokio::net::TcpStream) -> Fut + Send + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let addr = listener.local_addr().expect("the origin's address");
        let connections = Arc::new(AtomicUsize::new(0));
        let counted = connections.clone();
        let task = tokio::spawn(async move {
            loop {
                // A failed accept (a connection reset before it was taken, descriptors out)
                // leaves the listener as it was: the next one may succeed.
                let Ok((stream, _)) = listener.accept().await else {
                    tokio::task::yield_now().await;
                    continue;
                };
                counted.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(handle(stream));
            }
        });
        AcceptLoop {
            addr,
            connections,
            task: task.abort_handle(),
        }
    }

    /// The address the listener is bound to.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for AcceptLoop {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Whether the origin keeps a connection open after a response.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Connection {
    /// One response a connection, sent with `connection: close`, then closed.
    Close,
    /// Responses for as long as the client sends requests.
    KeepAlive,
}

/// Serves `body` as `content_type` with a `content-length` to every request on 127.0.0.1;
/// returns the address.
///
/// # Panics
///
/// When no loopback listener can be bound.
pub fn serve(content_type: &str, body: &[u8], connection: Connection) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind the origin");
    let addr = listener.local_addr().expect("the origin's address");
    let mut head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\n",
        body.len()
    );
    if connection == Connection::Close {
        head.push_str("connection: close\r\n");
    }
    head.push_str("\r\n");
    let response: Arc<[u8]> = [head.as_bytes(), body].concat().into();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { continue };
            let response = response.clone();
            std::thread::spawn(move || answer(&stream, &response, connection));
        }
    });
    addr
}

/// Reads request heads (requests without a body) and answers each with `response`.
fn answer(stream: &TcpStream, response: &[u8], connection: Connection) {
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    loop {
        // The head ends with an empty line; a closed connection ends the loop.
        loop {
            line.clear();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) if line == "\r\n" => break,
                Ok(_) => {}
            }
        }
        let mut writer = stream;
        if writer.write_all(response).is_err() || connection == Connection::Close {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    #[test]
    fn the_accept_loop_hands_each_connection_over_and_stops_when_dropped() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a runtime");
        runtime.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let origin = AcceptLoop::spawn(listener, |mut stream| async move {
                let _ = stream.write_all(b"hi").await;
            });
            for n in 1..=2 {
                let mut stream = tokio::net::TcpStream::connect(origin.addr())
                    .await
                    .expect("connect");
                let mut text = Vec::new();
                stream.read_to_end(&mut text).await.expect("read");
                assert_eq!(text, b"hi");
                assert_eq!(origin.connections.load(Ordering::SeqCst), n);
            }
            let addr = origin.addr();
            drop(origin);
            // The listener goes with the loop once the runtime has dropped the aborted task:
            // nothing accepts there any more.
            let mut closed = false;
            for _ in 0..100 {
                if tokio::net::TcpStream::connect(addr).await.is_err() {
                    closed = true;
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(10)).await;
            }
            assert!(
                closed,
                "the listener still accepts after the loop was dropped"
            );
        });
    }

    #[test]
    fn every_request_gets_the_body() {
        let addr = serve("text/plain", b"hello", Connection::KeepAlive);
        let mut stream = TcpStream::connect(addr).expect("connect");
        for _ in 0..2 {
            stream
                .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
                .expect("send");
            let mut response = [0u8; 128];
            let n = stream.read(&mut response).expect("read");
            let text = String::from_utf8_lossy(&response[..n]);
            assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
            assert!(text.ends_with("\r\n\r\nhello"), "{text}");
        }
        let addr = serve("text/html", b"<p>", Connection::Close);
        let mut stream = TcpStream::connect(addr).expect("connect");
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: t\r\n\r\n")
            .expect("send");
        let mut text = String::new();
        stream.read_to_string(&mut text).expect("read to the close");
        assert!(text.contains("connection: close\r\n\r\n<p>"), "{text}");
    }
}
