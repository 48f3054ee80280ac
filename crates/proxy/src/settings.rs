//! The typed proxy configuration: what the server needs, with every default applied.
//!
//! This is the second stage of configuration (ripgrep's HiArgs, rustls' "parse, don't
//! validate"): the binary reads TOML and flags into a raw form, validates it, and hands the
//! server a `ProxyConfig`. The library never reads files or environment variables. Names echo
//! nginx and HAProxy; `docs/config.md` maps each option to its nginx/HAProxy equivalent.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use zipwire_codec::Level;

use crate::encode::body::FlushPolicy;
use zipwire_cache::CacheSettings;
use zipwire_codings::{BrotliLevel, ZstdLevel};
use zipwire_rules::Rules;

/// Everything the proxy server needs to run.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Addresses the proxy accepts cleartext HTTP clients on (nginx `listen`, HAProxy
    /// `bind`); may be empty when [`Tls::listen`] is not.
    pub listen: Vec<SocketAddr>,
    /// Origin servers, tried round-robin.
    pub upstreams: Vec<Upstream>,
    /// Runtime worker threads (default: the number of cores).
    pub threads: usize,
    /// What gets compressed and how.
    pub compression: Compression,
    /// CPU, rate and memory limits on compression (HAProxy `maxcompcpuusage`, `maxcomprate`).
    pub budget: BudgetLimits,
    /// Headers added to requests sent upstream.
    pub forwarding: Forwarding,
    /// Timeouts on both sides.
    pub timeouts: Timeouts,
    /// Limits on what clients may send and hold.
    pub limits: ClientLimits,
    /// HTTP/2 towards clients: streams, windows, pings.
    pub http2: Http2Limits,
    /// How long an upstream whose connect failed is skipped before it is tried again.
    pub down_time: Duration,
    /// Address of the admin listener (`/stats`, `/metrics`); off when `None`.
    pub admin: Option<SocketAddr>,
    /// One `access` log line (tracing, level info) per request. Default on.
    pub access_log: bool,
    /// TLS listeners and their certificates; off when [`Tls::listen`] is empty.
    pub tls: Tls,
    /// The certificate authorities `https://` upstreams are verified against (nginx
    /// `proxy_ssl_trusted_certificate`, HAProxy `ca-file`). Default: the system's store.
    pub upstream_roots: UpstreamRoots,
    /// The compressed-variant cache (`[cache]`); off by default.
    pub cache: CacheSettings,
    /// Compression dictionaries (RFC 9842, `[dictionaries]`); `auto` by default.
    pub dictionaries: crate::DictionarySettings,
    /// Fields set, added or removed on requests upstream and responses to clients
    /// (`[headers]`); none by default.
    pub headers: crate::HeaderSettings,
}

impl ProxyConfig {
    /// A configuration with every default, listening on `listen` in front of `upstreams`.
    pub fn new(listen: SocketAddr, upstreams: Vec<Upstream>) -> ProxyConfig {
        ProxyConfig {
            listen: vec![listen],
            upstreams,
            threads: std::thread::available_parallelism().map_or(1, |n| n.get()),
            compression: Compression::default(),
            budget: BudgetLimits::default(),
            forwarding: Forwarding::default(),
            timeouts: Timeouts::default(),
            limits: ClientLimits::default(),
            http2: Http2Limits::default(),
            down_time: Duration::from_secs(10),
            admin: None,
            access_log: true,
            tls: Tls::default(),
            upstream_roots: UpstreamRoots::System,
            cache: CacheSettings::default(),
            dictionaries: crate::DictionarySettings::default(),
            headers: crate::HeaderSettings::default(),
        }
    }
}

/// One origin server, spoken to in HTTP/1.1, over TLS for `https://`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// Cleartext or TLS.
    pub scheme: UpstreamScheme,
    /// `host:port` to connect to. Over TLS, the host is also the name sent in SNI and the
    /// one the certificate must be valid for (nginx `proxy_ssl_server_name on`,
    /// `proxy_ssl_verify on`).
    pub authority: http::uri::Authority,
}

impl Upstream {
    /// A cleartext `http://` upstream at `authority`.
    pub fn http(authority: http::uri::Authority) -> Upstream {
        Upstream {
            scheme: UpstreamScheme::Http,
            authority,
        }
    }

    /// An `https://` upstream at `authority`.
    pub fn https(authority: http::uri::Authority) -> Upstream {
        Upstream {
            scheme: UpstreamScheme::Https,
            authority,
        }
    }
}

impl std::fmt::Display for Upstream {
    /// The upstream as a URL: `http://host:port` or `https://host:port`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let scheme = match self.scheme {
            UpstreamScheme::Http => "http",
            UpstreamScheme::Https => "https",
        };
        write!(f, "{scheme}://{}", self.authority)
    }
}

/// How the proxy speaks to an upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamScheme {
    /// HTTP/1.1 in cleartext.
    Http,
    /// HTTP/1.1 over TLS 1.2 or 1.3, the certificate verified.
    Https,
}

/// The certificate authorities that `https://` upstreams' certificates must chain to.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamRoots {
    /// The operating system's store (`rustls-native-certs`: `/etc/ssl/certs` and
    /// `SSL_CERT_FILE` on Linux), read once when the server is bound and only if an upstream
    /// is `https://`.
    #[default]
    System,
    /// These certificates only, as read from a CA file (nginx
    /// `proxy_ssl_trusted_certificate`).
    CaFile {
        /// Where they were read from, for `--check` and logs.
        path: std::path::PathBuf,
        /// The certificates (DER).
        certificates: Vec<rustls::pki_types::CertificateDer<'static>>,
    },
}

impl UpstreamRoots {
    /// The certificates of a PEM file's contents `pem` (`-----BEGIN CERTIFICATE-----`
    /// blocks; anything else in the file is skipped), read from `path` by the caller.
    ///
    /// # Errors
    ///
    /// A message when a block is malformed or the text holds no certificate.
    pub fn from_pem(
        path: impl Into<std::path::PathBuf>,
        pem: &[u8],
    ) -> Result<UpstreamRoots, String> {
        use rustls::pki_types::pem::PemObject as _;
        let certificates = rustls::pki_types::CertificateDer::pem_slice_iter(pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|error| format!("not a PEM certificate file: {error}"))?;
        if certificates.is_empty() {
            return Err("holds no PEM certificate".to_owned());
        }
        Ok(UpstreamRoots::CaFile {
            path: path.into(),
            certificates,
        })
    }
}

/// Compression settings.
#[derive(Clone, Debug)]
pub struct Compression {
    /// Encoder level: 1-3 use the stateless encoder (a few bytes per stream); 4-9 keep a 32 KB
    /// window per stream. Default 2.
    pub level: Level,
    /// zstd level, 1-19 (Caddy's `encode zstd` takes none; nginx's zstd module
    /// `zstd_comp_level`). Default 2: see `docs/config.md`.
    pub zstd_level: ZstdLevel,
    /// brotli quality, 0-11 (ngx_brotli `brotli_comp_level`). Default 3: see
    /// `docs/config.md`.
    pub br_level: BrotliLevel,
    /// Which responses are compressed.
    pub rules: Rules,
    /// How upstream data is grouped into encoder calls.
    pub flush: FlushPolicy,
    /// Remove `Accept-Encoding` from requests sent upstream, so origins send identity and
    /// spend no CPU on compression (HAProxy `compression offload`). Default on.
    pub offload: bool,
    /// Decode gzip responses for clients that do not accept gzip (nginx `gunzip on`).
    /// Default on.
    pub gunzip: bool,
    /// Most bytes one gunzipped response may decode to (decompression bombs). Default 1 GiB.
    pub gunzip_max_output: u64,
}

impl Default for Compression {
    fn default() -> Compression {
        Compression {
            level: Level::FAST,
            zstd_level: ZstdLevel::DEFAULT,
            br_level: BrotliLevel::DEFAULT,
            rules: Rules::default(),
            flush: FlushPolicy::default(),
            offload: true,
            gunzip: true,
            gunzip_max_output: 1 << 30,
        }
    }
}

/// The default [`BudgetLimits::gather_memory`] per runtime thread: 4 MiB, room for about 100
/// calls of the bench page (38 KB each) being gathered at once, a millisecond of one core's
/// encoding. With 1,000 HTTP/2 streams on one core (`bench/proxy.sh MODE=h2`), 4 MiB served
/// gzip at 3,553 hits/s and 78 MiB peak RSS, 8 MiB at 3,098 and 77 MiB, 16 MiB at 2,651 and
/// 85 MiB: fewer calls in flight at once also run faster.
pub const GATHER_MEMORY_PER_THREAD: u64 = 4 << 20;

/// Limits on the resources compression may use. Over a limit, new responses pass uncompressed
/// and running ones step down to stored blocks, until usage falls back below the limit by the
/// hysteresis margin.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct BudgetLimits {
    /// Percent of one core spent compressing, measured (HAProxy `maxcompcpuusage`). `None`: no
    /// limit.
    pub max_cpu: Option<f64>,
    /// Input bytes per second compressed (HAProxy `maxcomprate`, which counts kB/s). `None`:
    /// no limit.
    pub max_rate: Option<u64>,
    /// Total bytes of compression buffers held by open streams. `None`: no limit.
    pub max_memory: Option<u64>,
    /// Input bytes all compressing responses together may hold while they gather encoder
    /// calls; a response that finds it spent waits with its input unread upstream (HAProxy's
    /// buffer wait queue, `tune.buffers.limit`). `None`, the default: 4 MiB per runtime
    /// thread ([`GATHER_MEMORY_PER_THREAD`]); see
    /// [`GatherGate`](crate::encode::body::GatherGate).
    pub gather_memory: Option<u64>,
    /// How far below a limit usage must fall before compression resumes, as a fraction of the
    /// limit. Default 0.1.
    pub hysteresis: f64,
    /// The window over which CPU and rate are measured. Default one second.
    pub window: Duration,
}

impl Default for BudgetLimits {
    fn default() -> BudgetLimits {
        BudgetLimits {
            max_cpu: None,
            max_rate: None,
            max_memory: None,
            gather_memory: None,
            hysteresis: 0.1,
            window: Duration::from_secs(1),
        }
    }
}

/// Headers the proxy adds to requests it forwards.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forwarding {
    /// Append the client address to `X-Forwarded-For`. Default on.
    pub x_forwarded_for: bool,
    /// Set `X-Forwarded-Proto` to `https` or `http`, as the client connected. Default on.
    pub x_forwarded_proto: bool,
    /// Set `X-Forwarded-Host` to the host the client asked for. Default on.
    pub x_forwarded_host: bool,
    /// Add a `Via` entry with this pseudonym (RFC 9110 §7.6.3); `None` adds none. Default
    /// `Some("zipwire")`.
    pub via: Option<String>,
}

impl Default for Forwarding {
    fn default() -> Forwarding {
        Forwarding {
            x_forwarded_for: true,
            x_forwarded_proto: true,
            x_forwarded_host: true,
            via: Some("zipwire".to_owned()),
        }
    }
}

/// Timeouts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timeouts {
    /// Time a client has to send a complete request head (slowloris). Default 10 s.
    pub header_read: Duration,
    /// The longest gap between two reads of a request body (nginx `client_body_timeout`):
    /// past it the upload is abandoned, the upstream connection closed, and the client gets
    /// 408 if nothing was sent yet. Default 60 s.
    pub client_body: Duration,
    /// Time to establish an upstream connection. Default 3 s.
    pub upstream_connect: Duration,
    /// Time the upstream has to start its response (the proxy answers 504 after it), the
    /// longest it may go silent mid-body (the body is cut), and the longest it may leave a
    /// part of the request body untaken (504, as nginx's `proxy_send_timeout`). Default 60 s.
    pub upstream_response: Duration,
    /// Idle time after which a keep-alive connection (client or upstream) is closed. Default
    /// 60 s.
    pub idle: Duration,
    /// On SIGTERM, time given to in-flight requests before connections are closed. Default
    /// 10 s.
    pub shutdown_grace: Duration,
    /// An upgraded connection (a WebSocket) on which neither side has sent anything for this
    /// long is closed, both sides (HAProxy `timeout tunnel`; nginx applies
    /// `proxy_read_timeout` to it). Default 1 h: WebSocket applications often stay silent
    /// for minutes between messages, and HAProxy's own documentation suggests `timeout
    /// tunnel 1h`; nginx's 60 s default is the usual cause of dropped sockets there.
    pub upgrade_idle: Duration,
    /// The longest a client may take no response bytes while the proxy has some to send
    /// (nginx `send_timeout`, HAProxy's `timeout client` on the write side): a write to the
    /// client's connection that makes no progress for this long ends the connection, and an
    /// HTTP/2 stream whose flow-control window the client leaves shut this long is reset. In
    /// either case the upstream connection behind the response is let go. Counted between two
    /// successful writes, not for a whole response. On a WebSocket it bounds writes to the
    /// upstream too (nginx `proxy_send_timeout`). Default 60 s.
    pub send: Duration,
}

impl Default for Timeouts {
    fn default() -> Timeouts {
        Timeouts {
            header_read: Duration::from_secs(10),
            client_body: Duration::from_secs(60),
            upstream_connect: Duration::from_secs(3),
            upstream_response: Duration::from_secs(60),
            idle: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(10),
            upgrade_idle: Duration::from_secs(3600),
            send: Duration::from_secs(60),
        }
    }
}

/// Limits on clients.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Largest request head (request line and headers) accepted; larger gets 431 or 400.
    /// Default 64 KiB.
    pub max_header_bytes: usize,
    /// Most client connections open at once; further ones wait in the accept queue. Default
    /// 10,000.
    pub max_connections: usize,
    /// Largest request body forwarded (nginx's `client_max_body_size`): a request declaring
    /// more gets 413 before anything goes upstream, and one whose body grows past it while it
    /// streams is cut there (413 if the upstream has not answered yet). Default `None`: no
    /// limit, as HAProxy.
    pub max_body: Option<u64>,
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        ClientLimits {
            max_header_bytes: 64 * 1024,
            max_connections: 10_000,
            max_body: None,
        }
    }
}

/// TLS termination: the listeners, their certificates and what is added on them.
///
/// The certificates are read from files when the server binds and again on each
/// [`TlsReloader::reload`](crate::TlsReloader::reload) (SIGHUP in the binary), so that a
/// renewed certificate takes effect without a restart.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tls {
    /// Addresses that accept TLS clients (nginx `listen 443 ssl`, HAProxy `bind :443 ssl`).
    /// Default none.
    pub listen: Vec<SocketAddr>,
    /// The certificate for clients whose SNI names none of [`Tls::certificates`], or that
    /// send no SNI (nginx `ssl_certificate` in the default server, HAProxy's first `crt`).
    pub default_certificate: Option<CertificateFiles>,
    /// Further certificates, each chosen for a client whose SNI is one of the names the
    /// certificate is valid for (nginx `server_name` with its own `ssl_certificate`, HAProxy
    /// `crt-list`). The first that matches wins.
    pub certificates: Vec<CertificateFiles>,
    /// Time a client has to complete its handshake; it holds a connection-limit permit
    /// meanwhile (nginx `ssl_handshake_timeout`, 60 s there). Default 10 s, as the time
    /// allowed for a request head: a handshake is one or two round trips.
    pub handshake_timeout: Duration,
    /// A `Strict-Transport-Security` value set on every response sent over TLS, never over
    /// cleartext (RFC 6797 §7.2). Default none.
    pub hsts: Option<http::HeaderValue>,
}

impl Default for Tls {
    fn default() -> Tls {
        Tls {
            listen: Vec::new(),
            default_certificate: None,
            certificates: Vec::new(),
            handshake_timeout: Duration::from_secs(10),
            hsts: None,
        }
    }
}

/// A certificate chain and its private key, as PEM files.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CertificateFiles {
    /// The certificate chain, leaf first (nginx `ssl_certificate`).
    pub cert: PathBuf,
    /// The private key: PKCS#8, PKCS#1 or SEC1 (nginx `ssl_certificate_key`). A warning is
    /// logged when its group or others may read it.
    pub key: PathBuf,
}

/// HTTP/2 towards clients (RFC 9113). The header list size is
/// [`ClientLimits::max_header_bytes`], as for HTTP/1.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Http2Limits {
    /// Serve HTTP/2: by prior knowledge on cleartext listeners (h2c, RFC 9113 §3.3) and by
    /// ALPN `h2` over TLS (nginx `http2 on`). Off, every client speaks HTTP/1. Default on.
    pub enabled: bool,
    /// Streams a client may have open at once on one connection (SETTINGS_MAX_CONCURRENT_STREAMS;
    /// nginx `http2_max_concurrent_streams` 128, HAProxy `tune.h2.max-concurrent-streams`
    /// 100); a stream over it is refused (RST_STREAM `REFUSED_STREAM`). Default 128.
    pub max_concurrent_streams: u32,
    /// Request body bytes a client may send on one stream ahead of the proxy's reading
    /// (SETTINGS_INITIAL_WINDOW_SIZE; HAProxy `tune.h2.fe.initial-window-size`). Default
    /// 256 KiB.
    pub initial_stream_window: u32,
    /// The same for all streams of a connection together (its WINDOW_UPDATE). Default 1 MiB.
    pub initial_connection_window: u32,
    /// Send a PING after this long without a frame from the client, and close the connection
    /// when it is not acknowledged within [`Http2Limits::ping_timeout`]: a dead client is
    /// found even while a stream is open, which the idle timeout does not bound. `None`: no
    /// pings (nginx and HAProxy send none). Default `None`.
    pub ping_interval: Option<Duration>,
    /// How long a PING may go unacknowledged. Default 20 s.
    pub ping_timeout: Duration,
}

impl Default for Http2Limits {
    fn default() -> Http2Limits {
        Http2Limits {
            enabled: true,
            max_concurrent_streams: 128,
            initial_stream_window: 256 * 1024,
            initial_connection_window: 1024 * 1024,
            ping_interval: None,
            ping_timeout: Duration::from_secs(20),
        }
    }
}
