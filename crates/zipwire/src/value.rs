//! Parsers and printers for the value syntaxes of the configuration (sizes, durations,
//! percentages, addresses, upstream URLs), shared by the proxy's TOML file and every
//! subcommand's flags so all accept exactly the same spellings. It sits below `cli`, `proxy`
//! and `tunnel`, which all look down to it.
//!
//! Each parser's error is the problem alone (`'ftp://x' is not an http:// URL`); the caller
//! adds the key or the flag it came from.

use std::net::SocketAddr;
use std::time::Duration;

use http::uri::Authority;
use zipwire_proxy::Upstream;

/// Units a duration may carry, largest first (the printer picks the largest exact one).
const DURATION_UNITS: &[(&str, Duration)] = &[
    ("h", Duration::from_secs(3600)),
    ("m", Duration::from_secs(60)),
    ("s", Duration::from_secs(1)),
    ("ms", Duration::from_millis(1)),
    ("us", Duration::from_micros(1)),
    ("ns", Duration::from_nanos(1)),
];

/// Binary size suffixes, as nginx reads `k` and `m`; the `KiB` spellings are accepted too.
const SIZE_UNITS: &[(&[&str], u64, &str)] = &[
    (&["g", "G", "GiB"], 1 << 30, "GiB"),
    (&["m", "M", "MiB"], 1 << 20, "MiB"),
    (&["k", "K", "KiB"], 1 << 10, "KiB"),
    (&["", "B"], 1, ""),
];

/// A whole number with a unit: `250ms`, `10s`, `2m`, `1h` (also `us`, `ns`; a space before the
/// unit is allowed). Zero needs no unit (`0`, where a flag's help says "0 for off").
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    let invalid = || {
        format!("'{text}' is not a duration: write a whole number and a unit (250ms, 10s, 2m, 1h)")
    };
    let (number, unit) = split_number(text.trim()).ok_or_else(invalid)?;
    if number == 0 && unit.is_empty() {
        return Ok(Duration::ZERO);
    }
    let (_, scale) = DURATION_UNITS
        .iter()
        .find(|(name, _)| *name == unit)
        .ok_or_else(invalid)?;
    let scale = u64::try_from(scale.as_nanos()).expect("the largest unit is an hour");
    number
        .checked_mul(scale)
        .map(Duration::from_nanos)
        .ok_or_else(|| format!("'{text}' is too long a duration"))
}

/// The shortest exact spelling [`parse_duration`] reads back: `10s`, `250ms`, `0s`.
pub fn format_duration(duration: Duration) -> String {
    if duration.is_zero() {
        return "0s".to_owned();
    }
    let nanos = duration.as_nanos();
    DURATION_UNITS
        .iter()
        .find(|(_, scale)| nanos % scale.as_nanos() == 0)
        .map(|(unit, scale)| format!("{}{unit}", nanos / scale.as_nanos()))
        .expect("every duration is a whole number of nanoseconds")
}

/// Bytes: a whole number, optionally with a binary suffix as nginx writes them: `64k`,
/// `64K` or `64KiB` (×1024), `1m`/`1MiB`, `1g`/`1GiB`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let invalid =
        || format!("'{text}' is not a size: write bytes, or a number with k, m or g (64k, 1MiB)");
    let (number, unit) = split_number(text.trim()).ok_or_else(invalid)?;
    let (_, scale, _) = SIZE_UNITS
        .iter()
        .find(|(names, _, _)| names.contains(&unit))
        .ok_or_else(invalid)?;
    number
        .checked_mul(*scale)
        .ok_or_else(|| format!("'{text}' is too large"))
}

/// The shortest exact spelling [`parse_size`] reads back: `64KiB`, `1GiB`, `1000`.
pub fn format_size(bytes: u64) -> String {
    if bytes == 0 {
        return "0".to_owned();
    }
    SIZE_UNITS
        .iter()
        .find(|(_, scale, _)| bytes % scale == 0)
        .map(|(_, scale, unit)| format!("{}{unit}", bytes / scale))
        .expect("every size is a whole number of bytes")
}

/// An upstream URL: `http://HOST:PORT` (port 80 when left out) or `https://HOST:PORT` (port
/// 443), with no path, query or user info.
pub fn parse_upstream(text: &str) -> Result<Upstream, String> {
    let trimmed = text.trim();
    let (rest, default_port, https) =
        if let Some(rest) = strip_prefix_ignore_case(trimmed, "http://") {
            (rest, 80, false)
        } else if let Some(rest) = strip_prefix_ignore_case(trimmed, "https://") {
            (rest, 443, true)
        } else {
            return Err(format!("'{text}' is not an http:// or https:// URL"));
        };
    let (authority, path) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
    if !path.is_empty() && path != "/" {
        return Err(format!(
            "'{text}' has a path, query or fragment: an upstream is only http(s)://HOST:PORT"
        ));
    }
    if authority.contains('@') {
        return Err(format!(
            "'{text}' has user info: an upstream is only http(s)://HOST:PORT"
        ));
    }
    let no_host = || format!("'{text}' does not name a host (http(s)://HOST:PORT)");
    let parsed: Authority = authority
        .parse()
        .ok()
        .filter(|parsed: &Authority| !parsed.host().is_empty())
        .ok_or_else(no_host)?;
    // `host()` keeps an IPv6 address's brackets, so anything after it is `:PORT`.
    let has_port = parsed.as_str().len() > parsed.host().len();
    let authority = match parsed.port_u16() {
        Some(1..) => parsed,
        None if !has_port => format!("{}:{default_port}", parsed.host())
            .parse()
            .map_err(|_| no_host())?,
        _ => return Err(format!("'{text}' has no valid port (1-65535)")),
    };
    Ok(if https {
        Upstream::https(authority)
    } else {
        Upstream::http(authority)
    })
}

/// An IP address and port: `127.0.0.1:8080`, `[::1]:8080`. Host names are not resolved.
pub fn parse_socket_addr(text: &str) -> Result<SocketAddr, String> {
    let addr: SocketAddr = text.trim().parse().map_err(|_| {
        format!("'{text}' is not an IP address and port (like 127.0.0.1:8080 or [::1]:8080)")
    })?;
    // IPv6 listeners are bound IPv6-only (so that `0.0.0.0` and `[::]` can share a port), and
    // an IPv6-only socket cannot take an IPv4-mapped address: `--check` passed it, the start
    // failed with "Invalid argument".
    if let SocketAddr::V6(v6) = addr {
        if let Some(v4) = v6.ip().to_ipv4_mapped() {
            return Err(format!(
                "'{text}' is an IPv4-mapped address: write {}",
                SocketAddr::from((v4, v6.port()))
            ));
        }
    }
    Ok(addr)
}

/// A percentage of one core: a positive number (`80`, `150` for one and a half cores).
pub fn parse_percent(text: &str) -> Result<f64, String> {
    match text.trim().trim_end_matches('%').parse::<f64>() {
        Ok(percent) => check_percent(percent),
        Err(_) => Err(format!("'{text}' is not a percentage")),
    }
}

/// Accepts a finite, positive percentage.
pub fn check_percent(percent: f64) -> Result<f64, String> {
    if percent.is_finite() && percent > 0.0 {
        Ok(percent)
    } else {
        Err(format!("{percent} is not a positive percentage"))
    }
}

/// Splits `"250ms"` into `(250, "ms")`, allowing one run of spaces between them.
fn split_number(text: &str) -> Option<(u64, &str)> {
    let digits = text
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(text.len());
    if digits == 0 {
        return None;
    }
    let number = text[..digits].parse().ok()?;
    Some((number, text[digits..].trim_start()))
}

fn strip_prefix_ignore_case<'a>(text: &'a str, prefix: &str) -> Option<&'a str> {
    let head = text.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &text[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;
    use zipwire_proxy::UpstreamScheme;

    #[test]
    fn durations() {
        let rows: &[(&str, Duration)] = &[
            ("10s", Duration::from_secs(10)),
            ("250ms", Duration::from_millis(250)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("0s", Duration::ZERO),
            ("0", Duration::ZERO),
            ("15 us", Duration::from_micros(15)),
            (" 7ns ", Duration::from_nanos(7)),
        ];
        for (text, expected) in rows {
            assert_eq!(parse_duration(text), Ok(*expected), "{text}");
        }
        for text in ["", "10", "1", "s", "1.5s", "-1s", "10 sec", "10S", "1m30s"] {
            let err = parse_duration(text).expect_err(text);
            assert!(err.contains("is not a duration"), "{text}: {err}");
        }
        assert!(parse_duration("99999999999h").is_err());
    }

    #[test]
    fn durations_print_back() {
        for text in [
            "10s", "250ms", "2m", "1h", "0s", "1500ms", "90s", "7ns", "15us",
        ] {
            let duration = parse_duration(text).expect(text);
            assert_eq!(format_duration(duration), text);
        }
        assert_eq!(format_duration(Duration::from_millis(60_000)), "1m");
    }

    #[test]
    fn sizes() {
        let rows: &[(&str, u64)] = &[
            ("0", 0),
            ("1000", 1000),
            ("512B", 512),
            ("64k", 65_536),
            ("64K", 65_536),
            ("64KiB", 65_536),
            ("1m", 1 << 20),
            ("2 MiB", 2 << 20),
            ("1g", 1 << 30),
            ("1GiB", 1 << 30),
        ];
        for (text, expected) in rows {
            assert_eq!(parse_size(text), Ok(*expected), "{text}");
        }
        for text in ["", "k", "1.5k", "-1", "64kb", "64KB", "1T"] {
            assert!(parse_size(text).is_err(), "{text}");
        }
        assert!(parse_size("99999999999999g")
            .expect_err("overflow")
            .contains("too large"));
    }

    #[test]
    fn sizes_print_back() {
        for (bytes, text) in [
            (0, "0"),
            (1000, "1000"),
            (65_536, "64KiB"),
            (1 << 30, "1GiB"),
            (3 << 20, "3MiB"),
        ] {
            assert_eq!(format_size(bytes), text);
            assert_eq!(parse_size(text), Ok(bytes));
        }
    }

    #[test]
    fn upstreams() {
        let rows: &[(&str, &str)] = &[
            ("http://127.0.0.1:9000", "127.0.0.1:9000"),
            ("http://127.0.0.1:9000/", "127.0.0.1:9000"),
            ("HTTP://origin.example:8080", "origin.example:8080"),
            ("http://origin.example", "origin.example:80"),
            ("http://[::1]:9000", "[::1]:9000"),
            ("http://[::1]", "[::1]:80"),
            ("https://origin.example", "origin.example:443"),
            ("HTTPS://origin.example:8443/", "origin.example:8443"),
        ];
        for (text, expected) in rows {
            let upstream = parse_upstream(text).unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(upstream.authority.as_str(), *expected, "{text}");
            let https = text.to_ascii_lowercase().starts_with("https");
            let scheme = if https {
                UpstreamScheme::Https
            } else {
                UpstreamScheme::Http
            };
            assert_eq!(upstream.scheme, scheme, "{text}");
        }
    }

    #[test]
    fn bad_upstreams() {
        let rows: &[(&str, &str)] = &[
            ("ftp://x", "'ftp://x' is not an http:// or https:// URL"),
            (
                "127.0.0.1:9000",
                "'127.0.0.1:9000' is not an http:// or https:// URL",
            ),
            ("https://origin/app", "has a path"),
            ("http://origin/app", "has a path"),
            ("http://origin?x=1", "has a path, query or fragment"),
            ("http://user@origin", "has user info"),
            ("http://", "does not name a host"),
            ("http://:9000", "does not name a host"),
            ("http://origin:0", "has no valid port (1-65535)"),
            ("http://origin:", "has no valid port"),
            ("http://origin:99999", "has no valid port"),
            ("http://[::1]:x", "has no valid port"),
        ];
        for (text, expected) in rows {
            let err = parse_upstream(text).expect_err(text);
            assert!(err.contains(expected), "{text}: {err}");
        }
    }

    #[test]
    fn socket_addrs() {
        assert_eq!(
            parse_socket_addr("127.0.0.1:8080"),
            Ok(SocketAddr::from(([127, 0, 0, 1], 8080)))
        );
        assert!(parse_socket_addr("[::1]:9901").is_ok());
        let err = parse_socket_addr("localhost:8080").expect_err("no names");
        assert_eq!(
            err,
            "'localhost:8080' is not an IP address and port (like 127.0.0.1:8080 or [::1]:8080)"
        );
        assert!(parse_socket_addr("127.0.0.1").is_err());
        let err = parse_socket_addr("[::ffff:127.0.0.1]:8080").expect_err("v4-mapped");
        assert!(err.contains("write 127.0.0.1:8080"), "{err}");
    }

    #[test]
    fn percents() {
        assert_eq!(parse_percent("80"), Ok(80.0));
        assert_eq!(parse_percent("12.5%"), Ok(12.5));
        assert_eq!(parse_percent("150"), Ok(150.0));
        for text in ["0", "-5", "NaN", "inf", "lots"] {
            assert!(parse_percent(text).is_err(), "{text}");
        }
    }
}
