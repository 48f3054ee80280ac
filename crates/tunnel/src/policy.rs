//! The per-direction compression policy: raw or compressed, and at which level, block by
//! block. Pure: the relay feeds it what it saw and when; it never reads a clock or a socket.
//!
//! # How it decides
//!
//! - **Skip what won't compress.** [`crate::detect`] looks at magic numbers and a sampled
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
/// the transfer it took that much and more from the transfer (0.62× of raw on 2 cores).
pub const FAST_LINK: f64 = 2.5;

/// A rung above must promise this much more delivered payload before the ladder moves.
const CLIMB_GAIN: f64 = 1.05;

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

/// What a connection measured of the link's pace, in bytes/s.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Pace {
    /// The link limited the transfer at this rate.
    Limited(f64),
    /// The link carried at least this much (the sender set the pace).
    AtLeast(f64),
}

impl Pace {
    /// The rate, in bytes/s.
    pub fn rate(self) -> f64 {
        match self {
            Pace::Limited(rate) | Pace::AtLeast(rate) => rate,
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

/// What the kernel says about the tunnel's TCP connection (see [`crate::tcp_info`]), and
/// when.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Link {
    /// Bytes written to the socket and not sent yet.
    pub notsent: u32,
    /// Bytes the peer has acknowledged so far.
    pub bytes_acked: u64,
    /// Bytes sent and not acknowledged yet: in the bottleneck's queue or on the wire.
    pub in_flight: u64,
    /// The connection's smallest round-trip time (zero if unknown).
    pub min_rtt: Duration,
    /// When this was read, from any fixed start.
    pub at: Duration,
}

/// What the relay knows when a block is ready.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Signals {
    /// The block is full: the source has more, this is a bulk transfer.
    pub full: bool,
    /// The writer has nothing queued: the link would wait for this block.
    pub link_idle: bool,
    /// The CPU budget is spent.
    pub cpu_throttled: bool,
    /// The kernel's view of the link, where it gives one.
    pub link: Option<Link>,
}

/// How one full block went, for [`Policy::full_block_sent`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Sent {
    /// The signals it was decided on.
    pub signals: Signals,
    /// How long its frame waited for room in the writer's queue.
    pub waited: Duration,
    /// How long compressing it took (zero if it went raw).
    pub worked: Duration,
    /// Its raw and compressed sizes, if it was compressed at the current method.
    pub compressed: Option<(usize, usize)>,
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
        }
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
        // A link far faster than the compressor takes the block raw whatever it holds: no
        // need to sample it.
        if signals.full && self.link_too_fast() {
            return Decision::Raw(RawReason::LinkIdle);
        }
        match detect::inspect(block) {
            Verdict::Magic(_) => return Decision::Raw(RawReason::Magic),
            Verdict::HighEntropy(_) => return Decision::Raw(RawReason::Entropy),
            Verdict::Compressible => {}
        }
        if signals.full && self.link_would_idle(block.len(), &signals) {
            return Decision::Raw(RawReason::LinkIdle);
        }
        Decision::Compress(method)
    }

    /// Whether sending a full block of `len` bytes raw now keeps an otherwise idle link busy,
    /// rather than pushing ratio-less bytes into a link that is the bottleneck.
    fn link_would_idle(&self, len: usize, signals: &Signals) -> bool {
        if !idle_now(signals) {
            return false;
        }
        let Some(link) = signals.link else {
            // Our queue alone: mix only once even the fastest rung cannot keep up (above it,
            // an idle link first moves the ladder down).
            return self.rung == 0 && self.warmup_left == 0;
        };
        // The current method has been measured, and cannot keep the link busy at the pace
        // the link has shown: the rate at which it limited us, or at least carried what we
        // sent. Before any pace is known an empty queue says nothing: at the start the qdisc
        // and the congestion window take bytes far faster than the link drains them, and a
        // raw block sent then costs a slow link dearly.
        let pace = self.pace();
        let Some(speed) = self.speed else {
            return false;
        };
        if pace <= 0.0 || self.keeps_up(self.rung, pace) {
            return false;
        }
        // And the link really runs dry before this block could be compressed. The kernel has
        // nothing unsent ([`idle_now`]), but what it sent may still queue at the bottleneck:
        // the bytes in flight beyond one minimum round trip's worth merely travelling. That
        // queue must drain sooner. An empty socket says little on its own: a bottleneck
        // queue behind it can hold milliseconds of data, and a raw block sent into it
        // displaces `ratio` compressed ones.
        let travelling = pace * link.min_rtt.as_secs_f64();
        let queued = (link.in_flight as f64 - travelling).max(0.0);
        queued / pace < len as f64 / speed
    }

    /// Whether the link took bytes [`FAST_LINK`] times faster than the fastest rung
    /// compresses.
    fn link_too_fast(&self) -> bool {
        let rate = self.pace();
        self.predict(0)
            .is_some_and(|(speed, _)| rate >= FAST_LINK * speed)
    }

    /// The pace the link has shown, in bytes/s: the rate at which it limited us, or the rate
    /// at which it at least carried what we sent (or an earlier connection's, recalled); 0
    /// until an evaluation has measured one.
    fn pace(&self) -> f64 {
        self.link_rate.max(self.floor_rate).max(self.recalled)
    }

    /// Whether `rung` makes compressed bytes at least as fast as a link of `link_rate`
    /// bytes/s takes them (false when either is unknown).
    fn keeps_up(&self, rung: usize, link_rate: f64) -> bool {
        match self.predict(rung) {
            Some((speed, ratio)) if link_rate > 0.0 => speed * SPEED_HEADROOM / ratio >= link_rate,
            _ => false,
        }
    }

    /// Predicted compressing speed (input bytes/s) and ratio of `rung`, from what the
    /// current rung measured and the typical differences between methods.
    fn predict(&self, rung: usize) -> Option<(f64, f64)> {
        self.predict_from(self.rung, rung)
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
        self.change_rung(next);
        self.first = None;
        self.backlogged = 0;
        self.seen = 0;
        self.waited = Duration::ZERO;
        self.worked = Duration::ZERO;
        self.idle = 0;
    }

    /// Moves to `rung`; the current rung's measurements predict the new one's until it
    /// measures itself.
    fn change_rung(&mut self, rung: usize) {
        if rung == self.rung {
            return;
        }
        tracing::debug!(
            from = %self.ladder[self.rung],
            to = %self.ladder[rung],
            link_bytes_per_s = self.link_rate as u64,
            recalled_bytes_per_s = self.recalled as u64,
            "compression level changed"
        );
        if let Some((speed, ratio)) = self.predict_from(self.rung, rung) {
            self.speed = Some(speed);
            self.ratio = ratio;
        }
        self.rung = rung;
    }

    /// The rate at which the peer acknowledged bytes during this evaluation (once the link
    /// has shown its pace, [`WARMUP_ACKED`]). If the link limited it (the kernel had bytes
    /// waiting in most of its blocks), it is averaged with the earlier such rates into the
    /// link's rate and returned; otherwise it is kept as what the link at least carries.
    fn measure_link(&mut self) -> Option<f64> {
        let first = self.first?;
        let secs = (self.latest.at.saturating_sub(first.at)).as_secs_f64();
        let acked = self.latest.bytes_acked.saturating_sub(first.bytes_acked);
        if secs <= 0.0 || acked == 0 || first.bytes_acked < WARMUP_ACKED {
            return None;
        }
        let rate = acked as f64 / secs;
        if self.backlogged * 2 <= self.seen {
            self.floor_rate = rate;
            return None;
        }
        // The link limited us below a pace remembered from an earlier connection: the path
        // is not what it was.
        if rate < self.recalled {
            self.recalled = 0.0;
            self.recalled_limit = false;
        }
        // Acknowledgements come in bursts: smooth over evaluations.
        self.link_rate = if self.link_rate > 0.0 {
            (self.link_rate + rate) / 2.0
        } else {
            rate
        };
        Some(self.link_rate)
    }

    /// [`Policy::predict`] for `to`, made while `from` was the current rung.
    fn predict_from(&self, from: usize, to: usize) -> Option<(f64, f64)> {
        let speed = self.speed?;
        let (here, there) = (profile(self.ladder[from]), profile(self.ladder[to]));
        Some((
            speed * there.speed / here.speed,
            (self.ratio * there.ratio / here.ratio).max(1.0),
        ))
    }

    /// The rung that delivers the most payload over a link of `link_rate` bytes/s: each
    /// delivers the lesser of what it compresses and what the link carries at its ratio. It
    /// climbs at most two rungs at a time (speeds of far rungs are the least sure), and moves
    /// only for a gain of [`CLIMB_GAIN`].
    fn best_rung(&self, link_rate: f64) -> usize {
        let delivered = |rung: usize| {
            self.predict(rung).map_or(0.0, |(speed, ratio)| {
                (speed * SPEED_HEADROOM).min(ratio * link_rate)
            })
        };
        let here = delivered(self.rung);
        let top = (self.rung + 2).min(self.ladder.len() - 1);
        let (best, most) = (0..=top).map(|rung| (rung, delivered(rung))).fold(
            (self.rung, here),
            |(b, m), (r, d)| if d > m { (r, d) } else { (b, m) },
        );
        if most > here * CLIMB_GAIN {
            best
        } else {
            self.rung
        }
    }
}

/// Whether the link has nothing to send: our queue is empty, and so is the kernel's once
/// the link has shown its pace ([`WARMUP_ACKED`]), where the kernel says.
fn idle_now(signals: &Signals) -> bool {
    signals.link_idle
        && signals
            .link
            .is_none_or(|link| link.notsent == 0 && link.bytes_acked >= WARMUP_ACKED)
}

/// Typical speed and ratio of a method relative to the fastest rung of its ladder (measured
/// with zstd's and our benchmarks on text and on a tar of mixed files; only the ratios
/// between rungs matter, since the current rung's own measurements scale them).
#[derive(Clone, Copy, Debug)]
struct Profile {
    speed: f64,
    ratio: f64,
}

fn profile(method: Method) -> Profile {
    let (speed, ratio) = match (method.codec, method.level) {
        (Codec::Raw, _) => (10.0, 1.0),
        (Codec::Zstd, l) if l <= 1 => (1.0, 1.0),
        (Codec::Zstd, l) if l <= 3 => (0.65, 1.11),
        (Codec::Zstd, l) if l <= 6 => (0.19, 1.28),
        (Codec::Zstd, l) if l <= 9 => (0.15, 1.35),
        (Codec::Zstd, l) if l <= 12 => (0.068, 1.40),
        (Codec::Zstd, l) if l <= 15 => (0.014, 1.45),
        (Codec::Zstd, _) => (0.006, 1.55),
        (Codec::Deflate, l) if l <= 1 => (1.0, 1.0),
        (Codec::Deflate, l) if l <= 2 => (0.88, 1.04),
        (Codec::Deflate, _) => (0.18, 1.23),
        (Codec::DeflateWindow, l) if l <= 6 => (0.14, 1.2),
        (Codec::DeflateWindow, _) => (0.05, 1.22),
    };
    Profile { speed, ratio }
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
            link: None,
        }
    }

    /// Feeds `blocks` full blocks through `policy` with `signals`, each compressed in
    /// `worked` to `ratio` when compressed; returns how many went raw for an idle link.
    fn run(
        policy: &mut Policy,
        blocks: u32,
        signals: Signals,
        (waited, worked): (Duration, Duration),
        ratio: f64,
    ) -> usize {
        let block = TEXT.repeat(2400);
        let mut mixed = 0;
        for _ in 0..blocks {
            let decision = policy.decide(&block, signals);
            mixed += usize::from(decision == Decision::Raw(RawReason::LinkIdle));
            let compressed = matches!(decision, Decision::Compress(_))
                .then_some((block.len(), (block.len() as f64 / ratio) as usize));
            policy.full_block_sent(Sent {
                signals,
                waited,
                worked: if compressed.is_some() {
                    worked
                } else {
                    Duration::ZERO
                },
                compressed,
            });
        }
        mixed
    }

    fn us(waited: u64, worked: u64) -> (Duration, Duration) {
        (Duration::from_micros(waited), Duration::from_micros(worked))
    }

    #[test]
    fn without_the_kernel_a_busy_queue_climbs_and_an_idle_one_steps_down() {
        let mut policy = Policy::new(Choice::Auto, true);
        let start = policy.method();
        // Idle at the start does not count.
        let idle = full(true);
        assert_eq!(run(&mut policy, WARMUP_BLOCKS, idle, us(0, 1000), 4.0), 0);
        assert_eq!(policy.method(), start);
        let busy = full(false);
        assert_eq!(
            run(&mut policy, EVAL_BLOCKS * 3, busy, us(30_000, 1000), 4.0),
            0
        );
        let climbed = policy.method();
        assert!(climbed > start, "{climbed} after {start}");
        let mixed = run(&mut policy, EVAL_BLOCKS * 8, idle, us(0, 1000), 4.0);
        // Down to the fastest rung, and raw blocks mixed in there.
        assert_eq!(policy.method(), ladder(true)[0]);
        assert!(mixed > 0);
    }

    /// A link the tests drive: `rate` bytes/s, with `notsent` bytes left in the kernel after
    /// each block (0: the link idles between blocks).
    struct Sim {
        rate: f64,
        notsent: u32,
        /// Bytes sent and unacknowledged after each block, and the path's round trip.
        in_flight: u64,
        min_rtt: Duration,
        at: Duration,
        acked: u64,
    }

    impl Sim {
        fn new(rate: f64, notsent: u32) -> Sim {
            Sim {
                rate,
                notsent,
                in_flight: 0,
                min_rtt: Duration::ZERO,
                at: Duration::ZERO,
                acked: 0,
            }
        }

        fn signals(&self) -> Signals {
            Signals {
                link: Some(Link {
                    notsent: self.notsent,
                    bytes_acked: self.acked,
                    in_flight: self.in_flight,
                    min_rtt: self.min_rtt,
                    at: self.at,
                }),
                ..full(true)
            }
        }

        /// Runs `blocks` full blocks: each is compressed in `worked` to `ratio`, or sent raw,
        /// and the link carries it at its rate. Returns how many went raw for an idle link.
        fn run(&mut self, policy: &mut Policy, blocks: u32, worked: u64, ratio: f64) -> usize {
            let block = TEXT.repeat(2400);
            let mut mixed = 0;
            for _ in 0..blocks {
                let signals = self.signals();
                let decision = policy.decide(&block, signals);
                mixed += usize::from(decision == Decision::Raw(RawReason::LinkIdle));
                let wire = match decision {
                    Decision::Compress(_) => (block.len() as f64 / ratio) as usize,
                    Decision::Raw(_) => block.len(),
                };
                let compressed = matches!(decision, Decision::Compress(_));
                let worked = Duration::from_micros(if compressed { worked } else { 0 });
                self.at += worked.max(Duration::from_secs_f64(wire as f64 / self.rate));
                self.acked += wire as u64;
                policy.full_block_sent(Sent {
                    signals,
                    waited: Duration::ZERO,
                    worked,
                    compressed: compressed.then_some((block.len(), wire)),
                });
            }
            mixed
        }
    }

    #[test]
    fn a_slow_link_gets_the_best_ratio_that_keeps_it_busy_and_no_raw_block() {
        // 10 Mbit/s, link-bound; 130 KB of text compressed in 0.5 ms at ratio 11. Even with
        // our queue empty, no raw block: the compressor keeps up.
        let mut policy = Policy::new(Choice::Auto, true);
        let mut link = Sim::new(1.25e6, 16 * 1024);
        assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 8, 500, 11.0), 0);
        let level = policy.method();
        assert_eq!(level.codec, Codec::Zstd);
        assert!(level.level >= 9, "{level}");
        // A compressor twenty times slower climbs no higher than it can keep the link busy.
        let mut policy = Policy::new(Choice::Auto, true);
        let mut link = Sim::new(1.25e6, 16 * 1024);
        assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 8, 10_000, 11.0), 0);
        assert!(policy.method() < level, "{}", policy.method());
    }

    #[test]
    fn an_idle_fast_link_gets_raw_blocks_but_only_once_it_has_shown_its_pace() {
        let mut policy = Policy::new(Choice::Auto, true);
        // 300 MB/s, nothing left unsent after each block; the compressor makes 260 MB/s of
        // input into 65 MB/s of output.
        let mut link = Sim::new(3e8, 0);
        // Until WARMUP_ACKED bytes are acknowledged, no raw block however idle the link.
        while link.acked < WARMUP_ACKED {
            assert_eq!(link.run(&mut policy, 1, 500, 4.0), 0);
        }
        // Then raw blocks go in and the ladder steps down to its fastest rung.
        assert!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0) > 0);
        assert_eq!(policy.method(), ladder(true)[0]);
        // Bytes still unsent in the kernel: the link is busy, compress.
        link.notsent = 64 * 1024;
        assert_eq!(link.run(&mut policy, EVAL_BLOCKS, 500, 4.0), 0);
    }

    #[test]
    fn a_queue_at_the_bottleneck_gets_no_raw_block_however_empty_the_socket() {
        // 300 MB/s; the compressor turns a 130 KB block into 32 KB in 0.5 ms. Nothing is
        // unsent in the kernel, but 1 MB sent waits in the bottleneck's queue (3.3 ms of the
        // link): a raw block would displace four compressed ones, and the link does not run
        // dry while the next block is compressed.
        let mut policy = Policy::new(Choice::Auto, true);
        let mut link = Sim::new(3e8, 0);
        link.in_flight = 1 << 20;
        assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0), 0);
        // The same bytes in flight on a 20 ms path are merely travelling (at the 65 MB/s the
        // link has shown, 1.3 MB fit in one round trip): the bottleneck is empty, and raw
        // blocks go in.
        link.min_rtt = Duration::from_millis(20);
        assert!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0) > 0);
        // Less queued than the link drains while a block is compressed: raw blocks too.
        link.min_rtt = Duration::ZERO;
        link.in_flight = 16 * 1024;
        assert!(link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0) > 0);
    }

    #[test]
    fn an_empty_queue_gets_no_raw_block_before_the_link_has_shown_its_pace() {
        // A 100 Mbit/s link behind a qdisc that takes the first bytes at once: nothing is
        // unsent in the kernel and the writer's queue is empty, yet the link is the
        // bottleneck. Until an evaluation has measured how fast the link carries bytes, an
        // empty queue is no reason to send a raw block (docs/design/tunnel.md).
        let mut policy = Policy::new(Choice::Auto, true);
        let block = TEXT.repeat(2400);
        let signals = Signals {
            link: Some(Link {
                bytes_acked: WARMUP_ACKED,
                at: Duration::from_millis(5),
                ..Link::default()
            }),
            ..full(true)
        };
        policy.full_block_sent(Sent {
            signals,
            waited: Duration::ZERO,
            worked: Duration::from_micros(900),
            compressed: Some((block.len(), block.len() / 4)),
        });
        assert_eq!(
            policy.decide(&block, signals),
            Decision::Compress(policy.method())
        );
    }

    #[test]
    fn a_recalled_fast_pace_sends_raw_at_once_and_a_slow_link_overrules_it() {
        // An earlier connection saw 2 GB/s: once one block has measured the compressor, full
        // blocks go raw, with nothing acknowledged yet.
        let mut policy = Policy::new(Choice::Auto, true);
        policy.recall_pace(Pace::AtLeast(2e9));
        let mut link = Sim::new(2e9, 0);
        let blocks = EVAL_BLOCKS * 2;
        assert_eq!(link.run(&mut policy, blocks, 500, 4.0), blocks as usize - 1);
        // Without the memory, the same link gets compressed blocks first.
        let mut fresh = Policy::new(Choice::Auto, true);
        let mut link = Sim::new(2e9, 0);
        assert_eq!(link.run(&mut fresh, blocks, 500, 4.0), 0);
        // The same memory on a path now at 10 Mbit/s: the raw blocks back up in the kernel,
        // an evaluation measures the link limiting far below, and compression comes back.
        let mut policy = Policy::new(Choice::Auto, true);
        policy.recall_pace(Pace::AtLeast(2e9));
        let mut link = Sim::new(1.25e6, 64 * 1024);
        link.run(&mut policy, EVAL_BLOCKS * 3, 500, 4.0);
        assert!(
            matches!(policy.measured_pace(), Some(Pace::Limited(rate)) if rate < 2e6),
            "{:?}",
            policy.measured_pace()
        );
        assert_eq!(link.run(&mut policy, EVAL_BLOCKS * 2, 500, 4.0), 0);
    }

    #[test]
    fn a_recalled_slow_limit_climbs_before_the_link_is_measured_again() {
        // 10 Mbit/s, text at ratio 11: blocks put 12 KB each on the wire, far from the
        // 128 KB this connection needs acknowledged to measure the link itself.
        let run = |recalled: Option<Pace>, blocks: u32| {
            let mut policy = Policy::new(Choice::Auto, true);
            if let Some(pace) = recalled {
                policy.recall_pace(pace);
            }
            let start = policy.method();
            let mut link = Sim::new(1.25e6, 16 * 1024);
            assert_eq!(link.run(&mut policy, blocks, 500, 11.0), 0);
            (start, policy.method())
        };
        let (start, fresh) = run(None, EVAL_BLOCKS);
        assert_eq!(fresh, start, "nothing known: no climb yet");
        // An earlier connection saw the link limit it at 10 Mbit/s: the first block measures
        // the compressor, and the ladder climbs at once.
        let (_, first) = run(Some(Pace::Limited(1.25e6)), 1);
        assert!(first.level > start.level, "{start} -> {first}");
        // ... and on at the first evaluation in which the link limits.
        let (_, later) = run(Some(Pace::Limited(1.25e6)), EVAL_BLOCKS);
        assert!(later.level > first.level, "{first} -> {later}");
        // A rate the link merely carried says nothing about a limit: no climb.
        let (_, carried) = run(Some(Pace::AtLeast(1.25e6)), EVAL_BLOCKS);
        assert_eq!(carried, start);
    }

    #[test]
    fn before_the_link_has_shown_a_pace_frames_waiting_for_it_climb_the_ladder() {
        // The kernel reports, but nothing is acknowledged yet: the writer's queue decides.
        // Frames wait 8 ms each for a block compressed in 0.5 ms.
        let mut policy = Policy::new(Choice::Auto, true);
        let start = policy.method();
        let signals = Signals {
            link: Some(Link::default()),
            ..full(false)
        };
        let wait = (Duration::from_millis(8), Duration::from_micros(500));
        run(&mut policy, EVAL_BLOCKS, signals, wait, 11.0);
        // The waiting pays for two rungs' extra work (zstd-3 to zstd-9: 4.3× the time).
        assert_eq!((start, policy.method()), (ladder(true)[1], ladder(true)[3]));
        // Waiting that pays for one rung only climbs one.
        let mut policy = Policy::new(Choice::Auto, true);
        let wait = (Duration::from_micros(1400), Duration::from_micros(500));
        run(&mut policy, EVAL_BLOCKS, signals, wait, 11.0);
        assert_eq!(policy.method(), ladder(true)[2]);
        // Frames that do not wait leave the ladder where it is.
        let mut policy = Policy::new(Choice::Auto, true);
        run(
            &mut policy,
            EVAL_BLOCKS * 4,
            signals,
            (Duration::ZERO, wait.1),
            11.0,
        );
        assert_eq!(policy.method(), start);
    }

    #[test]
    fn a_link_far_faster_than_the_compressor_gets_only_raw_blocks() {
        // 2 GB/s; the fastest rung compresses about 400 MB/s (260 MB/s measured at zstd-3).
        let mut policy = Policy::new(Choice::Auto, true);
        let mut link = Sim::new(2e9, 0);
        link.run(&mut policy, EVAL_BLOCKS * 4, 500, 4.0);
        // Even with bytes waiting in the kernel (the link never idles), full blocks go raw.
        link.notsent = 64 * 1024;
        let blocks = EVAL_BLOCKS * 4;
        assert_eq!(link.run(&mut policy, blocks, 500, 4.0), blocks as usize);
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
