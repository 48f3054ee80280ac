//! Unix `compress` (`.Z`): LZW with 9- to 16-bit codes, as `gzip -d` reads it.
//!
//! Written here because no well-kept crate decodes compress's block mode: the `weezl` and
//! `lzw` crates speak GIF's and TIFF's LZW, whose code packing differs (compress writes codes
//! in groups of eight and skips the rest of a group whenever the code width grows or the
//! table is cleared). The layout follows ncompress 4.2 and gzip's unlzw.c: a 3-byte header
//! (magic, then the maximum code width and the block-mode flag), then codes least significant
//! bit first.
//!
//! Memory is fixed (a 64 K-entry table and a string stack of the same bound) and every code
//! is checked before use, so corrupt input ends in an error, never a panic or a loop.

use std::io::{Read, Write};

use crate::error::{Damage, StreamError};
use crate::source::Source;
use crate::stream::Output;

/// The magic number of compress's output.
pub(crate) const MAGIC: [u8; 2] = [0x1f, 0x9d];
/// Header byte 3: the maximum code width in the low bits, block mode in the top one.
const BITS_MASK: u8 = 0x1f;
const BLOCK_MODE: u8 = 0x80;
/// Bits compress never sets (ncompress refuses them; gzip warns and decodes).
const RESERVED: u8 = 0x60;
const INIT_BITS: u32 = 9;
const MAX_BITS: u32 = 16;
/// The clear code in block mode; the first free code follows it.
const CLEAR: u32 = 256;
/// Output gathered before each write.
const FLUSH: usize = 64 * 1024;

/// What a compress stream's header said besides its data.
pub(crate) struct Decoded {
    /// The header's length.
    pub(crate) framing: u64,
    /// Its flag bits that compress never sets, which gzip warns of and ignores.
    pub(crate) unknown_flags: u8,
}

/// Decodes a compress stream to the end of the input.
pub(crate) fn decode<R: Read, W: Write + ?Sized>(
    src: &mut Source<R>,
    out: &mut Output<'_, W>,
) -> Result<Decoded, StreamError> {
    if src.fill(3)? < 3 {
        return Err(Damage::Truncated.into());
    }
    let flags = src.available()[2];
    src.consume(3);
    let max_bits = u32::from(flags & BITS_MASK);
    // As gzip, only more bits than the table holds are refused: a stream of fewer than 9
    // (no compress writes one) keeps 9-bit codes and never adds to the table.
    if max_bits > MAX_BITS {
        return Err(Damage::Unsupported(format!(
            "compressed with {max_bits} bits, can only handle {MAX_BITS} bits"
        ))
        .into());
    }
    let block_mode = flags & BLOCK_MODE != 0;
    let max_max_code = 1u32 << max_bits;
    let mut prefix = vec![0u16; 1 << MAX_BITS];
    let mut suffix = vec![0u8; 1 << MAX_BITS];
    for (i, s) in suffix.iter_mut().enumerate().take(256) {
        *s = i as u8;
    }
    let mut stack: Vec<u8> = Vec::with_capacity(1 << MAX_BITS);
    let mut pending: Vec<u8> = Vec::with_capacity(FLUSH + (1 << MAX_BITS));

    let mut bits = Bits::default();
    let mut n_bits = INIT_BITS;
    let mut max_code = (1u32 << n_bits) - 1;
    let mut free = if block_mode { CLEAR + 1 } else { CLEAR };
    let mut old: Option<u32> = None;
    let mut fin_char = 0u8;
    loop {
        if free > max_code {
            // The width grows: the rest of this group of eight codes is padding.
            if !bits.skip_group(src, n_bits)? {
                break;
            }
            n_bits += 1;
            max_code = if n_bits == max_bits {
                max_max_code
            } else {
                (1 << n_bits) - 1
            };
            continue;
        }
        let Some(code) = bits.code(src, n_bits)? else {
            break;
        };
        let Some(previous) = old else {
            if code >= 256 {
                return Err(Damage::CorruptLzw.into());
            }
            fin_char = code as u8;
            pending.push(fin_char);
            old = Some(code);
            continue;
        };
        if code == CLEAR && block_mode {
            free = CLEAR;
            if !bits.skip_group(src, n_bits)? {
                break;
            }
            n_bits = INIT_BITS;
            max_code = (1 << n_bits) - 1;
            continue;
        }
        let incode = code;
        let mut code = code;
        stack.clear();
        if code >= free {
            if code > free {
                return Err(Damage::CorruptLzw.into());
            }
            // The KwKwK case: the code being defined by this very step.
            stack.push(fin_char);
            code = previous;
        }
        while code >= 256 {
            let at = code as usize;
            let (Some(&byte), Some(&next)) = (suffix.get(at), prefix.get(at)) else {
                return Err(Damage::CorruptLzw.into());
            };
            stack.push(byte);
            if stack.len() > 1 << MAX_BITS {
                return Err(Damage::CorruptLzw.into());
            }
            code = u32::from(next);
        }
        fin_char = code as u8;
        stack.push(fin_char);
        pending.extend(stack.iter().rev());
        if free < max_max_code {
            let at = free as usize;
            if let (Some(p), Some(s)) = (prefix.get_mut(at), suffix.get_mut(at)) {
                *p = previous as u16;
                *s = fin_char;
            }
            free += 1;
        }
        old = Some(incode);
        if pending.len() >= FLUSH {
            out.write(&pending, src.consumed())?;
            pending.clear();
        }
    }
    out.write(&pending, src.consumed())?;
    Ok(Decoded {
        framing: 3,
        unknown_flags: flags & RESERVED,
    })
}

/// Codes read least significant bit first, counted so group padding can be skipped.
#[derive(Default)]
struct Bits {
    buffer: u32,
    count: u32,
    /// Codes read since the width last changed.
    codes: u32,
}

impl Bits {
    /// The next `width`-bit code, or `None` when the input ends before a whole one.
    fn code<R: Read>(
        &mut self,
        src: &mut Source<R>,
        width: u32,
    ) -> Result<Option<u32>, StreamError> {
        while self.count < width {
            let Some(byte) = src.byte()? else {
                return Ok(None);
            };
            self.buffer |= u32::from(byte) << self.count;
            self.count += 8;
        }
        let code = self.buffer & ((1 << width) - 1);
        self.buffer >>= width;
        self.count -= width;
        self.codes += 1;
        Ok(Some(code))
    }

    /// Skips to the end of the current group of eight `width`-bit codes (a group is `width`
    /// bytes, so this lands on a byte boundary); `false` if the input ends first.
    fn skip_group<R: Read>(
        &mut self,
        src: &mut Source<R>,
        width: u32,
    ) -> Result<bool, StreamError> {
        let left = (8 - self.codes % 8) % 8;
        for _ in 0..left {
            if self.code(src, width)?.is_none() {
                return Ok(false);
            }
        }
        self.codes = 0;
        self.buffer = 0;
        self.count = 0;
        Ok(true)
    }
}
