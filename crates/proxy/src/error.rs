//! Proxy errors: each knows whose fault it is (pingora's error source), which fixes the status
//! the client is sent and whether the request may go to another upstream.

use std::error::Error as StdError;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use http::uri::Authority;
use http::StatusCode;
use zipwire_codec::DecodeError;

/// Who caused an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Side {
    /// The client sent something the proxy will not forward: 4xx.
    Client,
    /// An origin server failed or was unreachable: 502 or 504.
    Upstream,
    /// The proxy itself (binding, runtime, a request it could not build): 500.
    Internal,
}

impl Side {
    /// A short lowercase name, for logs and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Upstream => "upstream",
            Side::Internal => "internal",
        }
    }
}

impl fmt::Display for Side {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Why the proxy could not serve a request, or could not run.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProxyError {
    /// The listen address could not be bound.
    Bind {
        /// The address from [`ProxyConfig::listen`](crate::ProxyConfig::listen).
        addr: SocketAddr,
        /// What the operating system said.
        source: io::Error,
    },
    /// The async runtime could not be built.
    Runtime(io::Error),
    /// The configuration names no upstream.
    NoUpstreams,
    /// The configuration names no listener, cleartext or TLS.
    NoListeners,
    /// The request cannot be forwarded as it is (a target that is not a path, CONNECT).
    BadRequest {
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The request is refused with a status of its own: 501 for a transfer coding other than
    /// chunked, 414 and 431 for a request head over the limit.
    Refused {
        /// The status the client gets (4xx or 501).
        status: StatusCode,
        /// What is wrong with the request.
        reason: &'static str,
    },
    /// The client's request body failed while it was sent upstream: malformed chunked
    /// framing, more data than declared, the connection closed mid-body (400).
    ClientBody {
        /// The upstream client's error, whose chain holds the request body's.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The client sent nothing more of its request body for
    /// [`Timeouts::client_body`](crate::Timeouts::client_body) (408).
    ClientTimeout {
        /// The time it was given.
        after: Duration,
    },
    /// No upstream left to try: those tried could not be connected to and the rest are marked
    /// down (or there are none).
    AllDown,
    /// Connecting to an upstream failed (refused, unreachable, connect timeout). The request
    /// was not sent, so an idempotent one may go to the next upstream.
    Connect {
        /// The upstream tried.
        upstream: Authority,
        /// The connector's error.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The upstream failed after the connection was made: reset, invalid response.
    Upstream {
        /// The upstream that failed.
        upstream: Authority,
        /// The client's error.
        source: Box<dyn StdError + Send + Sync>,
    },
    /// The upstream did not start its response, or went silent before the proxy had sent
    /// anything, for [`Timeouts::upstream_response`](crate::Timeouts::upstream_response).
    UpstreamTimeout {
        /// The upstream that was too slow.
        upstream: Authority,
        /// The time it was given.
        after: Duration,
    },
    /// The upstream's gzip body, decoded for a client that does not accept gzip, failed
    /// before anything was sent: it does not decode, or it decodes past
    /// [`Compression::gunzip_max_output`](crate::Compression::gunzip_max_output).
    Gunzip(DecodeError),
    /// A TLS certificate or key that cannot be used (missing, unreadable, not PEM, a key
    /// that does not match its certificate), or TLS listeners without a certificate.
    Tls {
        /// The file at fault, when one is.
        path: Option<PathBuf>,
        /// What is wrong with it.
        reason: String,
    },
}

impl ProxyError {
    /// Whose fault the error is.
    pub fn side(&self) -> Side {
        match self {
            ProxyError::BadRequest { .. }
            | ProxyError::Refused { .. }
            | ProxyError::ClientBody { .. }
            | ProxyError::ClientTimeout { .. } => Side::Client,
            ProxyError::AllDown
            | ProxyError::Connect { .. }
            | ProxyError::Upstream { .. }
            | ProxyError::UpstreamTimeout { .. }
            | ProxyError::Gunzip(_) => Side::Upstream,
            ProxyError::Bind { .. }
            | ProxyError::Runtime(_)
            | ProxyError::NoUpstreams
            | ProxyError::NoListeners
            | ProxyError::Tls { .. } => Side::Internal,
        }
    }

    /// The status the client gets: 400 for its own faults (408 for a stalled request body, or
    /// the status a refusal names), 504 for an upstream timeout, 502 for other upstream
    /// failures, 500 for the proxy's.
    pub fn status(&self) -> StatusCode {
        match self {
            ProxyError::UpstreamTimeout { .. } => StatusCode::GATEWAY_TIMEOUT,
            ProxyError::Refused { status, .. } => *status,
            ProxyError::ClientTimeout { .. } => StatusCode::REQUEST_TIMEOUT,
            _ => match self.side() {
                Side::Client => StatusCode::BAD_REQUEST,
                Side::Upstream => StatusCode::BAD_GATEWAY,
                Side::Internal => StatusCode::INTERNAL_SERVER_ERROR,
            },
        }
    }

    /// Whether the request never reached the upstream, so that it may be sent to another one
    /// (if its method is idempotent).
    pub fn is_retryable(&self) -> bool {
        matches!(self, ProxyError::Connect { .. })
    }
}

impl fmt::Display for ProxyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProxyError::Bind { addr, .. } => write!(f, "cannot listen on {addr}"),
            ProxyError::Runtime(_) => f.write_str("cannot start the runtime"),
            ProxyError::NoUpstreams => f.write_str("no upstream configured"),
            ProxyError::NoListeners => f.write_str("no listener configured"),
            ProxyError::BadRequest { reason } => write!(f, "bad request: {reason}"),
            ProxyError::Refused { status, reason } => {
                write!(f, "refused ({}): {reason}", status.as_u16())
            }
            ProxyError::ClientBody { .. } => f.write_str("request body failed"),
            ProxyError::ClientTimeout { after } => {
                write!(f, "client sent no request body for {after:?}")
            }
            ProxyError::AllDown => f.write_str("no upstream available"),
            ProxyError::Connect { upstream, .. } => write!(f, "cannot connect to {upstream}"),
            ProxyError::Upstream { upstream, .. } => write!(f, "upstream {upstream} failed"),
            ProxyError::UpstreamTimeout { upstream, after } => {
                write!(f, "upstream {upstream} sent nothing for {after:?}")
            }
            ProxyError::Gunzip(error) => describe_gunzip_failure(error, f),
            ProxyError::Tls {
                path: Some(path),
                reason,
            } => write!(f, "{}: {reason}", path.display()),
            ProxyError::Tls { path: None, reason } => write!(f, "tls: {reason}"),
        }
    }
}

impl StdError for ProxyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            ProxyError::Bind { source, .. } | ProxyError::Runtime(source) => Some(source),
            ProxyError::Connect { source, .. }
            | ProxyError::Upstream { source, .. }
            | ProxyError::ClientBody { source } => Some(source.as_ref()),
            ProxyError::Gunzip(error) => Some(error),
            ProxyError::NoUpstreams
            | ProxyError::NoListeners
            | ProxyError::BadRequest { .. }
            | ProxyError::Refused { .. }
            | ProxyError::ClientTimeout { .. }
            | ProxyError::AllDown
            | ProxyError::UpstreamTimeout { .. }
            | ProxyError::Tls { .. } => None,
        }
    }
}

/// What went wrong decoding an upstream's gzip body: the size cap is named as such, as an
/// operator who sees it has a setting to change, not a broken origin to chase.
pub(crate) fn describe_gunzip_failure(
    error: &DecodeError,
    f: &mut fmt::Formatter<'_>,
) -> fmt::Result {
    match error {
        DecodeError::LimitExceeded { limit } => write!(
            f,
            "upstream gzip body decodes past compression.gunzip_max_output ({limit} bytes)"
        ),
        _ => f.write_str("upstream gzip body does not decode"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upstream() -> Authority {
        Authority::from_static("127.0.0.1:9")
    }

    #[test]
    fn each_side_fixes_the_status() {
        let cases = [
            (
                ProxyError::BadRequest { reason: "x" },
                Side::Client,
                StatusCode::BAD_REQUEST,
            ),
            (
                ProxyError::Refused {
                    status: StatusCode::NOT_IMPLEMENTED,
                    reason: "x",
                },
                Side::Client,
                StatusCode::NOT_IMPLEMENTED,
            ),
            (
                ProxyError::ClientBody {
                    source: "bad chunk size".into(),
                },
                Side::Client,
                StatusCode::BAD_REQUEST,
            ),
            (
                ProxyError::ClientTimeout {
                    after: Duration::from_secs(1),
                },
                Side::Client,
                StatusCode::REQUEST_TIMEOUT,
            ),
            (ProxyError::AllDown, Side::Upstream, StatusCode::BAD_GATEWAY),
            (
                ProxyError::Connect {
                    upstream: upstream(),
                    source: "refused".into(),
                },
                Side::Upstream,
                StatusCode::BAD_GATEWAY,
            ),
            (
                ProxyError::Upstream {
                    upstream: upstream(),
                    source: "reset".into(),
                },
                Side::Upstream,
                StatusCode::BAD_GATEWAY,
            ),
            (
                ProxyError::UpstreamTimeout {
                    upstream: upstream(),
                    after: Duration::from_secs(1),
                },
                Side::Upstream,
                StatusCode::GATEWAY_TIMEOUT,
            ),
            (
                ProxyError::Gunzip(DecodeError::Truncated),
                Side::Upstream,
                StatusCode::BAD_GATEWAY,
            ),
            (
                ProxyError::NoUpstreams,
                Side::Internal,
                StatusCode::INTERNAL_SERVER_ERROR,
            ),
        ];
        for (error, side, status) in cases {
            assert_eq!(error.side(), side, "{error}");
            assert_eq!(error.status(), status, "{error}");
        }
    }

    #[test]
    fn only_connect_failures_may_be_retried() {
        let connect = ProxyError::Connect {
            upstream: upstream(),
            source: "refused".into(),
        };
        let reset = ProxyError::Upstream {
            upstream: upstream(),
            source: "reset".into(),
        };
        assert!(connect.is_retryable());
        assert!(!reset.is_retryable());
        assert!(!ProxyError::AllDown.is_retryable());
    }

    #[test]
    fn display_is_lowercase_and_does_not_repeat_the_source() {
        let error = ProxyError::Connect {
            upstream: upstream(),
            source: "connection refused".into(),
        };
        assert_eq!(error.to_string(), "cannot connect to 127.0.0.1:9");
        assert_eq!(
            error.source().map(ToString::to_string).as_deref(),
            Some("connection refused")
        );
    }
}
