//! The `gzip_header` target's body: the gzip header parser on arbitrary bytes.

use crate::format::gzip::{parse_header, MAGIC};

/// The gzip header parser on arbitrary bytes: it never panics, never claims more bytes than
/// it was given, gives the same answer on exactly the bytes it consumed, asks for more on any
/// shorter prefix, and reads back what `Header::to_bytes` writes. An odd first byte puts the
/// magic and method in front, so most inputs reach the flags and optional fields instead of
/// failing on the magic.
pub fn gzip_header(data: &[u8]) {
    let framed;
    let buf = match data.split_first() {
        Some((first, rest)) if first & 1 == 1 => {
            framed = [&MAGIC[..], &[8], rest].concat();
            &framed[..]
        }
        _ => data,
    };
    let Ok(Some((header, consumed))) = parse_header(buf) else {
        return;
    };
    assert!(
        consumed <= buf.len(),
        "consumed {consumed} of {} bytes",
        buf.len()
    );
    assert!(consumed >= 10, "a gzip header is at least 10 bytes");
    assert_eq!(
        parse_header(&buf[..consumed]),
        Ok(Some((header.clone(), consumed)))
    );
    assert_eq!(
        parse_header(&buf[..consumed - 1]),
        Ok(None),
        "a strict prefix must ask for more"
    );

    let written = header.to_bytes();
    assert_eq!(
        parse_header(&written),
        Ok(Some((header, written.len()))),
        "to_bytes does not read back"
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_plain_header_and_noise_pass() {
        super::gzip_header(&[1, 0, 0, 0, 0, 0, 0, 255]);
        super::gzip_header(b"not a gzip header at all");
        super::gzip_header(&[]);
    }
}
