//! The origin servers: round-robin selection, down-marking, and the keep-alive client that
//! sends requests to them.
//!
//! A server whose connect fails, or that does not start its answer within
//! `timeouts.upstream_response`, is skipped for [`ProxyConfig::down_time`] (nginx's
//! `max_fails=1 fail_timeout` with `proxy_next_upstream error timeout`, HAProxy's `observe
//! layer4`). After a failed connect any request goes to the next server, as nothing was
//! sent; after a timeout only an idempotent one whose body was not sent (RFC 9110 §9.2.2).
//! Any other failure after the connection was made is not retried: the upstream may have
//! acted on the request.
//!
//! Selection is a pure function of an `Instant` passed in, tested without sockets.
//!
//! [`ProxyConfig::down_time`]: crate::ProxyConfig::down_time

use std::future::Future;
use std::time::{Duration, Instant};

use http::header::{CONTENT_LENGTH, TRANSFER_ENCODING};
use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, HeaderValue, Method, Request, Response, Uri};
use http_body::Body as _;
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::capture_connection;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tower_service::Service as _;
use tracing::{debug, warn};

use crate::error::ProxyError;
use crate::exchange::connector::UpstreamConnector;
use crate::exchange::interim::Interim;
use crate::exchange::read_timeout::ReadTimeout;
use crate::exchange::replay::{Replay, ReplayBody};
use crate::exchange::request_body::{self, RequestBody, Sent};
use crate::exchange::upgrade;
use crate::settings::{Timeouts, Upstream, UpstreamRoots};
use zipwire_rules::forward;

mod failure;
mod members;
pub(crate) use failure::Chain;
use failure::{closed_before_answer, local_failure};
use members::Members;

/// Bytes read from an upstream connection at a time, and so the read buffer each one holds,
/// idle in the pool too (hyper reads ahead on an idle connection to see it close). Upstream
/// bodies are streamed into calls gathered elsewhere, so a bigger buffer only holds memory:
/// with 1,000 upstream connections in use, hyper's adaptive buffer (up to 16 KiB, and a
/// second one while the first is still referenced by a body frame) held 32 MB, 8 KiB reads
/// 10 MB (heaptrack, `bench/proxy.sh MODE=h2`).
const UPSTREAM_READ_SIZE: usize = 8 * 1024;

/// An upstream response body, failing when the upstream goes silent for
/// [`Timeouts::upstream_response`].
pub(crate) type UpstreamBody = ReadTimeout<Incoming>;

/// The upstream servers and the pooled client that reaches them.
#[derive(Debug)]
pub(crate) struct Upstreams {
    members: Members,
    client: Client<UpstreamConnector, ReplayBody<RequestBody>>,
    /// The connector again, for upgrades: each takes a fresh connection of its own.
    connector: UpstreamConnector,
    response_timeout: Duration,
    client_body_timeout: Duration,
    /// `limits.max_body`.
    max_body: Option<u64>,
}

/// What one request sends upstream, besides its body.
#[derive(Debug)]
pub(crate) struct Head {
    /// The request method.
    pub(crate) method: Method,
    /// The origin-form target.
    pub(crate) target: PathAndQuery,
    /// The request headers, already filtered for upstream.
    pub(crate) headers: HeaderMap,
    /// Where the upstream's interim (1xx) responses go, if the client can take them.
    pub(crate) interim: Option<Interim>,
}

impl Upstreams {
    /// The pool for `servers`, with the connect, idle and response timeouts of `timeouts`;
    /// `https://` servers are verified against `roots`; at most `max_connections` upstream
    /// connections open at once.
    pub(crate) fn new(
        servers: &[Upstream],
        roots: &UpstreamRoots,
        down_time: Duration,
        timeouts: &Timeouts,
        (max_connections, max_body): (usize, Option<u64>),
    ) -> Upstreams {
        let connector = UpstreamConnector::new(servers, roots, timeouts, max_connections);
        // Idle connections hold slots too: together they keep at most half, so that a burst
        // that left one server's connections idle cannot leave none to open to another (but
        // one each at least: with fewer than two slots per server they may hold them all).
        let idle_per_server = (max_connections / (2 * servers.len().max(1))).max(1);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(timeouts.idle)
            .pool_max_idle_per_host(idle_per_server)
            .http1_read_buf_exact_size(UPSTREAM_READ_SIZE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector.clone());
        Upstreams {
            members: Members::new(servers, down_time, Instant::now()),
            client,
            connector,
            response_timeout: timeouts.upstream_response,
            client_body_timeout: timeouts.client_body,
            max_body,
        }
    }

    /// The longest an upstream may take to start its response, or go silent mid-body.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// Sends a request to the next upstream that is up, and on to each other one that is up
    /// after a failed connect, or after no answer in time when the method is idempotent and
    /// the body was not sent; such a request also goes once more, to any upstream, when its
    /// connection closes before the answer ([`closed_before_answer`]). Returns the response
    /// head and its streaming body. The upstream's time to answer runs from the end of the
    /// request body: a slow upload is the client's time, bounded by the client body timeout.
    ///
    /// # Errors
    ///
    /// [`ProxyError::AllDown`] when there is no upstream, [`ProxyError::Connect`] when the last
    /// one tried could not be connected to, [`ProxyError::UpstreamTimeout`] when the response
    /// did not start in time, [`ProxyError::ClientTimeout`] and [`ProxyError::ClientBody`]
    /// when the client's body stalled or failed, [`ProxyError::Upstream`] for any other
    /// failure.
    pub(crate) async fn send(
        &self,
        mut head: Head,
        body: Incoming,
    ) -> Result<Response<UpstreamBody>, ProxyError> {
        let unknown_length = frame_unknown_length(&mut head.headers, &body);
        let (body, mut sent) = RequestBody::new(body, self.client_body_timeout, self.max_body);
        let replay = Replay::new(body);
        let idempotent = is_idempotent(&head.method);
        let mut tried = Vec::with_capacity(2);
        // One more try, on another connection, for an idempotent request whose connection
        // closed before the answer (see `closed_before_answer`).
        let mut closed_retry = idempotent;
        // A failed connect sent nothing: any request goes on to the next server that is up, until
        // every one was tried (nginx's `proxy_next_upstream error` with no limit on tries;
        // HAProxy's `retry-on conn-failure`). With a fixed number of tries, two servers down in a
        // row (or one, for a method not retried) would give 502 while others were up.
        //
        // An upstream that takes no answer in time is marked down too, and an idempotent request
        // that sent no body goes on the same way (nginx's default
        // `proxy_next_upstream error timeout`, a timeout counting towards `max_fails=1`): a server
        // that accepted connections and never answered would otherwise keep its share of requests,
        // each waiting for the whole timeout.
        let mut last_failure = None;
        loop {
            let Some(index) = self.members.pick(Instant::now(), &tried) else {
                // The last failure says more than "no upstream available".
                return Err(last_failure.unwrap_or(ProxyError::AllDown));
            };
            tried.push(index);
            let (scheme, authority) = self.members.address(index);
            let headers = head.headers.clone();
            let mut request = build(scheme, &authority, &head, headers, replay.attempt())?;
            if let Some(interim) = &head.interim {
                interim.register(&mut request);
            }
            let connection = capture_connection(&mut request);
            let outcome = answer_within(
                self.client.request(request),
                &mut sent,
                self.response_timeout,
            );
            match outcome.await {
                Ok(Ok(response)) if !forward::is_chunked_or_none(response.headers()) => {
                    // Dropped unread, the connection is closed rather than pooled.
                    return Err(ProxyError::Upstream {
                        upstream: authority,
                        source: "response transfer coding other than chunked".into(),
                    });
                }
                Ok(Ok(response)) if response.status() == http::StatusCode::SWITCHING_PROTOCOLS => {
                    // No upgrade was asked for (`Upgrade` is hop-by-hop, and WebSocket goes
                    // through `send_upgrade`): passed on, a bare 101 would cost the client its
                    // connection (and give an HTTP/1.0 client a 101, which RFC 9110 §15.2
                    // forbids).
                    return Err(ProxyError::Upstream {
                        upstream: authority,
                        source: "101 to a request that asked for no upgrade".into(),
                    });
                }
                Ok(Ok(response))
                    if unknown_length
                        && response.version() == http::Version::HTTP_10
                        && replay.is_unsent() =>
                {
                    // A pooled connection that has seen an HTTP/1.0 answer carries requests
                    // as HTTP/1.0, which has no chunked coding: hyper sent the request with
                    // no body at all. The client must not take the answer for its upload's.
                    return Err(ProxyError::Upstream {
                        upstream: authority,
                        source: "an HTTP/1.0 upstream got the request without its body of \
                                 unknown length"
                            .into(),
                    });
                }
                Ok(Ok(response)) => {
                    // RFC 9112 §6.3: a response with both Content-Length and Transfer-Encoding is
                    // framed by the chunked coding, but "ought to be handled as an error": whoever
                    // framed it by its length would read the rest as the next response. And after
                    // an HTTP/1.0 answer hyper sends later requests on that connection as HTTP/1.0,
                    // which cannot carry a body of unknown length: it would go unsent, and an
                    // origin that answered the empty request in HTTP/1.1 would have its answer
                    // taken for the upload's. Neither connection is used again.
                    let ambiguous = response.headers().contains_key(CONTENT_LENGTH)
                        && response.headers().contains_key(TRANSFER_ENCODING);
                    if ambiguous || response.version() == http::Version::HTTP_10 {
                        if let Some(connected) = connection.connection_metadata().as_ref() {
                            connected.poison();
                        }
                    }
                    let limit = self.response_timeout;
                    return Ok(response.map(|body| ReadTimeout::new(body, authority, limit)));
                }
                Err(TimedOut) => {
                    self.members.mark_down(index, Instant::now());
                    warn!(upstream = %authority, after = ?self.response_timeout, "no answer in time, marked down");
                    let failure = ProxyError::UpstreamTimeout {
                        upstream: authority,
                        after: self.response_timeout,
                    };
                    if !(idempotent && replay.is_unsent()) {
                        return Err(failure);
                    }
                    last_failure = Some(failure);
                    debug!("retrying on the next upstream");
                }
                Ok(Err(error)) if error.is_connect() => {
                    if local_failure(&error) {
                        // Out of descriptors or ports here: the upstream is not to blame, and
                        // marking it down would fail every client for `down_time` after.
                        warn!(upstream = %authority, error = %Chain(&error), "connect failed for want of local resources");
                    } else {
                        self.members.mark_down(index, Instant::now());
                        warn!(upstream = %authority, error = %Chain(&error), "connect failed, marked down");
                    }
                    let failure = ProxyError::Connect {
                        upstream: authority,
                        source: error.into(),
                    };
                    if !replay.is_unsent() {
                        return Err(failure);
                    }
                    last_failure = Some(failure);
                    debug!("retrying on the next upstream");
                }
                Ok(Err(error))
                    if closed_retry && replay.is_unsent() && closed_before_answer(&error) =>
                {
                    // The same server may take it: the connection failed, not the server.
                    closed_retry = false;
                    tried.pop();
                    warn!(upstream = %authority, error = %Chain(&error), "connection closed before the answer, retrying");
                }
                Ok(Err(error)) => {
                    return Err(match request_body::client_failure(error.into()) {
                        Ok(client) => client,
                        Err(source) => ProxyError::Upstream {
                            upstream: authority,
                            source,
                        },
                    })
                }
            }
        }
    }
}

impl Upstreams {
    /// Sends an upgrade request (a WebSocket handshake, RFC 6455 §4.1) to the next upstream
    /// that is up, on a connection of its own, never taken from the pool nor returned to it:
    /// after a `101` the connection belongs to the tunnel, and after any other answer it
    /// closes with its response. One attempt: a handshake is a GET, but the client retries it
    /// itself. The answer's time limit and error mapping are those of [`Upstreams::send`].
    ///
    /// # Errors
    ///
    /// As [`Upstreams::send`], and [`ProxyError::Upstream`] for a `101` that does not switch
    /// to WebSocket (RFC 9110 §7.8: the `Upgrade` of a 101 names the protocol switched to).
    pub(crate) async fn send_upgrade(
        &self,
        mut head: Head,
        body: Incoming,
    ) -> Result<Response<UpstreamBody>, ProxyError> {
        // A handshake is a GET: a chunked body would go unsent (see `frame_unknown_length`).
        frame_unknown_length(&mut head.headers, &body);
        let (body, mut sent) = RequestBody::new(body, self.client_body_timeout, self.max_body);
        let Some(index) = self.members.pick(Instant::now(), &[]) else {
            return Err(ProxyError::AllDown);
        };
        let (scheme, authority) = self.members.address(index);
        let mut request = build(scheme, &authority, &head, head.headers.clone(), body)?;
        // The connector routes by the absolute URI; the request line carries the path.
        let uri = std::mem::replace(request.uri_mut(), Uri::from(head.target.clone()));
        let io = match self.connector.clone().call(uri).await {
            Ok(io) => io,
            Err(error) => {
                // As `send`: a shortage here (no free upstream connection slot, no descriptor) is
                // not the upstream's failure, and marks no healthy server down.
                if local_failure(error.as_ref()) {
                    warn!(upstream = %authority, error = %Chain(error.as_ref()), "connect failed for want of local resources");
                } else {
                    self.members.mark_down(index, Instant::now());
                    warn!(upstream = %authority, error = %Chain(error.as_ref()), "connect failed, marked down");
                }
                return Err(ProxyError::Connect {
                    upstream: authority,
                    source: error,
                });
            }
        };
        let upstream_error = |authority: &Authority, error: hyper::Error| ProxyError::Upstream {
            upstream: authority.clone(),
            source: error.into(),
        };
        let (mut sender, connection) = hyper::client::conn::http1::Builder::new()
            .read_buf_exact_size(Some(UPSTREAM_READ_SIZE))
            .handshake(io)
            .await
            .map_err(|error| upstream_error(&authority, error))?;
        tokio::spawn(async move {
            // Ends with the response (the connection is not kept), or hands the connection
            // to the tunnel after a 101.
            if let Err(error) = connection.with_upgrades().await {
                debug!(%error, "upgrade connection to upstream ended");
            }
        });
        match answer_within(
            sender.send_request(request),
            &mut sent,
            self.response_timeout,
        )
        .await
        {
            Ok(Ok(response))
                if response.status() == http::StatusCode::SWITCHING_PROTOCOLS
                    && !response
                        .headers()
                        .get(http::header::UPGRADE)
                        .is_some_and(upgrade::is_websocket) =>
            {
                Err(ProxyError::Upstream {
                    upstream: authority,
                    source: "101 switching to another protocol than websocket".into(),
                })
            }
            Ok(Ok(response)) => {
                let limit = self.response_timeout;
                Ok(response.map(|body| ReadTimeout::new(body, authority, limit)))
            }
            Err(TimedOut) => {
                self.members.mark_down(index, Instant::now());
                warn!(upstream = %authority, after = ?self.response_timeout, "no answer in time, marked down");
                Err(ProxyError::UpstreamTimeout {
                    upstream: authority,
                    after: self.response_timeout,
                })
            }
            Ok(Err(error)) => Err(match request_body::client_failure(error.into()) {
                Ok(client) => client,
                Err(source) => ProxyError::Upstream {
                    upstream: authority,
                    source,
                },
            }),
        }
    }
}

/// Runs `request` until the upstream answers, giving it `limit` from the end of the request
/// body (`sent`), not from its start; before that end, `limit` to take each frame of the
/// body it was handed (an upstream that stops reading an upload).
async fn answer_within<F: Future>(
    request: F,
    sent: &mut Sent,
    limit: Duration,
) -> Result<F::Output, TimedOut> {
    tokio::pin!(request);
    let stalled = sent.upstream_stalled(limit);
    tokio::select! {
        answer = &mut request => return Ok(answer),
        () = sent.wait() => {}
        () = stalled => return Err(TimedOut),
    }
    tokio::time::timeout(limit, request)
        .await
        .map_err(|_| TimedOut)
}

/// The upstream took longer than its timeout to answer, or to read the request body.
struct TimedOut;

/// Says `Transfer-Encoding: chunked` on a request whose body has content of a length not
/// known ahead (chunked from an HTTP/1.1 client, DATA frames without `content-length` from an
/// HTTP/2 one). hyper frames such a body as chunked on its own, except for GET, HEAD and
/// CONNECT, whose body it then drops unsent unless the header asks for chunked: a search
/// sent as a chunked GET (Elasticsearch's API takes one) would reach the origin empty.
/// Returns whether it did. Over a connection hyper keeps at HTTP/1.0 (its upstream answered
/// in 1.0) such a body goes unsent all the same, which `send` turns into a 502.
fn frame_unknown_length(headers: &mut HeaderMap, body: &Incoming) -> bool {
    if body.is_end_stream()
        || body.size_hint().exact().is_some()
        || headers.contains_key(CONTENT_LENGTH)
    {
        return false;
    }
    headers.insert(TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
    true
}

/// Whether a method may be sent twice with the effect of once (RFC 9110 §9.2.2).
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

/// One attempt's request, with an absolute URI the client routes by.
pub(crate) fn build<B>(
    scheme: &Scheme,
    authority: &Authority,
    head: &Head,
    headers: HeaderMap,
    body: B,
) -> Result<Request<B>, ProxyError> {
    let uri = Uri::builder()
        .scheme(scheme.clone())
        .authority(authority.clone())
        .path_and_query(head.target.clone())
        .build()
        .map_err(|_| ProxyError::BadRequest {
            reason: "request target cannot be forwarded",
        })?;
    let mut request = Request::new(body);
    *request.method_mut() = head.method.clone();
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    Ok(request)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn idempotent_methods_follow_rfc_9110() {
        for method in ["GET", "HEAD", "OPTIONS", "PUT", "DELETE", "TRACE"] {
            assert!(is_idempotent(&method.parse().expect("valid")), "{method}");
        }
        for method in ["POST", "PATCH", "CONNECT"] {
            assert!(!is_idempotent(&method.parse().expect("valid")), "{method}");
        }
    }
}
