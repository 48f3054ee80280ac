//! The streaming decoder: gzip (multi-member), zlib and raw deflate through zlib-rs, with the
//! framing parsed and checked here and optional limits against decompression bombs.
//!
//! zlib-rs only inflates raw deflate; headers and trailers go through [`crate::format`], so a
//! damaged header or checksum is reported with the same typed [`DecodeError`]s as damaged
//! deflate data, and a gzip stream can be followed by bytes that are not a member without
//! anything being lost: the decoder stops in front of them and says so.

use flate2::{Decompress, FlushDecompress, Status};

use crate::error::DecodeError;
use crate::format::{gzip, Format};

mod framing;
mod limits;
#[cfg(test)]
mod tests;

pub use limits::Limits;

/// Smallest output buffer [`Decoder::decode_to_vec`] offers per step.
const MIN_STEP: usize = 4 * 1024;
/// Largest output buffer [`Decoder::decode_to_vec`] offers per step.
const MAX_STEP: usize = 1 << 20;

/// What one [`Decoder::decode`] call did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Progress {
    /// Input bytes taken from the front of the call's input.
    pub consumed: usize,
    /// Output bytes written to the front of the call's output buffer.
    pub produced: usize,
}

/// Where in the stream the decoder is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Reading a gzip or zlib header; `buf` holds the part seen so far.
    Header,
    /// Inflating deflate blocks.
    Body,
    /// Reading the trailer; `buf` holds the part seen so far.
    Trailer,
    /// gzip: a member ended with a valid trailer; another may follow.
    MemberEnd,
    /// gzip: after a member, a lone `0x1f` was taken (in `buf`); the next byte tells whether it
    /// starts a member.
    MaybeMember,
    /// The stream ended; no more input is taken.
    Done,
}

/// A push-style streaming decoder for one gzip, zlib or raw deflate stream.
///
/// Feed input with [`Decoder::decode`] (caller-provided output buffer, zlib style) or
/// [`Decoder::decode_to_vec`], then call [`Decoder::finish`] when the input has ended, to learn
/// whether it ended inside the stream.
///
/// A gzip decoder reads multi-member files by default (as `gzip -d` does): after a member's
/// trailer, input that starts with the gzip magic is decoded as a further member, and anything
/// else ends the stream and is left unconsumed, for the caller to treat as trailing garbage or
/// padding (but a `0x1f` that ended one call's input is taken, as it may start a member: see
/// [`Decoder::held_trailing`]). Zlib and raw streams end after their trailer (raw: after the final block), and
/// bytes after them are left unconsumed too.
///
/// After an error, every later call returns the same error.
pub struct Decoder {
    inflate: Decompress,
    format: Format,
    limits: Limits,
    multi_member: bool,
    state: State,
    /// Header or trailer bytes waiting for the rest.
    buf: Vec<u8>,
    /// What a gzip header cut short in `buf` waits for before it is parsed again.
    awaiting: gzip::Awaiting,
    /// Running checksum of the current member's output.
    checksum: u32,
    /// Output of the current member, for gzip's ISIZE.
    member_out: u64,
    total_in: u64,
    total_out: u64,
    error: Option<DecodeError>,
}

impl Decoder {
    /// A decoder for one stream of `format`, without limits.
    pub fn new(format: Format) -> Decoder {
        Decoder {
            inflate: Decompress::new(false),
            format,
            limits: Limits::default(),
            multi_member: true,
            state: match format {
                Format::Gzip | Format::Zlib => State::Header,
                Format::Raw => State::Body,
            },
            buf: Vec::new(),
            awaiting: gzip::Awaiting::Length(0),
            checksum: format.initial_checksum(),
            member_out: 0,
            total_in: 0,
            total_out: 0,
            error: None,
        }
    }

    /// Sets the output limits, checked from the next call on.
    pub fn with_limits(mut self, limits: Limits) -> Decoder {
        self.limits = limits;
        self
    }

    /// gzip only: whether to go on into further members after the first (default: on). Off,
    /// the stream ends after the first member's trailer. No effect for zlib and raw.
    pub fn multi_member(mut self, on: bool) -> Decoder {
        self.multi_member = on;
        self
    }

    /// Decodes from `input` into `out`, as far as either allows, and says how much of each was
    /// used. The caller feeds the unconsumed rest of the input (with more appended, if it
    /// likes) to the next call.
    ///
    /// The call returns when the output buffer is full, the input is used up, or the stream has
    /// ended; it consumes everything it is given unless the output buffer fills up or the
    /// stream ends (then `input[consumed..]` is trailing data: see [`Decoder::is_done`]). With
    /// the input used up, call again with an empty input to drain output still pending, until
    /// a call produces less than the buffer's size.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Corrupt`] for bytes that are not a valid stream, with the input offset;
    /// [`DecodeError::ChecksumMismatch`] for a trailer that disagrees with the data (for gzip,
    /// the CRC-32 or the length); [`DecodeError::LimitExceeded`] when the output passes a
    /// [`Limits`] bound. Input that merely ends early is no error here: see
    /// [`Decoder::finish`].
    pub fn decode(&mut self, input: &[u8], out: &mut [u8]) -> Result<Progress, DecodeError> {
        if let Some(error) = &self.error {
            return Err(error.clone());
        }
        let mut progress = Progress {
            consumed: 0,
            produced: 0,
        };
        let result = self.run(input, out, &mut progress);
        match result {
            Ok(()) => Ok(progress),
            Err(error) => {
                self.error = Some(error.clone());
                Err(error)
            }
        }
    }

    /// Decodes all of `input` it can, appending the output to `out`, and returns how many input
    /// bytes it consumed: all of them, unless the stream ended and other bytes follow it.
    ///
    /// # Errors
    ///
    /// As [`Decoder::decode`]. On error, `out` keeps the output decoded before the failing
    /// step, which the caller should not trust.
    pub fn decode_to_vec(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<usize, DecodeError> {
        let mut consumed = 0;
        let mut step = input.len().saturating_mul(4).clamp(MIN_STEP, MAX_STEP);
        loop {
            let rest = input.get(consumed..).unwrap_or_default();
            // No point offering (and zeroing) much more room than the limits let through.
            let room = self.output_cap(rest.len(), step).max(1);
            let start = out.len();
            out.resize(start + room, 0);
            let result = self.decode(rest, out.get_mut(start..).unwrap_or_default());
            let progress = match result {
                Ok(progress) => progress,
                Err(error) => {
                    out.truncate(start);
                    return Err(error);
                }
            };
            out.truncate(start + progress.produced);
            consumed += progress.consumed;
            // `decode` only stops short of filling the buffer when it can do no more.
            if progress.produced < room {
                return Ok(consumed);
            }
            step = step.saturating_mul(2).min(MAX_STEP);
        }
    }

    /// Whether the stream ended with a valid trailer (for gzip: the last member so far did). A
    /// gzip decoder in this state still takes a further member if one follows.
    pub fn is_done(&self) -> bool {
        self.error.is_none()
            && matches!(
                self.state,
                State::MemberEnd | State::MaybeMember | State::Done
            )
    }

    /// Trailing bytes this decoder took before it knew they were trailing: a gzip member
    /// followed by `0x1f` at the end of one call's input takes that byte, as it may start a
    /// next member, and when the next call shows it does not, the stream ends and the byte
    /// is no longer in the caller's input. Empty unless the stream has ended that way; the
    /// trailing data is these bytes, then the input the last call left unconsumed.
    pub fn held_trailing(&self) -> &[u8] {
        if self.state == State::Done && self.format == Format::Gzip {
            &self.buf
        } else {
            &[]
        }
    }

    /// Says whether the stream was complete, once the caller has no more input.
    ///
    /// A gzip stream whose input ends with a single `0x1f` after a member was cut in the
    /// next member's magic: truncated, as `gzip -d` finds it ("unexpected end of file"), not
    /// complete with trailing garbage.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] if the input ended inside the stream: in a header, the
    /// deflate data or the trailer, in the magic of a next gzip member, or before anything
    /// (empty input is not a stream of any format). An earlier error is returned again.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match &self.error {
            Some(error) => Err(error.clone()),
            None if self.state == State::MaybeMember => Err(DecodeError::Truncated),
            None if self.is_done() => Ok(()),
            None => Err(DecodeError::Truncated),
        }
    }

    /// Input bytes consumed so far, over all members.
    pub fn total_in(&self) -> u64 {
        self.total_in
    }

    /// Output bytes produced so far, over all members.
    pub fn total_out(&self) -> u64 {
        self.total_out
    }

    /// Steps through the states until none can go further with what is left of the buffers.
    fn run(
        &mut self,
        input: &[u8],
        out: &mut [u8],
        progress: &mut Progress,
    ) -> Result<(), DecodeError> {
        loop {
            let rest = input.get(progress.consumed..).unwrap_or_default();
            let room = out.get_mut(progress.produced..).unwrap_or_default();
            let before = self.state;
            let (consumed, produced) = match self.state {
                State::Header => (self.header(rest)?, 0),
                State::Body => self.body(rest, room)?,
                State::Trailer => (self.trailer(rest)?, 0),
                State::MemberEnd => (self.member_end(rest), 0),
                State::MaybeMember => (self.maybe_member(rest), 0),
                State::Done => (0, 0),
            };
            progress.consumed += consumed;
            progress.produced += produced;
            self.total_in += consumed as u64;
            self.total_out += produced as u64;
            if consumed == 0 && produced == 0 && self.state == before {
                return Ok(());
            }
        }
    }

    /// Inflates from `rest` into `room`; returns the bytes consumed and produced.
    fn body(&mut self, rest: &[u8], room: &mut [u8]) -> Result<(usize, usize), DecodeError> {
        let cap = self.output_cap(rest.len(), room.len());
        let room = room.get_mut(..cap).unwrap_or_default();
        let (in_before, out_before) = (self.inflate.total_in(), self.inflate.total_out());
        let status = self.inflate.decompress(rest, room, FlushDecompress::None);
        // zlib-rs never reports more than it was given; the clamps only keep that assumption
        // from turning into a panic.
        let consumed = usize::try_from(self.inflate.total_in().saturating_sub(in_before))
            .map_or(rest.len(), |n| n.min(rest.len()));
        let produced = usize::try_from(self.inflate.total_out().saturating_sub(out_before))
            .map_or(room.len(), |n| n.min(room.len()));
        let total_in = self.total_in + consumed as u64;
        let status = status.map_err(|_| DecodeError::Corrupt { offset: total_in })?;
        let data = room.get(..produced).unwrap_or_default();
        self.checksum = self.format.update_checksum(self.checksum, data);
        self.member_out += produced as u64;
        self.check_limits(total_in, self.total_out + produced as u64)?;
        if status == Status::StreamEnd {
            self.state = State::Trailer;
        }
        Ok((consumed, produced))
    }

    /// How much of `room` bytes of output space the limits let through, given `available`
    /// more input bytes: one byte past the limit, so that passing it is seen, not mistaken for
    /// a full buffer.
    fn output_cap(&self, available: usize, room: usize) -> usize {
        match self
            .limits
            .bound(self.total_in.saturating_add(available as u64))
        {
            None => room,
            Some(bound) => {
                let left = bound.saturating_sub(self.total_out).saturating_add(1);
                usize::try_from(left).map_or(room, |left| left.min(room))
            }
        }
    }

    /// Checks output totals against the limits.
    fn check_limits(&self, total_in: u64, total_out: u64) -> Result<(), DecodeError> {
        match self.limits.bound(total_in) {
            Some(limit) if total_out > limit => Err(DecodeError::LimitExceeded { limit }),
            _ => Ok(()),
        }
    }
}

impl std::fmt::Debug for Decoder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Decoder")
            .field("format", &self.format)
            .field("limits", &self.limits)
            .field("multi_member", &self.multi_member)
            .field("state", &self.state)
            .field("total_in", &self.total_in)
            .field("total_out", &self.total_out)
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

/// Decodes a whole stream held in memory.
///
/// Stricter than [`Decoder`]: the stream must take up all of `input`, so bytes after a complete
/// stream (for gzip: after the last member, when they do not start another) are an error here,
/// reported as [`DecodeError::Corrupt`] at the offset where they start. Callers that want
/// `gzip -d`'s leniency towards trailing garbage use [`Decoder`] and look at what it did not
/// consume.
///
/// # Errors
///
/// [`DecodeError::Truncated`] if `input` ends inside the stream, the trailing-bytes case above,
/// and all errors of [`Decoder::decode`].
pub fn decompress(format: Format, input: &[u8], limits: Limits) -> Result<Vec<u8>, DecodeError> {
    let mut decoder = Decoder::new(format).with_limits(limits);
    let mut out = Vec::new();
    let consumed = decoder.decode_to_vec(input, &mut out)?;
    decoder.finish()?;
    if consumed < input.len() {
        return Err(DecodeError::Corrupt {
            offset: consumed as u64,
        });
    }
    Ok(out)
}
