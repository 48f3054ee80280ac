//! What the policy is told (the user's choice, the signals of a block, the kernel's view of
//! the link, how a block went) and what it answers.

use std::time::Duration;

use crate::frame::Method;

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
    /// The block is too small for compression to pay ([`super::TINY_BLOCK`]).
    Tiny,
    /// The `--max-memory` cap has no room for the method's state, nor for the stateless
    /// deflate encoder's ([`crate::memory`]).
    MemoryCap,
}

impl RawReason {
    /// Every reason, in report order.
    pub const ALL: [RawReason; 9] = [
        RawReason::Fixed,
        RawReason::Magic,
        RawReason::Entropy,
        RawReason::NoGain,
        RawReason::Backoff,
        RawReason::LinkIdle,
        RawReason::CpuCap,
        RawReason::Tiny,
        RawReason::MemoryCap,
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
            RawReason::Tiny => "tiny",
            RawReason::MemoryCap => "mem-cap",
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

/// How one full block went, for [`Policy::full_block_sent`](super::Policy::full_block_sent).
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
