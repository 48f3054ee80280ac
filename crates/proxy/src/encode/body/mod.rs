//! Streaming bodies: compress an upstream body as it arrives, or decompress a gzip one for a
//! client that does not accept gzip (nginx's `gunzip`).
//!
//! Both wrap any [`http_body::Body`] and are independent of the HTTP version. Memory per stream
//! is bounded: [`CompressBody`] holds at most [`FlushPolicy::coalesce`] bytes of input plus one
//! upstream frame, [`DecompressBody`] one upstream frame and one output chunk; the next frame is
//! only pulled when the connection has taken the previous one, so a slow client slows the
//! upstream read instead of filling memory.
//!
//! An upstream error mid-body is passed on as an error, never as a clean end: the server then
//! aborts the client connection, and the client never receives a complete-looking gzip stream
//! for a body that was cut short.
//!
//! Upstream trailers follow the recoded body, less the digests of the bytes it changed
//! (`Content-Digest`, `Repr-Digest`, `Content-MD5`, `Digest`), which the response head loses
//! too.
//!
//! - `compress`: [`CompressBody`], which drives a [`BodyEncoder`] of any coding
//!   (`zipwire_codings`).
//! - `gather`: [`GatherGate`], the budget all compressing bodies gather their calls in.
//! - `gunzip`: [`DecompressBody`].

use std::error::Error as StdError;
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderMap;
use http_body::Frame;
use zipwire_codec::DecodeError;

mod compress;
pub(crate) mod decoders;
pub(crate) mod dictionary_decoder;
mod gather;
pub(crate) mod gunzip;

pub use compress::CompressBody;
pub use gather::GatherGate;
pub use gunzip::DecompressBody;
pub use zipwire_codings::BodyEncoder;

/// How a [`CompressBody`] groups upstream data into encoder calls.
///
/// The stateless encoder compresses each call on its own, so bigger calls compress better:
/// HAProxy compresses each 16 kB buffer alone; gathering 64 kB gives the encoder four times the
/// context. The delay keeps streaming responses live when the upstream pauses.
///
/// The delay applies to bodies of unknown length (chunked or close-delimited: streams, events,
/// long polls). A body whose length the upstream announced is gathered call by call whatever
/// the pauses: under load the proxy's own run queue makes such pauses (a task waits its turn to
/// read data already in the socket), and flushing on them cut the bench page into extra calls
/// (ratio 2.64-2.69 against 2.72-2.74). nginx's gzip, by default, never flushes on a pause.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushPolicy {
    /// Input bytes gathered before an encoder call is made.
    pub coalesce: usize,
    /// Longest time gathered input of a body of unknown length waits for more while the
    /// upstream has nothing ready. Zero compresses whatever is there as soon as the upstream
    /// pauses (server-sent events), whatever the body's length.
    pub delay: Duration,
}

impl Default for FlushPolicy {
    fn default() -> FlushPolicy {
        FlushPolicy {
            coalesce: 64 * 1024,
            delay: Duration::from_millis(20),
        }
    }
}

/// The CPU time the calling thread has run, for timing encoder and decoder calls, not the
/// wall time, which counts waits for a core too.
pub(crate) use zipwire_adapt::cpu::thread_cpu;

/// Counters a compressing or decompressing body adds to as it runs, call by call.
#[derive(Debug, Default)]
pub struct BodyMeter {
    /// Bytes read from the upstream body.
    pub bytes_in: AtomicU64,
    /// Bytes handed to the client.
    pub bytes_out: AtomicU64,
    /// CPU time spent inside encoder or decoder calls (the thread's CPU time, not wall
    /// time), in nanoseconds.
    pub busy_nanos: AtomicU64,
    /// Of `bytes_in`, those that calls compressed (or decompressed): not those a stepped-down
    /// stream stored. The rate budget reads it, so that the stored bytes of the streams it
    /// stepped down do not keep it throttled.
    pub worked_in: AtomicU64,
    /// Bytes the calls that made less than they took saved, summed: unlike `bytes_in -
    /// bytes_out`, it never goes down when an incompressible body comes out a little larger
    /// (so a Prometheus counter built on it never appears reset).
    pub saved: AtomicU64,
    /// Server-wide totals that every call is added to as well, so that a budget sees a long
    /// stream's work while it runs, not when it ends.
    totals: Option<Arc<BodyMeter>>,
    /// The totals of the stream's coding, added to as well.
    coding: Option<Arc<BodyMeter>>,
}

impl BodyMeter {
    /// A meter for one stream that also adds every call to `totals`.
    pub fn with_totals(totals: Arc<BodyMeter>) -> BodyMeter {
        BodyMeter {
            totals: Some(totals),
            ..BodyMeter::default()
        }
    }

    /// Also adds every call to `coding`, the totals of the stream's coding.
    pub fn with_coding_totals(mut self, coding: Arc<BodyMeter>) -> BodyMeter {
        self.coding = Some(coding);
        self
    }

    /// Adds one call: `stored` when the call stored its input (a stepped-down stream) rather
    /// than compressing it.
    pub(crate) fn record(&self, bytes_in: usize, bytes_out: usize, busy: Duration, stored: bool) {
        let busy = busy.as_nanos().min(u128::from(u64::MAX)) as u64;
        let worked = if stored { 0 } else { bytes_in as u64 };
        let totals = self.totals.as_deref().into_iter();
        for meter in std::iter::once(self)
            .chain(totals)
            .chain(self.coding.as_deref())
        {
            meter.bytes_in.fetch_add(bytes_in as u64, Ordering::Relaxed);
            meter.worked_in.fetch_add(worked, Ordering::Relaxed);
            meter
                .bytes_out
                .fetch_add(bytes_out as u64, Ordering::Relaxed);
            meter.busy_nanos.fetch_add(busy, Ordering::Relaxed);
            meter
                .saved
                .fetch_add(bytes_in.saturating_sub(bytes_out) as u64, Ordering::Relaxed);
        }
    }
}

/// Why a streaming body stopped with an error.
#[non_exhaustive]
#[derive(Debug)]
pub enum BodyError {
    /// The upstream body failed (connection reset, timeout): the response is incomplete.
    Upstream(Box<dyn StdError + Send + Sync>),
    /// The upstream's gzip body does not decode.
    Decode(DecodeError),
    /// The encoder failed (zstd or brotli out of memory): the response is incomplete.
    Encode(zipwire_codings::EncodeFailure),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Upstream(e) => write!(f, "upstream body failed: {e}"),
            BodyError::Decode(e) => crate::error::describe_gunzip_failure(e, f),
            BodyError::Encode(e) => write!(f, "{e}"),
        }
    }
}

impl StdError for BodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BodyError::Upstream(e) => Some(e.as_ref()),
            BodyError::Decode(e) => Some(e),
            BodyError::Encode(_) => None,
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading upstream, compressing.
    Streaming,
    /// The final block went out; trailers, if any, come next.
    Trailers,
    /// Nothing more to send.
    Done,
}

impl State {
    /// Whether the body has nothing more to yield. With no trailers to come, the final
    /// block's frame ends it, so the connection can write the last chunk and the chunked
    /// terminator together.
    fn is_end(&self, trailers: &Option<HeaderMap>) -> bool {
        match self {
            State::Streaming => false,
            State::Trailers => trailers.is_none(),
            State::Done => true,
        }
    }

    /// Past the last block: what `poll_frame` returns next, the trailers if any and then the
    /// end. `None` while streaming.
    fn end(&mut self, trailers: &mut Option<HeaderMap>) -> Option<Option<Frame<Bytes>>> {
        match *self {
            State::Streaming => None,
            State::Trailers => {
                *self = State::Done;
                Some(trailers.take().map(Frame::trailers))
            }
            State::Done => Some(None),
        }
    }
}

/// The upstream's trailers as a recoded body sends them: without the digests of bytes the
/// recoding changed ([`zipwire_rules::headers::remove_digests`]), or `None` when nothing is left.
fn recoded_trailers(mut trailers: HeaderMap) -> Option<HeaderMap> {
    zipwire_rules::headers::remove_digests(&mut trailers);
    (!trailers.is_empty()).then_some(trailers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_cpu_counts_work_not_waiting() {
        let before = thread_cpu();
        std::thread::sleep(Duration::from_millis(100));
        let slept = thread_cpu().saturating_sub(before);
        assert!(slept < Duration::from_millis(20), "{slept:?} while asleep");
        let before = thread_cpu();
        let started = std::time::Instant::now();
        let mut x = 0u64;
        while started.elapsed() < Duration::from_millis(50) {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
        }
        let worked = thread_cpu().saturating_sub(before);
        assert!(worked >= Duration::from_millis(5), "{worked:?} while busy");
    }
}
