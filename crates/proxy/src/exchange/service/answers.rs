//! The answers the proxy makes itself rather than forward: a response from the cache, and
//! the error page for a request it could not serve.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CONNECTION, CONTENT_LENGTH, CONTENT_TYPE};
use http::request::Parts as RequestParts;
use http::{Method, Response, StatusCode};
use tracing::{debug, warn};

use super::Proxy;
use crate::cache::serve::{self, Encoders};
use crate::dictionary::{estimate, Ask, Context};
use crate::error::{ProxyError, Side};
use crate::exchange::outgoing::{AccessLog, ResponseBody, Transform};
use crate::exchange::upstream::Chain;
use zipwire_cache::policy::strip_surrogate_control;
use zipwire_cache::Cache;
use zipwire_cache::Entry;
use zipwire_rules::RequestFacts;
use zipwire_rules::{Decision, Payload};

impl Proxy {
    /// The response made from a cache entry, with the coding this client gets.
    pub(super) async fn cached_response(
        &self,
        cache: &Cache,
        (key, entry): (&str, &Arc<Entry>),
        (request, facts): (&RequestParts, &RequestFacts),
        (ask, secure): (Option<&Ask>, bool),
        mut log: AccessLog,
    ) -> Response<ResponseBody> {
        let dictionary = self.dictionaries.as_deref().map(|dictionaries| Context {
            dictionaries,
            ask,
            secure,
        });
        let encoders = Encoders {
            rules: &self.rules,
            codings: &self.codings,
            throttle: &self.throttle,
            gunzip: self.gunzip,
            counters: &self.counters,
        };
        match serve::serve(cache, key, entry, (request, facts), &encoders, dictionary).await {
            Ok(served) => {
                log.set_status(served.status);
                self.count_decision(&served.decision, served.delta.is_some());
                log.set_bypass(served.decision.bypass());
                log.set_transform(match (served.decision, served.delta) {
                    (
                        Decision::Compress {
                            coding,
                            payload: Payload::Transform,
                        },
                        Some(delta),
                    ) => Transform::Dictionary(delta, coding),
                    (
                        Decision::Compress {
                            coding,
                            payload: Payload::Transform,
                        },
                        None,
                    ) => Transform::Compress(coding),
                    (
                        Decision::Decompress {
                            payload: Payload::Transform,
                        },
                        _,
                    ) => Transform::Decompress,
                    _ => Transform::None,
                });
                if let (Some(used), Some(dictionaries), Decision::Compress { coding, .. }) =
                    (served.used, &self.dictionaries, served.decision)
                {
                    // Counted here: a hit reads nothing from the upstream to count by.
                    if !served.body.is_empty() {
                        let identity = entry.body.length;
                        let meter = &self.counters.codings.get(coding).meter;
                        let ordinary = estimate(meter, identity);
                        let sent = served.body.len() as u64;
                        dictionaries.count_use(&used, identity, sent, ordinary);
                    }
                    log.dictionary(used, None);
                }
                let body = match served.body.is_empty() {
                    true => ResponseBody::empty(log),
                    false => ResponseBody::stored(served.body, log),
                };
                let mut response = Response::new(body);
                *response.status_mut() = served.status;
                *response.headers_mut() = served.headers;
                strip_surrogate_control(&request.headers, response.headers_mut());
                response
            }
            Err(error) => self.error_response(&error, log),
        }
    }

    /// A site dictionary the proxy serves itself (see `dictionary::site`), or a 404 for a
    /// path under its prefix that names none.
    pub(super) fn site_dictionary(
        &self,
        request: &RequestParts,
        served: Option<(Bytes, HeaderMap)>,
        mut log: AccessLog,
    ) -> Response<ResponseBody> {
        let Some((body, fields)) = served else {
            log.set_status(StatusCode::NOT_FOUND);
            let mut response = Response::new(ResponseBody::page("404 Not Found\n", log));
            *response.status_mut() = StatusCode::NOT_FOUND;
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; charset=utf-8"),
            );
            return response;
        };
        log.set_status(StatusCode::OK);
        let length = body.len();
        let body = match request.method == Method::HEAD {
            true => ResponseBody::empty(log),
            false => ResponseBody::stored(body, log),
        };
        let mut response = Response::new(body);
        *response.headers_mut() = fields;
        response
            .headers_mut()
            .insert(CONTENT_LENGTH, HeaderValue::from(length));
        response
    }

    /// The proxy's own answer to a request it could not serve.
    pub(super) fn error_response(
        &self,
        error: &ProxyError,
        mut log: AccessLog,
    ) -> Response<ResponseBody> {
        let side = error.side();
        self.counters.errors.add(error);
        match side {
            Side::Client => debug!(%error, "request refused"),
            // With its causes: hyper's reason (a connection closed mid-answer, a head with
            // too many fields) is in the source chain, not in the error's own text.
            Side::Upstream => warn!(error = %Chain(error), "upstream failed"),
            Side::Internal => tracing::error!(%error, "request failed"),
        }
        let status = error.status();
        log.set_status(status);
        let text = match status.as_u16() {
            400 => "400 Bad Request\n",
            408 => "408 Request Timeout\n",
            414 => "414 URI Too Long\n",
            431 => "431 Request Header Fields Too Large\n",
            501 => "501 Not Implemented\n",
            502 => "502 Bad Gateway\n",
            504 => "504 Gateway Timeout\n",
            _ => "500 Internal Server Error\n",
        };
        let mut response = Response::new(ResponseBody::page(text, log));
        *response.status_mut() = status;
        response.headers_mut().insert(
            CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        if side == Side::Client {
            // What else the client sends on this connection is not to be trusted either.
            response
                .headers_mut()
                .insert(CONNECTION, HeaderValue::from_static("close"));
        }
        response
    }
}
