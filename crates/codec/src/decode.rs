//! The streaming decoder: gzip (multi-member), zlib and raw deflate through zlib-rs, with the
//! framing parsed and checked here and optional limits against decompression bombs.
//!
//! zlib-rs only inflates raw deflate; headers and trailers go through [`crate::format`], so a
//! damaged header or checksum is reported with the same typed [`DecodeError`]s as damaged
//! deflate data, and a gzip stream can be followed by bytes that are not a member without
//! anything being lost: the decoder stops in front of them and says so.

use flate2::{Decompress, FlushDecompress, Status};

use crate::error::DecodeError;
use crate::format::{gzip, zlib, Format};

/// Smallest output buffer [`Decoder::decode_to_vec`] offers per step.
const MIN_STEP: usize = 4 * 1024;
/// Largest output buffer [`Decoder::decode_to_vec`] offers per step.
const MAX_STEP: usize = 1 << 20;

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
    fn bound(&self, consumed: u64) -> Option<u64> {
        let by_ratio = self
            .max_ratio
            .map(|ratio| ratio.saturating_mul(consumed).max(Self::RATIO_ALLOWANCE));
        match (self.max_output, by_ratio) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

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
/// padding. Zlib and raw streams end after their trailer (raw: after the final block), and
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

    /// Says whether the stream was complete, once the caller has no more input.
    ///
    /// A gzip stream followed by a single `0x1f` byte that arrived in a call of its own counts
    /// as complete (the byte is trailing garbage, as `gzip -d` treats it), though that byte was
    /// reported as consumed.
    ///
    /// # Errors
    ///
    /// [`DecodeError::Truncated`] if the input ended inside the stream: in a header, the
    /// deflate data or the trailer, or before anything (empty input is not a stream of any
    /// format). An earlier error is returned again.
    pub fn finish(&self) -> Result<(), DecodeError> {
        match &self.error {
            Some(error) => Err(error.clone()),
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

    /// Reads (part of) a gzip or zlib header; returns the bytes taken.
    fn header(&mut self, rest: &[u8]) -> Result<usize, DecodeError> {
        let corrupt = DecodeError::Corrupt {
            offset: self.total_in,
        };
        match self.format {
            Format::Gzip => {
                let held = self.buf.len();
                let parsed = if held == 0 {
                    // The common case, a whole header in one call: no copy.
                    gzip::parse_header(rest)
                } else {
                    let take = rest
                        .len()
                        .min((gzip::MAX_HEADER_LEN + 1).saturating_sub(held));
                    self.buf
                        .extend_from_slice(rest.get(..take).unwrap_or_default());
                    gzip::parse_header(&self.buf)
                };
                match parsed {
                    Err(gzip::HeaderError::Invalid) => Err(corrupt),
                    Ok(Some((_, len))) => {
                        let taken = len.checked_sub(held).ok_or(corrupt)?;
                        self.buf.clear();
                        self.state = State::Body;
                        Ok(taken)
                    }
                    Ok(None) => {
                        let taken = if held == 0 {
                            let take = rest.len().min(gzip::MAX_HEADER_LEN + 1);
                            self.buf
                                .extend_from_slice(rest.get(..take).unwrap_or_default());
                            take
                        } else {
                            self.buf.len() - held
                        };
                        // parse_header refuses overlong headers itself; this only guards the
                        // buffer should it ever not.
                        if self.buf.len() > gzip::MAX_HEADER_LEN {
                            return Err(corrupt);
                        }
                        Ok(taken)
                    }
                }
            }
            Format::Zlib => {
                let take = rest.len().min(2usize.saturating_sub(self.buf.len()));
                self.buf
                    .extend_from_slice(rest.get(..take).unwrap_or_default());
                if let Ok(bytes) = <[u8; 2]>::try_from(self.buf.as_slice()) {
                    if !zlib::is_valid_header(bytes) {
                        return Err(corrupt);
                    }
                    self.buf.clear();
                    self.state = State::Body;
                }
                Ok(take)
            }
            Format::Raw => {
                self.state = State::Body;
                Ok(0)
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

    /// Reads (part of) the trailer and checks it once complete; returns the bytes taken.
    fn trailer(&mut self, rest: &[u8]) -> Result<usize, DecodeError> {
        let need = match self.format {
            Format::Gzip => 8,
            Format::Zlib => 4,
            Format::Raw => 0,
        };
        let take = rest.len().min(need - self.buf.len().min(need));
        self.buf
            .extend_from_slice(rest.get(..take).unwrap_or_default());
        if self.buf.len() < need {
            return Ok(take);
        }
        let word = |at: usize| -> [u8; 4] {
            let mut bytes = [0; 4];
            if let Some(src) = self.buf.get(at..at + 4) {
                bytes.copy_from_slice(src);
            }
            bytes
        };
        match self.format {
            Format::Gzip => {
                let (crc, isize) = (u32::from_le_bytes(word(0)), u32::from_le_bytes(word(4)));
                if crc != self.checksum {
                    return Err(DecodeError::ChecksumMismatch {
                        expected: crc,
                        actual: self.checksum,
                    });
                }
                // ISIZE is the length modulo 2^32 (RFC 1952 §2.3.1).
                let actual = self.member_out as u32;
                if isize != actual {
                    return Err(DecodeError::ChecksumMismatch {
                        expected: isize,
                        actual,
                    });
                }
            }
            Format::Zlib => {
                let adler = u32::from_be_bytes(word(0));
                if adler != self.checksum {
                    return Err(DecodeError::ChecksumMismatch {
                        expected: adler,
                        actual: self.checksum,
                    });
                }
            }
            Format::Raw => {}
        }
        self.buf.clear();
        self.state = if self.format == Format::Gzip && self.multi_member {
            State::MemberEnd
        } else {
            State::Done
        };
        Ok(take)
    }

    /// After a gzip member: starts the next one if `rest` begins with the magic; returns the
    /// bytes taken.
    fn member_end(&mut self, rest: &[u8]) -> usize {
        match rest {
            [] => 0,
            [first, second, ..] if [*first, *second] == gzip::MAGIC => {
                self.start_member();
                0
            }
            [first] if *first == gzip::MAGIC[0] => {
                // Half a magic: keep it, the next call decides.
                self.buf.push(*first);
                self.state = State::MaybeMember;
                1
            }
            _ => {
                self.state = State::Done;
                0
            }
        }
    }

    /// After a gzip member and a lone `0x1f`: returns the bytes taken (none).
    fn maybe_member(&mut self, rest: &[u8]) -> usize {
        match rest.first() {
            None => {}
            Some(&byte) if byte == gzip::MAGIC[1] => self.start_member(), // `buf` keeps the 0x1f
            Some(_) => {
                self.buf.clear();
                self.state = State::Done;
            }
        }
        0
    }

    /// Resets the per-member state for a further gzip member.
    fn start_member(&mut self) {
        self.inflate.reset(false);
        self.checksum = self.format.initial_checksum();
        self.member_out = 0;
        self.state = State::Header;
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
    let held = usize::from(decoder.state == State::MaybeMember);
    let end = consumed.saturating_sub(held);
    if end < input.len() {
        return Err(DecodeError::Corrupt { offset: end as u64 });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use proptest::prelude::*;

    use super::*;

    fn sample(len: usize) -> Vec<u8> {
        let words: [&[u8]; 5] = [b"alpha ", b"beta ", b"gamma\n", b"delta ", b"epsilon "];
        let mut data = Vec::with_capacity(len);
        let mut x: u32 = 7;
        while data.len() < len {
            x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
            data.extend_from_slice(words[(x >> 16) as usize % words.len()]);
            data.push(x as u8);
        }
        data.truncate(len);
        data
    }

    /// Compresses with flate2's own writers, independent of this crate's encoders.
    fn encode(format: Format, data: &[u8]) -> Vec<u8> {
        fn go<W: Write>(
            mut w: W,
            data: &[u8],
            finish: impl FnOnce(W) -> std::io::Result<Vec<u8>>,
        ) -> Vec<u8> {
            w.write_all(data).expect("writing to a Vec");
            finish(w).expect("writing to a Vec")
        }
        let level = flate2::Compression::default();
        match format {
            Format::Gzip => go(
                flate2::write::GzEncoder::new(Vec::new(), level),
                data,
                |w| w.finish(),
            ),
            Format::Zlib => go(
                flate2::write::ZlibEncoder::new(Vec::new(), level),
                data,
                |w| w.finish(),
            ),
            Format::Raw => go(
                flate2::write::DeflateEncoder::new(Vec::new(), level),
                data,
                |w| w.finish(),
            ),
        }
    }

    /// Feeds `wire` in `in_step`-byte windows with an `out_step`-byte output buffer; returns the
    /// output and the input consumed.
    fn drive(
        dec: &mut Decoder,
        wire: &[u8],
        in_step: usize,
        out_step: usize,
    ) -> Result<(Vec<u8>, usize), DecodeError> {
        let mut plain = Vec::new();
        let mut buf = vec![0; out_step];
        let mut pos = 0;
        loop {
            let window = &wire[pos..wire.len().min(pos + in_step)];
            let p = dec.decode(window, &mut buf)?;
            assert!(p.consumed <= window.len() && p.produced <= buf.len());
            plain.extend_from_slice(&buf[..p.produced]);
            pos += p.consumed;
            if p == (Progress {
                consumed: 0,
                produced: 0,
            }) {
                return Ok((plain, pos));
            }
        }
    }

    #[test]
    fn every_format_decodes_byte_by_byte() {
        let data = sample(5_000);
        for format in Format::ALL {
            let wire = encode(format, &data);
            for (in_step, out_step) in [(1, 1), (1, 4096), (4096, 1), (7, 13), (1 << 20, 1 << 20)] {
                let mut dec = Decoder::new(format);
                let (plain, consumed) =
                    drive(&mut dec, &wire, in_step, out_step).expect("valid stream");
                assert_eq!(plain, data, "{format} {in_step}/{out_step}");
                assert_eq!(consumed, wire.len());
                assert!(dec.is_done());
                assert_eq!(dec.finish(), Ok(()));
                assert_eq!(
                    (dec.total_in(), dec.total_out()),
                    (wire.len() as u64, data.len() as u64)
                );
            }
            assert_eq!(
                decompress(format, &wire, Limits::default()).as_deref(),
                Ok(&data[..])
            );
        }
    }

    #[test]
    fn empty_payloads_and_empty_input() {
        for format in Format::ALL {
            let wire = encode(format, b"");
            assert_eq!(
                decompress(format, &wire, Limits::default()),
                Ok(Vec::new()),
                "{format}"
            );
            assert_eq!(
                decompress(format, b"", Limits::default()),
                Err(DecodeError::Truncated),
                "{format}"
            );
            let dec = Decoder::new(format);
            assert!(!dec.is_done());
            assert_eq!(dec.finish(), Err(DecodeError::Truncated));
        }
    }

    #[test]
    fn gzip_header_with_every_optional_field() {
        let data = sample(1_000);
        let header = gzip::Header {
            mtime: 1_700_000_000,
            name: Some(b"file.txt".to_vec()),
            comment: Some(b"a comment".to_vec()),
            extra: Some(vec![b'A', b'B', 2, 0, 1, 2]),
            is_text: true,
            xfl: 0,
            os: 3,
        };
        let mut wire = header.to_bytes();
        // Set FHCRC by hand: the writer does not emit it.
        wire[3] |= 0x02;
        let crc = crc32fast::hash(&wire) as u16;
        wire.extend_from_slice(&crc.to_le_bytes());
        wire.extend_from_slice(&encode(Format::Raw, &data));
        wire.extend_from_slice(&gzip::trailer(crc32fast::hash(&data), data.len() as u32));
        let mut dec = Decoder::new(Format::Gzip);
        assert_eq!(drive(&mut dec, &wire, 1, 1), Ok((data.clone(), wire.len())));
        assert_eq!(dec.finish(), Ok(()));
    }

    #[test]
    fn multi_member_gzip() {
        let (a, b) = (sample(3_000), b"second member".to_vec());
        let mut wire = encode(Format::Gzip, &a);
        let first_len = wire.len();
        wire.extend_from_slice(&encode(Format::Gzip, b""));
        wire.extend_from_slice(&encode(Format::Gzip, &b));
        let both = [a.clone(), b].concat();
        for step in [1, 2, 3, 10, wire.len()] {
            let mut dec = Decoder::new(Format::Gzip);
            assert_eq!(
                drive(&mut dec, &wire, step, step),
                Ok((both.clone(), wire.len())),
                "step {step}"
            );
            assert_eq!(dec.finish(), Ok(()));
        }
        assert_eq!(decompress(Format::Gzip, &wire, Limits::default()), Ok(both));

        let mut dec = Decoder::new(Format::Gzip).multi_member(false);
        let mut out = Vec::new();
        assert_eq!(dec.decode_to_vec(&wire, &mut out), Ok(first_len));
        assert_eq!(out, a);
        assert!(dec.is_done());
    }

    #[test]
    fn trailing_bytes_are_left_unconsumed() {
        let data = sample(2_000);
        for format in Format::ALL {
            let stream = encode(format, &data);
            for tail in [&b"garbage"[..], &[0; 512], &[0x1f], &[0x1f, 0x8c, 0]] {
                let wire = [&stream[..], tail].concat();
                let mut dec = Decoder::new(format);
                let mut out = Vec::new();
                // A lone 0x1f after a gzip member is taken while the decoder waits to see the
                // next byte.
                let gzip = format == Format::Gzip;
                let held = usize::from(gzip && tail == [0x1f]);
                assert_eq!(
                    dec.decode_to_vec(&wire, &mut out),
                    Ok(stream.len() + held),
                    "{format} {tail:?}"
                );
                assert_eq!(out, data);
                assert!(dec.is_done());
                assert_eq!(dec.finish(), Ok(()));
                let offset = stream.len() as u64;
                assert_eq!(
                    decompress(format, &wire, Limits::default()),
                    Err(DecodeError::Corrupt { offset })
                );
                // Byte by byte, any 0x1f after a gzip member arrives alone.
                let mut dec = Decoder::new(format);
                let (plain, consumed) = drive(&mut dec, &wire, 1, 1).expect("valid stream");
                assert_eq!(plain, data);
                let held = usize::from(gzip && tail.first() == Some(&0x1f));
                assert_eq!(consumed, stream.len() + held, "{format} {tail:?}");
                assert_eq!(dec.finish(), Ok(()));
            }
        }
        // A second gzip magic followed by a broken header is a broken member, not garbage.
        let wire = [&encode(Format::Gzip, &data)[..], &[0x1f, 0x8b, 9]].concat();
        let len = wire.len() as u64 - 3;
        assert_eq!(
            decompress(Format::Gzip, &wire, Limits::default()),
            Err(DecodeError::Corrupt { offset: len })
        );
    }

    #[test]
    fn every_cut_point_is_truncated() {
        let data = sample(600);
        for format in Format::ALL {
            let wire = encode(format, &data);
            for cut in 0..wire.len() {
                let mut dec = Decoder::new(format);
                let mut out = Vec::new();
                assert_eq!(
                    dec.decode_to_vec(&wire[..cut], &mut out),
                    Ok(cut),
                    "{format} cut {cut}"
                );
                assert!(!dec.is_done());
                assert_eq!(
                    dec.finish(),
                    Err(DecodeError::Truncated),
                    "{format} cut {cut}"
                );
                assert_eq!(
                    decompress(format, &wire[..cut], Limits::default()),
                    Err(DecodeError::Truncated)
                );
                // The rest completes the stream.
                assert_eq!(
                    dec.decode_to_vec(&wire[cut..], &mut out),
                    Ok(wire.len() - cut)
                );
                assert_eq!((dec.finish(), &out), (Ok(()), &data));
            }
        }
    }

    #[test]
    fn bit_flips_never_give_wrong_data() {
        let data = sample(400);
        for format in [Format::Gzip, Format::Zlib] {
            let wire = encode(format, &data);
            for at in 0..wire.len() {
                for bit in [0, 3, 7] {
                    let mut bad = wire.clone();
                    bad[at] ^= 1 << bit;
                    match decompress(format, &bad, Limits::default()) {
                        // Flips in gzip's MTIME, XFL or OS bytes change nothing that is checked.
                        Ok(plain) => assert_eq!(plain, data, "{format} byte {at} bit {bit}"),
                        Err(DecodeError::Corrupt { offset }) => assert!(offset <= bad.len() as u64),
                        Err(DecodeError::ChecksumMismatch { .. } | DecodeError::Truncated) => {}
                        Err(other) => panic!("{format} byte {at} bit {bit}: {other:?}"),
                    }
                }
            }
        }
    }

    #[test]
    fn checksum_and_length_mismatches_are_typed() {
        let data = b"checksummed".to_vec();
        let mut wire = encode(Format::Gzip, &data);
        let n = wire.len();
        wire[n - 1] ^= 1; // ISIZE's top byte
        let expected = (data.len() as u32) ^ (1 << 24);
        let err = DecodeError::ChecksumMismatch {
            expected,
            actual: data.len() as u32,
        };
        assert_eq!(decompress(Format::Gzip, &wire, Limits::default()), Err(err));

        let mut wire = encode(Format::Zlib, &data);
        let n = wire.len();
        wire[n - 1] ^= 1;
        let actual = adler2::adler32_slice(&data);
        assert_eq!(
            decompress(Format::Zlib, &wire, Limits::default()),
            Err(DecodeError::ChecksumMismatch {
                expected: actual ^ 1,
                actual
            })
        );

        // Errors are sticky.
        let mut dec = Decoder::new(Format::Zlib);
        let mut out = Vec::new();
        assert!(dec.decode_to_vec(&wire, &mut out).is_err());
        assert!(dec.decode(&[], &mut [0; 8]).is_err());
        assert!(dec.finish().is_err() && !dec.is_done());
    }

    #[test]
    fn bad_zlib_headers_are_corrupt_at_offset_zero() {
        for header in [[0x78, 0xbb], [0x79, 0x9c], [0x78, 0x9d], [0x88, 0x98]] {
            let err = decompress(
                Format::Zlib,
                &[header[0], header[1], 3, 0],
                Limits::default(),
            );
            assert_eq!(err, Err(DecodeError::Corrupt { offset: 0 }), "{header:?}");
        }
        assert_eq!(
            decompress(Format::Gzip, b"PK\x03\x04", Limits::default()),
            Err(DecodeError::Corrupt { offset: 0 })
        );
    }

    /// 10 MB of zeros as a gzip bomb, built from repeated sync-flushed blocks so the test does
    /// not spend its time compressing: after the first block, each 64 KiB of zeros encodes to
    /// the same bytes.
    fn zero_bomb(megabytes: usize) -> (Vec<u8>, usize) {
        let chunk = vec![0u8; 64 * 1024];
        let level = crate::Level::try_from(6).expect("valid level");
        let mut enc = crate::StatefulEncoder::new(Format::Raw, level);
        let (mut first, mut second, mut third) = (Vec::new(), Vec::new(), Vec::new());
        enc.encode(&chunk, &mut first).expect("open stream");
        enc.encode(&chunk, &mut second).expect("open stream");
        enc.encode(&chunk, &mut third).expect("open stream");
        assert_eq!(
            second, third,
            "zeros after the first chunk should encode identically"
        );
        let chunks = megabytes * 16;
        let mut wire = gzip::minimal_header(6).to_vec();
        wire.extend_from_slice(&first);
        for _ in 1..chunks {
            wire.extend_from_slice(&second);
        }
        let mut end = Vec::new();
        enc.finish(&[], &mut end).expect("open stream");
        wire.extend_from_slice(&end);
        let len = chunks * chunk.len();
        let mut crc = crc32fast::Hasher::new();
        for _ in 0..chunks {
            crc.update(&chunk);
        }
        wire.extend_from_slice(&gzip::trailer(crc.finalize(), len as u32));
        (wire, len)
    }

    #[test]
    fn limits_stop_a_bomb() {
        let (bomb, len) = zero_bomb(10);
        assert!(bomb.len() * 500 < len, "{} bytes", bomb.len());

        let limits = Limits {
            max_output: Some(1 << 20),
            max_ratio: None,
        };
        let mut dec = Decoder::new(Format::Gzip).with_limits(limits);
        let mut out = Vec::new();
        assert_eq!(
            dec.decode_to_vec(&bomb, &mut out),
            Err(DecodeError::LimitExceeded { limit: 1 << 20 })
        );
        assert!(dec.total_out() <= (1 << 20) + 1 && out.len() <= 1 << 20);

        let limits = Limits {
            max_output: None,
            max_ratio: Some(100),
        };
        match decompress(Format::Gzip, &bomb, limits) {
            Err(DecodeError::LimitExceeded { limit }) => assert!(limit <= 100 * bomb.len() as u64),
            other => panic!("{:?}", other.map(|v| v.len())),
        }

        // Exactly at the limit is fine, one byte under is not; same with 1-byte buffers.
        let exact = Limits {
            max_output: Some(len as u64),
            max_ratio: Some(2_000),
        };
        assert_eq!(
            decompress(Format::Gzip, &bomb, exact).map(|v| v.len()),
            Ok(len)
        );
        let under = Limits {
            max_output: Some(len as u64 - 1),
            max_ratio: None,
        };
        assert_eq!(
            decompress(Format::Gzip, &bomb, under),
            Err(DecodeError::LimitExceeded {
                limit: len as u64 - 1
            })
        );
    }

    #[test]
    fn limits_with_small_buffers() {
        let data = sample(2_000);
        let wire = encode(Format::Zlib, &data);
        for max in [0, 1, 999, 1_999, 2_000] {
            let limits = Limits {
                max_output: Some(max),
                max_ratio: None,
            };
            let mut dec = Decoder::new(Format::Zlib).with_limits(limits);
            let result = drive(&mut dec, &wire, 3, 1);
            if max as usize >= data.len() {
                assert_eq!(result, Ok((data.clone(), wire.len())));
            } else {
                assert_eq!(result, Err(DecodeError::LimitExceeded { limit: max }));
            }
        }
        // The ratio allowance lets small, very compressible streams through.
        let zeros = vec![0; Limits::RATIO_ALLOWANCE as usize];
        let wire = encode(Format::Raw, &zeros);
        let limits = Limits {
            max_output: None,
            max_ratio: Some(1),
        };
        assert_eq!(decompress(Format::Raw, &wire, limits), Ok(zeros));
    }

    #[test]
    fn decodes_the_stateful_encoder() {
        let data = sample(100_000);
        for format in Format::ALL {
            let level = crate::Level::try_from(6).expect("valid level");
            let mut enc = crate::StatefulEncoder::new(format, level);
            let mut wire = Vec::new();
            for chunk in data.chunks(9_999) {
                enc.encode(chunk, &mut wire).expect("open stream");
            }
            enc.finish(&[], &mut wire).expect("open stream");
            assert_eq!(
                decompress(format, &wire, Limits::default()).as_deref(),
                Ok(&data[..]),
                "{format}"
            );
        }
    }

    fn format_strategy() -> impl Strategy<Value = Format> {
        prop::sample::select(Format::ALL.to_vec())
    }

    proptest! {
        #[test]
        fn never_panics_on_arbitrary_bytes(
            format in format_strategy(),
            bytes in prop::collection::vec(any::<u8>(), 0..2_000),
            step in 1usize..64,
        ) {
            let _ = decompress(format, &bytes, Limits::default());
            let limits = Limits { max_output: Some(1 << 16), max_ratio: Some(50) };
            let mut dec = Decoder::new(format).with_limits(limits);
            let _ = drive(&mut dec, &bytes, step, step);
            let _ = dec.finish();
        }

        #[test]
        fn never_panics_after_a_valid_header(
            format in format_strategy(),
            body in prop::collection::vec(any::<u8>(), 0..2_000),
            step in 1usize..64,
        ) {
            let mut bytes = match format {
                Format::Gzip => gzip::minimal_header(6).to_vec(),
                Format::Zlib => zlib::header(6).to_vec(),
                Format::Raw => Vec::new(),
            };
            bytes.extend_from_slice(&body);
            let _ = decompress(format, &bytes, Limits::default());
            let mut dec = Decoder::new(format);
            let _ = drive(&mut dec, &bytes, step, step + 1);
        }

        #[test]
        fn random_data_round_trips_in_random_steps(
            format in format_strategy(),
            data in prop::collection::vec(0u8..4, 0..5_000),
            in_step in 1usize..300,
            out_step in 1usize..300,
        ) {
            let wire = encode(format, &data);
            let mut dec = Decoder::new(format);
            prop_assert_eq!(drive(&mut dec, &wire, in_step, out_step), Ok((data, wire.len())));
            prop_assert_eq!(dec.finish(), Ok(()));
        }
    }
}
