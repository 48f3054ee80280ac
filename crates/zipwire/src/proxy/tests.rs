//! The configuration stages together: the example file, defaults, rejections with their keys,
//! flags over the file, and `--check`'s output reading back.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;
use zipwire_codec::Level;
use zipwire_proxy::{Coding, ProxyConfig, Upstream, UpstreamRoots};

use super::raw::RawConfig;
use super::typed::DEFAULT_LISTEN;
use super::{flags, load, render};
use crate::cli::{Cli, Command, ProxyArgs};

const EXAMPLE: &str = include_str!("../../../../zipwire.toml.example");
const CONFIG_DOC: &str = include_str!("../../../../docs/config.md");

fn typed(text: &str) -> Result<ProxyConfig, String> {
    let raw = RawConfig::from_toml(text).map_err(|e| e.to_string())?;
    ProxyConfig::try_from(raw).map_err(|e| e.to_string())
}

fn upstream(authority: &str) -> Upstream {
    Upstream::http(authority.parse().expect("valid test authority"))
}

/// `ProxyConfig` has no `PartialEq`; its `Debug` output shows every field.
fn same(a: &ProxyConfig, b: &ProxyConfig) -> bool {
    format!("{a:?}") == format!("{b:?}")
}

/// The example with every commented-out `key = value` line enabled.
fn example_with_every_key() -> String {
    EXAMPLE
        .lines()
        .map(|line| match line.strip_prefix("# ") {
            Some(rest) if is_key_line(rest) => rest,
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_key_line(line: &str) -> bool {
    line.split_once(" = ").is_some_and(|(key, _)| {
        !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
    })
}

/// `section.key` for every key line, commented or not (a `# key: …` note counts too).
fn keys_of(text: &str) -> BTreeSet<String> {
    let mut section = String::new();
    let mut keys = BTreeSet::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = format!("{name}.");
            continue;
        }
        let line = line.strip_prefix("# ").unwrap_or(line);
        let key = line
            .split_once(" = ")
            .or_else(|| line.split_once(": "))
            .map(|(key, _)| key)
            .filter(|key| {
                !key.is_empty() && key.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
            });
        if let Some(key) = key {
            keys.insert(format!("{section}{key}"));
        }
    }
    keys
}

#[test]
fn example_parses_to_the_defaults() {
    let config = typed(EXAMPLE).expect("the example is valid");
    let defaults = ProxyConfig::new(DEFAULT_LISTEN, vec![upstream("127.0.0.1:9000")]);
    assert!(same(&config, &defaults), "{config:#?}\n!=\n{defaults:#?}");
}

#[test]
fn example_shows_every_key() {
    let raw = RawConfig::from_toml(&example_with_every_key()).expect("uncommented example parses");
    let debug = format!("{raw:?}");
    assert!(
        !debug.contains("None"),
        "a key is missing from the example: {debug}"
    );
    // And the uncommented values are valid too (the CA file is the operator's, not here).
    let mut raw = raw;
    raw.upstream_ca_file = None;
    let config = ProxyConfig::try_from(raw).expect("uncommented example is valid");
    assert_eq!(config.threads, 4);
    assert_eq!(config.admin, Some("127.0.0.1:9901".parse().expect("addr")));
    assert_eq!(config.budget.max_cpu, Some(80.0));
    assert_eq!(config.budget.max_rate, Some(100 << 20));
    assert_eq!(config.budget.max_memory, Some(256 << 20));
}

#[test]
fn example_check_output_and_docs_cover_the_same_keys() {
    let example = keys_of(EXAMPLE);
    let defaults = ProxyConfig::new(DEFAULT_LISTEN, vec![upstream("127.0.0.1:9000")]);
    let rendered = keys_of(&render(&defaults));
    assert_eq!(example, rendered);
    assert_eq!(example.len(), 68);
    for key in &example {
        assert!(
            CONFIG_DOC.contains(&format!("`{key}`")),
            "docs/config.md lacks `{key}`"
        );
    }
}

#[test]
fn defaults_need_only_an_upstream() {
    let config = typed("upstreams = [\"http://origin:9000\"]").expect("valid");
    assert_eq!(
        config.listen,
        ["127.0.0.1:8080".parse::<SocketAddr>().expect("addr")]
    );
    assert!(same(
        &config,
        &ProxyConfig::new(DEFAULT_LISTEN, vec![upstream("origin:9000")])
    ));
}

#[test]
fn every_key_is_applied() {
    let config = typed(
        r#"
        listen = "0.0.0.0:80"
        upstreams = ["http://a:81", "http://b", "https://c"]
        threads = 3
        down_time = "30s"
        admin = "127.0.0.1:9901"
        access_log = false
        [compression]
        level = 6
        min_length = "1k"
        types = ["text/*", "application/json"]
        encodings = ["br", "deflate", "gzip"]
        zstd_level = 3
        br_level = 5
        coalesce = "16k"
        flush_delay = "0s"
        offload = false
        gunzip = false
        gunzip_max_output = "10m"
        [budget]
        max_cpu = 75.5
        max_rate = "8MiB"
        max_memory = 2000000
        gather_memory = "4MiB"
        hysteresis = 0
        window = "500ms"
        [forwarding]
        x_forwarded_for = false
        x_forwarded_proto = false
        x_forwarded_host = false
        via = ""
        [timeouts]
        header_read = "5s"
        client_body = "20s"
        upstream_connect = "1s"
        upstream_response = "2m"
        idle = "90s"
        shutdown_grace = "0s"
        upgrade_idle = "30m"
        send = "45s"
        [limits]
        max_header_bytes = "16k"
        max_connections = 500
        [http2]
        enabled = false
        max_concurrent_streams = 100
        initial_stream_window = "64KiB"
        initial_connection_window = "4MiB"
        ping_interval = "30s"
        ping_timeout = "5s"
        "#,
    )
    .expect("valid");
    assert_eq!(
        config.listen,
        ["0.0.0.0:80".parse::<SocketAddr>().expect("addr")]
    );
    let https = Upstream::https("c:443".parse().expect("valid"));
    assert_eq!(
        config.upstreams,
        [upstream("a:81"), upstream("b:80"), https]
    );
    assert_eq!(config.threads, 3);
    assert_eq!(config.down_time, Duration::from_secs(30));
    assert_eq!(config.admin, Some("127.0.0.1:9901".parse().expect("addr")));
    assert!(!config.access_log);
    let c = &config.compression;
    assert_eq!(c.level, Level::try_from(6).expect("level"));
    assert_eq!(c.rules.min_length, 1024);
    let types: Vec<String> = c.rules.types.iter().map(ToString::to_string).collect();
    assert_eq!(types, ["text/*", "application/json"]);
    assert_eq!(c.rules.offered, [Coding::Br, Coding::Deflate, Coding::Gzip]);
    assert_eq!(c.zstd_level.get(), 3);
    assert_eq!(c.br_level.get(), 5);
    assert_eq!(c.flush.coalesce, 16 * 1024);
    assert_eq!(c.flush.delay, Duration::ZERO);
    assert!(!c.offload);
    assert!(!c.gunzip);
    assert_eq!(c.gunzip_max_output, 10 << 20);
    let b = &config.budget;
    assert_eq!(b.max_cpu, Some(75.5));
    assert_eq!(b.max_rate, Some(8 << 20));
    assert_eq!(b.max_memory, Some(2_000_000));
    assert_eq!(b.gather_memory, Some(4 << 20));
    assert_eq!(b.hysteresis, 0.0);
    assert_eq!(b.window, Duration::from_millis(500));
    assert!(!config.forwarding.x_forwarded_for);
    assert!(!config.forwarding.x_forwarded_proto);
    assert!(!config.forwarding.x_forwarded_host);
    assert_eq!(config.forwarding.via, None);
    let t = &config.timeouts;
    assert_eq!(t.header_read, Duration::from_secs(5));
    assert_eq!(t.client_body, Duration::from_secs(20));
    assert_eq!(t.upstream_connect, Duration::from_secs(1));
    assert_eq!(t.upstream_response, Duration::from_secs(120));
    assert_eq!(t.idle, Duration::from_secs(90));
    assert_eq!(t.shutdown_grace, Duration::ZERO);
    assert_eq!(t.upgrade_idle, Duration::from_secs(1800));
    assert_eq!(t.send, Duration::from_secs(45));
    assert_eq!(config.limits.max_header_bytes, 16 * 1024);
    assert_eq!(config.limits.max_connections, 500);
    let h = &config.http2;
    assert!(!h.enabled);
    assert_eq!(h.max_concurrent_streams, 100);
    assert_eq!(h.initial_stream_window, 64 * 1024);
    assert_eq!(h.initial_connection_window, 4 << 20);
    assert_eq!(h.ping_interval, Some(Duration::from_secs(30)));
    assert_eq!(h.ping_timeout, Duration::from_secs(5));

    // --check's output reads back to the same configuration.
    let again = typed(&render(&config)).expect("rendered config is valid");
    assert!(same(&config, &again), "{}", render(&config));
}

#[test]
fn a_ca_file_is_read_and_rendered_back() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    zipwire_tunnel::keygen::keygen(dir.path(), false).expect("a certificate");
    let path = dir.path().join("cert.pem");
    let text = format!(
        "upstreams = [\"https://origin\"]\nupstream_ca_file = {:?}\n",
        path.display().to_string()
    );
    let config = typed(&text).expect("valid");
    match &config.upstream_roots {
        UpstreamRoots::CaFile {
            path: read,
            certificates,
        } => {
            assert_eq!(read, &path);
            assert_eq!(certificates.len(), 1);
        }
        other => panic!("not the CA file: {other:?}"),
    }
    let again = typed(&render(&config)).expect("rendered config is valid");
    assert!(same(&config, &again), "{}", render(&config));
}

#[test]
fn defaults_render_and_read_back() {
    let defaults = ProxyConfig::new(DEFAULT_LISTEN, vec![upstream("127.0.0.1:9000")]);
    let text = render(&defaults);
    let again = typed(&text).expect("rendered defaults are valid");
    assert!(same(&defaults, &again), "{text}");
    assert!(text.contains("\n# admin: off\n"), "{text}");
    assert!(text.contains("\ncoalesce = \"64KiB\"\n"), "{text}");
    assert!(text.contains("\nheader_read = \"10s\"\n"), "{text}");
    assert!(text.contains("\nclient_body = \"1m\"\n"), "{text}");
}

#[test]
fn rejections_name_the_key() {
    const UP: &str = "upstreams = [\"http://o:1\"]\n";
    let rows: &[(&str, &str)] = &[
        ("", "upstreams: no upstream given: set upstreams = [\"http://HOST:PORT\"] or pass --upstream"),
        ("upstreams = []", "upstreams: no upstream given"),
        ("upstreams = [\"http://o:1\", \"ftp://x\"]", "upstreams[1]: 'ftp://x' is not an http:// or https:// URL"),
        (
            "upstreams = [\"https://o/app\"]",
            "upstreams[0]: 'https://o/app' has a path",
        ),
        ("listen = \"localhost:80\"", "listen: 'localhost:80' is not an IP address and port"),
        ("threads = 0", "threads: 0 is not a thread count 1-1024"),
        ("threads = 5000", "threads: 5000 is not a thread count 1-1024"),
        ("down_time = 10", "down_time: 10 has no unit: write a string like \"10s\" or \"10ms\""),
        ("admin = \"127.0.0.1:8080\"", "admin: 127.0.0.1:8080 is also a listen address"),
        ("listen = []", "listen: no listener: give an address here or in tls.listen"),
        ("listen = [\"127.0.0.1:1\", \"127.0.0.1:1\"]", "listen[1]: 127.0.0.1:1 is listed twice"),
        (
            "listen = [\"0.0.0.0:80\", \"127.0.0.1:80\"]",
            "listen[1]: 127.0.0.1:80 takes the port of the address listed before it 0.0.0.0:80",
        ),
        (
            "listen = [\"[::1]:80\", \"[::]:80\"]",
            "listen[1]: [::]:80 takes the port of the address listed before it [::1]:80",
        ),
        (
            "listen = \"127.0.0.1:8081\"\nadmin = \"0.0.0.0:8081\"",
            "admin: 0.0.0.0:8081 takes the port of the listen address 127.0.0.1:8081",
        ),
        ("[tls]\nlisten = [\"nowhere\"]", "tls.listen[0]: 'nowhere' is not an IP address and port"),
        ("[tls]\nlisten = [\"127.0.0.1:443\"]", "tls.cert: TLS listeners need a certificate"),
        ("[tls]\ncert = \"a.pem\"\nkey = \"a.key\"", "tls.listen: certificates are given but no TLS listener"),
        ("[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a.pem\"", "tls.key: tls.cert is given without its key"),
        ("[tls]\nlisten = [\"127.0.0.1:443\"]\nkey = \"a.key\"", "tls.cert: tls.key is given without its certificate"),
        (
            "listen = \"127.0.0.1:443\"\n[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a\"\nkey = \"b\"",
            "tls.listen[0]: 127.0.0.1:443 is also a cleartext listen address",
        ),
        (
            "admin = \"127.0.0.1:443\"\n[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a\"\nkey = \"b\"",
            "admin: 127.0.0.1:443 is also a listen address",
        ),
        (
            "[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a\"\nkey = \"b\"\nhandshake_timeout = \"0s\"",
            "tls.handshake_timeout: must be longer than zero",
        ),
        (
            "[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a\"\nkey = \"b\"\nhsts = \"includeSubDomains\"",
            "tls.hsts: 'includeSubDomains' has no max-age=SECONDS directive (RFC 6797 §6.1.1)",
        ),
        (
            "[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a\"\nkey = \"b\"\nhsts = \"max-age=soon\"",
            "tls.hsts: 'max-age=soon' has no max-age",
        ),
        ("[compression]\nlevel = 12", "compression.level: 12 is not a level 1-9"),
        ("[compression]\nlevel = -1", "compression.level: -1 is not a level 1-9"),
        ("[compression]\nmin_length = -5", "compression.min_length: -5 is negative"),
        ("[compression]\nmin_length = 1.5", "compression.min_length: 1.5 is not a whole number of bytes"),
        ("[compression]\nmin_length = \"2kb\"", "compression.min_length: '2kb' is not a size"),
        ("[compression]\ntypes = [\"text/html\", \"html\"]", "compression.types[1]: 'html' is not a media type pattern"),
        ("[compression]\nencodings = [\"lzma\"]", "compression.encodings[0]: 'lzma' is not a coding the proxy produces (zstd, br, gzip, deflate)"),
        ("[compression]\nencodings = [\"zstd\", \"ZSTD\"]", "compression.encodings[1]: 'ZSTD' is listed twice"),
        ("[compression]\nencodings = []", "compression.encodings: empty"),
        ("[compression]\nzstd_level = 0", "compression.zstd_level: 0 is not a zstd level 1-19"),
        ("[compression]\nzstd_level = 22", "compression.zstd_level: 22 is not a zstd level 1-19"),
        ("[compression]\nbr_level = 12", "compression.br_level: 12 is not a brotli level 0-11"),
        ("[compression]\nbr_level = -1", "compression.br_level: -1 is not a brotli level 0-11"),
        ("[compression]\ncoalesce = 0", "compression.coalesce: 0 is not within 1-16MiB"),
        ("[compression]\ncoalesce = \"1g\"", "compression.coalesce: 1GiB is not within 1-16MiB"),
        ("[compression]\nflush_delay = \"soon\"", "compression.flush_delay: 'soon' is not a duration"),
        ("[compression]\ngunzip_max_output = 0", "compression.gunzip_max_output: 0 is below the minimum of 1"),
        ("[cache]\nmode = \"on\"", "cache.mode: \"on\" is not \"off\", \"revalidate\" or \"fresh\""),
        (
            "[cache]\nmax_object = \"64MiB\"",
            "cache.max_object: 67108864 is over a quarter of cache.max_memory (134217728): one object would crowd out the rest",
        ),
        ("[dictionaries]\nmode = \"on\"", "dictionaries.mode: \"on\" is not \"auto\", \"origin\" or \"off\""),
        ("[dictionaries]\ncodings = [\"dcz\", \"br\"]", "dictionaries.codings[1]: \"br\" is not \"dcz\" or \"dcb\""),
        ("[dictionaries]\ncodings = []", "dictionaries.codings: is empty: set mode = \"off\" to use no dictionary coding"),
        ("[dictionaries]\nmax_count = 0", "dictionaries.max_count: 0 is not a count 1-1000000"),
        (
            "[dictionaries]\nmax_memory = \"1MiB\"\nmax_size = \"2MiB\"",
            "dictionaries.max_size: 2097152 is over dictionaries.max_memory (1048576): no dictionary that large could be held",
        ),
        ("[[dictionaries.paths]]\nprefix = \"static/\"\nmark = false", "dictionaries.paths[0].prefix: \"static/\" is not a path"),
        ("[[dictionaries.paths]]\nprefix = \"/s/\"", "dictionaries.paths[0].match: missing: give the pattern"),
        ("[[dictionaries.paths]]\nprefix = \"/s/\"\nmatch = \"/s/(a|b).js\"", "dictionaries.paths[0].match: \"/s/(a|b).js\" is not a URL pattern"),
        ("[[dictionaries.paths]]\nprefix = \"/s/\"\nmatch = \"/s/*\"\nmark = false", "dictionaries.paths[0].mark: false with a match"),
        ("[[dictionaries.paths]]\nprefix = \"/s/\"\nmatch = \"/s/*\"\nmatch_dest = [\"scripts\"]", "dictionaries.paths[0].match_dest[0]: \"scripts\" is not a Fetch destination"),
        ("[[dictionaries.paths]]\nprefix = \"/s/\"\nmark = false\nmatch_dest = [\"script\"]", "dictionaries.paths[0].match_dest: given with mark = false"),
        ("[budget]\nmax_cpu = 0", "budget.max_cpu: 0 is not a positive percentage"),
        ("[budget]\nmax_cpu = -3.5", "budget.max_cpu: -3.5 is not a positive percentage"),
        ("[budget]\nmax_cpu = nan", "budget.max_cpu: NaN is not a positive percentage"),
        ("[budget]\nmax_rate = 0", "budget.max_rate: 0 is below the minimum of 1"),
        ("[budget]\nmax_memory = \"-1k\"", "budget.max_memory: '-1k' is not a size"),
        ("[budget]\ngather_memory = \"1k\"", "budget.gather_memory: 1KiB is below the minimum of 64KiB"),
        ("[budget]\nmax_memory = \"64k\"", "budget.max_memory: 64KiB is below the minimum of 1MiB"),
        (
            "[compression]\ncoalesce = \"1MiB\"\n[budget]\nmax_memory = \"1MiB\"",
            "budget.max_memory: 1048576 bytes cannot hold one compressing response: it takes twice compression.coalesce (1048576 bytes)",
        ),
        ("[budget]\nhysteresis = 1", "budget.hysteresis: 1 is not a fraction from 0 up to (not including) 1"),
        ("[budget]\nhysteresis = -0.1", "budget.hysteresis: -0.1 is not a fraction"),
        ("[budget]\nwindow = \"0s\"", "budget.window: must be longer than zero"),
        ("[forwarding]\nvia = \"my proxy\"", "forwarding.via: 'my proxy' is not a token"),
        ("[timeouts]\nheader_read = \"0ms\"", "timeouts.header_read: must be longer than zero"),
        ("[timeouts]\nupstream_connect = 3", "timeouts.upstream_connect: 3 has no unit"),
        ("[timeouts]\nupstream_response = \"1d\"", "timeouts.upstream_response: '1d' is not a duration"),
        ("[timeouts]\nidle = 2.5", "timeouts.idle: 2.5 has no unit"),
        ("[timeouts]\nshutdown_grace = \"x\"", "timeouts.shutdown_grace: 'x' is not a duration"),
        ("[timeouts]\nupgrade_idle = \"0s\"", "timeouts.upgrade_idle: must be longer than zero"),
        ("[timeouts]\nsend = \"0s\"", "timeouts.send: must be longer than zero"),
        ("upstream_ca_file = \"/nonexistent/ca.pem\"", "upstream_ca_file: /nonexistent/ca.pem: cannot read"),
        ("upstream_ca_file = \"/dev/null\"", "upstream_ca_file: /dev/null: holds no PEM certificate"),
        ("[limits]\nmax_header_bytes = 100", "limits.max_header_bytes: 100 is not within 1KiB-16MiB"),
        ("[limits]\nmax_connections = 0", "limits.max_connections: 0 is not a connection count 1-10000000"),
        ("[limits]\nmax_body = \"-1\"", "limits.max_body: '-1' is not a size"),
        ("[headers.request]\nremove = [\"Transfer-Encoding\"]", "headers.request.remove[0]: \"Transfer-Encoding\" cannot be changed: a hop-by-hop field"),
        ("[headers.response]\nset = { \"Content-Length\" = \"5\" }", "headers.response.set.Content-Length: \"Content-Length\" cannot be changed: a framing field"),
        ("[headers.response]\nadd = { \"Content-Encoding\" = \"br\" }", "headers.response.add.Content-Encoding: \"Content-Encoding\" cannot be changed"),
        ("[headers.response]\nset = { \"bad name\" = \"x\" }", "headers.response.set.bad name: \"bad name\" is not a field name"),
        ("[headers.request]\nset = { \"X-A\" = \"line\\nbreak\" }", "headers.request.set.X-A: \"line\\nbreak\" is not a field value"),
        ("[http2]\nmax_concurrent_streams = 0", "http2.max_concurrent_streams: 0 is not a stream count 1-100000"),
        ("[http2]\ninitial_stream_window = 65534", "http2.initial_stream_window: 65534 is not within 65535-1GiB"),
        ("[http2]\ninitial_stream_window = \"16k\"", "http2.initial_stream_window: 16KiB is not within 65535-1GiB"),
        ("[http2]\ninitial_connection_window = \"2g\"", "http2.initial_connection_window: 2GiB is not within 65535-1GiB"),
        ("[http2]\nping_interval = 30", "http2.ping_interval: 30 has no unit"),
        ("[http2]\nping_timeout = \"0s\"", "http2.ping_timeout: must be longer than zero"),
    ];
    for (text, expected) in rows {
        // Every row but the upstream ones gets a valid upstream, so the key under test fails.
        let text = if text.starts_with("upstreams") || text.is_empty() {
            (*text).to_owned()
        } else {
            format!("{UP}{text}")
        };
        let err = typed(&text).expect_err(&text);
        assert!(
            err.starts_with(expected),
            "{text:?}\n  got: {err}\n want: {expected}"
        );
    }
}

#[test]
fn toml_errors_are_reported_with_their_place() {
    for (text, expected) in [
        ("listen = ", "line 1"),
        ("[compression]\nlevl = 1", "unknown field `levl`"),
        ("upstreams = \"http://o:1\"", "invalid type"),
        ("[forwarding]\nx_forwarded_for = \"yes\"", "invalid type"),
    ] {
        let err = typed(text).expect_err(text);
        assert!(err.contains(expected), "{text:?}: {err}");
    }
}

fn proxy_args(flags: &[&str]) -> Result<ProxyArgs, clap::Error> {
    let argv = ["zipwire", "proxy", "--check"].iter().chain(flags);
    let cli = Cli::try_parse_from(argv)?;
    match cli.command {
        Command::Proxy(args) => Ok(args),
        other => panic!("parsed as {other:?}"),
    }
}

fn merged(file: &str, flag_list: &[&str]) -> Result<ProxyConfig, String> {
    let args = proxy_args(flag_list).map_err(|e| e.to_string())?;
    let raw = RawConfig::from_toml(file)
        .expect("valid test TOML")
        .overlay(flags(&args));
    ProxyConfig::try_from(raw).map_err(|e| e.to_string())
}

#[test]
fn flags_alone_are_a_configuration() {
    let config = merged("", &["--upstream", "http://127.0.0.1:9000"]).expect("valid");
    let defaults = ProxyConfig::new(DEFAULT_LISTEN, vec![upstream("127.0.0.1:9000")]);
    assert!(same(&config, &defaults));
}

#[test]
fn flags_override_the_file() {
    let file = r#"
        listen = "127.0.0.1:1000"
        upstreams = ["http://a:1", "http://b:1"]
        threads = 2
        [compression]
        level = 2
        min_length = 100
        offload = false
        [budget]
        max_cpu = 50
    "#;
    let config = merged(
        file,
        &[
            "--listen",
            "127.0.0.1:2000",
            "--upstream",
            "http://c:1",
            "--upstream",
            "http://d",
            "--threads",
            "8",
            "--level",
            "9",
            "--encodings",
            "br,gzip",
            "--zstd-level",
            "4",
            "--br-level",
            "0",
            "--admin",
            "[::1]:9901",
            "--min-length",
            "1k",
            "--max-cpu",
            "90",
            "--max-rate",
            "10m",
            "--max-memory",
            "64MiB",
            "--no-access-log",
            "--client-body-timeout",
            "15s",
        ],
    )
    .expect("valid");
    assert_eq!(
        config.listen,
        ["127.0.0.1:2000".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(config.upstreams, [upstream("c:1"), upstream("d:80")]);
    assert_eq!(config.threads, 8);
    assert_eq!(config.compression.level, Level::BEST);
    assert_eq!(config.compression.rules.offered, [Coding::Br, Coding::Gzip]);
    assert_eq!(config.compression.zstd_level.get(), 4);
    assert_eq!(config.compression.br_level.get(), 0);
    assert_eq!(config.admin, Some("[::1]:9901".parse().expect("addr")));
    assert_eq!(config.compression.rules.min_length, 1024);
    assert_eq!(config.budget.max_cpu, Some(90.0));
    assert_eq!(config.budget.max_rate, Some(10 << 20));
    assert_eq!(config.budget.max_memory, Some(64 << 20));
    assert!(!config.access_log);
    assert_eq!(config.timeouts.client_body, Duration::from_secs(15));
    // What no flag set stays as the file said.
    assert!(!config.compression.offload);

    let config = merged(file, &[]).expect("valid");
    assert_eq!(config.upstreams, [upstream("a:1"), upstream("b:1")]);
    assert_eq!(config.compression.level, Level::try_from(2).expect("level"));
}

#[test]
fn tls_flags_make_tls_listeners() {
    let config = merged(
        "",
        &[
            "--upstream",
            "http://o:1",
            "--tls-listen",
            "127.0.0.1:8443",
            "--tls-listen",
            "[::1]:8443",
            "--tls-cert",
            "site.pem",
            "--tls-key",
            "site.key",
        ],
    )
    .expect("valid");
    // TLS listeners alone: no cleartext listener unless asked for.
    assert!(config.listen.is_empty());
    let tls = &config.tls;
    assert_eq!(
        tls.listen,
        [
            "127.0.0.1:8443".parse::<SocketAddr>().expect("addr"),
            "[::1]:8443".parse().expect("addr")
        ]
    );
    let files = tls.default_certificate.as_ref().expect("a certificate");
    assert_eq!(files.cert, std::path::Path::new("site.pem"));
    assert_eq!(files.key, std::path::Path::new("site.key"));
    assert_eq!(tls.handshake_timeout, Duration::from_secs(10));

    // Both kinds of listener, the file's SNI certificates and HSTS kept under the flags.
    let file = r#"
        listen = ["127.0.0.1:80", "127.0.0.1:81"]
        upstreams = ["http://o:1"]
        [tls]
        handshake_timeout = "3s"
        hsts = "max-age=31536000; includeSubDomains"
        [[tls.certificates]]
        cert = "other.pem"
        key = "other.key"
    "#;
    let config = merged(
        file,
        &[
            "--listen",
            "127.0.0.1:8080",
            "--tls-listen",
            "127.0.0.1:8443",
            "--tls-cert",
            "site.pem",
            "--tls-key",
            "site.key",
        ],
    )
    .expect("valid");
    assert_eq!(
        config.listen,
        ["127.0.0.1:8080".parse::<SocketAddr>().expect("addr")]
    );
    assert_eq!(config.tls.certificates.len(), 1);
    assert_eq!(config.tls.handshake_timeout, Duration::from_secs(3));
    assert_eq!(
        config.tls.hsts.as_ref().map(|v| v.as_bytes()),
        Some(&b"max-age=31536000; includeSubDomains"[..])
    );
    let text = render(&config);
    let again = typed(&text).expect("rendered config is valid");
    assert!(same(&config, &again), "{text}");
    assert!(
        text.contains("\n[[tls.certificates]]\ncert = \"other.pem\"\n"),
        "{text}"
    );

    // A list of cleartext listeners from the file reads back from --check's output.
    let config = merged(
        file.replace(
            "[tls]",
            "[tls]\nlisten = [\"127.0.0.1:443\"]\ncert = \"a\"\nkey = \"b\"",
        )
        .as_str(),
        &[],
    )
    .expect("valid");
    assert_eq!(config.listen.len(), 2);
    let text = render(&config);
    assert!(
        text.contains("\nlisten = [\"127.0.0.1:80\", \"127.0.0.1:81\"]\n"),
        "{text}"
    );
    assert!(same(&config, &typed(&text).expect("valid")), "{text}");
}

#[test]
fn bad_flags_are_refused_by_clap_with_the_flag_name() {
    let rows: &[(&[&str], &str)] = &[
        (&["--level", "12"], "--level"),
        (&["--level", "0"], "--level"),
        (&["--zstd-level", "20"], "--zstd-level"),
        (&["--br-level", "12"], "--br-level"),
        (&["--threads", "0"], "--threads"),
        (
            &["--upstream", "ftp://x"],
            "'ftp://x' is not an http:// or https:// URL",
        ),
        (
            &["--listen", "localhost:1"],
            "is not an IP address and port",
        ),
        (&["--admin", "nowhere"], "--admin"),
        (&["--min-length", "-1"], "'-1'"),
        (&["--min-length", "1.5k"], "is not a size"),
        (&["--max-cpu", "0"], "is not a positive percentage"),
        (&["--max-rate", "0"], "must be above zero"),
        (&["--max-memory", "lots"], "is not a size"),
        (
            &["--max-memory", "1"],
            "--max-memory <BYTES>': must be at least 1MiB",
        ),
        (
            &["--gather-memory", "1k"],
            "--gather-memory <BYTES>': must be at least 64KiB",
        ),
        (&["--client-body-timeout", "5"], "is not a duration"),
        (
            &["--client-body-timeout", "0"],
            "--client-body-timeout <DURATION>': must be longer than zero",
        ),
        (
            &["--encodings", "gzip,lz4"],
            "--encodings <LIST>': 'lz4' is not a coding",
        ),
        (
            &["--listen", "[::ffff:127.0.0.1]:8080"],
            "is an IPv4-mapped address: write 127.0.0.1:8080",
        ),
        (
            &["--tls-listen", "localhost:443"],
            "is not an IP address and port",
        ),
    ];
    for (flag_list, expected) in rows {
        let err = proxy_args(flag_list)
            .expect_err(&format!("{flag_list:?}"))
            .to_string();
        assert!(err.contains(expected), "{flag_list:?}: {err}");
    }
}

#[test]
fn an_error_in_a_flag_names_the_command_line_and_one_in_the_file_the_file() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let path = dir.path().join("ok.toml");
    std::fs::write(
        &path,
        "upstreams = [\"http://127.0.0.1:9000\"]\nthreads = 0\n",
    )
    .expect("write");
    let file = path.to_string_lossy().into_owned();
    let error = |flag_list: &[&str]| {
        let mut argv = vec!["-c", file.as_str()];
        argv.extend_from_slice(flag_list);
        format!(
            "{:#}",
            load(&proxy_args(&argv).expect("flags")).expect_err("refused")
        )
    };
    // The file's own mistake is the file's.
    assert!(
        error(&[]).starts_with(&format!("{file}: threads: 0")),
        "{}",
        error(&[])
    );
    // The flags replace the file's threads, then repeat a listen address.
    let twice = error(&[
        "--threads",
        "1",
        "--listen",
        "127.0.0.1:1",
        "--listen",
        "127.0.0.1:1",
    ]);
    assert!(
        twice.starts_with("command line: listen[1]: 127.0.0.1:1 is listed twice"),
        "{twice}"
    );
    // A certificate flag without its key is told under tls.key: still the command line's.
    let half = error(&["--threads", "1", "--tls-cert", "x.pem"]);
    assert!(
        half.starts_with("command line: tls.key: tls.cert is given without its key"),
        "{half}"
    );
}

#[test]
fn dictionary_path_rules_are_read_and_rendered_back() {
    let config = typed(
        "upstreams = [\"http://o:1\"]\n[dictionaries]\nmode = \"auto\"\n\
         [[dictionaries.paths]]\nprefix = \"/static/\"\nmatch = \"/static/app-*.js\"\n\
         match_dest = [\"script\", \"script\"]\n\
         [[dictionaries.paths]]\nprefix = \"/static/private/\"\nmark = false\n",
    )
    .expect("valid");
    let paths = &config.dictionaries.paths;
    assert_eq!(paths.len(), 2);
    assert_eq!(paths[0].prefix, "/static/");
    let mark = paths[0].mark.as_ref().expect("a mark");
    assert_eq!(mark.pattern, "/static/app-*.js");
    assert_eq!(mark.destinations, ["script"]);
    assert_eq!(paths[1].prefix, "/static/private/");
    assert!(paths[1].mark.is_none());
    let again = typed(&render(&config)).expect("rendered config is valid");
    assert!(same(&config, &again), "{}", render(&config));
}

#[test]
fn max_body_zero_is_no_limit_and_a_size_is_read_back() {
    let none = typed("upstreams = [\"http://o:1\"]\n[limits]\nmax_body = 0").expect("valid");
    assert_eq!(none.limits.max_body, None);
    let one = typed("upstreams = [\"http://o:1\"]\n[limits]\nmax_body = \"1MiB\"").expect("valid");
    assert_eq!(one.limits.max_body, Some(1 << 20));
    let again = typed(&render(&one)).expect("rendered config is valid");
    assert!(same(&one, &again), "{}", render(&one));
}

#[test]
fn header_rules_are_read_and_rendered_back() {
    let config = typed(
        "upstreams = [\"http://o:1\"]\n\
         [headers.request]\nset = { \"Host\" = \"app.internal\" }\nremove = [\"X-Debug\"]\n\
         [headers.response]\nset = { \"X-Frame-Options\" = \"DENY\" }\n\
         add = { \"X-Served-By\" = \"edge 1\" }\nremove = [\"Server\", \"X-Powered-By\"]\n",
    )
    .expect("valid");
    let request = &config.headers.request;
    assert_eq!(request.set.len(), 1);
    assert_eq!(request.set[0].0, "host");
    assert_eq!(request.set[0].1, "app.internal");
    assert_eq!(request.remove, ["x-debug"]);
    let response = &config.headers.response;
    assert_eq!(response.add[0].1, "edge 1");
    assert_eq!(response.remove, ["server", "x-powered-by"]);
    let again = typed(&render(&config)).expect("rendered config is valid");
    assert!(same(&config, &again), "{}", render(&config));
}
