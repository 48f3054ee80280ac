//! RFC 1950 zlib framing: header and Adler-32 trailer.

/// The 2-byte zlib header for a 32 KB window, with the FLEVEL hint of RFC 1950 §2.2 set from the
/// compression level, and FCHECK making the pair a multiple of 31.
pub fn header(level: u8) -> [u8; 2] {
    let cmf: u8 = 0x78; // CM = 8 (deflate), CINFO = 7 (32 KB window)
    let flevel: u8 = match level {
        0..=1 => 0,
        2..=5 => 1,
        6 => 2,
        _ => 3,
    };
    let flg_base = flevel << 6;
    let rem = ((u16::from(cmf) << 8) | u16::from(flg_base)) % 31;
    let fcheck = if rem == 0 { 0 } else { 31 - rem as u8 };
    [cmf, flg_base | fcheck]
}

/// Checks a zlib header (RFC 1950 §2.2): deflate method, window at most 32 KB, no preset
/// dictionary, valid FCHECK.
pub fn is_valid_header(bytes: [u8; 2]) -> bool {
    let (cmf, flg) = (bytes[0], bytes[1]);
    cmf & 0x0f == 8
        && cmf >> 4 <= 7
        && flg & 0x20 == 0
        && ((u16::from(cmf) << 8) | u16::from(flg)) % 31 == 0
}

/// The 4-byte trailer: Adler-32 of the uncompressed data, big-endian.
pub fn trailer(adler: u32) -> [u8; 4] {
    adler.to_be_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_for_every_level_are_valid() {
        for level in 0..=9 {
            assert!(is_valid_header(header(level)), "level {level}");
        }
        assert_eq!(header(1), [0x78, 0x01]);
        assert_eq!(header(6), [0x78, 0x9c]);
        assert_eq!(header(9), [0x78, 0xda]);
    }

    #[test]
    fn rejects_preset_dictionary_and_other_methods() {
        assert!(!is_valid_header([0x78, 0xbb])); // FDICT set
        assert!(!is_valid_header([0x79, 0x9c]));
        assert!(!is_valid_header([0x78, 0x9d]));
    }
}
