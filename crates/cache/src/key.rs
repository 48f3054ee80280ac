//! Which stored response a request may get: the primary key (method, host, target; RFC 9111
//! §2) and the secondary key of `Vary` (§4.1).

use http::header::{
    HeaderMap, HeaderName, ACCEPT, ACCEPT_CHARSET, ACCEPT_ENCODING, ACCEPT_LANGUAGE, COOKIE, HOST,
    VARY,
};
use http::request::Parts;

use zipwire_rules::list;

/// The primary cache key: host and target of a GET (HEAD is answered from GET's entries, and
/// no other method's responses are stored, so the method is implied).
pub fn primary(request: &Parts) -> String {
    let host = request
        .uri
        .authority()
        .map(|authority| authority.as_str().as_bytes())
        .or_else(|| request.headers.get(HOST).map(|host| host.as_bytes()))
        .unwrap_or_default();
    let target = request.uri.path_and_query().map_or("/", |p| p.as_str());
    let mut key = String::with_capacity(host.len() + target.len() + 1);
    key.push_str(&String::from_utf8_lossy(host).to_ascii_lowercase());
    key.push(' ');
    key.push_str(target);
    key
}

/// The key of a `Location` or `Content-Location` value for invalidation (§4.4): same host only,
/// absolute or a path; `None` for another host or an unusable value.
pub fn for_location(host_key: &str, value: &[u8]) -> Option<String> {
    let text = std::str::from_utf8(value).ok()?;
    let uri: http::Uri = text.trim().parse().ok()?;
    let (host, _) = host_key.split_once(' ')?;
    if let Some(authority) = uri.authority() {
        if !authority.as_str().eq_ignore_ascii_case(host) {
            return None;
        }
    }
    let target = uri.path_and_query()?.as_str();
    if !target.starts_with('/') {
        return None;
    }
    Some(format!("{host} {target}"))
}

/// The request header values a response's `Vary` selects, in the order it names them: what a
/// later request must match (§4.1: the same values, after combining lines). `Accept-Encoding`
/// is left out when the upstream never sees it (offload mode): the cache makes its codings
/// itself.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selected(Vec<(HeaderName, Option<Vec<u8>>)>);

impl Selected {
    /// What `request` holds of the fields `response`'s `Vary` names.
    pub fn new(response: &HeaderMap, request: &HeaderMap, offload: bool) -> Selected {
        let mut fields = Vec::new();
        for member in list::elements(response.get_all(VARY)) {
            let Ok(name) = HeaderName::from_bytes(member) else {
                continue;
            };
            if (offload && name == ACCEPT_ENCODING) || fields.iter().any(|(n, _)| *n == name) {
                continue;
            }
            let value = combined(request, &name);
            fields.push((name, value));
        }
        Selected(fields)
    }

    /// Whether `request` holds the same values.
    pub fn matches(&self, request: &HeaderMap) -> bool {
        self.0
            .iter()
            .all(|(name, value)| combined(request, name) == *value)
    }

    /// Bytes held, for the memory count.
    pub fn weight(&self) -> usize {
        self.0
            .iter()
            .map(|(name, value)| name.as_str().len() + value.as_ref().map_or(0, Vec::len) + 32)
            .sum()
    }
}

/// Fields whose value is a comma-separated list (RFC 9110 §12.5): for these, and only these,
/// `a,b` and `a, b` are the same value (§4.1 allows normalising list syntax).
const LISTS: [HeaderName; 4] = [ACCEPT, ACCEPT_CHARSET, ACCEPT_ENCODING, ACCEPT_LANGUAGE];

/// The value of `name` a request is compared by: its lines joined (by "; " for `Cookie`, as HTTP/2
/// splits one into lines, RFC 9113 §8.2.3; by ", " for the rest), each trimmed at its ends; for a
/// list field, the elements of its lines, joined by ", ". Otherwise the bytes are compared as sent:
/// a comma means something in `Origin` or `Cookie`, and if `Origin: https://app.example,` selected
/// the response stored for `https://app.example`, one client could choose what another got (Varnish
/// compares the bytes too).
fn combined(headers: &HeaderMap, name: &HeaderName) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let mut out = Vec::new();
    if LISTS.contains(name) {
        for element in list::elements(headers.get_all(name)) {
            if !out.is_empty() {
                out.extend_from_slice(b", ");
            }
            out.extend_from_slice(element);
        }
        return Some(out);
    }
    let separator: &[u8] = if name == COOKIE { b"; " } else { b", " };
    for (i, line) in lines.enumerate() {
        if i > 0 {
            out.extend_from_slice(separator);
        }
        out.extend_from_slice(line.as_bytes().trim_ascii());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::header::HeaderValue;
    use http::Request;

    fn heads(lines: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for &(name, value) in lines {
            map.append(name, HeaderValue::from_static(value));
        }
        map
    }

    #[test]
    fn the_primary_key_is_host_and_target() {
        let (parts, ()) = Request::get("/a?b=1")
            .header("host", "Example.COM")
            .body(())
            .expect("valid")
            .into_parts();
        assert_eq!(primary(&parts), "example.com /a?b=1");
        let (absolute, ()) = Request::get("http://o:1/x")
            .body(())
            .expect("valid")
            .into_parts();
        assert_eq!(primary(&absolute), "o:1 /x");
        assert_eq!(for_location("o:1 /x", b"/y"), Some("o:1 /y".to_owned()));
        assert_eq!(
            for_location("o:1 /x", b"http://O:1/z"),
            Some("o:1 /z".to_owned())
        );
        assert_eq!(for_location("o:1 /x", b"http://evil/z"), None);
        assert_eq!(for_location("o:1 /x", b"y"), None);
    }

    #[test]
    fn vary_selects_on_the_named_request_fields() {
        let response = heads(&[
            ("vary", "Accept-Language, accept-encoding"),
            ("vary", "X-A"),
        ]);
        let en = heads(&[("accept-language", "en,de"), ("x-a", "1, 2")]);
        let selected = Selected::new(&response, &en, true);
        // A list field's syntax is normalised; another field's lines are joined as sent.
        assert!(selected.matches(&heads(&[("accept-language", "en, de"), ("x-a", "1, 2")])));
        assert!(selected.matches(&heads(&[
            ("accept-language", "en"),
            ("accept-language", "de"),
            ("x-a", "1"),
            ("x-a", " 2 ")
        ])));
        assert!(!selected.matches(&heads(&[("accept-language", "en,de"), ("x-a", "1,2")])));
        assert!(!selected.matches(&heads(&[("accept-language", "fr"), ("x-a", "1, 2")])));
        assert!(!selected.matches(&heads(&[("accept-language", "en,de")])));
        // Accept-Encoding counts only when the upstream saw it.
        assert!(selected.matches(&heads(&[
            ("accept-language", "en,de"),
            ("x-a", "1, 2"),
            ("accept-encoding", "br")
        ])));
        let forwarded = Selected::new(&response, &en, false);
        assert!(!forwarded.matches(&heads(&[
            ("accept-language", "en,de"),
            ("x-a", "1, 2"),
            ("accept-encoding", "br")
        ])));
        let none = Selected::new(&HeaderMap::new(), &en, true);
        assert!(none.matches(&HeaderMap::new()));
    }

    #[test]
    fn a_stray_comma_selects_another_response_where_the_field_is_no_list() {
        // One client's `Origin: https://app.example,` must not choose what the allowed origin
        // gets; an HTTP/2 client's cookie lines are the HTTP/1.1 client's one line.
        let response = heads(&[("vary", "Origin, Cookie")]);
        let sent = heads(&[("origin", "https://app.example,"), ("cookie", "a=1; b=2")]);
        let selected = Selected::new(&response, &sent, true);
        assert!(!selected.matches(&heads(&[
            ("origin", "https://app.example"),
            ("cookie", "a=1; b=2")
        ])));
        let stored = Selected::new(
            &response,
            &heads(&[("origin", "https://app.example"), ("cookie", "a=1; b=2")]),
            true,
        );
        assert!(stored.matches(&heads(&[
            ("origin", "https://app.example"),
            ("cookie", "a=1"),
            ("cookie", "b=2")
        ])));
        assert!(!stored.matches(&heads(&[
            ("origin", "https://app.example"),
            ("cookie", "a=1, b=2")
        ])));
    }
}
