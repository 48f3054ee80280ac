//! The per-stream match tables of the windowed encoder, and the per-thread working memory
//! (tokens, Huffman tables) its calls borrow.
//!
//! The tables must outlive a call: re-inserting 32 KB of history at every call (one hash and
//! one store per position) measured 86 µs, against 3-12 µs for a whole flushed call of 64-1024
//! bytes at level 1 (both on the same loaded 2-core machine). So each
//! stream keeps the table of its level, with positions that stay valid across calls: levels 1
//! and 2 store stream offsets modulo 2^16 (see [`parse_fast_windowed`]), level 3 tags positions
//! with a per-stream base that grows with the stream, as the stateless level 3 does per call.
//! The tokens and block writer hold nothing between calls, so they live once per thread.

use std::cell::Cell;

use crate::encode::bits::BitWriter;
use crate::encode::block::BlockWriter;
use crate::encode::lz77::{
    parse_chain, parse_fast_windowed, ChainParams, FastTable, Greedy, Tokens, FAST_BITS,
    MAX_SYMBOLS, SYMBOLS, WINDOW,
};
use crate::encode::scratch::write_blocks;

/// Hash heads of the windowed level 3: 8,192 (32 KB), a quarter of the stateless level 3's,
/// so that a stream stays within half of zlib's memory.
const CHAIN_HEADS: usize = 1 << 13;
/// Chain links of the windowed level 3: 8,192 (32 KB). A link is overwritten 8 KB later, so
/// chains reach 8 KB back reliably and further by chance (every candidate is verified); the
/// heads still reach the whole window.
const CHAIN_LINKS: usize = 1 << 13;
/// Blocks under this many input bytes get no dynamic code: pricing one (building the code
/// lengths twice, the header's code) costs about 3 µs, ten times the rest of such a call.
/// Measured on web/ cut into flushed calls at level 1: 32-byte calls 9.6 times faster for 0.1%
/// more output; a limit of 128 would cost 64-byte calls 2.8%, since with matches into the
/// history even such blocks often come out smaller with a dynamic code.
const SMALL_BLOCK: usize = 64;
/// The search of the windowed level 3: 8 candidates, a 32-byte match ends it, lazy. With the
/// stateless level 3's (16 candidates, 96 bytes) the search took 78% of an `scp -C` client's
/// CPU (perf, 100 MB of large/; OpenSSH asks for zlib's level 6, mapped here). On large/ in
/// flushed 1-16 KB packets (`window_bench`) this one makes 4.13 against 4.17, for 30% less
/// CPU; zlib's level 6 makes 4.32 there (0.95 of it). 4 candidates: 4.07 for 40% less, but
/// 0.82 of zlib on the JSON alone, which deep chains suit.
const SEARCH: ChainParams = ChainParams {
    depth: 8,
    nice: 32,
    lazy: true,
};
/// The tag of a fresh stream's first byte: past the window, so that a zeroed entry never
/// passes the distance check.
const FIRST_TAG: u32 = WINDOW as u32 + 1;

/// One stream's match tables.
#[derive(Clone)]
pub(crate) enum Tables {
    /// Levels 1 and 2: one tagged position per hash.
    Greedy(Greedy, Box<FastTable>),
    /// Level 3: hash chains; `tag` is the tag of the history buffer's first byte.
    Chain {
        head: Box<[u32]>,
        prev: Box<[u32]>,
        tag: u32,
    },
}

impl Tables {
    /// Fresh tables for `level` (1-3).
    pub(crate) fn new(level: u8) -> Tables {
        match level {
            1 | 2 => Tables::Greedy(greedy(level), zeroed_fast_table()),
            _ => Tables::Chain {
                head: vec![0; CHAIN_HEADS].into_boxed_slice(),
                prev: vec![0; CHAIN_LINKS].into_boxed_slice(),
                tag: FIRST_TAG,
            },
        }
    }

    /// Switches to `level`, keeping the table when levels 1 and 2 swap (entries of the other
    /// hash are merely useless); level 3 and the greedy levels share nothing.
    pub(crate) fn set_level(&mut self, level: u8) {
        match (self, level) {
            (Tables::Greedy(g, _), 1 | 2) => *g = greedy(level),
            (Tables::Chain { .. }, 3) => {}
            (tables, _) => *tables = Tables::new(level),
        }
    }

    /// Forgets every position (a reset), so a reset stream compresses as a fresh one.
    pub(crate) fn clear(&mut self) {
        match self {
            Tables::Greedy(_, table) => table.fill(0),
            Tables::Chain { head, prev, tag } => {
                head.fill(0);
                prev.fill(0);
                *tag = FIRST_TAG;
            }
        }
    }

    /// The history buffer moved down by `shift` bytes: its first byte's tag moves up.
    pub(crate) fn slid(&mut self, shift: usize) {
        if let Tables::Chain { tag, .. } = self {
            *tag = tag.wrapping_add(shift as u32);
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_size(&self) -> usize {
        match self {
            Tables::Greedy(_, table) => std::mem::size_of_val(&**table),
            Tables::Chain { head, prev, .. } => 4 * (head.len() + prev.len()),
        }
    }

    /// Compresses `data[start..]` as blocks, matching into `data[..start]` too; `data[0]` is
    /// `floor` bytes into the history buffer and at stream offset `offset`.
    pub(crate) fn compress(
        &mut self,
        (data, start): (&[u8], usize),
        (floor, offset): (usize, u64),
        is_final: bool,
        work: &mut Work,
        w: &mut BitWriter<'_>,
    ) {
        work.tokens.clear();
        let blocks = (&mut work.tokens, &mut work.blocks);
        match self {
            Tables::Greedy(g, table) => {
                let (g, origin) = (*g, offset as u16);
                blocks.0.set_max_symbols(match g {
                    Greedy::Fastest => MAX_SYMBOLS,
                    Greedy::Fast => SYMBOLS,
                });
                write_blocks(data, start, is_final, blocks, w, |data, pos, tokens| {
                    parse_fast_windowed(data, pos, table, (g, origin), tokens)
                });
            }
            Tables::Chain { head, prev, tag } => {
                // Tags are u32: when the buffer's would pass the top, start over (the history
                // loses its entries once every 4 GB of input).
                let span = (floor + data.len() + WINDOW + 1) as u64;
                if u64::from(*tag) + span >= u64::from(u32::MAX) {
                    head.fill(0);
                    prev.fill(0);
                    *tag = FIRST_TAG;
                }
                let base = tag.wrapping_add(floor as u32);
                blocks.0.set_max_symbols(SYMBOLS);
                write_blocks(data, start, is_final, blocks, w, |data, pos, tokens| {
                    parse_chain(data, pos, (&mut **head, &mut **prev), base, tokens, SEARCH)
                });
            }
        }
    }
}

fn greedy(level: u8) -> Greedy {
    if level == 1 {
        Greedy::Fastest
    } else {
        Greedy::Fast
    }
}

fn zeroed_fast_table() -> Box<FastTable> {
    Box::new([0; 1 << FAST_BITS])
}

/// Working memory a call borrows: what the stateless encoder's [`crate::Scratch`] holds
/// besides its tables (a 64 KB token buffer and the Huffman tables), nothing kept between
/// calls.
pub(crate) struct Work {
    pub(crate) tokens: Tokens,
    pub(crate) blocks: BlockWriter,
}

thread_local! {
    /// One [`Work`] per thread, taken out for a call and put back after it.
    static WORK: Cell<Option<Box<Work>>> = const { Cell::new(None) };
}

/// Runs `f` with this thread's [`Work`] (a fresh one the first time, or if the thread's is in
/// use or already destroyed at thread exit).
pub(crate) fn with_work<R>(f: impl FnOnce(&mut Work) -> R) -> R {
    let mut work = WORK.try_with(Cell::take).ok().flatten().unwrap_or_else(|| {
        let mut blocks = BlockWriter::new();
        blocks.set_small_block(SMALL_BLOCK);
        Box::new(Work {
            tokens: Tokens::new(),
            blocks,
        })
    });
    let r = f(&mut work);
    // Fails only while the thread is being torn down: the memory is then simply freed.
    let _ = WORK.try_with(|cell| cell.set(Some(work)));
    r
}
