//! A blocking origin server for tests that run a proxy as a process: every request gets the
//! same `200 OK`, on a thread per connection, on a port the kernel picked (port 0, kept
//! bound for as long as the test process runs).
//!
//! The proxy crate's own tests and the browser tests have richer origins of their own (paths,
//! streamed and failing bodies, a WebSocket echo); this one is for a test that only needs
//! something behind the proxy.

use std::io::{BufRead, BufReader, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;

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
