//! `[headers.request]` and `[headers.response]`: fields removed, set or added on every
//! request sent upstream and on every response sent to a client (the proxy's own errors and
//! cache hits included), as nginx's `proxy_set_header`, `proxy_hide_header` and
//! `add_header … always`, HAProxy's `http-request`/`http-response` `set-header`,
//! `add-header` and `del-header`, and Caddy's `header` do.
//!
//! No rule may touch a field that frames the message or belongs to one connection
//! ([`refused`]): those are the proxy's to write, and a rule could make a message that
//! does not parse or smuggles another.

use http::header::{
    HeaderMap, HeaderName, HeaderValue, CONNECTION, CONTENT_ENCODING, CONTENT_LENGTH, TE, TRAILER,
    TRANSFER_ENCODING, UPGRADE,
};

/// What one direction's rules do, in this order: remove, set (replacing every line of the
/// field), add (one more line).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderRules {
    /// Fields removed.
    pub remove: Vec<HeaderName>,
    /// Fields given exactly this value.
    pub set: Vec<(HeaderName, HeaderValue)>,
    /// Lines appended.
    pub add: Vec<(HeaderName, HeaderValue)>,
}

impl HeaderRules {
    /// Whether there is nothing to do.
    pub fn is_empty(&self) -> bool {
        self.remove.is_empty() && self.set.is_empty() && self.add.is_empty()
    }

    /// Applies the rules to `headers`.
    pub fn apply(&self, headers: &mut HeaderMap) {
        for name in &self.remove {
            headers.remove(name);
        }
        for (name, value) in &self.set {
            headers.insert(name.clone(), value.clone());
        }
        for (name, value) in &self.add {
            headers.append(name.clone(), value.clone());
        }
    }
}

/// `[headers]`: the request and response rules.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HeaderSettings {
    /// Applied to every request as it goes upstream, after the proxy's own forwarding fields.
    pub request: HeaderRules,
    /// Applied to every response as it goes to the client.
    pub response: HeaderRules,
}

/// Why no rule may touch `name`, if none may: a hop-by-hop field (RFC 9110 §7.6.1), a
/// framing one (RFC 9112 §6), or `Content-Encoding`, which the proxy's compression writes.
pub fn refused(name: &HeaderName) -> Option<&'static str> {
    let hop_by_hop = [CONNECTION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE];
    if hop_by_hop.contains(name)
        || name.as_str() == "keep-alive"
        || name.as_str() == "proxy-connection"
    {
        return Some("a hop-by-hop field, for one connection only");
    }
    if name == CONTENT_LENGTH {
        return Some("a framing field, written by the proxy");
    }
    if name == CONTENT_ENCODING {
        return Some("the proxy's compression writes it");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(text: &str) -> HeaderName {
        HeaderName::from_bytes(text.as_bytes()).expect("a field name")
    }

    #[test]
    fn remove_then_set_then_add() {
        let rules = HeaderRules {
            remove: vec![name("server"), name("x-powered-by")],
            set: vec![(name("x-frame-options"), HeaderValue::from_static("DENY"))],
            add: vec![
                (name("server"), HeaderValue::from_static("edge")),
                (
                    name("x-frame-options"),
                    HeaderValue::from_static("SAMEORIGIN"),
                ),
            ],
        };
        let mut headers = HeaderMap::new();
        headers.append("server", HeaderValue::from_static("nginx"));
        headers.append("x-powered-by", HeaderValue::from_static("PHP"));
        headers.append("x-frame-options", HeaderValue::from_static("ALLOW"));
        headers.append("x-frame-options", HeaderValue::from_static("ALLOW-FROM x"));
        rules.apply(&mut headers);
        assert_eq!(headers.get_all("server").iter().count(), 1);
        assert_eq!(headers["server"], "edge");
        assert!(!headers.contains_key("x-powered-by"));
        let frames: Vec<&HeaderValue> = headers.get_all("x-frame-options").iter().collect();
        assert_eq!(frames, ["DENY", "SAMEORIGIN"]);
    }

    #[test]
    fn framing_and_hop_by_hop_fields_are_refused() {
        for refused_name in [
            "connection",
            "keep-alive",
            "proxy-connection",
            "te",
            "trailer",
            "transfer-encoding",
            "upgrade",
            "content-length",
            "content-encoding",
        ] {
            assert!(refused(&name(refused_name)).is_some(), "{refused_name}");
        }
        for allowed in [
            "host",
            "server",
            "strict-transport-security",
            "x-request-id",
        ] {
            assert!(refused(&name(allowed)).is_none(), "{allowed}");
        }
    }
}
