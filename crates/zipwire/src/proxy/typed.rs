//! The second configuration stage: every raw value checked and turned into the proxy's typed
//! [`ProxyConfig`], defaults applied where a key is unset.
//!
//! The defaults are the proxy library's ([`ProxyConfig::new`]) except [`DEFAULT_LISTEN`],
//! which belongs to the command. Every rejection names its key as it is written in the file
//! (`compression.level`, `upstreams[1]`).

use std::error::Error;
use std::fmt;
use std::net::SocketAddr;

use http::HeaderValue;
use zipwire_codec::Level;
use zipwire_proxy::{
    BrotliLevel, CertificateFiles, Coding, Http2Limits, ProxyConfig, Tls, TypePattern, Upstream,
    UpstreamRoots, ZstdLevel,
};

use crate::proxy::raw::{RawConfig, RawHttp2, RawTls};
use crate::value;

mod header_rules;
mod stores;
mod values;

use stores::{cache, dictionaries};

use values::{at, duration, int_in, positive_duration, size, size_in};

/// The smallest `budget.max_memory`: below it not even one stream's buffers fit (a 64 KiB
/// call, its output and the encoder), and every response would pass uncompressed with the
/// bypass reason `budget`, silently.
pub const MIN_MAX_MEMORY: u64 = 1 << 20;

/// The smallest `budget.gather_memory`: one call of the default `compression.coalesce`.
pub const MIN_GATHER_MEMORY: u64 = 64 * 1024;

/// Where the proxy listens for cleartext clients when neither the file nor `--listen` says,
/// and no TLS listener is given.
pub const DEFAULT_LISTEN: SocketAddr =
    SocketAddr::new(std::net::IpAddr::V4(std::net::Ipv4Addr::LOCALHOST), 8080);

/// The most worker threads accepted.
const MAX_THREADS: i64 = 1024;

/// A rejected configuration value: the key as written in the file, and what is wrong with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigError {
    key: String,
    problem: String,
}

impl ConfigError {
    fn new(key: impl Into<String>, problem: impl Into<String>) -> ConfigError {
        ConfigError {
            key: key.into(),
            problem: problem.into(),
        }
    }

    /// The rejected key, like `compression.level` or `upstreams[1]`.
    pub fn key(&self) -> &str {
        &self.key
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.key, self.problem)
    }
}

impl Error for ConfigError {}

impl TryFrom<RawConfig> for ProxyConfig {
    type Error = ConfigError;

    fn try_from(raw: RawConfig) -> Result<ProxyConfig, ConfigError> {
        let tls = tls(&raw.tls)?;
        let listen = match &raw.listen {
            Some(listen) => listen_list(listen.as_slice())?,
            None if !tls.listen.is_empty() => Vec::new(),
            None => vec![DEFAULT_LISTEN],
        };
        if listen.is_empty() && tls.listen.is_empty() {
            return Err(ConfigError::new(
                "listen",
                "no listener: give an address here or in tls.listen",
            ));
        }
        if let Some((i, addr, taken)) = tls
            .listen
            .iter()
            .enumerate()
            .find_map(|(i, addr)| Some((i, *addr, overlap(*addr, &listen)?)))
        {
            return Err(ConfigError::new(
                format!("tls.listen[{i}]"),
                clash(addr, taken, "cleartext listen address"),
            ));
        }
        let upstreams = upstreams(raw.upstreams.as_deref().unwrap_or_default())?;
        let mut config = ProxyConfig::new(DEFAULT_LISTEN, upstreams);
        config.listen = listen;
        config.tls = tls;

        if let Some(threads) = raw.threads {
            config.threads = int_in("threads", threads, 1..=MAX_THREADS, "a thread count")?;
        }
        if let Some(down_time) = &raw.down_time {
            config.down_time = duration("down_time", down_time)?;
        }
        if let Some(text) = &raw.admin {
            let admin = at("admin", value::parse_socket_addr(text))?;
            if let Some(taken) =
                overlap(admin, &config.listen).or_else(|| overlap(admin, &config.tls.listen))
            {
                return Err(ConfigError::new(
                    "admin",
                    clash(admin, taken, "listen address"),
                ));
            }
            config.admin = Some(admin);
        }
        if let Some(access_log) = raw.access_log {
            config.access_log = access_log;
        }
        if let Some(path) = &raw.upstream_ca_file {
            config.upstream_roots = ca_file(path)?;
        }

        let raw_compression = &raw.compression;
        let compression = &mut config.compression;
        if let Some(level) = raw_compression.level {
            compression.level = u8::try_from(level)
                .ok()
                .and_then(|level| Level::try_from(level).ok())
                .ok_or_else(|| {
                    ConfigError::new("compression.level", format!("{level} is not a level 1-9"))
                })?;
        }
        if let Some(min_length) = &raw_compression.min_length {
            compression.rules.min_length = size("compression.min_length", min_length)?;
        }
        if let Some(types) = &raw_compression.types {
            compression.rules.types = types
                .iter()
                .enumerate()
                .map(|(i, text)| {
                    TypePattern::parse(text).map_err(|_| {
                        ConfigError::new(
                            format!("compression.types[{i}]"),
                            format!(
                                "'{text}' is not a media type pattern (type/subtype, type/*, type/*+suffix or */*)"
                            ),
                        )
                    })
                })
                .collect::<Result<_, _>>()?;
        }
        if let Some(names) = &raw_compression.encodings {
            compression.rules.offered = codings_list(names)?;
        }
        if let Some(level) = raw_compression.zstd_level {
            compression.zstd_level = u8::try_from(level)
                .ok()
                .and_then(ZstdLevel::new)
                .ok_or_else(|| {
                    ConfigError::new(
                        "compression.zstd_level",
                        format!("{level} is not a zstd level 1-{}", ZstdLevel::MAX),
                    )
                })?;
        }
        if let Some(level) = raw_compression.br_level {
            compression.br_level = u8::try_from(level)
                .ok()
                .and_then(BrotliLevel::new)
                .ok_or_else(|| {
                    ConfigError::new(
                        "compression.br_level",
                        format!("{level} is not a brotli level 0-{}", BrotliLevel::MAX),
                    )
                })?;
        }
        if let Some(coalesce) = &raw_compression.coalesce {
            let bytes = size_in("compression.coalesce", coalesce, 1..=16 << 20)?;
            compression.flush.coalesce = usize::try_from(bytes)
                .map_err(|_| ConfigError::new("compression.coalesce", "too large"))?;
        }
        if let Some(delay) = &raw_compression.flush_delay {
            compression.flush.delay = duration("compression.flush_delay", delay)?;
        }
        if let Some(offload) = raw_compression.offload {
            compression.offload = offload;
        }
        if let Some(gunzip) = raw_compression.gunzip {
            compression.gunzip = gunzip;
        }
        if let Some(max) = &raw_compression.gunzip_max_output {
            compression.gunzip_max_output =
                size_in("compression.gunzip_max_output", max, 1..=u64::MAX)?;
        }

        let raw_budget = &raw.budget;
        let budget = &mut config.budget;
        if let Some(max_cpu) = raw_budget.max_cpu {
            budget.max_cpu = Some(at("budget.max_cpu", value::check_percent(max_cpu))?);
        }
        if let Some(max_rate) = &raw_budget.max_rate {
            budget.max_rate = Some(size_in("budget.max_rate", max_rate, 1..=u64::MAX)?);
        }
        if let Some(max_memory) = &raw_budget.max_memory {
            budget.max_memory = Some(size_in(
                "budget.max_memory",
                max_memory,
                MIN_MAX_MEMORY..=u64::MAX,
            )?);
        }
        // A compressing response takes two calls' worth (its input and its output) of the
        // gate before it starts; less than that and every response would pass uncompressed,
        // counted as `budget` bypasses, with nothing else to say why.
        let coalesce = compression.flush.coalesce as u64;
        if let Some(max_memory) = budget.max_memory {
            if max_memory < 2 * coalesce {
                return Err(ConfigError::new(
                    "budget.max_memory",
                    format!(
                        "{max_memory} bytes cannot hold one compressing response: it takes \
                         twice compression.coalesce ({coalesce} bytes)"
                    ),
                ));
            }
        }
        if let Some(gather) = &raw_budget.gather_memory {
            budget.gather_memory = Some(size_in(
                "budget.gather_memory",
                gather,
                MIN_GATHER_MEMORY..=u64::MAX,
            )?);
        }
        if let Some(hysteresis) = raw_budget.hysteresis {
            if !(0.0..1.0).contains(&hysteresis) {
                return Err(ConfigError::new(
                    "budget.hysteresis",
                    format!("{hysteresis} is not a fraction from 0 up to (not including) 1"),
                ));
            }
            budget.hysteresis = hysteresis;
        }
        if let Some(window) = &raw_budget.window {
            budget.window = positive_duration("budget.window", window)?;
        }

        if let Some(raw_cache) = &raw.cache {
            config.cache = cache(raw_cache)?;
        }
        config.dictionaries = dictionaries(&raw.dictionaries)?;
        config.headers = zipwire_proxy::HeaderSettings {
            request: header_rules::rules("headers.request", &raw.headers.request)?,
            response: header_rules::rules("headers.response", &raw.headers.response)?,
        };

        if let Some(x_forwarded_for) = raw.forwarding.x_forwarded_for {
            config.forwarding.x_forwarded_for = x_forwarded_for;
        }
        if let Some(on) = raw.forwarding.x_forwarded_proto {
            config.forwarding.x_forwarded_proto = on;
        }
        if let Some(on) = raw.forwarding.x_forwarded_host {
            config.forwarding.x_forwarded_host = on;
        }
        if let Some(via) = &raw.forwarding.via {
            config.forwarding.via = pseudonym(via)?;
        }

        let raw_timeouts = &raw.timeouts;
        let timeouts = &mut config.timeouts;
        if let Some(t) = &raw_timeouts.header_read {
            timeouts.header_read = positive_duration("timeouts.header_read", t)?;
        }
        if let Some(t) = &raw_timeouts.client_body {
            timeouts.client_body = positive_duration("timeouts.client_body", t)?;
        }
        if let Some(t) = &raw_timeouts.upstream_connect {
            timeouts.upstream_connect = positive_duration("timeouts.upstream_connect", t)?;
        }
        if let Some(t) = &raw_timeouts.upstream_response {
            timeouts.upstream_response = positive_duration("timeouts.upstream_response", t)?;
        }
        if let Some(t) = &raw_timeouts.idle {
            timeouts.idle = positive_duration("timeouts.idle", t)?;
        }
        if let Some(t) = &raw_timeouts.shutdown_grace {
            timeouts.shutdown_grace = duration("timeouts.shutdown_grace", t)?;
        }
        if let Some(t) = &raw_timeouts.upgrade_idle {
            timeouts.upgrade_idle = positive_duration("timeouts.upgrade_idle", t)?;
        }
        if let Some(t) = &raw_timeouts.send {
            timeouts.send = positive_duration("timeouts.send", t)?;
        }

        if let Some(bytes) = &raw.limits.max_header_bytes {
            let bytes = size_in("limits.max_header_bytes", bytes, 1 << 10..=16 << 20)?;
            config.limits.max_header_bytes = usize::try_from(bytes)
                .map_err(|_| ConfigError::new("limits.max_header_bytes", "too large"))?;
        }
        if let Some(n) = raw.limits.max_connections {
            config.limits.max_connections = int_in(
                "limits.max_connections",
                n,
                1..=10_000_000,
                "a connection count",
            )?;
        }
        if let Some(bytes) = &raw.limits.max_body {
            // 0 is no limit, as nginx's `client_max_body_size 0`.
            let bytes = size_in("limits.max_body", bytes, 0..=u64::MAX)?;
            config.limits.max_body = (bytes > 0).then_some(bytes);
        }
        http2(&raw.http2, &mut config.http2)?;
        Ok(config)
    }
}

/// Socket addresses, each named `key[i]` when rejected, none twice.
fn addresses(key: &str, texts: &[String]) -> Result<Vec<SocketAddr>, ConfigError> {
    let mut addrs = Vec::with_capacity(texts.len());
    for (i, text) in texts.iter().enumerate() {
        let addr = at(format!("{key}[{i}]"), value::parse_socket_addr(text))?;
        if let Some(taken) = overlap(addr, &addrs) {
            let why = if taken == addr {
                format!("{addr} is listed twice")
            } else {
                clash(addr, taken, "address listed before it")
            };
            return Err(ConfigError::new(format!("{key}[{i}]"), why));
        }
        addrs.push(addr);
    }
    Ok(addrs)
}

/// The address among `bound` that `addr` could not be bound beside: the same port in the same
/// family, and the same address or a wildcard on either side (`0.0.0.0:80` takes
/// `127.0.0.1:80`). IPv6 listeners are bound IPv6-only, so `0.0.0.0:80` and `[::]:80` go
/// together, as nginx binds them. Port 0 (the system picks one) never clashes.
fn overlap(addr: SocketAddr, bound: &[SocketAddr]) -> Option<SocketAddr> {
    bound.iter().copied().find(|other| {
        addr.port() != 0
            && other.port() == addr.port()
            && other.is_ipv4() == addr.is_ipv4()
            && (other.ip() == addr.ip()
                || other.ip().is_unspecified()
                || addr.ip().is_unspecified())
    })
}

/// Why `addr` cannot be bound beside `taken`, a `what`.
fn clash(addr: SocketAddr, taken: SocketAddr, what: &str) -> String {
    if addr == taken {
        format!("{addr} is also a {what}")
    } else {
        format!("{addr} takes the port of the {what} {taken}")
    }
}

/// `listen`: one address (named `listen` when rejected) or a list.
fn listen_list(texts: &[String]) -> Result<Vec<SocketAddr>, ConfigError> {
    match texts {
        [one] => Ok(vec![at("listen", value::parse_socket_addr(one))?]),
        _ => addresses("listen", texts),
    }
}

/// `[tls]`: listeners, certificates (only their presence here: the files are read by
/// `--check` and by the server), the handshake timeout and HSTS.
fn tls(raw: &RawTls) -> Result<Tls, ConfigError> {
    let mut tls = Tls {
        listen: addresses("tls.listen", raw.listen.as_deref().unwrap_or_default())?,
        ..Tls::default()
    };
    tls.default_certificate = match (&raw.cert, &raw.key) {
        (Some(cert), Some(key)) => Some(CertificateFiles {
            cert: cert.clone(),
            key: key.clone(),
        }),
        (Some(_), None) => {
            return Err(ConfigError::new(
                "tls.key",
                "tls.cert is given without its key (--tls-key)",
            ))
        }
        (None, Some(_)) => {
            return Err(ConfigError::new(
                "tls.cert",
                "tls.key is given without its certificate (--tls-cert)",
            ))
        }
        (None, None) => None,
    };
    tls.certificates = raw
        .certificates
        .iter()
        .map(|entry| CertificateFiles {
            cert: entry.cert.clone(),
            key: entry.key.clone(),
        })
        .collect();
    let has_certificates = tls.default_certificate.is_some() || !tls.certificates.is_empty();
    if tls.listen.is_empty() && has_certificates {
        return Err(ConfigError::new(
            "tls.listen",
            "certificates are given but no TLS listener (--tls-listen)",
        ));
    }
    if !tls.listen.is_empty() && !has_certificates {
        return Err(ConfigError::new(
            "tls.cert",
            "TLS listeners need a certificate: set tls.cert and tls.key (--tls-cert, --tls-key) \
             or [[tls.certificates]]",
        ));
    }
    if let Some(t) = &raw.handshake_timeout {
        tls.handshake_timeout = positive_duration("tls.handshake_timeout", t)?;
    }
    if let Some(text) = &raw.hsts {
        tls.hsts = Some(hsts(text)?);
    }
    Ok(tls)
}

/// A `Strict-Transport-Security` value: a valid header value with the `max-age` directive
/// RFC 6797 §6.1.1 requires.
fn hsts(text: &str) -> Result<HeaderValue, ConfigError> {
    let invalid = |why: &str| ConfigError::new("tls.hsts", format!("'{text}' {why}"));
    let value = HeaderValue::from_str(text)
        .map_err(|_| invalid("is not a header value (visible ASCII only)"))?;
    let has_max_age = text.split(';').any(|directive| {
        directive.split_once('=').is_some_and(|(name, seconds)| {
            let seconds = seconds.trim().trim_matches('"');
            name.trim().eq_ignore_ascii_case("max-age")
                && !seconds.is_empty()
                && seconds.bytes().all(|b| b.is_ascii_digit())
        })
    });
    if !has_max_age {
        return Err(invalid(
            "has no max-age=SECONDS directive (RFC 6797 §6.1.1), e.g. \"max-age=31536000\"",
        ));
    }
    Ok(value)
}

/// `[http2]`. Windows go up to RFC 9113's 2^31-1 (§6.9.1), in whole sizes up to 1 GiB.
fn http2(raw: &RawHttp2, http2: &mut Http2Limits) -> Result<(), ConfigError> {
    if let Some(enabled) = raw.enabled {
        http2.enabled = enabled;
    }
    if let Some(n) = raw.max_concurrent_streams {
        http2.max_concurrent_streams = int_in(
            "http2.max_concurrent_streams",
            n,
            1..=100_000,
            "a stream count",
        )?;
    }
    for (key, quantity, window) in [
        (
            "http2.initial_stream_window",
            &raw.initial_stream_window,
            &mut http2.initial_stream_window,
        ),
        (
            "http2.initial_connection_window",
            &raw.initial_connection_window,
            &mut http2.initial_connection_window,
        ),
    ] {
        if let Some(quantity) = quantity {
            // RFC 9113 §6.5.2: the initial window is at least the default 65,535 bytes
            // (HAProxy's `tune.h2.initial-window-size` default, so its value is taken).
            let bytes = size_in(key, quantity, 65_535..=1 << 30)?;
            *window = u32::try_from(bytes).map_err(|_| ConfigError::new(key, "too large"))?;
        }
    }
    if let Some(interval) = &raw.ping_interval {
        let interval = duration("http2.ping_interval", interval)?;
        http2.ping_interval = (!interval.is_zero()).then_some(interval);
    }
    if let Some(timeout) = &raw.ping_timeout {
        http2.ping_timeout = positive_duration("http2.ping_timeout", timeout)?;
    }
    Ok(())
}

fn upstreams(texts: &[String]) -> Result<Vec<Upstream>, ConfigError> {
    if texts.is_empty() {
        return Err(ConfigError::new(
            "upstreams",
            "no upstream given: set upstreams = [\"http://HOST:PORT\"] or pass --upstream",
        ));
    }
    texts
        .iter()
        .enumerate()
        .map(|(i, text)| at(format!("upstreams[{i}]"), value::parse_upstream(text)))
        .collect()
}

/// The certificates of the PEM file at `path`, read now so that `--check` proves it.
fn ca_file(path: &str) -> Result<UpstreamRoots, ConfigError> {
    const KEY: &str = "upstream_ca_file";
    let pem = std::fs::read(path)
        .map_err(|error| ConfigError::new(KEY, format!("{path}: cannot read: {error}")))?;
    UpstreamRoots::from_pem(path, &pem)
        .map_err(|problem| ConfigError::new(KEY, format!("{path}: {problem}")))
}

/// The `encodings` list: known names, each once, at least one.
fn codings_list(names: &[String]) -> Result<Vec<Coding>, ConfigError> {
    let list_key = "compression.encodings";
    if names.is_empty() {
        return Err(ConfigError::new(
            list_key,
            "empty: name zstd, br, gzip or deflate (leave types empty to compress nothing)",
        ));
    }
    let mut codings = Vec::with_capacity(names.len());
    for (i, name) in names.iter().enumerate() {
        let key = || format!("{list_key}[{i}]");
        let coding = Coding::from_name(name.as_bytes()).ok_or_else(|| {
            ConfigError::new(
                key(),
                format!("'{name}' is not a coding the proxy produces (zstd, br, gzip, deflate)"),
            )
        })?;
        if codings.contains(&coding) {
            return Err(ConfigError::new(key(), format!("'{name}' is listed twice")));
        }
        codings.push(coding);
    }
    Ok(codings)
}

/// A `Via` pseudonym (RFC 9110 §7.6.3: a token); empty turns `Via` off.
fn pseudonym(text: &str) -> Result<Option<String>, ConfigError> {
    if text.is_empty() {
        return Ok(None);
    }
    if text.bytes().all(is_tchar) {
        Ok(Some(text.to_owned()))
    } else {
        Err(ConfigError::new(
            "forwarding.via",
            format!("'{text}' is not a token (letters, digits and !#$%&'*+-.^_`|~), or empty for no Via"),
        ))
    }
}

/// RFC 9110 §5.6.2 `tchar`.
fn is_tchar(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}
