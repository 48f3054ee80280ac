//! The effective configuration written back as TOML, for `zipwire proxy --check` (as
//! `nginx -T` prints the configuration it would run with).
//!
//! Every key is written, defaults included; an unset optional key is a comment saying so.
//! The output is itself a valid configuration file that reads back to the same
//! configuration.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::Path;

use zipwire_proxy::{CacheMode, ProxyConfig, Tls, UpstreamRoots};

use crate::value::{format_duration, format_size};

/// `config` as a TOML document.
pub fn render(config: &ProxyConfig) -> String {
    let mut out = String::new();
    // Writing to a String cannot fail; the `let _` below discard an always-Ok result.
    let _ = write_config(&mut out, config);
    out
}

fn write_config(out: &mut String, config: &ProxyConfig) -> std::fmt::Result {
    writeln!(out, "# effective configuration of zipwire proxy")?;
    match config.listen.as_slice() {
        [one] => writeln!(out, "listen = {}", quote(&one.to_string()))?,
        many => writeln!(out, "listen = {}", addresses(many))?,
    }
    let upstreams: Vec<String> = config
        .upstreams
        .iter()
        .map(|upstream| quote(&upstream.to_string()))
        .collect();
    writeln!(out, "upstreams = [{}]", upstreams.join(", "))?;
    writeln!(out, "threads = {}", config.threads)?;
    writeln!(
        out,
        "down_time = {}",
        quote(&format_duration(config.down_time))
    )?;
    match config.admin {
        Some(admin) => writeln!(out, "admin = {}", quote(&admin.to_string()))?,
        None => writeln!(out, "# admin: off")?,
    }
    writeln!(out, "access_log = {}", config.access_log)?;
    match &config.upstream_roots {
        UpstreamRoots::CaFile { path, certificates } => {
            let path = path.display().to_string();
            writeln!(out, "# {} certificates", certificates.len())?;
            writeln!(out, "upstream_ca_file = {}", quote(&path))?;
        }
        _ => writeln!(out, "# upstream_ca_file: the system's certificate store")?,
    }

    let compression = &config.compression;
    writeln!(out, "\n[compression]")?;
    writeln!(out, "level = {}", compression.level)?;
    writeln!(out, "min_length = {}", size(compression.rules.min_length))?;
    let types: Vec<String> = compression
        .rules
        .types
        .iter()
        .map(|pattern| quote(&pattern.to_string()))
        .collect();
    if types.is_empty() {
        writeln!(out, "types = []")?;
    } else {
        writeln!(out, "types = [\n    {},\n]", types.join(",\n    "))?;
    }
    let codings: Vec<String> = compression
        .rules
        .offered
        .iter()
        .map(|coding| quote(coding.as_str()))
        .collect();
    writeln!(out, "encodings = [{}]", codings.join(", "))?;
    writeln!(out, "zstd_level = {}", compression.zstd_level.get())?;
    writeln!(out, "br_level = {}", compression.br_level.get())?;
    writeln!(
        out,
        "coalesce = {}",
        size(compression.flush.coalesce as u64)
    )?;
    writeln!(
        out,
        "flush_delay = {}",
        quote(&format_duration(compression.flush.delay))
    )?;
    writeln!(out, "offload = {}", compression.offload)?;
    writeln!(out, "gunzip = {}", compression.gunzip)?;
    writeln!(
        out,
        "gunzip_max_output = {}",
        size(compression.gunzip_max_output)
    )?;

    let budget = &config.budget;
    writeln!(out, "\n[budget]")?;
    match budget.max_cpu {
        Some(percent) => writeln!(out, "max_cpu = {percent:?}")?,
        None => writeln!(out, "# max_cpu: no limit")?,
    }
    match budget.max_rate {
        Some(rate) => writeln!(out, "max_rate = {}", size(rate))?,
        None => writeln!(out, "# max_rate: no limit")?,
    }
    match budget.max_memory {
        Some(memory) => writeln!(out, "max_memory = {}", size(memory))?,
        None => writeln!(out, "# max_memory: no limit")?,
    }
    match budget.gather_memory {
        Some(bytes) => writeln!(out, "gather_memory = {}", size(bytes))?,
        None => writeln!(out, "# gather_memory: 4MiB per thread")?,
    }
    writeln!(out, "hysteresis = {:?}", budget.hysteresis)?;
    writeln!(out, "window = {}", quote(&format_duration(budget.window)))?;

    let cache = &config.cache;
    writeln!(out, "\n[cache]")?;
    let mode = match cache.mode {
        CacheMode::Revalidate => "revalidate",
        CacheMode::Fresh => "fresh",
        _ => "off",
    };
    writeln!(out, "mode = {}", quote(mode))?;
    writeln!(out, "max_object = {}", size(cache.max_object))?;
    writeln!(out, "max_memory = {}", size(cache.max_memory))?;
    writeln!(out, "store_set_cookie = {}", cache.store_set_cookie)?;
    writeln!(out, "recompress = {}", cache.recompress)?;
    writeln!(
        out,
        "lock_timeout = {}",
        quote(&format_duration(cache.lock_timeout))
    )?;

    let dictionaries = &config.dictionaries;
    writeln!(out, "\n[dictionaries]")?;
    writeln!(out, "mode = {}", quote(dictionaries.mode.as_str()))?;
    writeln!(out, "max_memory = {}", size(dictionaries.limits.max_memory))?;
    writeln!(out, "max_count = {}", dictionaries.limits.max_count)?;
    writeln!(out, "max_size = {}", size(dictionaries.limits.max_size))?;
    let codings: Vec<String> = dictionaries
        .codings
        .iter()
        .map(|coding| quote(coding.as_str()))
        .collect();
    writeln!(out, "codings = [{}]", codings.join(", "))?;
    writeln!(out, "site = {}", dictionaries.site)?;
    for rule in &dictionaries.paths {
        writeln!(out, "\n[[dictionaries.paths]]")?;
        writeln!(out, "prefix = {}", quote(&rule.prefix))?;
        match &rule.mark {
            Some(mark) => {
                writeln!(out, "match = {}", quote(&mark.pattern))?;
                if !mark.destinations.is_empty() {
                    let destinations: Vec<String> =
                        mark.destinations.iter().map(|dest| quote(dest)).collect();
                    writeln!(out, "match_dest = [{}]", destinations.join(", "))?;
                }
            }
            None => writeln!(out, "mark = false")?,
        }
    }

    for (section, rules) in [
        ("request", &config.headers.request),
        ("response", &config.headers.response),
    ] {
        writeln!(out, "\n[headers.{section}]")?;
        let table = |pairs: &[(http::HeaderName, http::HeaderValue)]| {
            let entries: Vec<String> = pairs
                .iter()
                .map(|(name, value)| {
                    let value = String::from_utf8_lossy(value.as_bytes());
                    format!("{} = {}", quote(name.as_str()), quote(&value))
                })
                .collect();
            match entries.is_empty() {
                true => "{}".to_owned(),
                false => format!("{{ {} }}", entries.join(", ")),
            }
        };
        writeln!(out, "set = {}", table(&rules.set))?;
        writeln!(out, "add = {}", table(&rules.add))?;
        let removed: Vec<String> = rules
            .remove
            .iter()
            .map(|name| quote(name.as_str()))
            .collect();
        writeln!(out, "remove = [{}]", removed.join(", "))?;
    }

    writeln!(out, "\n[forwarding]")?;
    writeln!(
        out,
        "x_forwarded_for = {}",
        config.forwarding.x_forwarded_for
    )?;
    writeln!(
        out,
        "x_forwarded_proto = {}",
        config.forwarding.x_forwarded_proto
    )?;
    writeln!(
        out,
        "x_forwarded_host = {}",
        config.forwarding.x_forwarded_host
    )?;
    let via = config.forwarding.via.as_deref().unwrap_or("");
    writeln!(out, "via = {}", quote(via))?;

    let timeouts = &config.timeouts;
    writeln!(out, "\n[timeouts]")?;
    for (key, duration) in [
        ("header_read", timeouts.header_read),
        ("client_body", timeouts.client_body),
        ("upstream_connect", timeouts.upstream_connect),
        ("upstream_response", timeouts.upstream_response),
        ("idle", timeouts.idle),
        ("shutdown_grace", timeouts.shutdown_grace),
        ("upgrade_idle", timeouts.upgrade_idle),
        ("send", timeouts.send),
    ] {
        writeln!(out, "{key} = {}", quote(&format_duration(duration)))?;
    }

    writeln!(out, "\n[limits]")?;
    writeln!(
        out,
        "max_header_bytes = {}",
        size(config.limits.max_header_bytes as u64)
    )?;
    writeln!(out, "max_connections = {}", config.limits.max_connections)?;
    writeln!(
        out,
        "max_body = {}",
        size(config.limits.max_body.unwrap_or(0))
    )?;

    let http2 = &config.http2;
    writeln!(out, "\n[http2]")?;
    writeln!(out, "enabled = {}", http2.enabled)?;
    writeln!(
        out,
        "max_concurrent_streams = {}",
        http2.max_concurrent_streams
    )?;
    writeln!(
        out,
        "initial_stream_window = {}",
        size(u64::from(http2.initial_stream_window))
    )?;
    writeln!(
        out,
        "initial_connection_window = {}",
        size(u64::from(http2.initial_connection_window))
    )?;
    let interval = http2.ping_interval.unwrap_or_default();
    writeln!(out, "ping_interval = {}", quote(&format_duration(interval)))?;
    writeln!(
        out,
        "ping_timeout = {}",
        quote(&format_duration(http2.ping_timeout))
    )?;
    write_tls(out, &config.tls)
}

/// `[tls]`, last: its `[[tls.certificates]]` tables must follow every other key.
fn write_tls(out: &mut String, tls: &Tls) -> std::fmt::Result {
    writeln!(out, "\n[tls]")?;
    writeln!(out, "listen = {}", addresses(&tls.listen))?;
    match &tls.default_certificate {
        Some(files) => {
            writeln!(out, "cert = {}", path(&files.cert))?;
            writeln!(out, "key = {}", path(&files.key))?;
        }
        None => {
            writeln!(out, "# cert: none")?;
            writeln!(out, "# key: none")?;
        }
    }
    writeln!(
        out,
        "handshake_timeout = {}",
        quote(&format_duration(tls.handshake_timeout))
    )?;
    match tls.hsts.as_ref().and_then(|value| value.to_str().ok()) {
        Some(hsts) => writeln!(out, "hsts = {}", quote(hsts))?,
        None => writeln!(out, "# hsts: off")?,
    }
    for files in &tls.certificates {
        writeln!(out, "\n[[tls.certificates]]")?;
        writeln!(out, "cert = {}", path(&files.cert))?;
        writeln!(out, "key = {}", path(&files.key))?;
    }
    Ok(())
}

/// Socket addresses as a TOML array.
fn addresses(addrs: &[SocketAddr]) -> String {
    let quoted: Vec<String> = addrs.iter().map(|addr| quote(&addr.to_string())).collect();
    format!("[{}]", quoted.join(", "))
}

/// A path as a TOML string (a path that is not UTF-8 is written lossily).
fn path(path: &Path) -> String {
    quote(&path.to_string_lossy())
}

/// A size as a TOML value: a quoted `"64KiB"` when a suffix fits exactly, else a number.
fn size(bytes: u64) -> String {
    let text = format_size(bytes);
    if text.bytes().all(|b| b.is_ascii_digit()) && i64::try_from(bytes).is_ok() {
        text
    } else {
        quote(&text)
    }
}

/// A TOML basic string.
fn quote(text: &str) -> String {
    toml::Value::String(text.to_owned()).to_string()
}
