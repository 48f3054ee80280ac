//! The proxy's cache phase: the response made from a stored entry ([`serve`]), with the
//! coding this client gets. The decision is [`zipwire_rules::admit`]'s, as on the streamed
//! path; the gate here answers from the variants stored with the entry before it asks the
//! budget. What a request may use, the fill and the store are the `zipwire-cache` crate's.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, AGE, CONTENT_LENGTH, CONTENT_LOCATION, ETAG, TRANSFER_ENCODING,
};
use http::request::Parts;
use http::{Method, StatusCode, Version};
use zipwire_adapt::Throttle;
use zipwire_cache::{revalidate, variant, Cache, Delta, Entry, Variant};
use zipwire_codec::Limits;
use zipwire_codings::Codings;
use zipwire_rules::{
    admit, decide, headers, Bypass, Coding, Decision, Gate, Grant, Path, Payload, RequestFacts,
    ResponseFacts, Rules, Vary,
};

use crate::cache::range;
use crate::counters::Counters;
use crate::dictionary::{Context, Dictionaries, Use};
use crate::encode::body::decoders::{self, Decoding};
use crate::encode::body::{thread_cpu, BodyMeter};
use crate::error::ProxyError;
use zipwire_dictionary::DictCoding;

/// The largest body whose variant is made on the request's own thread (a millisecond or
/// less at the request-path levels); a larger one goes to a blocking thread.
const INLINE_VARIANT: u64 = 128 * 1024;

/// A response made from an entry.
pub(crate) struct Served {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Bytes,
    /// What was done for this client, counted as the response filter's decisions are.
    pub(crate) decision: Decision,
    /// The dictionary coding the body was sent in, in place of the decision's coding.
    pub(crate) delta: Option<DictCoding>,
    /// The dictionary it was sent against.
    pub(crate) used: Option<Use>,
}

/// What the response filter would use to encode: the rules, the encoders, the budget.
pub(crate) struct Encoders<'a> {
    pub(crate) rules: &'a Rules,
    pub(crate) codings: &'a Codings,
    /// The compression budget: a variant made on the request path is admitted by it, as a
    /// streamed compression is.
    pub(crate) throttle: &'a Throttle,
    /// Gunzip for clients without gzip, within these limits; `None` when off.
    pub(crate) gunzip: Option<Limits>,
    /// What the cache phase counts besides the cache's own counters.
    pub(crate) counters: &'a Counters,
}

/// The compressing side of a response made from an entry: a variant stored with it needs no
/// budget; one made now is admitted by the rate allowance by the length it compresses, as a
/// streamed response is by its `Content-Length`.
struct StoredGate<'a> {
    cache: &'a Cache,
    key: &'a str,
    entry: &'a Arc<Entry>,
    request: &'a Parts,
    encoders: &'a Encoders<'a>,
    /// The stored variant the grant found.
    stored: Option<Variant>,
}

impl Gate for StoredGate<'_> {
    fn grant(&mut self, coding: Coding, payload: Payload) -> Grant {
        self.stored = self
            .cache
            .stored_variant(self.key, self.entry, self.request, coding);
        if self.stored.is_some() {
            return Grant::Granted;
        }
        let throttle = self.encoders.throttle;
        let refused = throttle.is_bypassing_new()
            || (payload == Payload::Transform && !throttle.admit(self.entry.body.length));
        match refused {
            true => Grant::Refused,
            false => Grant::Granted,
        }
    }

    fn can_gunzip(&self) -> bool {
        self.encoders.gunzip.is_some()
    }
}

/// A 304 for a client whose preconditions `entry` fails, with the header fields its 200
/// would carry (`headers`) less the representation's own.
fn not_modified(
    cache: &Cache,
    entry: &Entry,
    mut headers: HeaderMap,
    facts: &RequestFacts,
) -> Served {
    headers.insert(AGE, cache.age_of(entry));
    // RFC 9110 §15.4.5: no representation metadata beyond the fields that guide a
    // cache's update (ETag, Vary, Cache-Control, Expires, Date, Content-Location,
    // Last-Modified). A `Content-Encoding: gzip` here would relabel the identity copy a
    // downstream cache updated with it, when the weak tag matched that copy.
    let metadata: Vec<_> = headers
        .keys()
        .filter(|name| name.as_str().starts_with("content-") && **name != CONTENT_LOCATION)
        .cloned()
        .collect();
    for name in metadata {
        headers.remove(name);
    }
    // A client whose `If-None-Match` names strong tags alone holds a response that was
    // not recoded: its tag stays strong, as on a 304 from the origin (see
    // `not_modified_vary`), or its copy would lose it and `If-Range` with it.
    if facts.holds_strong_tags {
        if let Some(etag) = entry.headers.get(ETAG) {
            headers.insert(ETAG, etag.clone());
        }
    }
    Served {
        status: StatusCode::NOT_MODIFIED,
        headers,
        body: Bytes::new(),
        // Counted as the streaming path counts a 304 from the origin.
        decision: Decision::Pass {
            reason: Bypass::Status,
            vary: Vary::Unchanged,
        },
        delta: None,
        used: None,
    }
}

/// The response to `request` made from `entry`, with the coding the rules choose for this
/// client: a stored variant when there is one (the encoder time it saves counted), else made
/// now and stored beside the others.
pub(crate) async fn serve(
    cache: &Cache,
    key: &str,
    entry: &Arc<Entry>,
    (request, facts): (&Parts, &RequestFacts),
    encoders: &Encoders<'_>,
    dictionary: Option<Context<'_>>,
) -> Result<Served, ProxyError> {
    entry.hits.fetch_add(1, Ordering::Relaxed);
    let response = ResponseFacts::from_parts(entry.status, &entry.headers);
    // RFC 9110 §13.2.1: the client's preconditions count only where the answer would be
    // 2xx; a stored 404 or 301 is sent as it is (a browser must not keep showing a page the
    // origin has since removed). They are checked before any variant is made or budget
    // taken: a 304 needs the header fields the 200 would carry, which the rules alone give.
    if entry.status.is_success() {
        let mut headers = entry.headers.clone();
        headers::apply(
            &decide(facts, &response, encoders.rules),
            &mut headers,
            Version::HTTP_11,
        );
        if revalidate::client_not_modified(&request.headers, &headers) {
            return Ok(not_modified(cache, entry, headers, facts));
        }
    }
    // §13.2.2: after `If-None-Match`, a range.
    if let Some(part) = range::respond(entry, request, facts, encoders.rules, cache.age_of(entry))?
    {
        return Ok(part);
    }
    let mut gate = StoredGate {
        cache,
        key,
        entry,
        request,
        encoders,
        stored: None,
    };
    let mut decision = admit(facts, &response, encoders.rules, &mut gate, Path::Stored);
    let stored = gate.stored;
    let counters = encoders.counters;
    // A delta in place of the decision's coding, when the client holds a dictionary.
    let mut used = match (dictionary, decision) {
        (
            Some(Context {
                dictionaries,
                ask: Some(ask),
                ..
            }),
            Decision::Compress { .. },
        ) if entry.status == StatusCode::OK => {
            dictionaries.choose(ask, (&request.headers, &entry.headers), Path::Stored)
        }
        _ => None,
    };
    let mut delta = None;
    if let (Some(chosen), Some(context)) = (&used, dictionary) {
        let hash = chosen.dictionary.hash;
        delta = match cache.stored_delta(key, entry, request, &hash, chosen.coding) {
            Some(stored) => Some(stored.bytes),
            None if matches!(
                decision,
                Decision::Compress {
                    payload: Payload::Transform,
                    ..
                }
            ) =>
            {
                add_delta(cache, key, entry, chosen, context.dictionaries).await
            }
            None => None,
        };
        // Never more bytes than the stored variant the client would get otherwise (a delta
        // made on the request path, or against a dictionary that shares little with the
        // body, can be larger than a variant at the best level).
        let larger = matches!(
            (&delta, &stored),
            (Some(bytes), Some(variant)) if variant.bytes.len() <= bytes.len()
        );
        if larger {
            delta = None;
            used = None;
        } else if delta.is_none() && request.method != Method::HEAD {
            used = None;
        }
    }
    // A HEAD for a coding not stored yet is not worth compressing for: its length is left
    // out, as the streaming path does.
    let mut length_known = true;
    let body = match decision {
        _ if delta.is_some() => delta.clone(),
        Decision::Compress {
            payload: Payload::Absent,
            ..
        } if stored.is_none() => {
            length_known = false;
            Some(Bytes::new())
        }
        Decision::Compress { coding, .. } => match stored {
            Some(variant) => {
                cache
                    .counters
                    .encoder_micros_saved
                    .fetch_add(variant.micros, Ordering::Relaxed);
                Some(variant.bytes)
            }
            None => {
                match add_variant(cache, counters, key, entry, coding, encoders.codings).await {
                    Some(bytes) => Some(bytes),
                    None => {
                        // The encoder failed: the identity bytes, as a budget bypass would.
                        decision = Decision::Pass {
                            reason: Bypass::Budget,
                            vary: Vary::Add,
                        };
                        None
                    }
                }
            }
        },
        Decision::Decompress { .. } => {
            let limits = encoders.gunzip.unwrap_or_default();
            let as_sent = entry.body.as_sent.as_deref().unwrap_or_default();
            let cpu = thread_cpu();
            let decoding = Decoding::of(response.content_encoding, |coding| {
                let dictionaries = dictionary?.dictionaries;
                Some(dictionaries.resolve_stored(coding, as_sent, request))
            });
            let decoded =
                decoders::decode_all(decoding, as_sent, limits).map_err(ProxyError::Gunzip)?;
            BodyMeter::with_totals(counters.decompression.clone()).record(
                as_sent.len(),
                decoded.len(),
                thread_cpu().saturating_sub(cpu),
                false,
            );
            Some(Bytes::from(decoded))
        }
        Decision::Pass { .. } => None,
    };
    let body = match body {
        Some(body) => body,
        None => variant::identity(&entry.body).map_err(ProxyError::Gunzip)?,
    };
    let mut headers = entry.headers.clone();
    headers::apply(&decision, &mut headers, Version::HTTP_11);
    if let Some(context) = dictionary {
        let dictionaries = context.dictionaries;
        let candidate = dictionaries.candidate(
            request,
            (entry.status, &entry.headers),
            context.secure,
            encoders.rules,
        );
        dictionaries.rewrite(
            &mut headers,
            &decision,
            used.as_ref(),
            context.ask.is_some(),
            candidate.as_ref(),
        );
        dictionaries.announce(request, (entry.status, &mut headers), context.secure);
    }
    if used.is_some() && delta.is_none() {
        // A HEAD for a delta not made yet: its length is not known.
        length_known = false;
    }
    headers.remove(TRANSFER_ENCODING);
    if length_known {
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
    }
    headers.insert(AGE, cache.age_of(entry));
    let absent = request.method == Method::HEAD
        || matches!(
            decision,
            Decision::Compress {
                payload: Payload::Absent,
                ..
            }
        );
    Ok(Served {
        status: entry.status,
        headers,
        body: if absent { Bytes::new() } else { body },
        decision,
        delta: used.as_ref().map(|used| used.coding),
        used,
    })
}

/// Makes the delta of the entry against `used`'s dictionary with the request-path encoder
/// and stores it beside the entry's others; off the runtime's thread past
/// [`INLINE_VARIANT`], as a variant is.
async fn add_delta(
    cache: &Cache,
    key: &str,
    entry: &Arc<Entry>,
    used: &Use,
    dictionaries: &Dictionaries,
) -> Option<Bytes> {
    let encoder = dictionaries.encoder(used, Some(entry.body.length));
    let stored = entry.body.clone();
    let make = move || {
        let identity = variant::identity(&stored).ok()?;
        variant::encode(encoder, &identity).map(|(bytes, _)| bytes)
    };
    let bytes = if entry.body.length > INLINE_VARIANT {
        tokio::task::spawn_blocking(make).await.ok().flatten()
    } else {
        make()
    }?;
    cache.add_delta(
        key,
        entry,
        Delta {
            hash: used.dictionary.hash,
            coding: used.coding,
            bytes: bytes.clone(),
            dictionary: used.dictionary.bytes.clone(),
            best: false,
        },
    );
    Some(bytes)
}

/// Compresses the entry in `coding` with the request-path encoder and stores the variant
/// beside the others. A body past [`INLINE_VARIANT`] is compressed on a blocking thread: in
/// one piece on the runtime's thread it would hold up every connection there (a 4 MB br
/// variant takes 200 ms), where a streamed response is compressed a call at a time between
/// the others' turns.
async fn add_variant(
    cache: &Cache,
    counters: &Counters,
    key: &str,
    entry: &Arc<Entry>,
    coding: Coding,
    codings: &Codings,
) -> Option<Bytes> {
    let encoder = codings.encoder(coding, Some(entry.body.length));
    let stored = entry.body.clone();
    let make = move || {
        let identity = variant::identity(&stored).ok()?;
        let cpu = thread_cpu();
        let (bytes, micros) = variant::encode(encoder, &identity)?;
        Some((
            identity.len(),
            bytes,
            micros,
            thread_cpu().saturating_sub(cpu),
        ))
    };
    let made = if entry.body.length > INLINE_VARIANT {
        tokio::task::spawn_blocking(make).await.ok().flatten()
    } else {
        make()
    };
    let (identity_len, bytes, micros, cpu) = made?;
    // Counted as a streamed compression's calls are: the stats' encoder time, input and
    // savings, this coding's totals, and what the budget reads.
    BodyMeter::with_totals(counters.compression.clone())
        .with_coding_totals(counters.codings.get(coding).meter.clone())
        .record(identity_len, bytes.len(), cpu, false);
    cache.add_variant(key, entry, coding, bytes.clone(), micros);
    Some(bytes)
}
