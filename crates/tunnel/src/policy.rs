//! The per-direction compression policy: raw or compressed, and at which level, block by
//! block. Pure: the relay feeds it what it saw, it never reads a clock or a socket.
//!
//! # How it decides
//!
//! - **Skip what won't compress.** [`crate::detect`] looks at magic numbers and a sampled
//!   entropy first. A compression that saves less than [`MIN_SAVING`] is a failure; after `n`
//!   failures in a row the next `2^n` blocks (at most [`MAX_BACKOFF`]) go raw untried, then it
//!   probes again, so it never gives up on a connection for good.
//! - **Mix, don't switch.** When a full block is ready, the writer has nothing queued (the
//!   link would idle while the compressor works) and the ladder is already at its fastest
//!   rung, the block goes raw. On a link faster
//!   than the compressor this interleaves raw and compressed blocks so that delivered bytes/s
//!   ≈ link + compressor × (1 − 1/ratio), above both "always raw" and "always compress".
//! - **Match the link.** Every [`EVAL_BLOCKS`] full blocks it moves along a ladder of
//!   methods (fastest first): up when the compressor spent more time waiting for the link
//!   (the writer's queue was full) than the next rung's extra work would take (ratio is
//!   worth more than speed there),
//!   down when blocks often went raw because the link was idle (the compressor is the
//!   bottleneck). The queue is the measurement: it is full exactly when the link, not the
//!   compressor, limits (the socket's unsent bytes are capped with `TCP_NOTSENT_LOWAT`, so
//!   the queue sees the link's back-pressure).
//! - Small blocks (the source paused before a block filled, as interactive traffic does)
//!   are compressed at the current level: the link is not the bottleneck then, and fewer bytes
//!   still mean less latency on a slow link.

use std::time::Duration;

use crate::detect::{self, Verdict};
use crate::frame::{Codec, Method};

/// The least saving that makes a compressed block count as a success: 3%.
pub const MIN_SAVING: f64 = 0.03;

/// Most blocks sent raw untried after repeated failures.
pub const MAX_BACKOFF: u32 = 64;

/// Full blocks between two level decisions.
pub const EVAL_BLOCKS: u32 = 8;

/// Full blocks at the start of a connection during which an idle link is not taken for a
/// fast one: socket buffers, the congestion window and the bottleneck's queue take the first
/// few hundred kilobytes at once whatever the link's speed.
pub const WARMUP_BLOCKS: u32 = 8;

/// What the user asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Choice {
    /// Let the policy decide.
    Auto,
    /// Always this method, with no checks (raw means never compress).
    Fixed(Method),
}

/// Why a block went raw.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum RawReason {
    /// Compression is off.
    Fixed,
    /// The block starts with a compressed or encrypted format's magic number.
    Magic,
    /// The block's sampled entropy is that of compressed or encrypted data.
    Entropy,
    /// A compression was tried and saved too little.
    NoGain,
    /// Recent compressions failed; this one was not tried.
    Backoff,
    /// The link was idle and no compressed block was ready.
    LinkIdle,
    /// The `--max-cpu` budget is spent.
    CpuCap,
}

impl RawReason {
    /// Every reason, in report order.
    pub const ALL: [RawReason; 7] = [
        RawReason::Fixed,
        RawReason::Magic,
        RawReason::Entropy,
        RawReason::NoGain,
        RawReason::Backoff,
        RawReason::LinkIdle,
        RawReason::CpuCap,
    ];

    /// A short name for reports.
    pub fn as_str(self) -> &'static str {
        match self {
            RawReason::Fixed => "off",
            RawReason::Magic => "magic",
            RawReason::Entropy => "entropy",
            RawReason::NoGain => "no-gain",
            RawReason::Backoff => "backoff",
            RawReason::LinkIdle => "link-idle",
            RawReason::CpuCap => "cpu-cap",
        }
    }
}

/// What to do with one block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Decision {
    /// Send it as it is.
    Raw(RawReason),
    /// Compress it with this method.
    Compress(Method),
}

/// What the relay knows when a block is ready.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    /// The block is full: the source has more, this is a bulk transfer.
    pub full: bool,
    /// The writer has nothing queued: the link would wait for this block.
    pub link_idle: bool,
    /// The CPU budget is spent.
    pub cpu_throttled: bool,
}

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
        let method = match &self.choice {
            Choice::Fixed(m) if m.codec == Codec::Raw => return Decision::Raw(RawReason::Fixed),
            Choice::Fixed(m) => return Decision::Compress(*m),
            Choice::Auto => self.ladder[self.rung],
        };
        if signals.cpu_throttled {
            return Decision::Raw(RawReason::CpuCap);
        }
        if self.skip_left > 0 {
            self.skip_left -= 1;
            return Decision::Raw(RawReason::Backoff);
        }
        match detect::inspect(block) {
            Verdict::Magic(_) => return Decision::Raw(RawReason::Magic),
            Verdict::HighEntropy(_) => return Decision::Raw(RawReason::Entropy),
            Verdict::Compressible => {}
        }
        // Mix raw blocks in only once even the fastest rung cannot keep the link busy; above
        // it, an idle link first moves the ladder down.
        if signals.full && signals.link_idle && self.rung == 0 && self.warmup_left == 0 {
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

    /// Records how a full block went: how long its frame waited for room in the writer's
    /// queue (`waited`), how long compressing it took (`worked`) and whether the link was
    /// idle when it was ready. Moves along the ladder every [`EVAL_BLOCKS`] such blocks.
    pub fn full_block_sent(&mut self, waited: Duration, worked: Duration, link_idle: bool) {
        if self.choice != Choice::Auto {
            return;
        }
        self.seen += 1;
        self.waited += waited;
        self.worked += worked;
        if self.warmup_left > 0 {
            self.warmup_left -= 1;
        } else {
            self.idle += u32::from(link_idle);
        }
        if self.seen < EVAL_BLOCKS {
            return;
        }
        if self.idle >= EVAL_BLOCKS / 4 {
            self.rung = self.rung.saturating_sub(1);
        } else if self.rung + 1 < self.ladder.len() {
            // Climb only if the waiting would pay for the next rung's extra work: its time
            // per byte, relative to this rung's, from typical speeds.
            let slower = cost(self.ladder[self.rung + 1]) / cost(self.ladder[self.rung]);
            if self.waited.as_secs_f64() > self.worked.as_secs_f64() * (slower - 1.0).max(1.0) {
                self.rung += 1;
            }
        }
        self.seen = 0;
        self.waited = Duration::ZERO;
        self.worked = Duration::ZERO;
        self.idle = 0;
    }
}

/// Typical compression time per byte of a method, relative to zstd level 1 (measured on
/// text and mixed binaries; only the ratios between neighbouring rungs matter).
fn cost(method: Method) -> f64 {
    match (method.codec, method.level) {
        (Codec::Raw, _) => 0.1,
        (Codec::Zstd, l) if l <= 1 => 1.0,
        (Codec::Zstd, l) if l <= 3 => 1.6,
        (Codec::Zstd, l) if l <= 6 => 3.5,
        (Codec::Zstd, l) if l <= 9 => 5.0,
        (Codec::Zstd, l) if l <= 12 => 12.0,
        (Codec::Zstd, l) if l <= 15 => 25.0,
        (Codec::Zstd, _) => 100.0,
        (Codec::Deflate, l) => f64::from(l),
        (Codec::DeflateWindow, l) => 2.0 + f64::from(l),
    }
}

/// The compressing methods the automatic policy climbs, fastest first.
pub fn ladder(zstd: bool) -> Vec<Method> {
    let rungs: &[(Codec, u8)] = if zstd {
        &[
            (Codec::Zstd, 1),
            (Codec::Zstd, 3),
            (Codec::Zstd, 6),
            (Codec::Zstd, 9),
            (Codec::Zstd, 12),
            (Codec::Zstd, 15),
            (Codec::Zstd, 19),
        ]
    } else {
        &[
            (Codec::Deflate, 1),
            (Codec::Deflate, 3),
            (Codec::DeflateWindow, 6),
            (Codec::DeflateWindow, 9),
        ]
    };
    rungs
        .iter()
        .filter_map(|&(codec, level)| Method::new(codec, level))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &[u8] = b"<li><a href=\"/docs/index.html\">Documentation</a></li>\n";

    fn full(link_idle: bool) -> Signals {
        Signals {
            full: true,
            link_idle,
            cpu_throttled: false,
        }
    }

    #[test]
    fn a_busy_link_climbs_the_ladder_and_an_idle_one_steps_down() {
        let block = TEXT.repeat(1000);
        let mut policy = Policy::new(Choice::Auto, true);
        let start = policy.method();
        for _ in 0..WARMUP_BLOCKS {
            // Idle at the start does not count.
            assert!(matches!(
                policy.decide(&block, full(true)),
                Decision::Compress(_)
            ));
            policy.full_block_sent(Duration::ZERO, Duration::ZERO, true);
        }
        assert_eq!(policy.method(), start);
        for _ in 0..EVAL_BLOCKS * 3 {
            assert!(matches!(
                policy.decide(&block, full(false)),
                Decision::Compress(_)
            ));
            policy.full_block_sent(Duration::from_millis(30), Duration::from_millis(1), false);
        }
        let climbed = policy.method();
        assert!(climbed > start, "{climbed} after {start}");
        let mut mixed = 0;
        for _ in 0..EVAL_BLOCKS * 8 + WARMUP_BLOCKS {
            let decision = policy.decide(&block, full(true));
            mixed += usize::from(decision == Decision::Raw(RawReason::LinkIdle));
            policy.full_block_sent(Duration::ZERO, Duration::ZERO, true);
        }
        // Down to the fastest rung, and raw blocks mixed in there.
        assert_eq!(policy.method(), ladder(true)[0]);
        assert!(mixed > 0);
    }

    #[test]
    fn failures_back_off_exponentially_but_probing_goes_on() {
        let block = TEXT.repeat(100);
        let mut policy = Policy::new(Choice::Auto, false);
        let mut tried = 0;
        for _ in 0..1000 {
            match policy.decide(&block, Signals::default()) {
                Decision::Compress(_) => {
                    tried += 1;
                    assert!(!policy.compressed(1000, 999));
                }
                Decision::Raw(reason) => assert_eq!(reason, RawReason::Backoff),
            }
        }
        // 2, 4, ... 64 blocks skipped after each failure: about 1000 / 65 tries, never zero.
        assert!((15..=25).contains(&tried), "{tried} tries");
        assert!(policy.compressed(1000, 500));
        assert!(matches!(
            policy.decide(&block, Signals::default()),
            Decision::Raw(_)
        ));
    }

    #[test]
    fn fixed_choices_ignore_the_signals_and_auto_skips_noise() {
        let m = Method::new(Codec::Deflate, 1).unwrap();
        let mut fixed = Policy::new(Choice::Fixed(m), true);
        assert_eq!(
            fixed.decide(&[0x1f, 0x8b, 8], full(true)),
            Decision::Compress(m)
        );
        let mut off = Policy::new(Choice::Fixed(Method::RAW), true);
        assert_eq!(
            off.decide(TEXT, full(false)),
            Decision::Raw(RawReason::Fixed)
        );
        let mut auto = Policy::new(Choice::Auto, true);
        assert_eq!(
            auto.decide(&[0x16, 3, 1, 0, 200], full(false)),
            Decision::Raw(RawReason::Magic)
        );
        let throttled = Signals {
            cpu_throttled: true,
            ..full(false)
        };
        assert_eq!(
            auto.decide(TEXT, throttled),
            Decision::Raw(RawReason::CpuCap)
        );
    }
}
