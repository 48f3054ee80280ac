//! `limits.max_body` (nginx's `client_max_body_size`): a request declaring more gets 413 and
//! never reaches the origin; a chunked body that grows past it is cut before the frame that
//! crosses it, so the origin never reads more than the limit, and the client gets 413.

use std::convert::Infallible;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use zipwire_testkit::origin::AcceptLoop;

use crate::support::{split_head, upstream, Proxy};

const LIMIT: u64 = 1 << 20;

/// An origin that counts the requests it got and the body bytes it read.
struct Counting {
    _accept: AcceptLoop,
    addr: std::net::SocketAddr,
    requests: Arc<AtomicU64>,
    read: Arc<AtomicU64>,
}

fn counting_origin() -> Counting {
    let (requests, read) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicU64::new(0)));
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.set_nonblocking(true).expect("non-blocking");
    let addr = listener.local_addr().expect("addr");
    let listener = TcpListener::from_std(listener).expect("tokio listener");
    let (counted, bytes) = (requests.clone(), read.clone());
    let accept = AcceptLoop::spawn(listener, move |stream| {
        let (counted, bytes) = (counted.clone(), bytes.clone());
        async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let (counted, bytes) = (counted.clone(), bytes.clone());
                async move {
                    counted.fetch_add(1, Ordering::SeqCst);
                    let mut body = request.into_body();
                    while let Some(Ok(frame)) = body.frame().await {
                        if let Some(data) = frame.data_ref() {
                            bytes.fetch_add(data.len() as u64, Ordering::SeqCst);
                        }
                    }
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(b"ok"))))
                }
            });
            let _ = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        }
    });
    Counting {
        _accept: accept,
        addr,
        requests,
        read,
    }
}

/// Sends `head` and then `body` on a fresh connection, ignoring a write the proxy cut short
/// by answering and closing, and returns the status line and what the proxy sent.
async fn send(proxy: &Proxy, head: String, body: Vec<u8>) -> String {
    let stream = TcpStream::connect(proxy.addr).await.expect("connect");
    let (mut reader, mut writer) = stream.into_split();
    let writing = tokio::spawn(async move {
        if writer.write_all(head.as_bytes()).await.is_ok() {
            for piece in body.chunks(64 * 1024) {
                if writer.write_all(piece).await.is_err() {
                    break;
                }
            }
        }
        writer
    });
    let mut answer = Vec::new();
    let read = tokio::time::timeout(Duration::from_secs(10), async {
        let mut buffer = [0u8; 4096];
        loop {
            match reader.read(&mut buffer).await {
                Ok(0) | Err(_) => break,
                Ok(n) => answer.extend_from_slice(&buffer[..n]),
            }
            if answer.windows(4).any(|w| w == b"\r\n\r\n") {
                break;
            }
        }
    })
    .await;
    assert!(read.is_ok(), "no answer within 10 s");
    writing.abort();
    let (head, _) = split_head(&answer);
    head.lines().next().unwrap_or_default().to_owned()
}

fn chunked(total: usize) -> Vec<u8> {
    let mut body = Vec::new();
    for _ in 0..total / (64 * 1024) {
        body.extend_from_slice(format!("{:x}\r\n", 64 * 1024).as_bytes());
        body.extend_from_slice(&vec![b'x'; 64 * 1024]);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(b"0\r\n\r\n");
    body
}

#[tokio::test]
async fn bodies_over_the_limit_get_413_and_the_origin_reads_nothing_past_it() {
    let origin = counting_origin();
    let proxy = Proxy::start(vec![upstream(origin.addr)], |config| {
        config.limits.max_body = Some(LIMIT);
    })
    .await;
    // 2 MiB declared: 413 before anything goes upstream.
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        2 * LIMIT
    );
    let status = send(&proxy, head, vec![b'x'; 2 * LIMIT as usize]).await;
    assert!(status.starts_with("http/1.1 413"), "{status}");
    assert_eq!(origin.requests.load(Ordering::SeqCst), 0);

    // 2 MiB chunked: cut before the frame that crosses the limit.
    let head = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_owned();
    let status = send(&proxy, head, chunked(2 * LIMIT as usize)).await;
    assert!(status.starts_with("http/1.1 413"), "{status}");
    // What the proxy forwarded before the cut may still be arriving: wait until it stops.
    let mut seen = origin.read.load(Ordering::SeqCst);
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = origin.read.load(Ordering::SeqCst);
        if now == seen {
            break;
        }
        seen = now;
    }
    assert!(seen > 0, "the chunked body went upstream as it streamed");
    assert!(
        origin.read.load(Ordering::SeqCst) <= LIMIT,
        "the origin read {} bytes",
        origin.read.load(Ordering::SeqCst)
    );

    // Within the limit, both ways: forwarded whole.
    let before = origin.read.load(Ordering::SeqCst);
    let head = format!(
        "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {LIMIT}\r\nConnection: close\r\n\r\n"
    );
    let status = send(&proxy, head, vec![b'x'; LIMIT as usize]).await;
    assert!(status.starts_with("http/1.1 200"), "{status}");
    let head = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\
                Connection: close\r\n\r\n"
        .to_owned();
    let status = send(&proxy, head, chunked(LIMIT as usize / 2)).await;
    assert!(status.starts_with("http/1.1 200"), "{status}");
    assert_eq!(
        origin.read.load(Ordering::SeqCst) - before,
        LIMIT + LIMIT / 2
    );
}
