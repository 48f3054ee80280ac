//! Per-thread working memory of the stateless encoder.
//!
//! Levels 1 and 2 use a 32 KB table of tagged 16-bit positions (level 1 only its first 16 KB)
//! and clear the part a call uses (less for small inputs) at the start of the call, so their
//! output never depends on what the thread compressed before: the CLI's blocks come out the
//! same whatever thread made them.
//!
//! The hash chains of level 3 are larger (320 KB) and are allocated on first use. Their
//! positions are stored as `base + pos`, where every call gets a fresh `base` at least one
//! window past everything stored before, so they never need clearing between calls or streams,
//! and an entry left by another stream can never pass the distance check. When the tag space
//! would wrap, the tables are cleared once and tagging restarts.

use super::bits::BitWriter;
use super::block::{write_stored, write_sync_marker, BlockWriter, Plan};
use super::lz77::{
    parse_chain, parse_fast, ChainParams, FastTable, Greedy, Tokens, FAST_BITS, HASH_BITS,
    MAX_SYMBOLS, MAX_TOKENS, SYMBOLS, WINDOW,
};

/// Level 3's hash-chain search.
pub(crate) const CHAIN: ChainParams = ChainParams {
    depth: 16,
    nice: 96,
    lazy: true,
};

/// Inputs longer than this are parsed as independent segments so tagged positions fit in u32.
const SEGMENT: usize = 1 << 30;

/// Per-thread working memory of the stateless encoder: hash tables, token buffer, Huffman
/// tables. One `Scratch` serves any number of streams, one call at a time; it holds no stream
/// data between calls.
pub struct Scratch {
    /// Greedy table of levels 1 and 2.
    fast: Box<FastTable>,
    /// Hash heads and chains, allocated on the first call at level 3.
    head: Box<[u32]>,
    prev: Box<[u32]>,
    next_base: u32,
    tokens: Tokens,
    blocks: BlockWriter,
}

impl Scratch {
    /// Allocates the scratch memory (about 100 KB, 420 KB once level 3 is used).
    pub fn new() -> Scratch {
        Scratch {
            fast: vec![0; 1 << FAST_BITS]
                .into_boxed_slice()
                .try_into()
                .expect("length matches FastTable"),
            head: Box::default(),
            prev: Box::default(),
            next_base: WINDOW as u32 + 1,
            tokens: Tokens::new(),
            blocks: BlockWriter::new(),
        }
    }

    /// Bytes of heap memory this scratch holds now.
    pub fn memory_size(&self) -> usize {
        4 * (self.head.len() + self.prev.len() + MAX_TOKENS)
            + 4 * self.fast.len()
            + std::mem::size_of::<Scratch>()
    }

    /// Compresses `input` as whole blocks, the last one final if `is_final`, else followed by
    /// a sync marker; output is byte-aligned. Level 0 writes stored blocks.
    pub(crate) fn compress(&mut self, level: u8, input: &[u8], is_final: bool, out: &mut Vec<u8>) {
        let mut w = BitWriter::new(out);
        self.tokens.clear();
        if input.is_empty() {
            if is_final {
                let plan = self.blocks.plan(&mut self.tokens, 0);
                self.blocks.emit(&mut w, plan, &self.tokens, &[], true);
            } else {
                write_sync_marker(&mut w);
            }
        }
        if level == 0 && !input.is_empty() {
            // Stored blocks end byte-aligned: no sync marker needed.
            write_stored(&mut w, input, is_final);
            w.finish();
            return;
        }
        let segments = input.len().div_ceil(SEGMENT);
        for (i, segment) in input.chunks(SEGMENT).enumerate() {
            self.compress_segment(level, segment, is_final && i + 1 == segments, &mut w);
        }
        if !is_final && !input.is_empty() {
            write_sync_marker(&mut w);
        }
        w.finish();
    }

    fn compress_segment(&mut self, level: u8, data: &[u8], is_final: bool, w: &mut BitWriter<'_>) {
        // Levels 1-2: a table just large enough for the input (4, 16 or, at level 2, 32 KB),
        // cleared.
        let greedy = match level {
            1 => Some(Greedy::Fastest),
            2 => Some(Greedy::Fast),
            _ => None,
        };
        let bits = greedy.map_or(0, |g| g.table_bits(data.len()));
        self.tokens
            .set_max_symbols(if greedy == Some(Greedy::Fastest) {
                MAX_SYMBOLS
            } else {
                SYMBOLS
            });
        let base = if greedy.is_some() {
            self.fast[..1 << bits].fill(0);
            0
        } else {
            if self.prev.is_empty() {
                self.head = vec![0; 1 << HASH_BITS].into_boxed_slice();
                self.prev = vec![0; WINDOW].into_boxed_slice();
            }
            self.claim_base(data.len())
        };
        let work = (&mut self.tokens, &mut self.blocks);
        match greedy {
            Some(g) => {
                let fast = &mut *self.fast;
                write_blocks(data, 0, is_final, work, w, |data, pos, tokens| {
                    parse_fast(data, pos, fast, (g, bits), tokens)
                });
            }
            None => {
                let tables = (&mut *self.head, &mut *self.prev);
                write_blocks(data, 0, is_final, work, w, |data, pos, tokens| {
                    parse_chain(
                        data,
                        pos,
                        (&mut *tables.0, &mut *tables.1),
                        base,
                        tokens,
                        CHAIN,
                    )
                });
            }
        }
    }

    /// Reserves the tag range for a call of `len` bytes, clearing the tables if it would wrap.
    fn claim_base(&mut self, len: usize) -> u32 {
        let span = len as u64 + WINDOW as u64 + 1;
        if u64::from(self.next_base) + span >= u64::from(u32::MAX) {
            self.head.fill(0);
            self.prev.fill(0);
            self.next_base = WINDOW as u32 + 1;
        }
        let base = self.next_base;
        self.next_base = (u64::from(base) + span) as u32;
        base
    }
}

/// Parses `data[start..]` into blocks with `parse` (which fills the tokens of one block from a
/// position and returns where it stopped) and writes them, the last one final if `is_final`.
/// `data[..start]` is history the parse may match into (empty for the stateless encoder).
/// Neighbouring blocks that price cheapest as stored are written as one run of stored blocks.
pub(crate) fn write_blocks(
    data: &[u8],
    start: usize,
    is_final: bool,
    (tokens, blocks): (&mut Tokens, &mut BlockWriter),
    w: &mut BitWriter<'_>,
    mut parse: impl FnMut(&[u8], usize, &mut Tokens) -> usize,
) {
    let (mut pos, mut block_start) = (start, start);
    // Start of the run of blocks that chose stored: written as one run of 64 KB blocks.
    let mut stored_from = None;
    while pos < data.len() {
        pos = parse(data, pos, tokens);
        let done = pos >= data.len();
        match blocks.plan(tokens, pos - block_start) {
            Plan::Stored => {
                stored_from.get_or_insert(block_start);
            }
            plan => {
                if let Some(from) = stored_from.take() {
                    write_stored(w, &data[from..block_start], false);
                }
                let raw = &data[block_start..pos];
                blocks.emit(w, plan, tokens, raw, is_final && done);
            }
        }
        tokens.clear();
        block_start = pos;
    }
    if let Some(from) = stored_from {
        write_stored(w, &data[from..], is_final);
    }
}

impl Default for Scratch {
    fn default() -> Scratch {
        Scratch::new()
    }
}

impl std::fmt::Debug for Scratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Scratch")
            .field("memory_size", &self.memory_size())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_space_wraps_by_clearing_the_tables() {
        let data: Vec<u8> = b"abcdefgh".iter().cycle().take(100_000).copied().collect();
        // Level 3, the one with hash chains.
        let mut scratch = Scratch::new();
        let mut first = Vec::new();
        scratch.compress(3, &data, true, &mut first);
        scratch.next_base = u32::MAX - 50_000;
        let mut wrapped = Vec::new();
        scratch.compress(3, &data, true, &mut wrapped);
        assert_eq!(first, wrapped);
        assert!(scratch.next_base < 200_000);
    }
}
