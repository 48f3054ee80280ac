//! The per-request phases, in the order they run (pingora's `ProxyHttp` is the model;
//! `docs/design/proxy.md` charts them):
//!
//! 1. [`Proxy::request_filter`]: refuse what cannot be forwarded, read the request facts
//!    the compression decision needs.
//! 2. [`Proxy::upstream_request_filter`]: the request as the upstream sees it: hop-by-hop
//!    fields removed, `X-Forwarded-For` and `Via` added, `Accept-Encoding` removed in
//!    offload mode.
//! 3. [`Upstreams::send`]: pick an upstream, send, retry once on a connect failure.
//! 4. [`Proxy::response_filter`]: decide and rewrite the response headers.
//! 5. [`Proxy::response_body_filter`]: wrap the upstream body to compress, decompress or
//!    pass it.
//! 6. Logging: when the body is dropped ([`AccessLog`]).
//!
//! An error in phases 1-3 ends the request with the status its [`Side`] fixes.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use http::header::{HeaderValue, CONTENT_LENGTH, HOST, TRANSFER_ENCODING};
use http::request::Parts as RequestParts;
use http::response::Parts as ResponseParts;
use http::uri::PathAndQuery;
use http::{Method, Request, Response, StatusCode, Version};
use hyper::body::Incoming;
use tracing::{debug, warn};
use zipwire_codec::Limits;

use crate::connection::http::Secure;
use crate::counters::{protocol_name, Counters};
use crate::dictionary::fill::{DictionaryFill, Sink};
use crate::dictionary::{Dictionaries, Use};
use crate::encode::body::decoders::{self, Decoding};
use crate::encode::body::{
    gunzip, BodyEncoder, CompressBody, DecompressBody, FlushPolicy, GatherGate,
};
use crate::error::ProxyError;
use crate::exchange::checks;
use crate::exchange::more::MoreToCome;
use crate::exchange::outgoing::{AccessLog, ResponseBody, Transform};
use crate::exchange::tunnel::{self, ClientLink};
use crate::exchange::upgrade;
use crate::exchange::upstream::{Head, UpstreamBody, Upstreams};
use crate::exchange::versions::{for_http11_upstream, set_version};
use crate::settings::ProxyConfig;
use crate::DictionaryMode;
use zipwire_adapt::Throttle;
use zipwire_adapt::{MemoryGate, Permit};
use zipwire_cache::policy::{strip_surrogate_control, SURROGATE_CAPABILITY};
use zipwire_cache::After;
use zipwire_cache::Cache;
use zipwire_codings::Codings;
use zipwire_rules::forward::{self, ViaEntries};
use zipwire_rules::headers;
use zipwire_rules::negotiate::Negotiated;
use zipwire_rules::Rules;
use zipwire_rules::{admit, Decision, Path, Payload};
use zipwire_rules::{ContentEncoding, RequestFacts, ResponseFacts};

mod answers;
mod gate;

use gate::StreamGate;

/// What every request of one server shares.
#[derive(Debug)]
pub(crate) struct Proxy {
    upstreams: Upstreams,
    rules: Rules,
    /// The encoder of each coding, and the memory each holds per stream.
    codings: Codings,
    flush: FlushPolicy,
    offload: bool,
    gunzip: Option<Limits>,
    /// `[forwarding]`: the fields added to requests upstream.
    forwarding: crate::Forwarding,
    via: Option<ViaEntries>,
    access_log: bool,
    counters: Arc<Counters>,
    throttle: Throttle,
    memory: MemoryGate,
    /// The budget compressing bodies gather their calls in.
    gather: GatherGate,
    /// The request head limit ([`ClientLimits::max_header_bytes`]), checked here: hyper's
    /// own check comes before its 414 and would hide it.
    ///
    /// [`ClientLimits::max_header_bytes`]: crate::ClientLimits::max_header_bytes
    max_head: usize,
    /// `limits.max_body`: a request declaring more gets 413 here.
    max_body: Option<u64>,
    /// `[headers]`: applied to every request upstream and every response.
    headers: crate::HeaderSettings,
    /// [`Timeouts::upgrade_idle`](crate::Timeouts::upgrade_idle) and
    /// [`Timeouts::send`](crate::Timeouts::send), for tunnels.
    tunnel_limits: tunnel::Limits,
    /// The compressed-variant cache, when `[cache] mode` is not off.
    cache: Option<Arc<Cache>>,
    /// Compression dictionaries, when `[dictionaries] mode` is not off.
    dictionaries: Option<Arc<Dictionaries>>,
}

impl Proxy {
    /// The shared state for `config`.
    pub(crate) fn new(
        config: &ProxyConfig,
        counters: Arc<Counters>,
        throttle: Throttle,
        memory: MemoryGate,
    ) -> Proxy {
        let compression = &config.compression;
        let mut rules = compression.rules.clone();
        // Event streams are compressed with a zero flush delay (see `flush_policy`), so every
        // event reaches the client when the upstream sends it.
        rules.event_stream_flush = true;
        // With dictionaries on, `Available-Dictionary` and the dictionary codings are not
        // forwarded, so an upstream's `dcb` or `dcz` was sent unasked: decoded, never passed.
        rules.decode_dictionary_codings = config.dictionaries.mode != DictionaryMode::Off;
        let via = config.forwarding.via.as_deref().and_then(|pseudonym| {
            let entries = ViaEntries::new(pseudonym);
            if entries.is_none() {
                warn!(
                    pseudonym,
                    "via pseudonym is not a valid header value, not sent"
                );
            }
            entries
        });
        let codings = Codings::new(
            compression.level,
            compression.zstd_level,
            compression.br_level,
            &rules.offered,
            compression.flush.coalesce,
        );
        let cache = Cache::new(
            &config.cache,
            &codings,
            counters.cache.clone(),
            compression.offload,
        );
        let dictionaries = Dictionaries::new(
            &config.dictionaries,
            (compression.zstd_level, compression.br_level),
            counters.dictionaries.clone(),
            &memory,
        );
        Proxy {
            dictionaries: dictionaries.map(Arc::new),
            upstreams: Upstreams::new(
                &config.upstreams,
                &config.upstream_roots,
                config.down_time,
                &config.timeouts,
                (config.limits.max_connections, config.limits.max_body),
            ),
            codings,
            rules,
            flush: compression.flush,
            offload: compression.offload,
            gunzip: compression.gunzip.then_some(Limits {
                max_output: Some(compression.gunzip_max_output),
                max_ratio: None,
            }),
            forwarding: config.forwarding.clone(),
            via,
            access_log: config.access_log,
            cache: cache.map(Arc::new),
            counters: counters.clone(),
            throttle,
            memory,
            gather: GatherGate::new(config.budget.gather_memory.unwrap_or(
                crate::settings::GATHER_MEMORY_PER_THREAD * config.threads.max(1) as u64,
            ))
            .counted(counters.gather.clone()),
            max_head: config.limits.max_header_bytes,
            max_body: config.limits.max_body,
            headers: config.headers.clone(),
            tunnel_limits: tunnel::Limits {
                idle: config.timeouts.upgrade_idle,
                send: config.timeouts.send,
            },
        }
    }

    /// The cache, for the admin listener's purge.
    pub(crate) fn cache(&self) -> Option<Arc<Cache>> {
        self.cache.clone()
    }

    /// Serves one request from a client at `peer`, through every phase; `client` takes the
    /// interim responses and a tunnel, if the request opens one.
    pub(crate) async fn handle(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        more: MoreToCome,
        client: ClientLink,
    ) -> Response<ResponseBody> {
        let version = request.version();
        let mut response = self.respond(request, peer, more, client).await;
        set_version(&mut response, version);
        self.headers.response.apply(response.headers_mut());
        response
    }

    /// The phases, up to the response the client gets.
    async fn respond(
        &self,
        request: Request<Incoming>,
        peer: SocketAddr,
        more: MoreToCome,
        client: ClientLink,
    ) -> Response<ResponseBody> {
        Counters::bump(&self.counters.requests);
        let (mut parts, body) = request.into_parts();
        self.counters.requests_by_protocol.add(parts.version);
        let mut log = AccessLog::new(
            parts.method.clone(),
            parts.uri.path(),
            Instant::now(),
            self.counters.clone(),
        );
        log.set_protocol(protocol_name(parts.version));
        if !self.access_log {
            log.silence();
        }
        let facts = match self.request_filter(&parts) {
            Ok(facts) => facts,
            Err(error) => return self.error_response(&error, log),
        };
        // RFC 9842 is for secure contexts: TLS, or a browser's `localhost`.
        let secure = parts
            .extensions
            .get::<Secure>()
            .is_some_and(|secure| secure.0)
            || peer.ip().is_loopback();
        let ask = self
            .dictionaries
            .as_ref()
            .and_then(|dictionaries| dictionaries.ask(&parts, secure));
        if let Some(served) = self
            .dictionaries
            .as_ref()
            .and_then(|dictionaries| dictionaries.serve_site(&parts))
        {
            return self.site_dictionary(&parts, served, log);
        }
        let mut lookup = None;
        if let Some(cache) = &self.cache {
            let mut found = cache.lookup(&parts);
            let mut hit = cache.fresh(&found);
            if hit.is_none() {
                // Nothing fresh: wait for a fill of the same key, if one runs.
                found = cache.join_fill(found, &parts).await;
                hit = cache.fresh(&found);
            }
            if let Some((key, entry)) = hit {
                return self
                    .cached_response(
                        cache,
                        (&key, &entry),
                        (&parts, &facts),
                        (ask.as_ref(), secure),
                        log,
                    )
                    .await;
            }
            lookup = Some(found);
        }
        let mut head = match self.upstream_request_filter(&parts, peer) {
            Ok(head) => head,
            Err(error) => return self.error_response(&error, log),
        };
        if let Some((cache, lookup)) = self.cache.as_ref().zip(lookup.as_mut()) {
            cache.add_conditionals(lookup, &mut head.headers);
        }
        // A WebSocket handshake goes on a connection of its own, and a 101 turns the client
        // connection into a tunnel; any other answer is an ordinary response.
        let websocket = upgrade::websocket(&parts).and_then(|protocol| {
            let on_client = parts.extensions.remove::<hyper::upgrade::OnUpgrade>()?;
            Some((protocol, on_client))
        });
        let sent = match websocket {
            Some((protocol, on_client)) => {
                upgrade::ask_to_switch(&mut head.headers, protocol);
                match self.upstreams.send_upgrade(head, body).await {
                    Ok(response) if response.status() == StatusCode::SWITCHING_PROTOCOLS => {
                        return self.switch(response, on_client, &client, log);
                    }
                    sent => sent,
                }
            }
            None => {
                // RFC 9110 §15.2: no 1xx to an HTTP/1.0 client (nor as an HTTP/1.1 head
                // inside another protocol).
                let interim = (parts.version == Version::HTTP_11).then(|| client.interim());
                if let Some(interim) = &interim {
                    interim.open();
                }
                head.interim = interim.clone();
                let sent = self.upstreams.send(head, body).await;
                if let Some(interim) = &interim {
                    interim.close().await;
                }
                sent
            }
        };
        let response = match sent {
            Ok(response) => response,
            Err(error) => return self.error_response(&error, log),
        };
        let mut cache_fill = None;
        let response = match self.cache.as_ref().zip(lookup) {
            Some((cache, lookup)) => match cache.after_upstream(lookup, &parts, response) {
                After::Forward(response, fill) => {
                    cache_fill = fill;
                    response
                }
                After::Serve(key, entry) => {
                    return self
                        .cached_response(
                            cache,
                            (&key, &entry),
                            (&parts, &facts),
                            (ask.as_ref(), secure),
                            log,
                        )
                        .await
                }
            },
            None => response,
        };
        let (mut head, upstream_body) = response.into_parts();
        let dictionaries = self.dictionaries.as_ref();
        let candidate = dictionaries.and_then(|dictionaries| {
            dictionaries.candidate(&parts, (head.status, &head.headers), secure, &self.rules)
        });
        let sample = match (dictionaries, &candidate) {
            (Some(dictionaries), None) => {
                dictionaries.sample(&parts, (head.status, &head.headers), secure)
            }
            _ => None,
        };
        let chosen = dictionaries
            .zip(ask.as_ref())
            .and_then(|(dictionaries, ask)| {
                dictionaries.choose(ask, (&parts.headers, &head.headers), Path::Streamed)
            });
        // What a decompressed body is decoded from, read before the filter rewrites it.
        let decoding = Decoding::of(ContentEncoding::from_headers(&head.headers), |_| {
            Some(dictionaries?.resolver(&parts))
        });
        let (decision, flush, permit, encoder, used) =
            self.response_filter(&facts, &mut head, parts.version, chosen);
        if let Some(dictionaries) = dictionaries {
            dictionaries.rewrite(
                &mut head.headers,
                &decision,
                used.as_ref(),
                ask.is_some(),
                candidate.as_ref(),
            );
            dictionaries.announce(&parts, (head.status, &mut head.headers), secure);
            let sink = match (candidate, sample) {
                (Some(candidate), _) => Some(Sink::Dictionary(candidate)),
                (None, Some(sample)) => Some(Sink::Sample(sample)),
                (None, None) => None,
            };
            if let Some(sink) = sink {
                log.dictionary_fill(DictionaryFill::new(dictionaries.clone(), sink));
            }
        }
        if self.cache.is_some() {
            strip_surrogate_control(&parts.headers, &mut head.headers);
        }
        if let Some(fill) = &mut cache_fill {
            if let (Decision::Compress { coding, .. }, None) = (decision, &used) {
                fill.served_in(coding);
            }
        }
        let transform = match (&used, decision) {
            (Some(used), Decision::Compress { coding, .. }) => {
                if let Some(dictionaries) = dictionaries {
                    log.dictionary(used.clone(), Some(dictionaries.clone()));
                }
                Some(Transform::Dictionary(used.coding, coding))
            }
            _ => None,
        };
        log.fill(cache_fill);
        let mut body = self.response_body_filter(
            decision,
            (flush, permit),
            (encoder, transform, decoding),
            &head,
            upstream_body,
            log,
        );
        body.hold_first_frame(flush.delay, self.upstreams.response_timeout())
            .await;
        let mut body = match body.failed_early() {
            Ok(body) => body,
            Err(failed) => {
                let (error, log) = *failed;
                return self.error_response(&error, log);
            }
        };
        // Counted once the head is going out: a body that failed before it became an error
        // response above, counted as that.
        self.count_decision(&decision, used.is_some());
        body.cork_between_calls(more);
        Response::from_parts(head, body)
    }

    /// The upstream switched protocols: the `101` goes to the client with the two fields
    /// that say so, and the connection is left to a tunnel once hyper has written it. Never
    /// compressed: the bytes that follow are not HTTP.
    fn switch(
        &self,
        mut response: Response<UpstreamBody>,
        on_client: hyper::upgrade::OnUpgrade,
        client: &ClientLink,
        mut log: AccessLog,
    ) -> Response<ResponseBody> {
        let on_upstream = hyper::upgrade::on(&mut response);
        let (mut head, _) = response.into_parts();
        let protocol = head.headers.get(http::header::UPGRADE).cloned();
        forward::strip_hop_by_hop(&mut head.headers);
        if let Some(protocol) = protocol {
            upgrade::ask_to_switch(&mut head.headers, protocol);
        }
        Counters::bump(&self.counters.upgrades);
        debug!("upgraded, tunnel opens");
        client.hand_over(tunnel::run(
            on_client,
            on_upstream,
            self.tunnel_limits,
            self.counters.clone(),
        ));
        log.set_status(head.status);
        Response::from_parts(head, ResponseBody::empty(log))
    }

    /// Phase 1: refuses requests a reverse proxy does not forward and reads the facts the
    /// decision needs.
    fn request_filter(&self, request: &RequestParts) -> Result<RequestFacts, ProxyError> {
        if request.method == Method::CONNECT {
            // RFC 9110 §15.6.2: 501 for a method the server does not support for any
            // resource, as HAProxy's and nginx's reverse proxies do not tunnel either. Over
            // HTTP/2 a CONNECT is a tunnel (RFC 9113 §8.5); WebSocket over HTTP/2 (RFC 8441's
            // extended CONNECT) is not offered, so a `:protocol` request never gets here: h2
            // resets it as malformed.
            return Err(ProxyError::Refused {
                status: StatusCode::NOT_IMPLEMENTED,
                reason: if request.version == Version::HTTP_2 {
                    "CONNECT over HTTP/2 (a tunnel, or RFC 8441 WebSocket) is not served"
                } else {
                    "CONNECT (a tunnel) is not served by a reverse proxy"
                },
            });
        }
        checks::head_size(request, self.max_head)?;
        checks::host(request)?;
        checks::asterisk_form(request)?;
        checks::transfer_coding(request)?;
        checks::body_size(request, self.max_body)?;
        checks::http2_field_values(request)?;
        let mut facts = RequestFacts::from_parts(&request.method, &request.headers);
        facts.close_delimited = request.version < Version::HTTP_11;
        Ok(facts)
    }

    /// Phase 2: the request as it goes upstream.
    fn upstream_request_filter(
        &self,
        request: &RequestParts,
        peer: SocketAddr,
    ) -> Result<Head, ProxyError> {
        // The authority form (RFC 9112 §3.2.3) is CONNECT's alone: a GET to `evil:80` must not
        // go upstream as `GET /` with `Host: evil:80`. It is refused, as nginx answers 400.
        if request.uri.scheme().is_none() && request.uri.authority().is_some() {
            return Err(ProxyError::BadRequest {
                reason: "request target is in authority form",
            });
        }
        // An absolute-form target (RFC 9112 §3.2.2) is read for its path only: the upstream is
        // the proxy's choice, not the client's.
        let target = request
            .uri
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        if !target.as_str().starts_with('/') && target.as_str() != "*" {
            return Err(ProxyError::BadRequest {
                reason: "request target is not a path",
            });
        }
        let mut headers = request.headers.clone();
        // RFC 9112 §3.2.2: a proxy forwarding an absolute-form request generates `Host` from
        // the target's authority, not from the received `Host`.
        if let Some(authority) = request.uri.authority() {
            // No userinfo in what goes upstream as Host (RFC 9110 §4.2.4, RFC 9113 §8.3.1):
            // `checks::host` refuses it in the Host field, and the target's authority is held
            // to the same.
            if authority.as_str().contains('@') {
                return Err(ProxyError::BadRequest {
                    reason: "request target carries userinfo",
                });
            }
            if let Ok(host) = HeaderValue::from_str(authority.as_str()) {
                headers.insert(HOST, host);
            }
        }
        if request.version == Version::HTTP_2 {
            for_http11_upstream(&mut headers);
        }
        forward::strip_hop_by_hop(&mut headers);
        forward::single_content_length(&mut headers);
        if forward::content_length(&headers).is_some_and(|n| n > forward::MAX_CONTENT_LENGTH) {
            return Err(ProxyError::BadRequest {
                reason: "Content-Length past 2^63 - 1",
            });
        }
        if self.forwarding.x_forwarded_for {
            forward::add_forwarded_for(&mut headers, peer.ip());
        }
        if self.forwarding.x_forwarded_proto {
            let tls = request
                .extensions
                .get::<Secure>()
                .is_some_and(|secure| secure.0);
            forward::set_forwarded_proto(&mut headers, tls);
        }
        if self.forwarding.x_forwarded_host {
            // What the client asked for: HTTP/2's `:authority`, or its `Host` (checked above).
            let host = match request.uri.authority() {
                Some(authority) => HeaderValue::from_str(authority.as_str()).ok(),
                None => request.headers.get(HOST).cloned(),
            };
            forward::set_forwarded_host(&mut headers, host);
        }
        if let Some(via) = &self.via {
            via.append(&mut headers, request.version);
        }
        let recodable = matches!(
            RequestFacts::from_parts(&request.method, &request.headers)
                .accept_encoding
                .negotiate(&self.rules.offered),
            Negotiated::Coding(_)
        );
        if recodable {
            headers::drop_range_validated_by_date(&mut headers);
        }
        if self.offload {
            headers::strip_accept_encoding(&mut headers);
        }
        if self.dictionaries.is_some() {
            zipwire_dictionary::fields::strip_for_upstream(&mut headers);
        }
        if self.cache.is_some() {
            // Edge Architecture 1.0: a surrogate announces itself, so the origin may target
            // `Surrogate-Control` directives at it.
            headers.append(SURROGATE_CAPABILITY, SURROGATE_CAPABILITY_VALUE);
        }
        self.headers.request.apply(&mut headers);
        Ok(Head {
            method: request.method.clone(),
            target,
            headers,
            interim: None,
        })
    }

    /// Phase 4: decides what to do with the response and rewrites its headers for a client
    /// speaking `version` ([`Self::count_decision`] counts it once the head goes out). Returns
    /// the decision, the flush policy a compressed body follows, the memory permit a
    /// compressed or decoded body holds while it runs, the encoder it runs, and the
    /// dictionary coding it runs in where `dictionary` was granted in place of the decision's
    /// coding (the caller rewrites the fields for it).
    fn response_filter(
        &self,
        request: &RequestFacts,
        response: &mut ResponseParts,
        version: Version,
        dictionary: Option<Use>,
    ) -> (
        Decision,
        FlushPolicy,
        Option<Permit>,
        Option<BodyEncoder>,
        Option<Use>,
    ) {
        // RFC 9112 §6.3: the transfer coding (which hyper's client has read by) overrides a
        // Content-Length, which an intermediary must remove before forwarding.
        if response.headers.contains_key(TRANSFER_ENCODING) {
            response.headers.remove(CONTENT_LENGTH);
        } else {
            forward::single_content_length(&mut response.headers);
        }
        forward::strip_hop_by_hop(&mut response.headers);
        let facts = ResponseFacts::from_parts(response.status, &response.headers);
        let mut gate = StreamGate {
            proxy: self,
            request,
            response: &facts,
            permit: None,
            encoder: None,
            dictionary,
            used: None,
        };
        let decision = admit(request, &facts, &self.rules, &mut gate, Path::Streamed);
        let (mut permit, encoder, used) = (gate.permit, gate.encoder, gate.used);
        // A fallback or a refusal after the grant leaves the dictionary unused.
        let used = used.filter(|_| matches!(decision, Decision::Compress { .. }));
        if let Decision::Decompress {
            payload: Payload::Transform,
        } = decision
        {
            // A client that does not accept the coding can get the body in no other form, so
            // the gate is not asked but told: the decoder's memory counts, and compressing
            // streams are refused sooner while it is held.
            let largest = self.dictionaries.as_ref().map_or(0, |d| d.max_size());
            let state = decoders::encoding_memory(facts.content_encoding, largest);
            permit = Some(self.memory.account(gunzip::DECODE_CHUNK as u64 + state));
        }
        headers::apply(&decision, &mut response.headers, version);
        if response.status == StatusCode::NOT_MODIFIED {
            headers::trim_not_modified(&mut response.headers);
        }
        if response.status == StatusCode::NO_CONTENT || response.status.is_informational() {
            // RFC 9110 §8.6: never on a 1xx or 204. hyper leaves it out of a 204 to GET, but
            // keeps the upstream's on a 204 to HEAD.
            response.headers.remove(CONTENT_LENGTH);
        }
        debug!(?decision, "response filter");
        let event_stream = facts
            .content_type
            .as_ref()
            .is_some_and(|media| media.is_event_stream());
        let flush = if event_stream {
            FlushPolicy {
                delay: std::time::Duration::ZERO,
                ..self.flush
            }
        } else {
            self.flush
        };
        (decision, flush, permit, encoder, used)
    }

    /// Counts what [`Self::response_filter`] decided for a response that goes out; one sent
    /// in a dictionary coding (`delta`) is not counted under the ordinary coding it replaced.
    fn count_decision(&self, decision: &Decision, delta: bool) {
        match decision.bypass() {
            Some(reason) => self.counters.bypassed.add(reason),
            None => match decision {
                Decision::Compress { coding, .. } => {
                    Counters::bump(&self.counters.compressed);
                    if !delta {
                        Counters::bump(&self.counters.codings.get(*coding).responses);
                    }
                }
                _ => Counters::bump(&self.counters.decompressed),
            },
        }
    }

    /// Phase 5: the body the client gets.
    fn response_body_filter(
        &self,
        decision: Decision,
        (flush, permit): (FlushPolicy, Option<Permit>),
        (encoder, transform, decoding): (Option<BodyEncoder>, Option<Transform>, Decoding),
        head: &ResponseParts,
        upstream: UpstreamBody,
        mut log: AccessLog,
    ) -> ResponseBody {
        log.set_status(head.status);
        log.set_bypass(decision.bypass());
        // A compressing body holds its permit itself (and gives back what a stepped-down
        // encoder frees); any other response's, the log holds until the response is done.
        let compressing = matches!(
            decision,
            Decision::Compress {
                payload: Payload::Transform,
                ..
            }
        );
        let mut permit = permit;
        if !compressing {
            if let Some(permit) = permit.take() {
                log.hold(permit);
            }
        }
        match decision {
            Decision::Compress {
                payload: Payload::Absent,
                ..
            }
            | Decision::Decompress {
                payload: Payload::Absent,
            } => ResponseBody::empty(log),
            Decision::Compress {
                coding,
                payload: Payload::Transform,
            } => {
                let encoder = encoder.unwrap_or_else(|| self.codings.encoder(coding, None));
                let step_down = self.throttle.step_down.clone();
                let gather = self.gather.clone();
                let transform = transform.unwrap_or(Transform::Compress(coding));
                ResponseBody::compress(upstream, log, transform, |body, meter| {
                    let body = CompressBody::new(body, encoder, flush, meter)
                        .with_step_down(step_down)
                        .with_gather_gate(gather);
                    match permit {
                        Some(permit) => body.with_permit(permit),
                        None => body,
                    }
                })
            }
            Decision::Decompress {
                payload: Payload::Transform,
            } => {
                let limits = self.gunzip.unwrap_or_default();
                ResponseBody::decompress(upstream, log, |body, meter| {
                    DecompressBody::decoding(decoding, body, limits, meter)
                })
            }
            Decision::Pass { .. } => ResponseBody::pass(upstream, log),
        }
    }
}

/// `Surrogate-Capability`'s value: this cache's device token and what it does.
const SURROGATE_CAPABILITY_VALUE: HeaderValue =
    HeaderValue::from_static("zipwire=\"Surrogate/1.0\"");
