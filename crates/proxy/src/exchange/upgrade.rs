//! Which requests are passed upstream as upgrades, and the headers an upgrade keeps.
//!
//! `Connection` and `Upgrade` are hop-by-hop (RFC 9110 §7.6.1), so the proxy removes them
//! from every message it forwards; an upgrade is the one case where it sends its own again,
//! because the proxy itself takes part in the switch (RFC 9110 §7.8). Only WebSocket
//! handshakes (RFC 6455 §4.1: a GET in HTTP/1.1 with `Upgrade: websocket` and `Connection:
//! upgrade`) are passed: nginx passes whatever the configuration copies into `Upgrade`, but
//! passing any token lets a client open an `h2c` connection straight to the origin, behind
//! the proxy's back (h2c smuggling). Another `Upgrade` is removed and the request forwarded
//! as an ordinary one.

use http::header::{HeaderMap, HeaderValue, CONNECTION, UPGRADE};
use http::request::Parts as RequestParts;
use http::{Method, Version};

use zipwire_rules::list;

/// The `Upgrade` value of a WebSocket handshake the proxy passes on, `None` for any other
/// request.
pub(crate) fn websocket(request: &RequestParts) -> Option<HeaderValue> {
    // RFC 9110 §7.8: an `Upgrade` in an HTTP/1.0 request is ignored.
    if request.method != Method::GET || request.version != Version::HTTP_11 {
        return None;
    }
    let asks = list::elements(request.headers.get_all(CONNECTION))
        .any(|option| option.eq_ignore_ascii_case(b"upgrade"));
    if !asks {
        return None;
    }
    let mut upgrades = request.headers.get_all(UPGRADE).iter();
    match (upgrades.next(), upgrades.next()) {
        (Some(value), None) if is_websocket(value) => Some(value.clone()),
        _ => None,
    }
}

/// Whether an `Upgrade` value names exactly the `websocket` protocol (any version suffix
/// is not WebSocket's: RFC 6455 §4.1 registers the bare token).
pub(crate) fn is_websocket(value: &HeaderValue) -> bool {
    let mut protocols = list::split(value.as_bytes());
    matches!(
        (protocols.next(), protocols.next()),
        (Some(protocol), None) if protocol.eq_ignore_ascii_case(b"websocket")
    )
}

/// Puts back, on headers whose hop-by-hop fields were removed, the two that ask the next
/// hop to switch to `protocol`.
pub(crate) fn ask_to_switch(headers: &mut HeaderMap, protocol: HeaderValue) {
    headers.insert(CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(UPGRADE, protocol);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parts(
        method: &str,
        version: Version,
        lines: &[(&'static str, &'static str)],
    ) -> RequestParts {
        let mut request = http::Request::builder().method(method).version(version);
        for &(name, value) in lines {
            request = request.header(name, value);
        }
        request.body(()).expect("valid").into_parts().0
    }

    #[test]
    fn only_websocket_handshakes_are_upgrades() {
        let handshake = [
            ("connection", "keep-alive, Upgrade"),
            ("upgrade", "WebSocket"),
        ];
        let v11 = Version::HTTP_11;
        assert!(websocket(&parts("GET", v11, &handshake)).is_some());
        assert!(websocket(&parts("GET", Version::HTTP_10, &handshake)).is_none());
        assert!(websocket(&parts("POST", v11, &handshake)).is_none());
        let refused: &[&[(&'static str, &'static str)]] = &[
            &[("upgrade", "websocket")],
            &[("connection", "upgrade"), ("upgrade", "h2c")],
            &[("connection", "upgrade"), ("upgrade", "websocket, h2c")],
            &[("connection", "upgrade"), ("upgrade", "websocket/2")],
            &[
                ("connection", "upgrade"),
                ("upgrade", "websocket"),
                ("upgrade", "websocket"),
            ],
        ];
        for lines in refused {
            assert!(websocket(&parts("GET", v11, lines)).is_none(), "{lines:?}");
        }
    }
}
