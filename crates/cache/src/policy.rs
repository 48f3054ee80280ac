//! What a shared cache may store and for how long: pure functions of request and response
//! heads (RFC 9111 §3, §4.2, §5.2; RFC 9213 for `CDN-Cache-Control`; the W3C Edge
//! Architecture note for `Surrogate-Control`), tested without sockets.

use std::time::{Duration, SystemTime};

use http::header::{
    HeaderMap, HeaderName, AGE, AUTHORIZATION, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_LENGTH,
    DATE, ETAG, EXPIRES, IF_RANGE, LAST_MODIFIED, PRAGMA, RANGE, SET_COOKIE, TRANSFER_ENCODING,
    VARY,
};
use http::{Method, StatusCode};

use zipwire_rules::list;

use crate::store::Entry;

/// `CDN-Cache-Control` (RFC 9213), the field a CDN-like shared cache obeys before
/// `Cache-Control`.
pub const CDN_CACHE_CONTROL: HeaderName = HeaderName::from_static("cdn-cache-control");

/// `Surrogate-Control` (Edge Architecture 1.0), obeyed after `CDN-Cache-Control` and before
/// `Cache-Control`: its directives either apply to every surrogate or name one after a `;`.
pub const SURROGATE_CONTROL: HeaderName = HeaderName::from_static("surrogate-control");

/// The request field by which the cache tells the origin it is a surrogate, and the name
/// its `Surrogate-Control` directives may target it by.
pub const SURROGATE_CAPABILITY: HeaderName = HeaderName::from_static("surrogate-capability");

/// This cache's device token in `Surrogate-Capability` and `Surrogate-Control`.
pub const SURROGATE_TOKEN: &str = "zipwire";

/// Removes `Surrogate-Control` from a response for a client that did not announce itself as
/// a surrogate with `Surrogate-Capability`: the field speaks to surrogates, and this cache is
/// the last one before such a client (Squid's rule). A client that is a surrogate gets the
/// field as the origin sent it.
pub fn strip_surrogate_control(request: &HeaderMap, response: &mut HeaderMap) {
    if !request.contains_key(SURROGATE_CAPABILITY) {
        response.remove(SURROGATE_CONTROL);
    }
}

/// The directives of one `Cache-Control`-like field that a shared cache acts on.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Directives {
    /// `no-store`.
    pub no_store: bool,
    /// `no-cache`, with or without field names: both are read as unqualified, which RFC 9111
    /// §5.2.2.4 allows (every use is revalidated).
    pub no_cache: bool,
    /// `private` without field names.
    pub private: bool,
    /// The field names of a qualified `private`: a shared cache stores the response without
    /// them (§5.2.2.7).
    pub private_fields: Vec<HeaderName>,
    /// `public`.
    pub public: bool,
    /// `max-age`, in seconds.
    pub max_age: Option<u64>,
    /// `s-maxage`, in seconds (for shared caches alone).
    pub s_maxage: Option<u64>,
    /// `must-revalidate`: the cache never serves such a response stale, which it never does anyway;
    /// kept for the `Authorization` rule (§3.5), which `proxy-revalidate` does not satisfy (else a
    /// response to a request with credentials that said only `proxy-revalidate` would be shared).
    pub must_revalidate: bool,
    /// Request only: `max-age`, `min-fresh` (§5.2.1).
    pub min_fresh: Option<u64>,
}

impl Directives {
    /// Reads every line of `name`. Unknown directives are ignored (§5.2.3); a duplicated or
    /// invalid delta-seconds reads as 0, the safe value (§1.2.2, §4.2.1).
    pub fn parse(headers: &HeaderMap, name: &HeaderName) -> Directives {
        let mut out = Directives::default();
        for line in headers.get_all(name) {
            for (directive, argument) in directives(line.as_bytes()) {
                out.apply(directive, argument);
            }
        }
        out
    }

    /// Reads `Surrogate-Control`: the caching directives for every surrogate and those that
    /// name this one (`max-age=60;zipwire`), without those naming another. `None` when none
    /// applies, so that `Cache-Control` does: `content="ESI/1.0"` alone says nothing of
    /// caching.
    pub fn parse_surrogate(headers: &HeaderMap) -> Option<Directives> {
        let mut out = Directives::default();
        let mut any = false;
        for line in headers.get_all(SURROGATE_CONTROL) {
            for (directive, argument) in directives(line.as_bytes()) {
                // The target follows the directive, or its argument, after a `;`.
                let (directive, argument, target) = match argument {
                    Some(argument) => {
                        let (argument, target) = split_target(argument);
                        (directive, Some(argument), target)
                    }
                    None => {
                        let (directive, target) = split_target(directive);
                        (directive, None, target)
                    }
                };
                if target.is_some_and(|t| !t.eq_ignore_ascii_case(SURROGATE_TOKEN.as_bytes())) {
                    continue;
                }
                // `max-age=FRESH+STALE`: the stale part is not used.
                let argument = argument.map(|a| a.split(|&b| b == b'+').next().unwrap_or(a));
                any |= out.apply(directive, argument);
            }
        }
        any.then_some(out)
    }

    /// Takes one directive; whether it is one this cache reads.
    fn apply(&mut self, directive: &[u8], argument: Option<&[u8]>) -> bool {
        let seconds = || argument.map_or(Some(0), delta_seconds);
        match directive.to_ascii_lowercase().as_slice() {
            b"no-store" => self.no_store = true,
            b"no-cache" => self.no_cache = true,
            b"private" => match argument {
                Some(fields) => self.private_fields.extend(field_names(fields)),
                None => self.private = true,
            },
            b"public" => self.public = true,
            b"max-age" => self.max_age = merge(self.max_age, seconds()),
            b"s-maxage" => self.s_maxage = merge(self.s_maxage, seconds()),
            b"min-fresh" => self.min_fresh = seconds(),
            b"must-revalidate" => self.must_revalidate = true,
            _ => return false,
        }
        true
    }
}

/// `text;target` as its two parts, each without surrounding whitespace.
fn split_target(text: &[u8]) -> (&[u8], Option<&[u8]>) {
    match text.iter().position(|&b| b == b';') {
        Some(semicolon) => (
            list::trim_ows(&text[..semicolon]),
            Some(list::trim_ows(&text[semicolon + 1..])),
        ),
        None => (text, None),
    }
}

/// A second value of a directive makes it read as 0: conflicting freshness is no freshness.
fn merge(old: Option<u64>, new: Option<u64>) -> Option<u64> {
    match (old, new) {
        (Some(_), _) => Some(0),
        (None, value) => Some(value.unwrap_or(0)),
    }
}

/// §1.2.1: delta-seconds, capped at 2^31 as the RFC recommends for overflow.
fn delta_seconds(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut value: u64 = 0;
    for digit in text {
        value = (value * 10 + u64::from(digit - b'0')).min(1 << 31);
    }
    Some(value)
}

/// The `name[=argument]` pairs of one field line, quoted arguments unquoted (commas inside
/// quotes do not split).
fn directives(line: &[u8]) -> Vec<(&[u8], Option<&[u8]>)> {
    let mut out = Vec::new();
    let mut rest = line;
    while !rest.is_empty() {
        let mut quoted = false;
        let mut end = rest.len();
        for (i, &byte) in rest.iter().enumerate() {
            match byte {
                b'"' => quoted = !quoted,
                b',' if !quoted => {
                    end = i;
                    break;
                }
                _ => {}
            }
        }
        let item = list::trim_ows(&rest[..end]);
        rest = rest.get(end + 1..).unwrap_or(&[]);
        if item.is_empty() {
            continue;
        }
        match item.iter().position(|&b| b == b'=') {
            Some(eq) => {
                let value = list::trim_ows(&item[eq + 1..]);
                let value = value
                    .strip_prefix(b"\"")
                    .and_then(|v| v.strip_suffix(b"\""))
                    .unwrap_or(value);
                out.push((list::trim_ows(&item[..eq]), Some(value)));
            }
            None => out.push((item, None)),
        }
    }
    out
}

fn field_names(list: &[u8]) -> impl Iterator<Item = HeaderName> + '_ {
    list.split(|&b| b == b',')
        .filter_map(|name| HeaderName::from_bytes(list::trim_ows(name)).ok())
}

/// The response directives that apply to this cache: `CDN-Cache-Control` when present
/// (RFC 9213 §2.1: a cache that obeys it then ignores `Cache-Control`), else the
/// `Surrogate-Control` directives for this surrogate when there are any, else
/// `Cache-Control`. The second value says whether `Expires` still applies.
pub fn response_directives(headers: &HeaderMap) -> (Directives, bool) {
    if headers.contains_key(CDN_CACHE_CONTROL) {
        (Directives::parse(headers, &CDN_CACHE_CONTROL), false)
    } else if let Some(surrogate) = Directives::parse_surrogate(headers) {
        (surrogate, false)
    } else {
        (Directives::parse(headers, &CACHE_CONTROL), true)
    }
}

/// Whose a response is: `private` (for one user: a shared cache keeps none of it) and the
/// fields a qualified `private="..."` names (kept out of what is stored, RFC 9111 §5.2.2.7).
/// From the directives that apply ([`response_directives`]) and, unless `CDN-Cache-Control`
/// replaces it, from `Cache-Control` too: `Surrogate-Control` says how long a surrogate keeps
/// a response, not whose it is, so a `private` in `Cache-Control` still holds beside it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Privacy {
    /// Only the user it answered may have it.
    pub private: bool,
    /// Fields only that user may have.
    pub fields: Vec<HeaderName>,
}

impl Privacy {
    /// Reads it from a response's fields.
    pub fn of(headers: &HeaderMap) -> Privacy {
        let (applying, _) = response_directives(headers);
        let mut privacy = Privacy {
            private: applying.private,
            fields: applying.private_fields,
        };
        if !headers.contains_key(CDN_CACHE_CONTROL) && headers.contains_key(CACHE_CONTROL) {
            let cache_control = Directives::parse(headers, &CACHE_CONTROL);
            privacy.private |= cache_control.private;
            for name in cache_control.private_fields {
                if !privacy.fields.contains(&name) {
                    privacy.fields.push(name);
                }
            }
        }
        privacy
    }
}

/// What the request asks of the cache (§5.2.1, and `Pragma: no-cache` without
/// `Cache-Control`, §5.4).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RequestRules {
    /// The client will not take a stored response without revalidation.
    pub revalidate: bool,
    /// Nothing of this exchange may be stored (`no-store`).
    pub no_store: bool,
    /// The oldest age the client accepts (`max-age`).
    pub max_age: Option<u64>,
    /// The freshness the client wants left (`min-fresh`).
    pub min_fresh: Option<u64>,
}

impl RequestRules {
    /// Reads the request's directives.
    pub fn from_headers(headers: &HeaderMap) -> RequestRules {
        let directives = Directives::parse(headers, &CACHE_CONTROL);
        let pragma = !headers.contains_key(CACHE_CONTROL)
            && list::elements(headers.get_all(PRAGMA))
                .any(|element| element.eq_ignore_ascii_case(b"no-cache"));
        RequestRules {
            revalidate: directives.no_cache || pragma,
            no_store: directives.no_store,
            max_age: directives.max_age,
            min_fresh: directives.min_fresh,
        }
    }
}

/// Why a response is not stored; named for the debug log and the tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotStored {
    /// A method whose responses are not stored (only GET is).
    Method,
    /// A status the cache does not understand.
    Status,
    /// `no-store` in the request or the response.
    NoStore,
    /// `private` (unqualified) in the response.
    Private,
    /// A request with `Authorization`, without a directive that allows sharing it.
    Authorization,
    /// `Set-Cookie`, unless `store_set_cookie`.
    SetCookie,
    /// `Vary: *`, or a `Vary` member that is no field name.
    VaryStar,
    /// `Vary` names a field the proxy writes into the upstream request ([`PROXY_WRITTEN`]).
    VaryOnProxyField,
    /// Neither fresh for a while nor revalidatable: nothing to gain.
    NoFreshnessNorValidator,
    /// Over `cache.max_object`.
    Size,
    /// Delimited by the closing of the connection, where a cut looks like an end.
    Unframed,
    /// Both `Content-Length` and `Transfer-Encoding`: RFC 9112 §6.3 says such a response "ought to
    /// be handled as an error" (a sign of smuggling or splitting). It is passed on, framed by its
    /// chunks, as HAProxy does, but not kept for every other client (nginx answers 502).
    AmbiguousFraming,
}

/// Request fields the proxy writes or extends on the way upstream, from the client's address
/// or its own name: a response that varies on one is for that client alone.
pub const PROXY_WRITTEN: [&str; 4] = ["x-forwarded-for", "forwarded", "via", "x-real-ip"];

/// What a response's framing says of its body's length (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Length {
    /// `Content-Length`.
    Known(u64),
    /// Chunked, or an HTTP/2 stream: the framing marks the end; the size is checked as the
    /// body streams.
    Framed,
    /// Neither: the body ends when the connection closes.
    UntilClose,
}

/// The status codes this cache understands and stores (§3: "understood"); 206 and 304 are
/// left out (ranges pass as they do without a cache).
fn understood(status: StatusCode) -> bool {
    matches!(
        status.as_u16(),
        200 | 203 | 204 | 300 | 301 | 302 | 307 | 308 | 404 | 405 | 410 | 414 | 501
    )
}

/// Whether a shared cache may store the response to `method` with these heads (RFC 9111 §3,
/// §3.5), given the largest body it keeps and whether `Set-Cookie` responses may be kept.
/// `length` is what the framing says of the body.
pub fn storable(
    method: &Method,
    request: &HeaderMap,
    status: StatusCode,
    response: &HeaderMap,
    length: Length,
    max_object: u64,
    store_set_cookie: bool,
) -> Result<(), NotStored> {
    if method != Method::GET {
        return Err(NotStored::Method);
    }
    if !understood(status) {
        return Err(NotStored::Status);
    }
    let (directives, expires_applies) = response_directives(response);
    // `Surrogate-Control` tells a surrogate how long to keep a response (a `no-store` for
    // browsers with `max-age` for the surrogate is its use), not whose it is: `private` in
    // `Cache-Control` still keeps it out ([`Privacy`]), as Fastly's default VCL passes any
    // response that says `private`. Only `CDN-Cache-Control` replaces `Cache-Control` whole
    // (RFC 9213 §2.1).
    if directives.no_store || Directives::parse(request, &CACHE_CONTROL).no_store {
        return Err(NotStored::NoStore);
    }
    if Privacy::of(response).private {
        return Err(NotStored::Private);
    }
    // §4.1: the selecting fields are those of the request that was answered. A field the
    // proxy writes or rewrites on the way (the client's address) differs between what the
    // client sent, which the next lookups compare, and what the origin saw.
    if list::elements(response.get_all(VARY)).any(|member| {
        PROXY_WRITTEN
            .iter()
            .any(|name| member.eq_ignore_ascii_case(name.as_bytes()))
    }) {
        return Err(NotStored::VaryOnProxyField);
    }
    // §3.5: a response to a request with credentials only when it says a shared cache may.
    if request.contains_key(AUTHORIZATION)
        && !(directives.public || directives.must_revalidate || directives.s_maxage.is_some())
    {
        return Err(NotStored::Authorization);
    }
    if response.contains_key(SET_COOKIE) && !store_set_cookie {
        return Err(NotStored::SetCookie);
    }
    // A member that is no field name (`"Cookie"`, `Cookie;`) selects on something no request field
    // can be compared with: as `*`, not stored, rather than ignored and the response shared between
    // every client.
    if list::elements(response.get_all(VARY))
        .any(|member| member == b"*" || !list::is_token(member))
    {
        return Err(NotStored::VaryStar);
    }
    let explicit = directives
        .s_maxage
        .or(directives.max_age)
        .is_some_and(|s| s > 0)
        || (expires_applies && response.contains_key(EXPIRES));
    let validator = response.contains_key(ETAG) || response.contains_key(LAST_MODIFIED);
    if !explicit && !validator {
        return Err(NotStored::NoFreshnessNorValidator);
    }
    if response.contains_key(CONTENT_LENGTH) && response.contains_key(TRANSFER_ENCODING) {
        return Err(NotStored::AmbiguousFraming);
    }
    match length {
        Length::Known(length) if length > max_object => Err(NotStored::Size),
        Length::Known(_) | Length::Framed => Ok(()),
        Length::UntilClose => Err(NotStored::Unframed),
    }
}

/// The freshness lifetime of a stored response for a shared cache (§4.2.1): `s-maxage`, else
/// `max-age`, else `Expires` minus `Date`; zero when none (no heuristic freshness: such a
/// response is revalidated on every use), or when `no-cache` says so.
pub fn freshness_lifetime(headers: &HeaderMap, response_time: SystemTime) -> Duration {
    let (directives, expires_applies) = response_directives(headers);
    if directives.no_cache {
        return Duration::ZERO;
    }
    if let Some(seconds) = directives.s_maxage.or(directives.max_age) {
        return Duration::from_secs(seconds);
    }
    if !expires_applies {
        return Duration::ZERO;
    }
    let Some(expires) = headers.get(EXPIRES) else {
        return Duration::ZERO;
    };
    // §5.3: an invalid Expires (such as "0") means already expired.
    let Some(expires) = date(expires.as_bytes()) else {
        return Duration::ZERO;
    };
    let date = headers
        .get(DATE)
        .and_then(|value| date(value.as_bytes()))
        .unwrap_or(response_time);
    expires.duration_since(date).unwrap_or(Duration::ZERO)
}

/// The age the response had when it was received (§4.2.3: the corrected initial age, with
/// no response delay: the clock reads once per response).
pub fn initial_age(headers: &HeaderMap, response_time: SystemTime) -> Duration {
    let apparent = headers
        .get(DATE)
        .and_then(|value| date(value.as_bytes()))
        .and_then(|date| response_time.duration_since(date).ok())
        .unwrap_or(Duration::ZERO);
    let mut lines = headers.get_all(AGE).iter();
    let age = match (lines.next(), lines.next()) {
        (None, _) => Duration::ZERO,
        (Some(line), None) => {
            delta_seconds(list::trim_ows(line.as_bytes())).map_or(UNKNOWN_AGE, Duration::from_secs)
        }
        (Some(_), Some(_)) => UNKNOWN_AGE,
    };
    apparent.max(age)
}

/// The age of a response whose `Age` is not one non-negative integer (a list, a sign, a
/// fraction, a parameter): older than any freshness lifetime (`max-age` stops at 2^31
/// seconds, an `Expires` in the year 9999 is under 2^38 from now), so it is revalidated
/// before use. RFC 9111 §5.1 lets a cache ignore such a field instead, which would serve a
/// response of unknown age as new.
const UNKNOWN_AGE: Duration = Duration::from_secs(1 << 40);

/// An HTTP-date (RFC 9110 §5.6.7, all three formats).
pub fn date(value: &[u8]) -> Option<SystemTime> {
    let text = std::str::from_utf8(value).ok()?;
    httpdate::parse_http_date(text.trim()).ok()
}

/// Whether a stored response of `age` with `lifetime` may be served without asking the
/// origin, for a request with `rules`.
pub fn is_fresh(lifetime: Duration, age: Duration, rules: &RequestRules) -> bool {
    if rules.revalidate {
        return false;
    }
    if rules
        .max_age
        .is_some_and(|max| age > Duration::from_secs(max))
    {
        return false;
    }
    let wanted = age + Duration::from_secs(rules.min_fresh.unwrap_or(0));
    lifetime > wanted
}

/// Whether the cache may take `request` although it has a `Range`: a GET whose `If-Range`,
/// if any, holds an entity tag. A range on any other method is ignored (§14.2), so it never
/// keeps the cache out.
pub fn range_may_use_cache(method: &Method, headers: &HeaderMap) -> bool {
    if *method != Method::GET || !headers.contains_key(RANGE) {
        return true;
    }
    match headers.get(IF_RANGE) {
        None => true,
        Some(value) => {
            let value = value.as_bytes().trim_ascii_start();
            value.starts_with(b"\"") || value.starts_with(b"W/")
        }
    }
}

/// Whether `entry` can answer a range request: a 200 stored as the origin sent it in no
/// content coding, so that its identity bytes are the representation a range counts in.
pub fn serves_ranges(entry: &Entry) -> bool {
    entry.status == StatusCode::OK && !entry.headers.contains_key(CONTENT_ENCODING)
}

#[cfg(test)]
mod tests;
