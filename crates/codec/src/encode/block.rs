//! Block output: builds the dynamic code for a block's tokens, prices dynamic, fixed and stored
//! encodings exactly, and writes the cheapest.

use super::bits::{BitWriter, SliceWriter};
use super::huffman::{
    canonical_codes, CodeBuilder, MAX_CODELEN_CODE_LEN, MAX_CODE_LEN, MAX_LITLEN_CODE_LEN,
};
use super::lz77::{Tokens, MATCH_FLAG};
use super::tables::{
    fixed_litlen_lengths, CODELEN_ORDER, DIST_BASE, DIST_EXTRA, END_OF_BLOCK, LENGTH_BASE,
    LENGTH_CODE, LENGTH_EXTRA, NUM_DIST, NUM_LITLEN,
};

/// Largest payload of one stored block.
const MAX_STORED: usize = 65_535;

/// A literal/length and distance code ready for output.
#[derive(Clone)]
struct Code {
    lit_lens: [u8; 288],
    dist_lens: [u8; 32],
    /// Per literal byte (0..256), then per match length − 3 (256..512, the length symbol's
    /// code and its extra bits): `bits | nbits << 24`.
    sym: [u32; 512],
    /// The end-of-block symbol: `bits | nbits << 24`.
    eob: u32,
    dist_codes: [u16; 32],
    /// Per distance code: `code | len << 16 | (len + extra) << 24 | base << 32`.
    dist: [u64; 32],
}

impl Code {
    fn new() -> Code {
        Code {
            lit_lens: [0; 288],
            dist_lens: [0; 32],
            sym: [0; 512],
            eob: 0,
            dist_codes: [0; 32],
            dist: [0; 32],
        }
    }

    /// Fills the output tables from `lit_lens` and `dist_lens`.
    fn build_tables(&mut self) {
        let mut lit_codes = [0u16; 288];
        canonical_codes(&self.lit_lens, &mut lit_codes);
        canonical_codes(&self.dist_lens, &mut self.dist_codes);
        let (lit, len) = self.sym.split_at_mut(256);
        for ((entry, &code), &bits) in lit.iter_mut().zip(&lit_codes).zip(&self.lit_lens) {
            *entry = u32::from(code) | u32::from(bits) << 24;
        }
        self.eob =
            u32::from(lit_codes[END_OF_BLOCK]) | u32::from(self.lit_lens[END_OF_BLOCK]) << 24;
        for (dc, entry) in self.dist.iter_mut().enumerate().take(NUM_DIST) {
            let len = u64::from(self.dist_lens[dc]);
            *entry = u64::from(self.dist_codes[dc])
                | len << 16
                | (len + u64::from(DIST_EXTRA[dc])) << 24
                | u64::from(DIST_BASE[dc]) << 32;
        }
        for (l3, entry) in len.iter_mut().enumerate() {
            let code = usize::from(LENGTH_CODE[l3]);
            let sym = 257 + code;
            let extra = (l3 as u32 + 3) - u32::from(LENGTH_BASE[code]);
            let nbits = u32::from(self.lit_lens[sym]) + u32::from(LENGTH_EXTRA[code]);
            *entry = (u32::from(lit_codes[sym]) | extra << self.lit_lens[sym]) | nbits << 24;
        }
    }
}

/// The encoding chosen for a block, with its exact size in bits.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Plan {
    /// Raw bytes in stored blocks.
    Stored,
    /// The fixed Huffman code.
    Fixed {
        /// Size of the block.
        bits: u64,
    },
    /// A dynamic Huffman code, built by [`BlockWriter::plan`].
    Dynamic {
        /// Size of the block, header included.
        bits: u64,
        /// The header's layout.
        header: Header,
    },
}

/// Size and counts of a dynamic block header.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Header {
    bits: u64,
    hlit: usize,
    hdist: usize,
    hclen: usize,
}

/// Per-thread tables of the block writer.
pub(crate) struct BlockWriter {
    fixed: Code,
    dynamic: Code,
    /// Run-length coded code lengths: `symbol | extra << 8`.
    rle: Vec<u16>,
    codelen_lens: [u8; 19],
    codelen_codes: [u16; 19],
    /// Working arrays for building the codes.
    builder: CodeBuilder,
    /// Blocks of fewer input bytes are priced as fixed and stored only (0, the stateless
    /// encoder's choice: every block is priced all three ways).
    small_block: usize,
}

impl BlockWriter {
    pub(crate) fn new() -> BlockWriter {
        let mut fixed = Code::new();
        fixed.lit_lens = fixed_litlen_lengths();
        fixed.dist_lens = [5; 32];
        fixed.build_tables();
        BlockWriter {
            fixed,
            dynamic: Code::new(),
            rle: Vec::with_capacity(NUM_LITLEN + NUM_DIST),
            codelen_lens: [0; 19],
            codelen_codes: [0; 19],
            builder: CodeBuilder::new(),
            small_block: 0,
        }
    }

    /// Sets the block size under which no dynamic code is built (see [`Plan`]).
    pub(crate) fn set_small_block(&mut self, bytes: usize) {
        self.small_block = bytes;
    }

    /// Prices the block that `tokens` (encoding `raw_len` input bytes) would make as dynamic,
    /// fixed and stored, and returns the cheapest. The dynamic code is kept for [`Self::emit`].
    pub(crate) fn plan(&mut self, tokens: &mut Tokens, raw_len: usize) -> Plan {
        tokens.litlen[END_OF_BLOCK] = 1;
        let extra_bits: u64 = (0..29)
            .map(|c| u64::from(tokens.litlen[257 + c]) * u64::from(LENGTH_EXTRA[c]))
            .chain((0..30).map(|c| u64::from(tokens.dist[c]) * u64::from(DIST_EXTRA[c])))
            .sum();
        let fixed_bits = 3 + extra_bits + symbol_bits(tokens, &self.fixed);
        let stored_chunks = raw_len.div_ceil(MAX_STORED).max(1) as u64;
        // Header, worst-case padding, LEN/NLEN for each chunk, then the bytes.
        let stored_bits = stored_chunks * (3 + 32) + 7 + 8 * raw_len as u64;
        if raw_len < self.small_block {
            // Too small to repay a dynamic header: not worth building the code.
            return if stored_bits <= fixed_bits {
                Plan::Stored
            } else {
                Plan::Fixed { bits: fixed_bits }
            };
        }

        self.builder.lengths(
            &tokens.litlen,
            MAX_LITLEN_CODE_LEN,
            &mut self.dynamic.lit_lens[..NUM_LITLEN],
        );
        self.builder.lengths(
            &tokens.dist,
            MAX_CODE_LEN,
            &mut self.dynamic.dist_lens[..NUM_DIST],
        );
        let header = self.plan_header();
        let dynamic_bits = 3 + header.bits + extra_bits + symbol_bits(tokens, &self.dynamic);

        if stored_bits <= dynamic_bits.min(fixed_bits) {
            Plan::Stored
        } else if fixed_bits <= dynamic_bits {
            Plan::Fixed { bits: fixed_bits }
        } else {
            Plan::Dynamic {
                bits: dynamic_bits,
                header,
            }
        }
    }

    /// Writes the tokens as the compressed block `plan` chose (not [`Plan::Stored`], which the
    /// caller writes from the raw bytes so that neighbouring stored blocks merge).
    /// `raw` is the block's input, where the literal runs' bytes are.
    pub(crate) fn emit(
        &mut self,
        w: &mut BitWriter<'_>,
        plan: Plan,
        tokens: &Tokens,
        raw: &[u8],
        is_final: bool,
    ) {
        match plan {
            Plan::Stored => debug_assert!(false, "stored blocks are written from raw bytes"),
            Plan::Fixed { bits } => {
                w.put(u64::from(is_final) | 0b01 << 1, 3);
                w.with_reserved((bits / 8) as usize + 8, |s| {
                    write_tokens(s, tokens.list(), raw, &self.fixed)
                });
            }
            Plan::Dynamic { bits, header } => {
                w.reserve((bits / 8) as usize + 8);
                w.put(u64::from(is_final) | 0b10 << 1, 3);
                self.dynamic.build_tables();
                self.write_header(w, header);
                w.with_reserved((bits / 8) as usize + 8, |s| {
                    write_tokens(s, tokens.list(), raw, &self.dynamic)
                });
            }
        }
    }

    /// Run-length codes the dynamic code lengths (RFC 1951 §3.2.7) and builds the code-length
    /// code.
    fn plan_header(&mut self) -> Header {
        let code = &self.dynamic;
        let hlit = 257
            + code.lit_lens[257..NUM_LITLEN]
                .iter()
                .rposition(|&l| l != 0)
                .map_or(0, |i| i + 1);
        let hdist = 1 + code.dist_lens[1..NUM_DIST]
            .iter()
            .rposition(|&l| l != 0)
            .map_or(0, |i| i + 1);
        let mut lens = [0u8; NUM_LITLEN + NUM_DIST];
        lens[..hlit].copy_from_slice(&code.lit_lens[..hlit]);
        lens[hlit..hlit + hdist].copy_from_slice(&code.dist_lens[..hdist]);
        let lens = &lens[..hlit + hdist];

        self.rle.clear();
        let mut i = 0;
        while i < lens.len() {
            let len = lens[i];
            let run = lens[i..].iter().take_while(|&&l| l == len).count();
            let mut left = run;
            if len == 0 {
                while left >= 11 {
                    let n = left.min(138);
                    self.rle.push(18 | ((n - 11) as u16) << 8);
                    left -= n;
                }
                if left >= 3 {
                    self.rle.push(17 | ((left - 3) as u16) << 8);
                    left = 0;
                }
            } else {
                self.rle.push(u16::from(len));
                left -= 1;
                while left >= 3 {
                    let n = left.min(6);
                    self.rle.push(16 | ((n - 3) as u16) << 8);
                    left -= n;
                }
            }
            for _ in 0..left {
                self.rle.push(u16::from(len));
            }
            i += run;
        }

        let mut freqs = [0u32; 19];
        for &item in &self.rle {
            freqs[usize::from(item & 0xff)] += 1;
        }
        self.builder
            .lengths(&freqs, MAX_CODELEN_CODE_LEN, &mut self.codelen_lens);
        canonical_codes(&self.codelen_lens, &mut self.codelen_codes);
        let hclen = 4 + CODELEN_ORDER[4..]
            .iter()
            .rposition(|&s| self.codelen_lens[s] != 0)
            .map_or(0, |i| i + 1);
        let body: u64 = freqs
            .iter()
            .zip(&self.codelen_lens)
            .enumerate()
            .map(|(sym, (&f, &l))| {
                u64::from(f)
                    * (u64::from(l) + [2, 3, 7].get(sym.wrapping_sub(16)).copied().unwrap_or(0))
            })
            .sum();
        Header {
            bits: 14 + 3 * hclen as u64 + body,
            hlit,
            hdist,
            hclen,
        }
    }

    fn write_header(&self, w: &mut BitWriter<'_>, header: Header) {
        let Header {
            hlit, hdist, hclen, ..
        } = header;
        w.put((hlit - 257) as u64, 5);
        w.put((hdist - 1) as u64, 5);
        w.put((hclen - 4) as u64, 4);
        for &sym in &CODELEN_ORDER[..hclen] {
            w.put(u64::from(self.codelen_lens[sym]), 3);
            w.flush();
        }
        for &item in &self.rle {
            let sym = usize::from(item & 0xff);
            let extra = u64::from(item >> 8);
            w.put(
                u64::from(self.codelen_codes[sym]),
                u32::from(self.codelen_lens[sym]),
            );
            match sym {
                16 => w.put(extra, 2),
                17 => w.put(extra, 3),
                18 => w.put(extra, 7),
                _ => {}
            }
            w.flush();
        }
    }
}

/// Bits the literal/length and distance symbols cost under `code`, extra bits excluded.
fn symbol_bits(tokens: &Tokens, code: &Code) -> u64 {
    let lit: u64 = tokens
        .litlen
        .iter()
        .zip(&code.lit_lens)
        .map(|(&f, &l)| u64::from(f) * u64::from(l))
        .sum();
    let dist: u64 = tokens
        .dist
        .iter()
        .zip(&code.dist_lens)
        .map(|(&f, &l)| u64::from(f) * u64::from(l))
        .sum();
    lit + dist
}

/// The hot loop: every token through the code's tables. A literal run's bytes come from `raw`
/// (the block's input) four to a flush: literal codes are at most 14 bits, so four take 56.
fn write_tokens(outer: &mut SliceWriter<'_>, tokens: &[u32], raw: &[u8], code: &Code) {
    let mut local = outer.local();
    let w = &mut local;
    let lit = |w: &mut SliceWriter<'_>, b: u8| {
        let e = code.sym[usize::from(b)];
        w.put(u64::from(e & 0xff_ffff), e >> 24);
    };
    let mut at = 0;
    for &t in tokens {
        if t & MATCH_FLAG == 0 {
            let run = &raw[at..at + t as usize];
            at += run.len();
            let mut quads = run.chunks_exact(4);
            for q in &mut quads {
                lit(w, q[0]);
                lit(w, q[1]);
                lit(w, q[2]);
                lit(w, q[3]);
                w.flush();
            }
            // The last 0-3 literals without a branch on how many: a count that varies from
            // run to run would be a coin toss. Bytes past the run are read (clamped to the
            // block) but put as zero bits.
            let left = quads.remainder().len();
            let last = raw.len() - 1;
            let mut acc = 0;
            let mut n = 0;
            for i in 0..3 {
                let e = code.sym[usize::from(raw[(at - left + i).min(last)])];
                let keep = 0u32.wrapping_sub(u32::from(i < left));
                acc |= u64::from(e & 0xff_ffff & keep) << n;
                n += (e >> 24) & keep;
            }
            w.put(acc, n);
            w.flush();
        } else {
            let l3 = (t & 0xff) as usize;
            at += l3 + 3;
            let e = code.sym[256 + l3];
            w.put(u64::from(e & 0xff_ffff), e >> 24);
            let d1 = u64::from((t >> 8) & 0x7fff);
            let e = code.dist[((t >> 23) & 0x1f) as usize];
            let extra = d1 + 1 - (e >> 32);
            w.put(
                (e & 0xffff) | extra << ((e >> 16) & 0xff),
                ((e >> 24) & 0xff) as u32,
            );
            w.flush();
        }
    }
    debug_assert_eq!(at, raw.len());
    let e = code.eob;
    w.put(u64::from(e & 0xff_ffff), e >> 24);
    w.flush();
    let state = local.state();
    outer.absorb(state);
}

/// Writes `raw` as stored blocks of at most 65,535 bytes; only the last may be final.
pub(crate) fn write_stored(w: &mut BitWriter<'_>, raw: &[u8], is_final: bool) {
    let mut chunks = raw.chunks(MAX_STORED).peekable();
    if chunks.peek().is_none() {
        w.reserve(8);
        w.put(u64::from(is_final), 3);
        w.align();
        w.bytes(&[0, 0, 0xff, 0xff]);
        return;
    }
    while let Some(chunk) = chunks.next() {
        let last = chunks.peek().is_none();
        w.reserve(chunk.len() + 8);
        w.put(u64::from(is_final && last), 3);
        w.align();
        let len = chunk.len() as u16;
        w.bytes(&len.to_le_bytes());
        w.bytes(&(!len).to_le_bytes());
        w.bytes(chunk);
    }
}

/// Ends a non-final call on a byte boundary with an empty stored block (a zlib sync flush).
pub(crate) fn write_sync_marker(w: &mut BitWriter<'_>) {
    write_stored(w, &[], false);
}
