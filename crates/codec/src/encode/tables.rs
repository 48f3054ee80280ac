//! Constant tables of RFC 1951 §3.2.5: length and distance codes, and the fixed Huffman code.

/// Base length of each length code 257..=285.
pub(crate) const LENGTH_BASE: [u16; 29] = [
    3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131,
    163, 195, 227, 258,
];

/// Extra bits of each length code.
pub(crate) const LENGTH_EXTRA: [u8; 29] = [
    0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0,
];

/// Base distance of each distance code 0..=29.
pub(crate) const DIST_BASE: [u16; 30] = [
    1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537,
    2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];

/// Extra bits of each distance code.
pub(crate) const DIST_EXTRA: [u8; 30] = [
    0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13,
    13,
];

/// Length code index (0..=28, i.e. symbol − 257) for each match length − 3.
pub(crate) static LENGTH_CODE: [u8; 256] = length_code_table();

/// Distance code for `dist − 1`: entries 0..256 directly, 256..512 for `(dist − 1) >> 7`.
pub(crate) static DIST_CODE: [u8; 512] = dist_code_table();

/// Order in which code length code lengths are sent (RFC 1951 §3.2.7).
pub(crate) const CODELEN_ORDER: [usize; 19] = [
    16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15,
];

/// Number of literal/length symbols, end of block and the two unused ones excluded.
pub(crate) const NUM_LITLEN: usize = 286;
/// Number of distance symbols used.
pub(crate) const NUM_DIST: usize = 30;
/// The end-of-block symbol.
pub(crate) const END_OF_BLOCK: usize = 256;

/// Distance code of a match distance given as `dist − 1` (0..32768).
#[inline(always)]
pub(crate) fn dist_code(dist_minus_1: u32) -> usize {
    let index = if dist_minus_1 < 256 {
        dist_minus_1
    } else {
        256 + (dist_minus_1 >> 7)
    };
    usize::from(DIST_CODE[index as usize & 511])
}

/// Code length of each literal/length symbol in the fixed code (RFC 1951 §3.2.6).
pub(crate) fn fixed_litlen_lengths() -> [u8; 288] {
    let mut lens = [0; 288];
    for (sym, len) in lens.iter_mut().enumerate() {
        *len = match sym {
            0..=143 => 8,
            144..=255 => 9,
            256..=279 => 7,
            _ => 8,
        };
    }
    lens
}

const fn length_code_table() -> [u8; 256] {
    let mut table = [0u8; 256];
    let mut code = 0;
    while code < 29 {
        let base = LENGTH_BASE[code] as usize - 3;
        let count = 1usize << LENGTH_EXTRA[code];
        let mut i = 0;
        while i < count && base + i < 256 {
            table[base + i] = code as u8;
            i += 1;
        }
        code += 1;
    }
    table
}

const fn dist_code_table() -> [u8; 512] {
    let mut table = [0u8; 512];
    let mut code = 0;
    while code < 30 {
        let base = DIST_BASE[code] as usize - 1;
        let count = 1usize << DIST_EXTRA[code];
        let mut i = 0;
        while i < count {
            let d = base + i;
            if d < 256 {
                table[d] = code as u8;
            } else {
                table[256 + (d >> 7)] = code as u8;
            }
            i += 1;
        }
        code += 1;
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_codes_cover_their_ranges() {
        for len in 3..=258u16 {
            let code = usize::from(LENGTH_CODE[usize::from(len - 3)]);
            let base = LENGTH_BASE[code];
            assert!(
                len >= base && len - base < 1 << LENGTH_EXTRA[code],
                "len {len} code {code}"
            );
        }
        assert_eq!(LENGTH_CODE[255], 28);
        assert_eq!(LENGTH_CODE[254], 27);
    }

    #[test]
    fn distance_codes_cover_their_ranges() {
        for dist in 1..=32_768u32 {
            let code = dist_code(dist - 1);
            let base = u32::from(DIST_BASE[code]);
            assert!(
                dist >= base && dist - base < 1 << DIST_EXTRA[code],
                "dist {dist} code {code}"
            );
        }
    }
}
