//! The per-stream match tables of the windowed encoder, and the per-thread working memory
//! (tokens, Huffman tables) its calls borrow.
//!
//! The tables must outlive a call: re-inserting 32 KB of history at every call (one hash and
//! one store per position) measured 86 µs, against 3-12 µs for a whole flushed call of 64-1024
//! bytes at level 1 (both on the same loaded 2-core machine). So each stream keeps the table
//! of its level, with positions that stay valid across calls: stream offsets modulo 2^16 (see
//! [`parse_fast_windowed`] and [`parse_bucket`]). The tokens and block writer hold nothing
//! between calls, so they live once per thread.

use std::cell::Cell;

use crate::encode::bits::BitWriter;
use crate::encode::block::BlockWriter;
use crate::encode::lz77::{
    parse_bucket, parse_fast_windowed, BucketTable, FastTable, Greedy, Tokens, FAST_BITS,
    MAX_SYMBOLS, SYMBOLS,
};
use crate::encode::scratch::write_blocks;

/// Blocks under this many input bytes get no dynamic code: pricing one (building the code
/// lengths twice, the header's code) costs about 3 µs, ten times the rest of such a call.
/// Measured on web/ cut into flushed calls at level 1: 32-byte calls 9.6 times faster for 0.1%
/// more output; a limit of 128 would cost 64-byte calls 2.8%, since with matches into the
/// history even such blocks often come out smaller with a dynamic code.
const SMALL_BLOCK: usize = 64;

/// One stream's match tables.
#[derive(Clone)]
pub(crate) enum Tables {
    /// Levels 1 and 2: one tagged position per hash.
    Greedy(Greedy, Box<FastTable>),
    /// Level 3: four tagged positions per hash (see `encode/lz77/bucket.rs` for why not the
    /// stateless level 3's hash chains).
    Bucket(Box<BucketTable>),
}

impl Tables {
    /// Fresh tables for `level` (1-3).
    pub(crate) fn new(level: u8) -> Tables {
        match level {
            1 | 2 => Tables::Greedy(greedy(level), zeroed_fast_table()),
            _ => Tables::Bucket(zeroed_bucket_table()),
        }
    }

    /// Switches to `level`, keeping the table when levels 1 and 2 swap (entries of the other
    /// hash are merely useless); level 3 and the greedy levels share nothing.
    pub(crate) fn set_level(&mut self, level: u8) {
        match (self, level) {
            (Tables::Greedy(g, _), 1 | 2) => *g = greedy(level),
            (Tables::Bucket(_), 3) => {}
            (tables, _) => *tables = Tables::new(level),
        }
    }

    /// Forgets every position (a reset), so a reset stream compresses as a fresh one.
    pub(crate) fn clear(&mut self) {
        match self {
            Tables::Greedy(_, table) => table.fill(0),
            Tables::Bucket(table) => table.fill(Default::default()),
        }
    }

    /// Heap bytes held.
    pub(crate) fn heap_size(&self) -> usize {
        match self {
            Tables::Greedy(_, table) => std::mem::size_of_val(&**table),
            Tables::Bucket(table) => std::mem::size_of_val(&**table),
        }
    }

    /// Compresses `data[start..]` as blocks, matching into `data[..start]` too; `data[0]` is
    /// at stream offset `offset`.
    pub(crate) fn compress(
        &mut self,
        (data, start): (&[u8], usize),
        offset: u64,
        is_final: bool,
        work: &mut Work,
        w: &mut BitWriter<'_>,
    ) {
        work.tokens.clear();
        let blocks = (&mut work.tokens, &mut work.blocks);
        // Positions are kept modulo 2^16: the offset's low bits are all the tables need.
        let origin = offset as u16;
        match self {
            Tables::Greedy(g, table) => {
                let g = *g;
                blocks.0.set_max_symbols(match g {
                    Greedy::Fastest => MAX_SYMBOLS,
                    Greedy::Fast => SYMBOLS,
                });
                write_blocks(data, start, is_final, blocks, w, |data, pos, tokens| {
                    parse_fast_windowed(data, pos, table, (g, origin), tokens)
                });
            }
            Tables::Bucket(table) => {
                blocks.0.set_max_symbols(SYMBOLS);
                write_blocks(data, start, is_final, blocks, w, |data, pos, tokens| {
                    parse_bucket(data, pos, table, origin, tokens)
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

fn zeroed_bucket_table() -> Box<BucketTable> {
    vec![Default::default(); std::mem::size_of::<BucketTable>() / 16]
        .into_boxed_slice()
        .try_into()
        .unwrap_or_else(|_| unreachable!("the length is the table's"))
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
