//! The value checks every key's conversion uses: sizes, durations and integers within a
//! range, each error naming its key.

use std::ops::RangeInclusive;
use std::time::Duration;

use super::ConfigError;
use crate::proxy::raw::Quantity;
use crate::value;

pub(super) fn at<T>(key: impl Into<String>, result: Result<T, String>) -> Result<T, ConfigError> {
    result.map_err(|problem| ConfigError::new(key, problem))
}

pub(super) fn int_in<T: TryFrom<i64>>(
    key: &str,
    n: i64,
    range: RangeInclusive<i64>,
    what: &str,
) -> Result<T, ConfigError> {
    let out_of_range = || {
        ConfigError::new(
            key,
            format!("{n} is not {what} {}-{}", range.start(), range.end()),
        )
    };
    if !range.contains(&n) {
        return Err(out_of_range());
    }
    T::try_from(n).map_err(|_| out_of_range())
}

pub(super) fn size(key: &str, quantity: &Quantity) -> Result<u64, ConfigError> {
    match quantity {
        Quantity::Int(n) => {
            u64::try_from(*n).map_err(|_| ConfigError::new(key, format!("{n} is negative")))
        }
        Quantity::Float(x) => Err(ConfigError::new(
            key,
            format!("{x} is not a whole number of bytes"),
        )),
        Quantity::Text(text) => at(key, value::parse_size(text)),
    }
}

pub(super) fn size_in(
    key: &str,
    quantity: &Quantity,
    range: RangeInclusive<u64>,
) -> Result<u64, ConfigError> {
    let bytes = size(key, quantity)?;
    if range.contains(&bytes) {
        return Ok(bytes);
    }
    let problem = if *range.end() == u64::MAX {
        format!(
            "{} is below the minimum of {}",
            value::format_size(bytes),
            value::format_size(*range.start())
        )
    } else {
        format!(
            "{} is not within {}-{}",
            value::format_size(bytes),
            value::format_size(*range.start()),
            value::format_size(*range.end())
        )
    };
    Err(ConfigError::new(key, problem))
}

pub(super) fn duration(key: &str, quantity: &Quantity) -> Result<Duration, ConfigError> {
    match quantity {
        Quantity::Text(text) => at(key, value::parse_duration(text)),
        Quantity::Int(n) => Err(ConfigError::new(
            key,
            format!("{n} has no unit: write a string like \"{n}s\" or \"{n}ms\""),
        )),
        Quantity::Float(x) => Err(ConfigError::new(
            key,
            format!("{x} has no unit: write a string like \"250ms\" or \"10s\""),
        )),
    }
}

pub(super) fn positive_duration(key: &str, quantity: &Quantity) -> Result<Duration, ConfigError> {
    let duration = duration(key, quantity)?;
    if duration.is_zero() {
        return Err(ConfigError::new(key, "must be longer than zero"));
    }
    Ok(duration)
}
