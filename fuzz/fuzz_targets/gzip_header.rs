//! The gzip header parser on arbitrary bytes: it must never panic, never claim more bytes
//! than it was given, give the same answer on exactly the bytes it consumed, ask for more on
//! any shorter prefix, and read back what `Header::to_bytes` writes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use zipwire_codec::format::gzip::{parse_header, MAGIC};

fuzz_target!(|data: &[u8]| {
    // An odd first byte puts the magic and method in front, so most inputs reach the flags and
    // optional fields instead of failing on the magic.
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
});
