//! Property bodies for the `tunnel_frames` fuzz target in `fuzz/`: each takes arbitrary bytes,
//! must never panic on its own, and asserts the invariants of the result. Not part of the API.

use crate::blocks::BlockDecoder;
use crate::frame::{parse_head, Head};

/// The tunnel's receiving side on arbitrary bytes: frame heads, then payloads through the
/// block decoders (stateless deflate, windowed deflate, zstd). Must never panic, and every
/// accepted data frame must decode to exactly the length its header claims.
///
/// # Panics
///
/// When a data frame decodes to another length than its header claims.
pub fn frames(data: &[u8]) {
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
}

#[cfg(test)]
mod tests {
    use super::frames;
    use crate::blocks::BlockEncoder;
    use crate::frame::{write_end, Codec, Method, PING};

    /// Frames of every codec, a ping and the end, as a peer would send them.
    fn wire() -> Vec<u8> {
        let block = b"hello, hello, hello world, ".repeat(40);
        let mut encoder = BlockEncoder::new();
        let mut out = Vec::new();
        for (codec, level) in [
            (Codec::Raw, 0),
            (Codec::Deflate, 1),
            (Codec::DeflateWindow, 6),
            (Codec::Zstd, 3),
        ] {
            let method = Method::new(codec, level).expect("a valid level");
            encoder
                .encode_frame(method, &block, &mut out)
                .expect("encode");
        }
        out.extend_from_slice(PING);
        write_end(&mut out);
        out
    }

    #[test]
    fn valid_truncated_and_empty_streams_pass() {
        let wire = wire();
        frames(&wire);
        frames(&wire[..wire.len() / 2]);
        frames(&wire[..5]);
        frames(&[]);
        frames(b"not a tunnel frame");
    }
}
