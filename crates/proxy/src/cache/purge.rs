//! The admin purge: `DELETE /cache?key=HOST%20TARGET` drops the responses of one key (as
//! Varnish's `ban` on `req.url` and nginx's `proxy_cache_purge` do), `DELETE /cache` every
//! one. Keys are the host (as the client sent it, lower case) and the target, joined by a
//! space.

use http::{StatusCode, Uri};

use zipwire_cache::Cache;

/// The status and text the admin listener answers a purge with.
pub(crate) fn answer(cache: Option<&Cache>, uri: &Uri) -> (StatusCode, &'static str) {
    let Some(cache) = cache else {
        return (StatusCode::NOT_FOUND, "404 Not Found: the cache is off\n");
    };
    let key = uri.query().and_then(|query| {
        query
            .split('&')
            .find_map(|pair| pair.strip_prefix("key="))
            .map(percent_decoded)
    });
    match key {
        // A query without a key, even an empty one (`/cache?`, a purge URL cut short), is refused:
        // only `/cache` alone drops everything, so that a cut-short URL does not empty the cache.
        None if uri.query().is_some() => (
            StatusCode::BAD_REQUEST,
            "400 Bad Request: use ?key=HOST%20TARGET or nothing\n",
        ),
        None => {
            cache.purge(None);
            (StatusCode::OK, "purged: everything\n")
        }
        Some(key) if cache.purge(Some(&key)) => (StatusCode::OK, "purged\n"),
        Some(_) => (
            StatusCode::NOT_FOUND,
            "404 Not Found: nothing stored for that key\n",
        ),
    }
}

/// `%XX` escapes and `+` decoded; an invalid escape is kept as it is.
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push((high * 16 + low) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            byte => out.push(byte),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_percent_decoded() {
        assert_eq!(percent_decoded("a%20%2Fb+c"), "a /b c");
        assert_eq!(percent_decoded("100%"), "100%");
        assert_eq!(percent_decoded("%zz%4"), "%zz%4");
    }
}
