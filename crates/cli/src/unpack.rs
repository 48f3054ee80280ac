//! `pack` (`.z`): the Huffman-only format of System V's pack(1), as `gzip -d` reads it.
//!
//! Written here because no crate decodes it (it predates every format the ecosystem keeps
//! alive) and it is small. Layout, after gzip's unpack.c: the magic `1f 1e`, the original length
//! (4 bytes, big-endian), the longest code length, the number of leaves at each length (the
//! last one minus 2), then the leaves' bytes level by level. The end-of-block code is the last
//! leaf of the longest length and is not stored. Codes are canonical per level, parents first,
//! read most significant bit first.
//!
//! Every count is checked against what a tree can hold before use, so corrupt input ends in
//! an error, never a panic.

use std::io::{Read, Write};

use crate::error::{Damage, StreamError};
use crate::source::Source;
use crate::stream::Output;

/// The magic number of pack's output.
pub(crate) const MAGIC: [u8; 2] = [0x1f, 0x1e];
/// Longest code gzip accepts.
const MAX_BITLEN: usize = 25;
/// Output gathered before each write.
const FLUSH: usize = 64 * 1024;

/// Decodes one packed stream; returns the header's length.
pub(crate) fn decode<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
) -> Result<u64, StreamError> {
    let mut header_len = 0u64;
    let mut byte = |src: &mut Source<R>| {
        header_len += 1;
        src.need_byte()
    };
    for _ in 0..2 {
        byte(src)?;
    }
    let mut orig_len = 0u32;
    for _ in 0..4 {
        orig_len = (orig_len << 8) | u32::from(byte(src)?);
    }
    let max_len = usize::from(byte(src)?);
    if max_len == 0 || max_len > MAX_BITLEN {
        return Err(Damage::Corrupt.into());
    }
    let mut leaves = [0usize; MAX_BITLEN + 1];
    let mut max_leaves = 1usize;
    let mut total = 0;
    for (len, count) in leaves.iter_mut().enumerate().take(max_len + 1).skip(1) {
        *count = usize::from(byte(src)?);
        if max_leaves - usize::from(len == max_len) < *count {
            return Err(Damage::Corrupt.into());
        }
        max_leaves = (max_leaves - *count + 1) * 2 - 1;
        total += *count;
    }
    if total >= 256 {
        return Err(Damage::Corrupt.into());
    }
    // The stored count at the longest length is two short: one for the end-of-block code,
    // which has no byte, and one more to fit 257 in a byte.
    leaves[max_len] += 1;
    let mut literal = Vec::with_capacity(256);
    let mut lit_base = [0usize; MAX_BITLEN + 1];
    for len in 1..=max_len {
        lit_base[len] = literal.len();
        for _ in 0..leaves[len] {
            literal.push(byte(src)?);
        }
    }
    leaves[max_len] += 1;
    // Parents at each length: half the nodes (parents and leaves) one level deeper.
    let mut parents = [0usize; MAX_BITLEN + 1];
    let mut nodes = 0usize;
    for len in (1..=max_len).rev() {
        nodes >>= 1;
        parents[len] = nodes;
        nodes += leaves[len];
    }
    if nodes >> 1 != 1 {
        return Err(Damage::Corrupt.into());
    }
    let eob = leaves[max_len] - 1;

    let mut pending = Vec::with_capacity(FLUSH);
    let mut written = 0u64;
    let (mut buffer, mut count) = (0u8, 0u32);
    'symbols: loop {
        let mut code = 0usize;
        for len in 1..=max_len {
            if count == 0 {
                buffer = src.need_byte()?;
                count = 8;
            }
            count -= 1;
            code = (code << 1) | usize::from((buffer >> count) & 1);
            if code < parents[len] {
                continue;
            }
            let leaf = code - parents[len];
            if leaf >= leaves[len] {
                return Err(Damage::Corrupt.into());
            }
            if len == max_len && leaf == eob {
                break 'symbols;
            }
            let Some(&value) = literal.get(lit_base[len] + leaf) else {
                return Err(Damage::Corrupt.into());
            };
            pending.push(value);
            if pending.len() >= FLUSH {
                written += pending.len() as u64;
                out.write(&pending, src.consumed())?;
                pending.clear();
            }
            continue 'symbols;
        }
        return Err(Damage::Corrupt.into());
    }
    written += pending.len() as u64;
    out.write(&pending, src.consumed())?;
    if written as u32 != orig_len {
        return Err(Damage::Length.into());
    }
    Ok(header_len)
}
