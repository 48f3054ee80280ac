//! The page and its files, built into the binary (`include_bytes!`), each kept in memory as
//! is and gzip-compressed by zipwire's own encoder, both made once on first use.

use std::sync::OnceLock;

use bytes::Bytes;
use zipwire_codec::{Format, Level};

use crate::routes::Kind;

/// One file as served.
#[derive(Debug)]
pub(crate) struct Prepared {
    /// Its `Content-Type`.
    pub(crate) content_type: &'static str,
    /// The bytes as they are.
    pub(crate) identity: Bytes,
    /// The same bytes gzip-compressed (RFC 1952) at the best level.
    pub(crate) gzip: Bytes,
}

impl Prepared {
    fn new(content_type: &'static str, bytes: Vec<u8>) -> Prepared {
        let gzip = zipwire_codec::compress(Format::Gzip, Level::BEST, &bytes);
        Prepared {
            content_type,
            identity: Bytes::from(bytes),
            gzip: Bytes::from(gzip),
        }
    }
}

/// The files under `/assets/<version>/`: name, type, bytes.
const FILES: [(&str, &str, &[u8]); 6] = [
    (
        "uPlot.iife.min.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/uPlot.iife.min.js"),
    ),
    (
        "uPlot.min.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/uPlot.min.css"),
    ),
    (
        "dashboard.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/dashboard.js"),
    ),
    (
        "dashboard.css",
        "text/css; charset=utf-8",
        include_bytes!("../assets/dashboard.css"),
    ),
    (
        "proxy.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/proxy.js"),
    ),
    (
        "tunnel.js",
        "text/javascript; charset=utf-8",
        include_bytes!("../assets/tunnel.js"),
    ),
];

/// The page's template: `{title}`, `{version}` and `{script}` are filled in per [`Kind`].
const PAGE: &str = include_str!("../assets/page.html");

/// The assets' version: a CRC-32 of every file and the page, in hex. It changes whenever a
/// byte does, so browsers may cache an asset URL for good.
pub(crate) fn version() -> &'static str {
    static VERSION: OnceLock<String> = OnceLock::new();
    VERSION.get_or_init(|| {
        let mut hasher = crc32fast::Hasher::new();
        for (name, _, bytes) in FILES {
            hasher.update(name.as_bytes());
            hasher.update(bytes);
        }
        hasher.update(PAGE.as_bytes());
        format!("{:08x}", hasher.finalize())
    })
}

/// The asset named `name`, if there is one.
pub(crate) fn file(name: &str) -> Option<&'static Prepared> {
    static PREPARED: OnceLock<Vec<Prepared>> = OnceLock::new();
    let index = FILES.iter().position(|(n, _, _)| *n == name)?;
    let prepared = PREPARED.get_or_init(|| {
        FILES
            .iter()
            .map(|(_, content_type, bytes)| Prepared::new(content_type, bytes.to_vec()))
            .collect()
    });
    prepared.get(index)
}

/// The page for `kind`.
pub(crate) fn page(kind: Kind) -> &'static Prepared {
    static PROXY: OnceLock<Prepared> = OnceLock::new();
    static TUNNEL: OnceLock<Prepared> = OnceLock::new();
    let cell = match kind {
        Kind::Proxy => &PROXY,
        Kind::Tunnel => &TUNNEL,
    };
    cell.get_or_init(|| {
        let (title, script) = match kind {
            Kind::Proxy => ("zipwire proxy", "proxy.js"),
            Kind::Tunnel => ("zipwire tunnel", "tunnel.js"),
        };
        let html = PAGE
            .replace("{title}", title)
            .replace("{version}", version())
            .replace("{script}", script);
        Prepared::new("text/html; charset=utf-8", html.into_bytes())
    })
}
