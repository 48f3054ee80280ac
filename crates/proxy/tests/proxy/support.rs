//! An in-process origin serving fixtures, the proxy in front of it, and client helpers.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::HeaderValue;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body::{Body, Frame};
use http_body_util::{BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use zipwire_codec::{Format, Level, Limits};
use zipwire_proxy::{Counters, Hurry, ProxyConfig, ProxyError, Server, Throttle, Upstream};
use zipwire_testkit::origin::AcceptLoop;

/// How long the pausing fixtures pause.
pub const PAUSE: Duration = Duration::from_millis(1_500);

/// The first part of `/pause`, sent before the pause.
pub const PAUSE_FIRST: &[u8] = b"first part, sent before the upstream pauses\n";

/// Text that compresses well: an HTML list.
pub fn html(len: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(len + 64);
    let mut i = 0u64;
    while out.len() < len {
        out.extend_from_slice(
            format!("<li class=\"item\"><a href=\"/item/{i}\">Item number {i}</a></li>\n")
                .as_bytes(),
        );
        i += 1;
    }
    out.truncate(len);
    out
}

/// Bytes that do not compress (xorshift), standing for an image.
pub fn noise(len: usize) -> Vec<u8> {
    let mut state = 0x9e37_79b9_7f4a_7c15_u64;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state as u8
        })
        .collect()
}

/// A JSON document.
pub fn json(records: usize) -> Vec<u8> {
    let items: Vec<String> = (0..records)
        .map(|i| {
            format!(
                "{{\"id\":{i},\"name\":\"record {i}\",\"active\":{}}}",
                i % 2 == 0
            )
        })
        .collect();
    format!("[{}]", items.join(",")).into_bytes()
}

/// The body of the `/big` fixture.
pub fn big() -> Vec<u8> {
    html(4 * 1024 * 1024)
}

/// A gzip body decoded by zipwire's decoder and by flate2's (its own framing and checksums),
/// which must agree.
pub fn gunzip(data: &[u8]) -> Vec<u8> {
    let ours = zipwire_codec::decompress(Format::Gzip, data, Limits::default())
        .expect("a complete gzip body");
    let theirs = flate2_decode(flate2::read::MultiGzDecoder::new(data));
    assert!(
        ours == theirs,
        "zipwire and flate2 decode the gzip body differently"
    );
    ours
}

/// A zlib body decoded by zipwire's decoder and by flate2's, which must agree.
pub fn unzlib(data: &[u8]) -> Vec<u8> {
    let ours = zipwire_codec::decompress(Format::Zlib, data, Limits::default())
        .expect("a complete zlib body");
    let theirs = flate2_decode(flate2::read::ZlibDecoder::new(data));
    assert!(
        ours == theirs,
        "zipwire and flate2 decode the zlib body differently"
    );
    ours
}

fn flate2_decode(mut decoder: impl io::Read) -> Vec<u8> {
    let mut out = Vec::new();
    decoder
        .read_to_end(&mut out)
        .expect("flate2 decodes the body");
    out
}

type OriginBody = http_body_util::combinators::UnsyncBoxBody<Bytes, io::Error>;

/// An origin server on 127.0.0.1:0 serving the fixtures below: testkit's accept loop with
/// hyper's HTTP/1 server on each connection.
pub struct Origin {
    pub addr: SocketAddr,
    /// Connections accepted so far.
    pub connections: Arc<AtomicUsize>,
    /// Requests served so far.
    pub hits: Arc<AtomicUsize>,
    /// The headers of the last request received.
    pub last_headers: Arc<Mutex<Option<HeaderMap>>>,
    _accept: AcceptLoop,
}

impl Origin {
    pub async fn start() -> Origin {
        Origin::serve(TcpListener::bind("127.0.0.1:0").await.expect("bind origin"))
    }

    /// The origin on a listener the caller made.
    pub fn serve(listener: TcpListener) -> Origin {
        let hits = Arc::new(AtomicUsize::new(0));
        let last_headers = Arc::new(Mutex::new(None));
        let state = (hits.clone(), last_headers.clone());
        let accept = AcceptLoop::spawn(listener, move |stream| {
            let hits = state.0.clone();
            let last = state.1.clone();
            async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    hits.fetch_add(1, Ordering::SeqCst);
                    *last.lock().expect("not poisoned") = Some(request.headers().clone());
                    async move { Ok::<_, Infallible>(fixture(request).await) }
                });
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await;
            }
        });
        Origin {
            addr: accept.addr(),
            connections: accept.connections.clone(),
            hits,
            last_headers,
            _accept: accept,
        }
    }

    pub fn upstream(&self) -> Upstream {
        upstream(self.addr)
    }

    pub fn last_headers(&self) -> HeaderMap {
        self.last_headers
            .lock()
            .expect("not poisoned")
            .clone()
            .expect("the origin got a request")
    }
}

pub fn upstream(addr: SocketAddr) -> Upstream {
    Upstream::http(addr.to_string().parse().expect("valid authority"))
}

/// An address nothing listens on (bound, then closed).
/// A loopback port that refuses connections for as long as the value lives: the socket is
/// bound but never listens, so no other test's listener can take the port meanwhile (a port
/// that is merely closed could be handed to a parallel test's server).
pub struct DeadPort {
    socket: tokio::net::TcpSocket,
    pub addr: SocketAddr,
}

impl DeadPort {
    /// Brings the port to life: an [`Origin`] listens on it from now on.
    pub fn revive(self) -> Origin {
        Origin::serve(self.socket.listen(64).expect("listen on the dead port"))
    }
}

pub async fn dead_addr() -> DeadPort {
    let socket = tokio::net::TcpSocket::new_v4().expect("socket");
    socket
        .bind("127.0.0.1:0".parse().expect("valid"))
        .expect("bind");
    let addr = socket.local_addr().expect("address");
    DeadPort { socket, addr }
}

fn full(data: impl Into<Bytes>) -> OriginBody {
    Full::new(data.into())
        .map_err(|never: Infallible| match never {})
        .boxed_unsync()
}

fn respond(
    status: u16,
    headers: &[(&'static str, &str)],
    body: OriginBody,
) -> Response<OriginBody> {
    let mut response = Response::new(body);
    *response.status_mut() = StatusCode::from_u16(status).expect("valid status");
    for &(name, value) in headers {
        response
            .headers_mut()
            .append(name, HeaderValue::from_str(value).expect("valid value"));
    }
    response
}

/// A body fed by a task, so fixtures can pause, stream and fail.
struct ChannelBody(mpsc::Receiver<Result<Frame<Bytes>, io::Error>>);

impl Body for ChannelBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        self.0.poll_recv(cx)
    }
}

/// A body whose frames a spawned task writes.
fn streamed<F, Fut>(write: F) -> OriginBody
where
    F: FnOnce(mpsc::Sender<Result<Frame<Bytes>, io::Error>>) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(write(tx));
    ChannelBody(rx).boxed_unsync()
}

fn data(bytes: impl Into<Bytes>) -> Result<Frame<Bytes>, io::Error> {
    Ok(Frame::data(bytes.into()))
}

async fn fixture(request: Request<Incoming>) -> Response<OriginBody> {
    let path = request.uri().path().to_owned();
    match path.as_str() {
        "/page.html" | "/logged.html" => {
            let body = html(50_000);
            respond(
                200,
                &[
                    ("content-type", "text/html; charset=utf-8"),
                    ("etag", "\"v1\""),
                    ("vary", "Cookie"),
                    ("accept-ranges", "bytes"),
                ],
                full(body),
            )
        }
        "/data.json" => respond(
            200,
            &[("content-type", "application/json")],
            full(json(500)),
        ),
        "/image.png" => respond(200, &[("content-type", "image/png")], full(noise(10_000))),
        "/grpc" => respond(
            200,
            &[("content-type", "application/grpc+proto")],
            full(html(5_000)),
        ),
        "/small.txt" => respond(200, &[("content-type", "text/plain")], full(html(100))),
        "/gzipped.html" => {
            let gz = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &html(50_000));
            respond(
                200,
                &[("content-type", "text/html"), ("content-encoding", "gzip")],
                full(gz),
            )
        }
        "/brotli.html" => {
            let mut br = Vec::new();
            {
                let mut writer = brotli::CompressorWriter::new(&mut br, 4096, 5, 22);
                std::io::Write::write_all(&mut writer, &html(50_000)).expect("br");
            }
            respond(
                200,
                &[
                    ("content-type", "text/html"),
                    ("content-encoding", "br"),
                    ("cache-control", "max-age=60"),
                ],
                full(br),
            )
        }
        "/zstd.html" => respond(
            200,
            &[("content-type", "text/html"), ("content-encoding", "zstd")],
            full(zstd::stream::encode_all(&html(50_000)[..], 3).expect("zstd")),
        ),
        "/zstd-cut.html" => {
            let mut zst = zstd::stream::encode_all(&html(50_000)[..], 3).expect("zstd");
            zst.truncate(zst.len() - 10);
            respond(
                200,
                &[("content-type", "text/html"), ("content-encoding", "zstd")],
                full(zst),
            )
        }
        "/big" => respond(
            200,
            &[("content-type", "text/plain")],
            streamed(|tx| async move {
                for chunk in big().chunks(16 * 1024) {
                    if tx.send(data(Bytes::copy_from_slice(chunk))).await.is_err() {
                        return;
                    }
                }
            }),
        ),
        "/pause" => respond(
            200,
            &[("content-type", "text/plain")],
            streamed(|tx| async move {
                let _ = tx.send(data(PAUSE_FIRST)).await;
                tokio::time::sleep(PAUSE).await;
                let _ = tx.send(data(html(10_000))).await;
            }),
        ),
        "/events" => respond(
            200,
            &[("content-type", "text/event-stream")],
            streamed(|tx| async move {
                let _ = tx.send(data("data: one\n\n")).await;
                tokio::time::sleep(PAUSE).await;
                let _ = tx.send(data("data: two\n\n")).await;
            }),
        ),
        "/dies" => respond(
            200,
            &[("content-type", "text/plain")],
            streamed(|tx| async move {
                let _ = tx.send(data(html(100_000))).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
                let reset = io::Error::new(io::ErrorKind::ConnectionReset, "origin died");
                let _ = tx.send(Err(reset)).await;
            }),
        ),
        "/dies-at-once" => respond(
            200,
            &[("content-type", "text/html")],
            streamed(|tx| async move {
                let reset = io::Error::new(io::ErrorKind::ConnectionReset, "origin died");
                let _ = tx.send(Err(reset)).await;
            }),
        ),
        "/parts.png" => respond(
            200,
            &[("content-type", "image/png"), ("content-length", "100000")],
            streamed(|tx| async move {
                for part in noise(100_000).chunks(10_000) {
                    if tx.send(data(Bytes::copy_from_slice(part))).await.is_err() {
                        return;
                    }
                    tokio::time::sleep(Duration::from_millis(2)).await;
                }
            }),
        ),
        "/late.html" => respond(
            200,
            &[("content-type", "text/html"), ("content-length", "10000")],
            streamed(|tx| async move {
                tokio::time::sleep(PAUSE).await;
                let _ = tx.send(data(html(10_000))).await;
            }),
        ),
        "/late-stream" => respond(
            200,
            &[("content-type", "text/html")],
            streamed(|tx| async move {
                tokio::time::sleep(PAUSE).await;
                let _ = tx.send(data(html(10_000))).await;
            }),
        ),
        "/stall.html" => respond(
            200,
            &[("content-type", "text/html"), ("content-length", "150000")],
            streamed(|tx| async move {
                let body = Bytes::from(html(150_000));
                let _ = tx.send(data(body.slice(..100_000))).await;
                tokio::time::sleep(PAUSE).await;
                let _ = tx.send(data(body.slice(100_000..))).await;
            }),
        ),
        "/hang.html" => respond(
            200,
            &[("content-type", "text/html"), ("content-length", "20000")],
            streamed(|tx| async move {
                // The first part comes a little after the head, as from a slow backend: the
                // read timeout counts from it, not from the head.
                tokio::time::sleep(Duration::from_millis(300)).await;
                let _ = tx.send(data(html(5_000))).await;
                // Silent, connection open, far past the proxy's read timeout.
                tokio::time::sleep(Duration::from_secs(60)).await;
                drop(tx);
            }),
        ),
        "/no-content" => respond(204, &[("content-type", "text/html")], full(Bytes::new())),
        "/not-modified" => respond(
            304,
            &[("etag", "\"v1\""), ("content-type", "text/html")],
            full(Bytes::new()),
        ),
        "/partial" => respond(
            206,
            &[
                ("content-type", "text/html"),
                ("content-range", "bytes 0-999/50000"),
            ],
            full(html(1_000)),
        ),
        "/slow-head" => {
            tokio::time::sleep(Duration::from_secs(3)).await;
            respond(200, &[("content-type", "text/plain")], full(html(1_000)))
        }
        "/slow-body" => {
            tokio::time::sleep(Duration::from_millis(500)).await;
            respond(200, &[("content-type", "text/html")], full(html(20_000)))
        }
        "/very-slow" => {
            tokio::time::sleep(Duration::from_secs(5)).await;
            respond(200, &[("content-type", "text/plain")], full(html(1_000)))
        }
        "/upload" => {
            let received = request
                .into_body()
                .collect()
                .await
                .map(|body| body.to_bytes().len())
                .unwrap_or(0);
            respond(
                200,
                &[("content-type", "text/plain")],
                full(format!("received {received}")),
            )
        }
        _ => respond(404, &[("content-type", "text/plain")], full("not found")),
    }
}

/// A running proxy.
pub struct Proxy {
    pub addr: SocketAddr,
    pub admin: Option<SocketAddr>,
    pub stats: Arc<Counters>,
    pub throttle: Throttle,
    pub hurry: Hurry,
    shutdown: Option<oneshot::Sender<()>>,
    pub task: Option<JoinHandle<Result<(), ProxyError>>>,
    /// The runtime of a proxy started with [`Proxy::start_apart`], shut down on drop.
    runtime: Option<tokio::runtime::Runtime>,
}

impl Proxy {
    /// Starts a proxy in front of `upstreams`, with short timeouts, after `adjust`.
    pub async fn start(upstreams: Vec<Upstream>, adjust: impl FnOnce(&mut ProxyConfig)) -> Proxy {
        Proxy::try_start(upstreams, adjust)
            .await
            .expect("bind proxy")
    }

    /// [`Proxy::start`], or the error binding its listeners gave.
    pub async fn try_start(
        upstreams: Vec<Upstream>,
        adjust: impl FnOnce(&mut ProxyConfig),
    ) -> Result<Proxy, ProxyError> {
        let config = Proxy::config(upstreams, adjust);
        let server = Server::bind(config).await?;
        Ok(Proxy::serve(server, &tokio::runtime::Handle::current()))
    }

    /// [`Proxy::start`], but the proxy runs on a runtime of its own with one worker thread
    /// (as with `threads = 1`): what blocks that thread holds up the proxy's other requests,
    /// never the test's own tasks and timers.
    pub async fn start_apart(
        upstreams: Vec<Upstream>,
        adjust: impl FnOnce(&mut ProxyConfig),
    ) -> Proxy {
        let config = Proxy::config(upstreams, adjust);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .expect("the proxy's runtime");
        let server = runtime
            .spawn(Server::bind(config))
            .await
            .expect("binding ran")
            .expect("bind proxy");
        let mut proxy = Proxy::serve(server, runtime.handle());
        proxy.runtime = Some(runtime);
        proxy
    }

    /// The test settings: short timeouts, one thread, then `adjust`.
    fn config(upstreams: Vec<Upstream>, adjust: impl FnOnce(&mut ProxyConfig)) -> ProxyConfig {
        let mut config = ProxyConfig::new("127.0.0.1:0".parse().expect("valid"), upstreams);
        config.threads = 1;
        config.timeouts.header_read = Duration::from_secs(1);
        config.timeouts.upstream_connect = Duration::from_millis(500);
        config.timeouts.upstream_response = Duration::from_secs(2);
        config.timeouts.shutdown_grace = Duration::from_secs(2);
        adjust(&mut config);
        config
    }

    /// Runs `server` on `runtime` until shut down.
    fn serve(server: Server, runtime: &tokio::runtime::Handle) -> Proxy {
        let addr = server.local_addr();
        let admin = server.admin_addr();
        let stats = server.stats();
        let throttle = server.throttle();
        let hurry = server.hurry();
        let (tx, rx) = oneshot::channel::<()>();
        let task = runtime.spawn(server.run(async move {
            let _ = rx.await;
        }));
        Proxy {
            addr,
            admin,
            stats,
            throttle,
            hurry,
            shutdown: Some(tx),
            task: Some(task),
            runtime: None,
        }
    }

    /// The proxy in front of one origin, with the default settings.
    pub async fn before(origin: &Origin) -> Proxy {
        Proxy::start(vec![origin.upstream()], |_| {}).await
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Signals shutdown and returns the running server's task.
    pub fn shut_down(&mut self) -> JoinHandle<Result<(), ProxyError>> {
        if let Some(tx) = self.shutdown.take() {
            let _ = tx.send(());
        }
        self.task.take().expect("running")
    }

    pub fn count(counter: &std::sync::atomic::AtomicU64) -> u64 {
        counter.load(Ordering::Relaxed)
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

pub type TestClient = Client<hyper_util::client::legacy::connect::HttpConnector, Empty<Bytes>>;

/// `DELETE target` on the proxy's admin listener: the whole answer, head and body.
pub async fn purge(proxy: &Proxy, target: &str) -> String {
    let admin = proxy.admin.expect("an admin listener");
    let mut stream = tokio::net::TcpStream::connect(admin)
        .await
        .expect("connect");
    let request =
        format!("DELETE {target} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes())
        .await
        .expect("write");
    let mut out = Vec::new();
    tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut out)
        .await
        .expect("read");
    String::from_utf8_lossy(&out).into_owned()
}

pub fn client() -> TestClient {
    Client::builder(TokioExecutor::new()).build_http()
}

/// A GET (or other method) with the given headers.
pub fn request(
    method: &str,
    url: &str,
    headers: &[(&'static str, &'static str)],
) -> Request<Empty<Bytes>> {
    let mut request = Request::builder().method(method).uri(url);
    for &(name, value) in headers {
        request = request.header(name, value);
    }
    request.body(Empty::new()).expect("valid request")
}

/// Sends a request and reads the whole response.
pub async fn fetch(
    client: &TestClient,
    method: &str,
    url: &str,
    headers: &[(&'static str, &'static str)],
) -> (http::response::Parts, Bytes) {
    let response = client
        .request(request(method, url, headers))
        .await
        .expect("a response");
    let (parts, body) = response.into_parts();
    let body = body.collect().await.expect("a complete body").to_bytes();
    (parts, body)
}

/// Writes `raw` on a new connection and reads until the proxy closes it.
///
/// # Panics
///
/// When the proxy has not closed the connection within `limit`: every caller expects the
/// close (an error answer, `Connection: close`, a close-delimited body), and a test that did
/// not see it would claim more than it checked.
pub async fn raw_exchange(addr: SocketAddr, raw: &[u8], limit: Duration) -> Vec<u8> {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(raw).await.expect("write");
    let mut out = Vec::new();
    match tokio::time::timeout(limit, stream.read_to_end(&mut out)).await {
        Ok(Ok(_)) => out,
        // A reset after the answer still closes the connection (the proxy may close with
        // unread request bytes, which makes the kernel send RST).
        Ok(Err(e)) if e.kind() == io::ErrorKind::ConnectionReset => out,
        Ok(Err(e)) => panic!("reading the answer: {e}"),
        Err(_) => panic!(
            "the proxy did not close the connection within {limit:?}; got {:?}",
            String::from_utf8_lossy(&out)
        ),
    }
}

/// Splits a raw HTTP/1 response into its head (as text) and body.
pub fn split_head(raw: &[u8]) -> (String, &[u8]) {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a complete head");
    (
        String::from_utf8_lossy(&raw[..end]).to_lowercase(),
        &raw[end + 4..],
    )
}

/// Runs the futures concurrently and returns their outputs in order.
pub async fn futures_join<F>(futures: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let tasks: Vec<_> = futures.map(tokio::spawn).collect();
    let mut outputs = Vec::with_capacity(tasks.len());
    for task in tasks {
        outputs.push(task.await.expect("task finished"));
    }
    outputs
}
