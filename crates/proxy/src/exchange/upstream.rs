//! The origin servers: round-robin selection, down-marking, and the keep-alive client that
//! sends requests to them.
//!
//! A server whose connect fails is skipped for [`ProxyConfig::down_time`] (nginx's
//! `max_fails=1 fail_timeout`, HAProxy's `observe layer4`), and an idempotent request goes to
//! the next one: a failed connect means nothing was sent, so only the method decides whether
//! sending it again is safe (RFC 9110 §9.2.2). A failure after the connection was made is not
//! retried: the upstream may have acted on the request.
//!
//! Selection is a pure function of an `Instant` passed in, tested without sockets.
//!
//! [`ProxyConfig::down_time`]: crate::ProxyConfig::down_time

use std::future::Future;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use http::uri::{Authority, PathAndQuery, Scheme};
use http::{HeaderMap, Method, Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use tracing::{debug, warn};

use crate::error::ProxyError;
use crate::exchange::forward;
use crate::exchange::read_timeout::ReadTimeout;
use crate::exchange::replay::{Replay, ReplayBody};
use crate::exchange::request_body::{self, RequestBody, Sent};
use crate::settings::{Timeouts, Upstream};

/// Read-buffer limit per upstream connection.
const UPSTREAM_BUF_SIZE: usize = 16 * 1024;

/// An upstream response body, failing when the upstream goes silent for
/// [`Timeouts::upstream_response`].
pub(crate) type UpstreamBody = ReadTimeout<Incoming>;

/// The upstream servers and the pooled client that reaches them.
#[derive(Debug)]
pub(crate) struct Upstreams {
    members: Members,
    client: Client<HttpConnector, ReplayBody<RequestBody>>,
    response_timeout: Duration,
    client_body_timeout: Duration,
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
}

impl Upstreams {
    /// The pool for `servers`, with the connect, idle and response timeouts of `timeouts`.
    pub(crate) fn new(servers: &[Upstream], down_time: Duration, timeouts: &Timeouts) -> Upstreams {
        let mut connector = HttpConnector::new();
        connector.set_connect_timeout(Some(timeouts.upstream_connect));
        connector.set_nodelay(true);
        let client = Client::builder(TokioExecutor::new())
            .pool_idle_timeout(timeouts.idle)
            // Upstream bodies are streamed: a read buffer past this only holds memory.
            .http1_max_buf_size(UPSTREAM_BUF_SIZE)
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .build(connector);
        Upstreams {
            members: Members::new(servers, down_time, Instant::now()),
            client,
            response_timeout: timeouts.upstream_response,
            client_body_timeout: timeouts.client_body,
        }
    }

    /// The longest an upstream may take to start its response, or go silent mid-body.
    pub(crate) fn response_timeout(&self) -> Duration {
        self.response_timeout
    }

    /// Sends a request to the next upstream that is up, and to one more after a connect
    /// failure when the method is idempotent and the body was not sent. Returns the response
    /// head and its streaming body. The upstream's time to answer runs from the end of the
    /// request body: a slow upload is the client's time, bounded by the client body timeout.
    ///
    /// # Errors
    ///
    /// [`ProxyError::AllDown`] when no upstream is up, [`ProxyError::Connect`] when the last
    /// one tried could not be connected to, [`ProxyError::UpstreamTimeout`] when the response
    /// did not start in time, [`ProxyError::ClientTimeout`] and [`ProxyError::ClientBody`]
    /// when the client's body stalled or failed, [`ProxyError::Upstream`] for any other
    /// failure.
    pub(crate) async fn send(
        &self,
        mut head: Head,
        body: Incoming,
    ) -> Result<Response<UpstreamBody>, ProxyError> {
        let (body, mut sent) = RequestBody::new(body, self.client_body_timeout);
        let replay = Replay::new(body);
        let attempts = if is_idempotent(&head.method) { 2 } else { 1 };
        let mut tried = Vec::with_capacity(attempts);
        loop {
            let Some(index) = self.members.pick(Instant::now(), &tried) else {
                return Err(ProxyError::AllDown);
            };
            tried.push(index);
            let authority = self.members.authority(index).clone();
            let last = tried.len() == attempts;
            let headers = if last {
                std::mem::take(&mut head.headers)
            } else {
                head.headers.clone()
            };
            let request = build(&head.method, &authority, &head.target, headers, &replay)?;
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
                Ok(Ok(response)) => {
                    let limit = self.response_timeout;
                    return Ok(response.map(|body| ReadTimeout::new(body, authority, limit)));
                }
                Err(_) => {
                    return Err(ProxyError::UpstreamTimeout {
                        upstream: authority,
                        after: self.response_timeout,
                    })
                }
                Ok(Err(error)) if error.is_connect() => {
                    self.members.mark_down(index, Instant::now());
                    warn!(upstream = %authority, error = %error, "connect failed, marked down");
                    let failure = ProxyError::Connect {
                        upstream: authority,
                        source: error.into(),
                    };
                    if last || !replay.is_unsent() {
                        return Err(failure);
                    }
                    debug!("retrying on the next upstream");
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

/// Runs `request` until the upstream answers, giving it `limit` from the end of the request
/// body (`sent`), not from its start.
async fn answer_within<F: Future>(
    request: F,
    sent: &mut Sent,
    limit: Duration,
) -> Result<F::Output, tokio::time::error::Elapsed> {
    tokio::pin!(request);
    tokio::select! {
        answer = &mut request => return Ok(answer),
        () = sent.wait() => {}
    }
    tokio::time::timeout(limit, request).await
}

/// Whether a method may be sent twice with the effect of once (RFC 9110 §9.2.2).
pub(crate) fn is_idempotent(method: &Method) -> bool {
    matches!(
        *method,
        Method::GET | Method::HEAD | Method::OPTIONS | Method::PUT | Method::DELETE | Method::TRACE
    )
}

/// One attempt's request, with an absolute URI the client routes by.
fn build(
    method: &Method,
    authority: &Authority,
    target: &PathAndQuery,
    headers: HeaderMap,
    replay: &Replay<RequestBody>,
) -> Result<Request<ReplayBody<RequestBody>>, ProxyError> {
    let uri = Uri::builder()
        .scheme(Scheme::HTTP)
        .authority(authority.clone())
        .path_and_query(target.clone())
        .build()
        .map_err(|_| ProxyError::BadRequest {
            reason: "request target cannot be forwarded",
        })?;
    let mut request = Request::new(replay.attempt());
    *request.method_mut() = method.clone();
    *request.uri_mut() = uri;
    *request.headers_mut() = headers;
    Ok(request)
}

/// The servers and their down marks, without the client. Server indices come from
/// [`Members::pick`], so indexing with them stays in range.
#[derive(Debug)]
struct Members {
    servers: Vec<Member>,
    next: AtomicUsize,
    epoch: Instant,
    down_time: Duration,
}

#[derive(Debug)]
struct Member {
    authority: Authority,
    /// Nanoseconds after `Members::epoch` until which the server is skipped; 0 when up.
    down_until: AtomicU64,
}

impl Members {
    fn new(servers: &[Upstream], down_time: Duration, epoch: Instant) -> Members {
        Members {
            servers: servers
                .iter()
                .map(|server| Member {
                    authority: server.authority.clone(),
                    down_until: AtomicU64::new(0),
                })
                .collect(),
            next: AtomicUsize::new(0),
            epoch,
            down_time,
        }
    }

    fn authority(&self, index: usize) -> &Authority {
        &self.servers[index].authority
    }

    /// The next server in round-robin order that is up at `now` and not in `tried`.
    fn pick(&self, now: Instant, tried: &[usize]) -> Option<usize> {
        let count = self.servers.len();
        if count == 0 {
            return None;
        }
        let start = self.next.fetch_add(1, Ordering::Relaxed);
        let now = self.nanos(now);
        (0..count)
            .map(|offset| start.wrapping_add(offset) % count)
            .find(|&index| {
                !tried.contains(&index)
                    && self.servers[index].down_until.load(Ordering::Relaxed) <= now
            })
    }

    /// Skips server `index` until `down_time` after `now`.
    fn mark_down(&self, index: usize, now: Instant) {
        let until = self.nanos(now + self.down_time);
        self.servers[index]
            .down_until
            .fetch_max(until, Ordering::Relaxed);
    }

    /// `at` as nanoseconds after the epoch (at least 1, so that 0 can mean "up").
    fn nanos(&self, at: Instant) -> u64 {
        let nanos = at.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(nanos).unwrap_or(u64::MAX).max(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn members(count: usize, epoch: Instant) -> Members {
        let servers: Vec<Upstream> = (0..count)
            .map(|i| Upstream {
                authority: Authority::try_from(format!("10.0.0.{i}:80")).expect("valid"),
            })
            .collect();
        Members::new(&servers, Duration::from_secs(10), epoch)
    }

    #[test]
    fn servers_take_turns() {
        let now = Instant::now();
        let members = members(3, now);
        let picks: Vec<_> = (0..6).filter_map(|_| members.pick(now, &[])).collect();
        assert_eq!(picks, [0, 1, 2, 0, 1, 2]);
    }

    #[test]
    fn a_down_server_is_skipped_until_its_down_time_ends() {
        let now = Instant::now();
        let members = members(2, now);
        members.mark_down(0, now);
        let picks: Vec<_> = (0..4).filter_map(|_| members.pick(now, &[])).collect();
        assert_eq!(picks, [1, 1, 1, 1]);
        let later = now + Duration::from_secs(10);
        let picks: Vec<_> = (0..2).filter_map(|_| members.pick(later, &[])).collect();
        assert_eq!(picks, [0, 1]);
    }

    #[test]
    fn a_retry_never_picks_a_server_already_tried() {
        let now = Instant::now();
        let members = members(2, now);
        let first = members.pick(now, &[]).expect("one is up");
        let second = members.pick(now, &[first]).expect("the other is up");
        assert_ne!(first, second);
        assert_eq!(members.pick(now, &[first, second]), None);
    }

    #[test]
    fn all_down_picks_none() {
        let now = Instant::now();
        let members = members(2, now);
        members.mark_down(0, now);
        members.mark_down(1, now);
        assert_eq!(members.pick(now + Duration::from_secs(1), &[]), None);
        let empty = Members::new(&[], Duration::from_secs(10), now);
        assert_eq!(empty.pick(now, &[]), None);
    }

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
