//! Caps against decompression bombs: total output and output per input byte.

/// Caps on what one stream may decode to. The default sets none.
///
/// Both are checked as output is produced, so a decompression bomb is stopped after at most the
/// limit (plus one byte) of output, not after it has been inflated in full.
#[derive(Clone, Copy, Debug, Default)]
pub struct Limits {
    /// Most bytes of output in all, over all gzip members.
    pub max_output: Option<u64>,
    /// Most bytes of output per byte of input consumed (headers and trailers included). Output
    /// up to [`Limits::RATIO_ALLOWANCE`] is always allowed, so that a short stream of highly
    /// repetitive data is not refused; past it, output may not exceed `max_ratio` times the
    /// input consumed so far. Deflate cannot exceed about 1032:1, so values above that only
    /// matter for the allowance.
    pub max_ratio: Option<u64>,
}

impl Limits {
    /// Output a stream may always produce, whatever [`Limits::max_ratio`] says.
    pub const RATIO_ALLOWANCE: u64 = 64 * 1024;

    /// The output allowed once `consumed` input bytes have been read, and the limit to report
    /// when it is passed; `None` for no limit.
    pub(super) fn bound(&self, consumed: u64) -> Option<u64> {
        let by_ratio = self
            .max_ratio
            .map(|ratio| ratio.saturating_mul(consumed).max(Self::RATIO_ALLOWANCE));
        match (self.max_output, by_ratio) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}
