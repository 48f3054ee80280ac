//! Just enough of a PNG reader (RFC 2083) to look at Chromium's screenshot: 8-bit RGB or
//! RGBA, not interlaced, every filter type.

use std::io::Read as _;

/// A decoded image: its size and its pixels' RGB, row by row.
pub struct Image {
    /// Width in pixels.
    pub width: usize,
    /// Height in pixels.
    pub height: usize,
    /// `width * height` pixels, alpha dropped.
    pub pixels: Vec<[u8; 3]>,
}

/// Decodes `bytes`, or says why it cannot.
pub fn decode(bytes: &[u8]) -> Result<Image, String> {
    let rest = bytes
        .strip_prefix(b"\x89PNG\r\n\x1a\n")
        .ok_or("no PNG signature")?;
    let (mut at, mut header, mut data) = (0, None, Vec::new());
    while at + 8 <= rest.len() {
        let length = u32::from_be_bytes(rest[at..at + 4].try_into().expect("4 bytes")) as usize;
        let kind = &rest[at + 4..at + 8];
        let body = rest
            .get(at + 8..at + 8 + length)
            .ok_or("chunk past the end")?;
        match kind {
            b"IHDR" => header = Some(body.to_vec()),
            b"IDAT" => data.extend_from_slice(body),
            b"IEND" => break,
            _ => {}
        }
        at += 12 + length; // length, type, data, CRC
    }
    let header = header.ok_or("no IHDR")?;
    if header.len() != 13 {
        return Err("short IHDR".into());
    }
    let word = |i: usize| u32::from_be_bytes(header[i..i + 4].try_into().expect("4 bytes"));
    let (width, height) = (word(0) as usize, word(4) as usize);
    let (depth, colour, interlace) = (header[8], header[9], header[12]);
    let bpp = match (depth, colour, interlace) {
        (8, 2, 0) => 3,
        (8, 6, 0) => 4,
        _ => {
            return Err(format!(
                "unsupported PNG: depth {depth}, colour type {colour}"
            ))
        }
    };
    let mut raw = Vec::new();
    flate2::read::ZlibDecoder::new(&data[..])
        .read_to_end(&mut raw)
        .map_err(|e| format!("IDAT does not inflate: {e}"))?;
    let stride = width * bpp;
    if raw.len() != height * (stride + 1) {
        return Err(format!(
            "{} bytes of pixel data for {width}x{height}",
            raw.len()
        ));
    }
    let mut pixels = Vec::with_capacity(width * height);
    let mut previous = vec![0u8; stride];
    for row in raw.chunks(stride + 1) {
        let (filter, line) = (row[0], &row[1..]);
        let mut current = vec![0u8; stride];
        for i in 0..stride {
            let left = if i >= bpp { current[i - bpp] } else { 0 };
            let up = previous[i];
            let up_left = if i >= bpp { previous[i - bpp] } else { 0 };
            // RFC 2083 section 6: the five filter types.
            let predictor = match filter {
                0 => 0,
                1 => left,
                2 => up,
                3 => ((u16::from(left) + u16::from(up)) / 2) as u8,
                4 => paeth(left, up, up_left),
                other => return Err(format!("filter type {other}")),
            };
            current[i] = line[i].wrapping_add(predictor);
        }
        pixels.extend(current.chunks(bpp).map(|p| [p[0], p[1], p[2]]));
        previous = current;
    }
    Ok(Image {
        width,
        height,
        pixels,
    })
}

fn paeth(a: u8, b: u8, c: u8) -> u8 {
    let p = i16::from(a) + i16::from(b) - i16::from(c);
    let (pa, pb, pc) = (
        (p - i16::from(a)).abs(),
        (p - i16::from(b)).abs(),
        (p - i16::from(c)).abs(),
    );
    if pa <= pb && pa <= pc {
        a
    } else if pb <= pc {
        b
    } else {
        c
    }
}
