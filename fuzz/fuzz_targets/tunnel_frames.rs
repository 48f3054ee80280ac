//! The tunnel's receiving side on arbitrary bytes: frame heads, then payloads through the
//! block decoders (stateless deflate, windowed deflate, zstd). Must never panic, and every
//! accepted data frame must decode to exactly the length its header claims.

#![no_main]

use libfuzzer_sys::fuzz_target;
use zipwire_tunnel::blocks::BlockDecoder;
use zipwire_tunnel::frame::{parse_head, Head};

fuzz_target!(|data: &[u8]| {
    let mut decoder = BlockDecoder::new();
    let mut rest = data;
    let mut out = Vec::new();
    while let Ok(Some((head, used))) = parse_head(rest) {
        rest = &rest[used..];
        let Head::Data(header) = head else {
            continue;
        };
        let Some(payload) = rest.get(..header.payload_len as usize) else {
            break;
        };
        rest = &rest[header.payload_len as usize..];
        out.clear();
        if decoder.decode(&header, payload, &mut out).is_err() {
            break;
        }
        assert_eq!(out.len(), header.raw_len as usize);
    }
});
