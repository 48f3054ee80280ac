//! `[headers.request]` and `[headers.response]`: names and values checked, and no rule on a
//! field the proxy must write itself (`zipwire_proxy::header_rules::refused`).

use http::header::{HeaderName, HeaderValue};
use zipwire_proxy::header_rules::refused;
use zipwire_proxy::HeaderRules;

use super::ConfigError;
use crate::proxy::raw::RawHeaderRules;

/// The field `text` names, under `key` in errors.
fn field_name(key: &str, text: &str) -> Result<HeaderName, ConfigError> {
    let name = HeaderName::from_bytes(text.as_bytes())
        .map_err(|_| ConfigError::new(key, format!("{text:?} is not a field name")))?;
    if let Some(why) = refused(&name) {
        return Err(ConfigError::new(
            key,
            format!("{text:?} cannot be changed: {why}"),
        ));
    }
    Ok(name)
}

/// The pairs of one `set` or `add` table.
fn pairs(
    key: &str,
    table: Option<&std::collections::BTreeMap<String, String>>,
) -> Result<Vec<(HeaderName, HeaderValue)>, ConfigError> {
    table
        .into_iter()
        .flatten()
        .map(|(name, value)| {
            let at = format!("{key}.{name}");
            let name = field_name(&at, name)?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| ConfigError::new(&at, format!("{value:?} is not a field value")))?;
            Ok((name, value))
        })
        .collect()
}

/// One direction's rules, the table at `key`.
pub(super) fn rules(key: &str, raw: &RawHeaderRules) -> Result<HeaderRules, ConfigError> {
    let remove = raw
        .remove
        .iter()
        .flatten()
        .enumerate()
        .map(|(i, name)| field_name(&format!("{key}.remove[{i}]"), name))
        .collect::<Result<_, _>>()?;
    Ok(HeaderRules {
        remove,
        set: pairs(&format!("{key}.set"), raw.set.as_ref())?,
        add: pairs(&format!("{key}.add"), raw.add.as_ref())?,
    })
}
