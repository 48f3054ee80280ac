//! One client connection: the HTTP protocol spoken on a client's byte stream, whatever
//! listener accepted it, and the requests it reads handed to the exchange.
//!
//! A TLS listener knows the protocol from ALPN ([`Protocol::from_alpn`]); a cleartext one
//! tells HTTP/2 by the client's connection preface (h2c "with prior knowledge", RFC 9113
//! §3.3) and serves HTTP/1.1 otherwise ([`Protocol::Detect`]). h2c by `Upgrade: h2c` is not
//! offered: RFC 9113 §3.1 deprecates it, and browsers never spoke it.
//!
//! The connection is counted (open and total) while it lives, and the time it may spend
//! between requests and on a request head is bounded by its [`Phases`]; on HTTP/2 the
//! connection is between requests while no stream is open.

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use http::header::{HeaderValue, STRICT_TRANSPORT_SECURITY};
use hyper::body::Incoming;
use hyper::server::conn::{http1, http2};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::sync::OwnedSemaphorePermit;
use tracing::{debug, debug_span, Instrument};

use crate::connection::graceful::Watcher;
use crate::connection::keepalive::{Phases, ServedBody, TimedStream};
use crate::counters::Counters;
use crate::exchange::more::MoreToCome;
use crate::exchange::outgoing::ResponseBody;
use crate::exchange::service::Proxy;
use crate::exchange::tunnel::{ClientLink, TunnelSlot};
use crate::settings::ProxyConfig;

/// Smallest per-connection buffer limit hyper accepts is 8 KiB; keep some room above it.
const MIN_BUF_SIZE: usize = 16 * 1024;

/// Room in the read buffer past the head limit: hyper's longest URI (65,534 bytes) and a
/// little more, so that a request line hyper refuses with 414 is read whole.
const URI_ROOM: usize = 64 * 1024 + 512;

/// The HTTP/2 client connection preface (RFC 9113 §3.4).
const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// The most read at once while telling the protocol: a typical request head.
const DETECT_READ: usize = 4096;

/// Response bytes one HTTP/2 stream may queue before its body is polled no further (h2's
/// default is 400 KiB): a compressed body is produced in frames of at most `coalesce`, so a
/// few of them keep the connection busy, and 128 streams that a client does not read hold
/// 16 MiB rather than 50.
const H2_SEND_BUFFER: usize = 128 * 1024;

/// Streams a client may reset before the server accepted them, then GOAWAY
/// `ENHANCE_YOUR_CALM` (h2's default, set here so that a change of default does not pass
/// unnoticed): the rapid-reset attack, CVE-2023-44487.
const H2_MAX_PENDING_ACCEPT_RESETS: usize = 20;

/// Streams the server may reset for the client's protocol errors, then GOAWAY
/// `ENHANCE_YOUR_CALM` (h2's default, set explicitly for the same reason).
const H2_MAX_LOCAL_ERROR_RESETS: usize = 1024;

/// The protocol a connection speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// HTTP/1.0 and 1.1, with upgrades (WebSocket).
    Http1,
    /// HTTP/2 from the first byte (ALPN `h2`).
    Http2,
    /// Cleartext: HTTP/2 when the client opens with the connection preface, else HTTP/1.
    Detect,
}

impl Protocol {
    /// The protocol a TLS handshake settled on: `h2` is HTTP/2; `http/1.1`, no ALPN at all
    /// (a client that offered none) and anything else is HTTP/1 (RFC 7301 §3.2: the server
    /// only selects a protocol the client offered, and it offers only these and `http/1.0`).
    pub(crate) fn from_alpn(alpn: Option<&[u8]>) -> Protocol {
        match alpn {
            Some(b"h2") => Protocol::Http2,
            _ => Protocol::Http1,
        }
    }
}

/// The protocol settings every client connection of one server shares.
#[derive(Clone, Debug)]
pub(crate) struct Protocols {
    http1: http1::Builder,
    http2: http2::Builder<TokioExecutor>,
}

impl Protocols {
    /// The settings for `config`: its head limit, HTTP/2 limits and keep-alive pings.
    pub(crate) fn new(config: &ProxyConfig) -> Protocols {
        let mut http1 = http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            // Off: `keepalive` times the head and the gap between requests apart.
            .header_read_timeout(None)
            // Read and write buffers per connection: a request head must fit, and a request
            // line up to hyper's URI limit past it, so that hyper answers 414 rather than 431
            // (the head limit itself is checked with the request, see `service`); responses
            // are streamed in frames of at most `coalesce`, so larger buffers only hold memory.
            .max_buf_size(config.limits.max_header_bytes.max(MIN_BUF_SIZE) + URI_ROOM)
            .keep_alive(true);
        let limits = &config.http2;
        let mut http2 = http2::Builder::new(TokioExecutor::new());
        http2
            .timer(TokioTimer::new())
            .max_concurrent_streams(limits.max_concurrent_streams)
            // SETTINGS_MAX_HEADER_LIST_SIZE (RFC 9113 §6.5.2): the head limit HTTP/1 has; it
            // also bounds how much of a header block h2 gathers from CONTINUATION frames
            // before it ends the connection (CVE-2024-27316).
            .max_header_list_size(u32::try_from(config.limits.max_header_bytes).unwrap_or(u32::MAX))
            .initial_stream_window_size(limits.initial_stream_window)
            .initial_connection_window_size(limits.initial_connection_window)
            .max_send_buf_size(H2_SEND_BUFFER)
            .max_pending_accept_reset_streams(H2_MAX_PENDING_ACCEPT_RESETS)
            .max_local_error_reset_streams(H2_MAX_LOCAL_ERROR_RESETS)
            .keep_alive_interval(limits.ping_interval)
            .keep_alive_timeout(limits.ping_timeout);
        // Extended CONNECT (RFC 8441, WebSocket over HTTP/2) stays off: the proxy does not
        // tunnel, so SETTINGS_ENABLE_CONNECT_PROTOCOL is never sent and a request with
        // `:protocol` is malformed (RFC 8441 §4).
        Protocols { http1, http2 }
    }
}

/// Whether a request came over TLS, in its extensions.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Secure(pub(crate) bool);

/// One client connection's share of the server.
pub(crate) struct Connection {
    pub(crate) proxy: Arc<Proxy>,
    pub(crate) counters: Arc<Counters>,
    pub(crate) phases: Phases,
    pub(crate) peer: SocketAddr,
    /// The `Strict-Transport-Security` value set on every response: `Some` on TLS
    /// listeners with `tls.hsts`, never on cleartext (RFC 6797 §7.2).
    pub(crate) hsts: Option<HeaderValue>,
    /// Whether the connection is TLS: dictionary codings are for secure contexts.
    pub(crate) secure: bool,
    /// Held while the connection is open: the connection limit.
    pub(crate) _permit: OwnedSemaphorePermit,
}

/// A hyper connection of either protocol, as one future.
type Serving = Pin<Box<dyn Future<Output = hyper::Result<()>> + Send>>;

/// One request's exchange, from its head to the response head.
type Exchange =
    Pin<Box<dyn Future<Output = Result<Response<ServedBody<ResponseBody>>, Infallible>> + Send>>;

impl Connection {
    /// The task serving the connection until the client closes it, it fails, or shutdown
    /// closes it (on HTTP/2 with GOAWAY, letting open streams finish).
    ///
    /// `stream` is the client's byte stream (a TCP socket, or TLS over one) and `protocol`
    /// what it speaks; `more` is the flag its
    /// [`CorkedStream`](crate::connection::cork::CorkedStream) reads, which an HTTP/1
    /// response body raises while more of it follows; `watcher` closes the connection when
    /// the server shuts down (taken when the connection was accepted, so that a shutdown
    /// signalled during a TLS handshake or while the protocol is detected reaches it).
    pub(crate) fn serve<S>(
        self,
        protocols: &Protocols,
        mut watcher: Watcher,
        stream: S,
        protocol: Protocol,
        more: MoreToCome,
    ) -> impl Future<Output = ()> + Send + 'static
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let protocols = protocols.clone();
        Counters::bump(&self.counters.connections);
        Counters::bump(&self.counters.active_connections);
        async move {
            debug!("accepted");
            let mut stream = Prefixed::new(TimedStream::new(stream, self.phases.clone()));
            let protocol = match protocol {
                // A shutdown closes a connection that has sent nothing yet at once, as it closes an
                // idle keep-alive one: else one silent client (a browser's preconnect) would hold
                // the stop for `timeouts.header_read`.
                Protocol::Detect => match tokio::select! {
                    detected = stream.detect() => detected,
                    () = watcher.signalled() => {
                        debug!("shutdown before a request");
                        return;
                    }
                } {
                    Ok(protocol) => protocol,
                    Err(error) => {
                        debug!(%error, "closed before a request");
                        return;
                    }
                },
                known => known,
            };
            // Where a request that upgrades the connection leaves its tunnel, run below once
            // hyper hands the connection over (HTTP/1 only).
            let tunnel = TunnelSlot::default();
            let connection =
                self.connection(&protocols, watcher, stream, protocol, more, tunnel.clone());
            match connection.await {
                Ok(()) => debug!("closed"),
                // Parse errors, timeouts and aborted bodies end here; hyper has already
                // answered what could be answered (400, 431).
                Err(error) => {
                    self.counters.errors.add_connection_error(&error);
                    debug!(%error, "connection ended with an error");
                }
            }
            // An upgraded connection lives on as a tunnel, still holding its permit.
            tunnel.run().await;
            // `self` is dropped here, or where the task is aborted at the end of shutdown.
            drop(self);
        }
    }

    /// hyper's connection for `protocol` on `stream`, watched for graceful shutdown.
    fn connection<S>(
        &self,
        protocols: &Protocols,
        watcher: Watcher,
        stream: Prefixed<TimedStream<S>>,
        protocol: Protocol,
        more: MoreToCome,
        tunnel: TunnelSlot,
    ) -> Serving
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let proxy = self.proxy.clone();
        let peer = self.peer;
        let phases = self.phases.clone();
        let hsts = self.hsts.clone();
        let secure = Secure(self.secure);
        let multiplexed = protocol == Protocol::Http2;
        if multiplexed {
            phases.multiplex();
        }
        let service = service_fn(move |mut request: Request<Incoming>| {
            request.extensions_mut().insert(secure);
            let proxy = proxy.clone();
            // `MSG_MORE` follows one response's writes; HTTP/2 interleaves streams in one
            // writer, so its bodies get a flag of their own that no socket reads.
            let more = if multiplexed {
                MoreToCome::default()
            } else {
                more.clone()
            };
            let cut = more.clone();
            let client = ClientLink::new(phases.interim(), &tunnel, {
                let phases = phases.clone();
                move || phases.tunnel()
            });
            let served = phases.serve();
            let answer = phases.answer();
            let hsts = hsts.clone();
            let span =
                debug_span!("request", method = %request.method(), path = %request.uri().path());
            // Boxed per request: hyper keeps a slot of the service future's size for the
            // life of every HTTP/1 connection, idle or streaming a body, and the exchange is
            // 4,656 bytes; boxed, the slot holds a pointer and the exchange's memory lives
            // only until its response head is ready.
            let exchange: Exchange = Box::pin(
                async move {
                    let mut response = proxy.handle(request, peer, more, client).await;
                    answer.given();
                    if let Some(value) = hsts {
                        response
                            .headers_mut()
                            .insert(STRICT_TRANSPORT_SECURITY, value);
                    }
                    Ok::<_, Infallible>(response.map(|body| ServedBody::new(body, served, cut)))
                }
                .instrument(span),
            );
            exchange
        });
        let io = TokioIo::new(stream);
        let idle = {
            let phases = self.phases.clone();
            async move { phases.idle_expired().await }
        };
        match protocol {
            Protocol::Http2 => {
                let connection = protocols.http2.serve_connection(io, service);
                Box::pin(watcher.watch(Box::pin(connection), idle))
            }
            // Upgrades on, for the WebSocket pass-through (`hyper::upgrade::on`).
            Protocol::Http1 | Protocol::Detect => {
                let connection = protocols.http1.serve_connection(io, service);
                Box::pin(watcher.watch(Box::pin(connection.with_upgrades()), idle))
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        Counters::drop_one(&self.counters.active_connections);
    }
}

/// A stream whose first bytes, read to tell the protocol, are read again by hyper.
#[derive(Debug)]
struct Prefixed<S> {
    prefix: Bytes,
    inner: S,
}

impl<S: AsyncRead + Unpin> Prefixed<S> {
    fn new(inner: S) -> Prefixed<S> {
        Prefixed {
            prefix: Bytes::new(),
            inner,
        }
    }

    /// Reads until the bytes hold the whole HTTP/2 preface or stop matching it. The reads are
    /// the head's, under `header_read`: a client that sends nothing is closed as on HTTP/1.
    /// Each read takes what is there, so an HTTP/1 head usually comes whole in the first one
    /// and hyper's first read is served from it.
    async fn detect(&mut self) -> io::Result<Protocol> {
        let mut seen = Vec::new();
        let mut buf = vec![0u8; DETECT_READ];
        while seen.len() < PREFACE.len() && PREFACE.starts_with(&seen) {
            let n = self.inner.read(&mut buf).await?;
            if n == 0 {
                // Closed: hyper's HTTP/1 reads the end and closes quietly.
                break;
            }
            seen.extend_from_slice(&buf[..n]);
        }
        let protocol = if seen.starts_with(PREFACE) {
            Protocol::Http2
        } else {
            Protocol::Http1
        };
        self.prefix = Bytes::from(seen);
        Ok(protocol)
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Prefixed<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.prefix.has_remaining() {
            let n = self.prefix.len().min(buf.remaining());
            buf.put_slice(&self.prefix[..n]);
            self.prefix.advance(n);
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Prefixed<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncWriteExt;

    #[test]
    fn alpn_picks_the_protocol() {
        assert_eq!(Protocol::from_alpn(Some(b"h2")), Protocol::Http2);
        assert_eq!(Protocol::from_alpn(Some(b"http/1.1")), Protocol::Http1);
        assert_eq!(Protocol::from_alpn(None), Protocol::Http1);
    }

    async fn detect(sent: &'static [u8]) -> (Protocol, Vec<u8>) {
        let (mut client, server) = tokio::io::duplex(1024);
        client.write_all(sent).await.expect("write");
        client.shutdown().await.expect("shutdown");
        let mut stream = Prefixed::new(server);
        let protocol = stream.detect().await.expect("detected");
        let mut again = Vec::new();
        stream.read_to_end(&mut again).await.expect("read");
        (protocol, again)
    }

    #[tokio::test]
    async fn the_preface_is_http2_and_every_byte_is_read_again() {
        let h2 = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
        assert_eq!(detect(h2).await, (Protocol::Http2, h2.to_vec()));
        let get = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n";
        assert_eq!(detect(get).await, (Protocol::Http1, get.to_vec()));
        // Partial reads: one byte at a time still finds the preface.
        let (mut client, server) = tokio::io::duplex(1);
        let writer = tokio::spawn(async move { client.write_all(PREFACE).await });
        let mut stream = Prefixed::new(server);
        assert_eq!(stream.detect().await.expect("detected"), Protocol::Http2);
        assert_eq!(stream.prefix, PREFACE);
        writer.await.expect("writer").expect("written");
        // A method that starts like the preface, and a connection closed early.
        let pri = b"PRIX / HTTP/1.1\r\n\r\n";
        assert_eq!(detect(pri).await, (Protocol::Http1, pri.to_vec()));
        assert_eq!(
            detect(b"PRI * HT").await,
            (Protocol::Http1, b"PRI * HT".to_vec())
        );
    }
}
