//! The per-direction compression policy: raw or compressed, and at which level, block by
//! block. Pure: the relay feeds it what it saw and when; it never reads a clock or a socket.
//!
//! # How it decides
//!
//! - **Skip what won't compress.** [`zipwire_adapt::sniff`] looks at magic numbers and a sampled
//!   entropy first. A compression that saves less than [`MIN_SAVING`] is a failure; after `n`
//!   failures in a row the next `2^n` blocks (at most [`MAX_BACKOFF`]) go raw untried, then it
//!   probes again, so it never gives up on a connection for good.
//! - **Know the link.** Where the kernel reports on the tunnel's TCP connection
//!   ([`Link`], from `TCP_INFO`), the link's rate is the rate at which the peer acknowledged
//!   bytes over an evaluation during which the kernel still had bytes waiting (so the link,
//!   not we, set the pace). Bytes in flight, the bottleneck's queue and socket buffers make a
//!   slow link look idle at first; acknowledgements do not lie, so nothing below counts an
//!   idle link before [`WARMUP_ACKED`] bytes have been acknowledged.
//! - **Match the link.** Every [`EVAL_BLOCKS`] full blocks it picks a rung on a ladder of
//!   methods (fastest first). With the link's rate known, it takes the rung that delivers the
//!   most payload: each delivers the lesser of what it compresses per second and the link's
//!   rate times its ratio, predicted from the speed and ratio measured at the current rung and
//!   the typical steps between methods. On a slow link that is the best ratio the compressor
//!   can still produce in time; on a fast one the fastest rung. When the link was often idle
//!   (the compressor limits), one rung down. Without the kernel's view, or before the link
//!   has shown any pace, it watches the writer's queue instead: up when frames waited longer
//!   for the link than the next rung's extra work would take, down when the queue was often
//!   empty. A pace at which the link limited an earlier connection ([`Policy::recall_pace`])
//!   picks the rung from the first compressed block on: over a slow link the compressor runs
//!   hundreds of kilobytes ahead of the acknowledgements, and a short transfer would be
//!   mostly compressed before the connection could measure the link itself.
//! - **Mix, don't switch.** When a full block is ready, the writer's queue and the kernel's
//!   unsent bytes are empty, what was sent and still queues at the bottleneck drains before
//!   the block could be compressed (the link would idle while the compressor works) and the
//!   current method is too slow to keep the link busy at its measured rate, the block goes
//!   raw. On a
//!   link faster than the compressor this interleaves raw and compressed blocks so that
//!   delivered bytes/s ≈ link + compressor × (1 − 1/ratio), above both "always raw" and
//!   "always compress"; on a link the compressor keeps busy, no raw block goes in, however
//!   empty the queue looks for a moment. (Without the kernel's view: only at the fastest rung
//!   and after [`WARMUP_BLOCKS`].) A link [`FAST_LINK`] times faster than the fastest rung
//!   gets only raw full blocks: the compressor's CPU would cost the transfer more than its
//!   ratio adds when they share cores.
//! - **Stay within memory.** The relay asks the endpoint's memory cap ([`crate::memory`])
//!   for the chosen method's state before compressing; refused, it calls
//!   [`Policy::memory_short`], which steps one rung down and keeps the ladder there for
//!   [`MEMORY_CEILING_EVALS`] evaluations.
//! - Small blocks (the source paused before a block filled, as interactive traffic does)
//!   are compressed at the current level: the link is not the bottleneck then, and fewer bytes
//!   still mean less latency on a slow link.

mod link;
mod rungs;
mod types;

use std::time::Duration;

use zipwire_adapt::sniff::{self, Verdict};

use crate::frame::{Codec, Method};

use link::idle_now;
pub use rungs::ladder;
use rungs::profile;
pub use types::{Choice, Decision, Link, Pace, RawReason, Sent, Signals};

/// Blocks shorter than this go raw untried, whatever the choice (but raw): keystrokes and
/// other interactive packets, which are mostly encrypted already (ssh). Measured with this
/// crate's encoders, 150 blocks in a row through one stream, wire bytes against raw frames:
/// on random bytes (an ssh session's packets) zstd-3 costs +11% at 16-byte blocks, +4.1% at
/// 64, +2.2% at 128, +1.1% at 256, and never gains; the entropy check cannot tell such
/// blocks from text below a few kilobytes, so without this rule they are all compressed.
/// Text does gain from about 48 bytes on (zstd-3 keeps its window: 0.83 at 64, 0.64 at 192,
/// 0.60 at 256), so the line is drawn where interactive packets end: ssh keystrokes and
/// echoes are 36 to ~150 bytes.
pub const TINY_BLOCK: usize = 256;

/// The least saving that makes a compressed block count as a success: 3%.
pub const MIN_SAVING: f64 = 0.03;

/// Most blocks sent raw untried after repeated failures.
pub const MAX_BACKOFF: u32 = 64;

/// Full blocks between two level decisions.
pub const EVAL_BLOCKS: u32 = 4;

/// Full blocks at the start of a connection during which an idle queue is not taken for a
/// fast link, when the kernel does not report on the link (see [`Link`]): socket buffers, the
/// congestion window and the bottleneck's queue take the first few hundred kilobytes at once
/// whatever the link's speed.
pub const WARMUP_BLOCKS: u32 = 8;

/// Bytes the peer must have acknowledged before an idle link may get raw blocks: until the
/// bottleneck's burst allowance and queue have filled, a 10 Mbit/s link looks as idle as a
/// 10 Gbit/s one, and a raw block sent into it costs ten compressed ones.
pub const WARMUP_ACKED: u64 = 128 * 1024;

/// Share of its measured speed a method is trusted to keep up (the rest is headroom for a
/// compressor that shares its core).
const SPEED_HEADROOM: f64 = 0.8;

/// A link that takes bytes this many times faster than the fastest rung compresses gets
/// only raw full blocks. Mixing compressed blocks in could add at most
/// 1/2.5 of its rate, and only with a core to spare: where the compressor shares cores with
/// the transfer it takes that much and more from the transfer (0.62× of raw on 2 cores).
pub const FAST_LINK: f64 = 2.5;

/// A rung above must promise this much more delivered payload before the ladder moves.
const CLIMB_GAIN: f64 = 1.05;

/// Evaluations after a step down for memory ([`Policy::memory_short`]) during which the
/// ladder climbs no higher: 32 full blocks, so that a connection refused memory does not
/// climb back at every evaluation only to be refused again (each change of zstd level
/// starts a new frame, with an empty window).
pub const MEMORY_CEILING_EVALS: u32 = 8;

/// The policy of one direction.
#[derive(Clone, Debug)]
pub struct Policy {
    choice: Choice,
    ladder: Vec<Method>,
    rung: usize,
    failures: u32,
    skip_left: u32,
    warmup_left: u32,
    seen: u32,
    waited: Duration,
    worked: Duration,
    idle: u32,
    /// Input bytes per second of compressing time at the current rung, and its ratio.
    speed: Option<f64>,
    ratio: f64,
    /// The kernel's first and latest reading in this evaluation, and in how many of its
    /// blocks the kernel still had bytes to send (the link, not we, limited).
    first: Option<Link>,
    latest: Link,
    backlogged: u32,
    /// Bytes/s the peer acknowledged in evaluations that the link limited (averaged), and in
    /// the last one that we limited (the link is at least that fast).
    link_rate: f64,
    floor_rate: f64,
    /// A pace recalled from an earlier connection ([`Policy::recall_pace`]), and whether the
    /// link limited that connection at it.
    recalled: f64,
    recalled_limit: bool,
    kernel: bool,
    /// The highest rung the ladder may climb to, lowered for a while when memory was short.
    ceiling: usize,
    ceiling_evals: u32,
}

impl Policy {
    /// A policy; `zstd` says whether the peer decodes zstd (the ladder then uses it).
    pub fn new(choice: Choice, zstd: bool) -> Policy {
        let ladder = ladder(zstd);
        Policy {
            choice,
            rung: 1.min(ladder.len() - 1),
            ladder,
            failures: 0,
            skip_left: 0,
            warmup_left: WARMUP_BLOCKS,
            seen: 0,
            waited: Duration::ZERO,
            worked: Duration::ZERO,
            idle: 0,
            speed: None,
            ratio: 1.0,
            first: None,
            latest: Link::default(),
            backlogged: 0,
            link_rate: 0.0,
            floor_rate: 0.0,
            recalled: 0.0,
            recalled_limit: false,
            kernel: false,
            ceiling: usize::MAX,
            ceiling_evals: 0,
        }
    }

    /// The memory cap refused the current method's state ([`crate::memory`]): one rung down,
    /// where the ladder stays for [`MEMORY_CEILING_EVALS`] evaluations. Returns the method to
    /// try instead, or `None` where there is none lower (a fixed level, or the ladder's
    /// first rung): the block then goes raw.
    pub fn memory_short(&mut self) -> Option<Method> {
        if self.choice != Choice::Auto || self.rung == 0 {
            return None;
        }
        self.ceiling = self.rung - 1;
        self.ceiling_evals = MEMORY_CEILING_EVALS;
        self.change_rung(self.rung - 1);
        Some(self.ladder[self.rung])
    }

    /// Starts from a pace an earlier connection over the same path measured (see
    /// [`Policy::measured_pace`]): the link is taken to carry at least that rate until an
    /// evaluation shows it limiting below it. Without it every connection would compress
    /// its first blocks to learn what the last one knew, which on a link far faster than the
    /// compressor costs a short transfer a tenth or more of its rate.
    ///
    /// A pace at which the link limited the earlier connection also sets the ladder's first
    /// climbs: until this connection has measured the link itself (which takes
    /// [`WARMUP_ACKED`] acknowledged, most of a short transfer over a slow link), an
    /// evaluation in which the link limited picks its rung for the recalled rate.
    pub fn recall_pace(&mut self, pace: Pace) {
        let rate = pace.rate();
        if rate.is_finite() && rate > 0.0 {
            self.recalled = rate;
            self.recalled_limit = matches!(pace, Pace::Limited(_));
        }
    }

    /// What this connection's evaluations measured of the link (a recalled pace not
    /// included), if anything.
    pub fn measured_pace(&self) -> Option<Pace> {
        if self.link_rate > 0.0 {
            Some(Pace::Limited(self.link_rate))
        } else if self.floor_rate > 0.0 {
            Some(Pace::AtLeast(self.floor_rate))
        } else {
            None
        }
    }

    /// The method the next compressed block would use.
    pub fn method(&self) -> Method {
        match &self.choice {
            Choice::Fixed(m) => *m,
            Choice::Auto => self.ladder[self.rung],
        }
    }

    /// Decides what to do with `block`.
    pub fn decide(&mut self, block: &[u8], signals: Signals) -> Decision {
        if matches!(&self.choice, Choice::Fixed(m) if m.codec == Codec::Raw) {
            return Decision::Raw(RawReason::Fixed);
        }
        if block.len() < TINY_BLOCK {
            return Decision::Raw(RawReason::Tiny);
        }
        // The CPU cap holds for a fixed level too: `--max-cpu` says past it blocks go raw.
        if signals.cpu_throttled {
            return Decision::Raw(RawReason::CpuCap);
        }
        let method = match &self.choice {
            Choice::Fixed(m) => return Decision::Compress(*m),
            Choice::Auto => self.ladder[self.rung],
        };
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return Decision::Raw(RawReason::Backoff);
        }
        // A link far faster than the compressor takes the block raw whatever it holds: no
        // need to sample it.
        if signals.full && self.link_too_fast() {
            return Decision::Raw(RawReason::LinkIdle);
        }
        match sniff::inspect(block) {
            Verdict::Magic(_) => return Decision::Raw(RawReason::Magic),
            Verdict::HighEntropy(_) => return Decision::Raw(RawReason::Entropy),
            Verdict::Compressible => {}
        }
        if signals.full && self.link_would_idle(block.len(), &signals) {
            return Decision::Raw(RawReason::LinkIdle);
        }
        Decision::Compress(method)
    }

    /// Records how a compression went; returns whether it saved enough to be worth it.
    pub fn compressed(&mut self, raw_len: usize, wire_len: usize) -> bool {
        let worth = (wire_len as f64) <= (raw_len as f64) * (1.0 - MIN_SAVING);
        if worth {
            self.failures = 0;
        } else {
            self.failures = (self.failures + 1).min(MAX_BACKOFF.trailing_zeros());
            self.skip_left = 1 << self.failures;
        }
        worth
    }

    /// Records how a full block went. Every [`EVAL_BLOCKS`] such blocks it picks the rung:
    ///
    /// - with the kernel's delivery rate for a link that limited us, the rung that delivers
    ///   the most payload through a link of that rate (fast enough to keep it busy, and of
    ///   the best ratio among those), from the speed and ratio measured at the current rung;
    /// - when the link was often idle (the compressor limits), one rung down;
    /// - without the kernel's view, one rung up when frames waited longer for the link than
    ///   the next rung's extra work would take.
    pub fn full_block_sent(&mut self, sent: Sent) {
        if self.choice != Choice::Auto {
            return;
        }
        self.seen += 1;
        self.waited += sent.waited;
        self.worked += sent.worked;
        if let Some((raw, wire)) = sent.compressed {
            let secs = sent.worked.as_secs_f64();
            if secs > 0.0 && wire > 0 {
                let (speed, ratio) = (raw as f64 / secs, raw as f64 / wire as f64);
                let first = self.speed.is_none();
                (self.speed, self.ratio) = match self.speed {
                    Some(old) => (Some((old + speed) / 2.0), (self.ratio + ratio) / 2.0),
                    None => (Some(speed), ratio),
                };
                // The first block measured the compressor on this data. On a link an
                // earlier connection found limiting, go at once to the rung that pace calls
                // for: on a slow link the compressor runs hundreds of kilobytes ahead of the
                // acknowledgements, so a short transfer is mostly compressed before this
                // connection could measure the link.
                if first && self.recalled_limit && self.link_rate == 0.0 {
                    self.change_rung(self.best_rung(self.recalled));
                }
            }
        }
        if let Some(link) = sent.signals.link {
            self.kernel = true;
            self.first.get_or_insert(link);
            self.latest = link;
            self.backlogged += u32::from(link.notsent > 0);
        }
        if self.warmup_left > 0 && sent.signals.link.is_none() {
            self.warmup_left -= 1;
        } else {
            self.idle += u32::from(idle_now(&sent.signals));
        }
        if self.seen < EVAL_BLOCKS {
            return;
        }
        // The link limited this evaluation: the kernel had bytes waiting in most blocks, or
        // frames waited for room in the writer's queue longer than compressing them took.
        let limited = self.backlogged * 2 > self.seen || self.waited > self.worked;
        let bound = self.measure_link().or_else(|| {
            // Not measured yet, but the link limited this evaluation and an earlier
            // connection measured it limiting: climb for that rate. A path that got faster
            // since shows up as an idle link at the next evaluation, which steps down.
            (limited && self.recalled_limit && self.link_rate == 0.0).then_some(self.recalled)
        });
        tracing::trace!(
            method = %self.ladder[self.rung],
            link_bytes_per_s = self.link_rate as u64,
            at_least_bytes_per_s = self.floor_rate as u64,
            speed = self.speed.unwrap_or(0.0) as u64,
            ratio = self.ratio,
            idle = self.idle,
            backlogged = self.backlogged,
            recalled = self.recalled as u64,
            acked = self.latest.bytes_acked,
            notsent = self.latest.notsent,
            in_flight = self.latest.in_flight,
            "compression evaluated"
        );
        let next = if let (Some(rate), Some(_)) = (bound, self.speed) {
            self.best_rung(rate)
        } else if self.idle >= EVAL_BLOCKS / 4 {
            self.rung.saturating_sub(1)
        } else if !self.kernel || self.pace() == 0.0 {
            // Our queue alone: without the kernel, or before the link has shown any pace
            // (on a slow link the compressor runs far ahead of the acknowledgements, and a
            // short transfer may be over before WARMUP_ACKED). Climb as far as the waiting
            // pays for the extra work (at most two rungs): a rung's time per byte, relative
            // to this rung's, from typical speeds.
            let here = profile(self.ladder[self.rung]).speed;
            let top = (self.rung + 2).min(self.ladder.len() - 1);
            (self.rung + 1..=top)
                .take_while(|&rung| {
                    let slower = here / profile(self.ladder[rung]).speed;
                    self.waited.as_secs_f64() > self.worked.as_secs_f64() * (slower - 1.0).max(1.0)
                })
                .last()
                .unwrap_or(self.rung)
        } else {
            self.rung
        };
        if self.ceiling_evals > 0 {
            self.ceiling_evals -= 1;
        } else {
            self.ceiling = usize::MAX;
        }
        self.change_rung(next);
        self.first = None;
        self.backlogged = 0;
        self.seen = 0;
        self.waited = Duration::ZERO;
        self.worked = Duration::ZERO;
        self.idle = 0;
    }
}

#[cfg(test)]
mod tests;
