//! The store sections: `[cache]` and `[dictionaries]`.

use zipwire_dictionary::{pattern, UseAsDictionary};
use zipwire_proxy::{
    CacheMode, CacheSettings, DictCoding, DictionaryMode, DictionaryPathRule, DictionarySettings,
};

use super::values::{duration, int_in, size_in};
use super::ConfigError;
use crate::proxy::raw::{RawCache, RawDictionaries, RawDictionaryPath};

/// The Fetch destinations (WHATWG Fetch, `request.destination`) a `match_dest` may name.
const DESTINATIONS: [&str; 22] = [
    "audio",
    "audioworklet",
    "document",
    "embed",
    "font",
    "frame",
    "iframe",
    "image",
    "json",
    "manifest",
    "object",
    "paintworklet",
    "report",
    "script",
    "serviceworker",
    "sharedworker",
    "style",
    "track",
    "video",
    "webidentity",
    "worker",
    "xslt",
];

/// One `[[dictionaries.paths]]` table, the `index`th.
fn path_rule(index: usize, raw: &RawDictionaryPath) -> Result<DictionaryPathRule, ConfigError> {
    let at = |key: &str| format!("dictionaries.paths[{index}].{key}");
    if !raw.prefix.starts_with('/') {
        return Err(ConfigError::new(
            at("prefix"),
            format!("{:?} is not a path (it starts with /)", raw.prefix),
        ));
    }
    let mark = match (&raw.pattern, raw.mark) {
        (Some(_), Some(false)) => {
            return Err(ConfigError::new(
                at("mark"),
                "false with a match: choose one",
            ))
        }
        (None, Some(false)) => None,
        (None, _) => {
            return Err(ConfigError::new(
                at("match"),
                "missing: give the pattern to mark with, or mark = false",
            ))
        }
        (Some(found), _) => {
            if !found.starts_with('/') || !pattern::is_valid(found) {
                return Err(ConfigError::new(
                    at("match"),
                    format!(
                        "{found:?} is not a URL pattern for a path (it starts with /, and RFC                          9842 allows no regular-expression groups)"
                    ),
                ));
            }
            let mut mark = UseAsDictionary::matching(found.as_str());
            for (i, dest) in raw.match_dest.iter().flatten().enumerate() {
                if !DESTINATIONS.contains(&dest.as_str()) {
                    return Err(ConfigError::new(
                        at(&format!("match_dest[{i}]")),
                        format!("{dest:?} is not a Fetch destination (\"script\", \"style\", …)"),
                    ));
                }
                if !mark.destinations.contains(dest) {
                    mark.destinations.push(dest.clone());
                }
            }
            Some(mark)
        }
    };
    if mark.is_none() && raw.match_dest.is_some() {
        return Err(ConfigError::new(
            at("match_dest"),
            "given with mark = false: nothing is marked",
        ));
    }
    Ok(DictionaryPathRule {
        prefix: raw.prefix.clone(),
        mark,
    })
}

/// `[dictionaries]`: `auto` unless `mode` says otherwise.
pub(super) fn dictionaries(raw: &RawDictionaries) -> Result<DictionarySettings, ConfigError> {
    let mut settings = DictionarySettings::default();
    if let Some(mode) = &raw.mode {
        settings.mode = DictionaryMode::from_name(mode).ok_or_else(|| {
            ConfigError::new(
                "dictionaries.mode",
                format!("{mode:?} is not \"auto\", \"origin\" or \"off\""),
            )
        })?;
    }
    if let Some(codings) = &raw.codings {
        let mut chosen = Vec::new();
        for (i, name) in codings.iter().enumerate() {
            let coding = match name.as_str() {
                "dcz" => DictCoding::Dcz,
                "dcb" => DictCoding::Dcb,
                _ => {
                    return Err(ConfigError::new(
                        format!("dictionaries.codings[{i}]"),
                        format!("{name:?} is not \"dcz\" or \"dcb\""),
                    ))
                }
            };
            if !chosen.contains(&coding) {
                chosen.push(coding);
            }
        }
        if chosen.is_empty() {
            return Err(ConfigError::new(
                "dictionaries.codings",
                "is empty: set mode = \"off\" to use no dictionary coding",
            ));
        }
        settings.codings = chosen;
    }
    if let Some(site) = raw.site {
        settings.site = site;
    }
    settings.paths = raw
        .paths
        .iter()
        .enumerate()
        .map(|(index, raw)| path_rule(index, raw))
        .collect::<Result<_, _>>()?;
    let limits = &mut settings.limits;
    if let Some(max) = &raw.max_memory {
        limits.max_memory = size_in("dictionaries.max_memory", max, 1 << 16..=u64::MAX)?;
    }
    if let Some(max) = raw.max_count {
        limits.max_count = int_in("dictionaries.max_count", max, 1..=1_000_000, "a count")?;
    }
    if let Some(max) = &raw.max_size {
        // 128 MiB: Chromium's limit for the window a dcz client accepts.
        limits.max_size = size_in("dictionaries.max_size", max, 1..=128 << 20)?;
    }
    if limits.max_size > limits.max_memory {
        return Err(ConfigError::new(
            "dictionaries.max_size",
            format!(
                "{} is over dictionaries.max_memory ({}): no dictionary that large could be held",
                limits.max_size, limits.max_memory
            ),
        ));
    }
    Ok(settings)
}

/// `[cache]`: present means on, in `revalidate` mode unless `mode` says otherwise.
pub(super) fn cache(raw: &RawCache) -> Result<CacheSettings, ConfigError> {
    let mut cache = CacheSettings {
        mode: CacheMode::Revalidate,
        ..CacheSettings::default()
    };
    if let Some(mode) = &raw.mode {
        cache.mode = match mode.as_str() {
            "off" => CacheMode::Off,
            "revalidate" => CacheMode::Revalidate,
            "fresh" => CacheMode::Fresh,
            other => {
                return Err(ConfigError::new(
                    "cache.mode",
                    format!("{other:?} is not \"off\", \"revalidate\" or \"fresh\""),
                ))
            }
        };
    }
    if let Some(max) = &raw.max_object {
        cache.max_object = size_in("cache.max_object", max, 1..=1 << 30)?;
    }
    if let Some(max) = &raw.max_memory {
        cache.max_memory = size_in("cache.max_memory", max, 1 << 20..=u64::MAX)?;
    }
    if cache.max_object > cache.max_memory / 4 {
        return Err(ConfigError::new(
            "cache.max_object",
            format!(
                "{} is over a quarter of cache.max_memory ({}): one object would crowd out the rest",
                cache.max_object, cache.max_memory
            ),
        ));
    }
    if let Some(store) = raw.store_set_cookie {
        cache.store_set_cookie = store;
    }
    if let Some(recompress) = raw.recompress {
        cache.recompress = recompress;
    }
    if let Some(timeout) = &raw.lock_timeout {
        cache.lock_timeout = duration("cache.lock_timeout", timeout)?;
    }
    Ok(cache)
}
