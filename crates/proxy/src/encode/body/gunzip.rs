//! [`DecompressBody`]: decodes a gzip, br or zstd upstream body for a client that does not
//! accept that coding (nginx's `gunzip`, for every coding the proxy also produces; the
//! decoders are [`super::decoders`]), and an upstream's unasked `dcb`/`dcz` (see
//! [`super::dictionary_decoder`]).

use std::error::Error as StdError;
use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use zipwire_codec::{DecodeError, Limits};
use zipwire_rules::Coding;

use super::decoders::{BodyDecoder, Decoding};

use super::{recoded_trailers, BodyError, BodyMeter, State};

/// Output produced per decoder step: the most a [`DecompressBody`] decodes at once, into a buffer
/// of its own that each frame is copied out of at its length. Handing the buffer itself on would
/// keep 64 KiB alive for every frame, however small, in the connection's write queue: about 1 MiB
/// per stream for a client that stopped reading.
pub(crate) const DECODE_CHUNK: usize = 64 * 1024;

/// A body that decodes an upstream body for a client that does not accept its coding.
pub struct DecompressBody<B> {
    inner: B,
    decoder: BodyDecoder,
    input: Bytes,
    /// Where each step decodes to (allocated at the first step).
    scratch: Vec<u8>,
    upstream_done: bool,
    /// Whether the last step filled its chunk: the decoder may hold more output for the
    /// input it has taken (brotli and zstd keep what did not fit), so it is stepped again
    /// before more input is read or the end is checked.
    pending: bool,
    state: State,
    trailers: Option<HeaderMap>,
    meter: Arc<BodyMeter>,
}

impl<B> DecompressBody<B> {
    /// Wraps `inner`, a gzip body; `limits` caps what one response may decode to.
    pub fn new(inner: B, limits: Limits, meter: Arc<BodyMeter>) -> DecompressBody<B> {
        DecompressBody::of(Coding::Gzip, inner, limits, meter)
    }

    /// Wraps `inner`, a body in `coding` (gzip, br or zstd).
    pub fn of(
        coding: Coding,
        inner: B,
        limits: Limits,
        meter: Arc<BodyMeter>,
    ) -> DecompressBody<B> {
        DecompressBody::decoding(Decoding::Coding(coding), inner, limits, meter)
    }

    /// Wraps `inner`, a body in what `decoding` names.
    pub(crate) fn decoding(
        decoding: Decoding,
        inner: B,
        limits: Limits,
        meter: Arc<BodyMeter>,
    ) -> DecompressBody<B> {
        DecompressBody {
            inner,
            decoder: decoding.decoder(limits),
            input: Bytes::new(),
            scratch: Vec::new(),
            upstream_done: false,
            pending: false,
            state: State::Streaming,
            trailers: None,
            meter,
        }
    }

    /// Decodes from the buffered input into at most one chunk.
    fn step(&mut self) -> Result<Bytes, DecodeError> {
        let started = super::thread_cpu();
        if self.scratch.is_empty() {
            self.scratch = vec![0; DECODE_CHUNK];
        }
        let progress = self.decoder.decode(&self.input, &mut self.scratch)?;
        bytes::Buf::advance(&mut self.input, progress.consumed);
        let out = Bytes::copy_from_slice(&self.scratch[..progress.produced]);
        self.pending = progress.produced == self.scratch.len();
        if self.decoder.is_done() {
            // Bytes after the gzip stream are ignored, as `gzip -d` does with trailing garbage.
            self.input = Bytes::new();
        }
        self.meter.record(
            progress.consumed,
            progress.produced,
            super::thread_cpu().saturating_sub(started),
            false,
        );
        Ok(out)
    }
}

impl<B> Body for DecompressBody<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<Box<dyn StdError + Send + Sync>>,
{
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = &mut *self;
        loop {
            if let Some(end) = this.state.end(&mut this.trailers) {
                return Poll::Ready(end.map(Ok));
            }
            if !this.input.is_empty() || this.pending {
                match this.step() {
                    Ok(out) if !out.is_empty() => return Poll::Ready(Some(Ok(Frame::data(out)))),
                    Ok(_) => {}
                    Err(e) => {
                        this.state = State::Done;
                        return Poll::Ready(Some(Err(BodyError::Decode(e))));
                    }
                }
                if !this.input.is_empty() && !this.decoder.is_done() {
                    continue;
                }
            }
            if this.upstream_done {
                this.state = State::Trailers;
                this.scratch = Vec::new();
                // An empty body labelled gzip (some stacks label every response) is empty
                // decoded too, not a truncated stream: nothing was cut.
                let empty = this.decoder.total_in() == 0;
                if let Err(e) = this
                    .decoder
                    .finish()
                    .or_else(|e| if empty { Ok(()) } else { Err(e) })
                {
                    this.state = State::Done;
                    return Poll::Ready(Some(Err(BodyError::Decode(e))));
                }
                continue;
            }
            match Pin::new(&mut this.inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                    Ok(data) => this.input = data,
                    Err(frame) => {
                        if let Ok(trailers) = frame.into_trailers() {
                            this.trailers = recoded_trailers(trailers);
                        }
                    }
                },
                Poll::Ready(Some(Err(e))) => {
                    this.state = State::Done;
                    return Poll::Ready(Some(Err(BodyError::Upstream(e.into()))));
                }
                Poll::Ready(None) => this.upstream_done = true,
                Poll::Pending => return Poll::Pending,
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.state.is_end(&self.trailers)
    }
}

impl<B> fmt::Debug for DecompressBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DecompressBody")
            .field("state", &self.state)
            .field("buffered", &self.input.len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::convert::Infallible;

    use http_body_util::BodyExt;
    use zipwire_codec::{Format, Level};

    use super::*;
    use crate::test_bodies::{futures_iter, text};

    #[tokio::test]
    async fn gzip_upstream_is_decoded_for_clients_without_gzip() {
        let data = text(500_000);
        let gz = zipwire_codec::compress(Format::Gzip, Level::DEFAULT, &data);
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = gz
            .chunks(7_000)
            .map(|c| Ok(Frame::data(Bytes::copy_from_slice(c))))
            .collect();
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let meter = Arc::new(BodyMeter::default());
        let mut body = Box::pin(DecompressBody::new(upstream, Limits::default(), meter));
        let mut plain = Vec::new();
        while let Some(frame) = body.frame().await {
            let chunk = frame.expect("no error").into_data().expect("data");
            assert!(chunk.len() <= DECODE_CHUNK);
            plain.extend_from_slice(&chunk);
        }
        assert_eq!(plain, data);
    }

    /// A whole br or zstd body in one upstream frame that decodes to many chunks: what the
    /// decoder keeps after taking all the input still comes out before the end is checked.
    #[tokio::test]
    async fn output_held_past_the_last_input_is_drained() {
        let data = text(500_000);
        let encoded = [
            (Coding::Br, {
                let mut out = Vec::new();
                let level = zipwire_codings::BrotliLevel::new(5).expect("level");
                zipwire_codings::Encode::finish(
                    &mut zipwire_codings::BrotliEncoder::new(level, 20),
                    &data,
                    &mut out,
                )
                .expect("br");
                out
            }),
            (Coding::Zstd, zstd::bulk::compress(&data, 3).expect("zstd")),
        ];
        for (coding, wire) in encoded {
            let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![Ok(Frame::data(wire.into()))];
            let upstream = http_body_util::StreamBody::new(futures_iter(frames));
            let meter = Arc::new(BodyMeter::default());
            let mut body = Box::pin(DecompressBody::of(
                coding,
                upstream,
                Limits::default(),
                meter,
            ));
            let mut plain = Vec::new();
            while let Some(frame) = body.frame().await {
                let chunk = frame.expect("no error").into_data().expect("data");
                plain.extend_from_slice(&chunk);
            }
            assert_eq!(plain, data, "{coding:?}");
        }
    }

    #[tokio::test]
    async fn digest_trailers_are_dropped_from_a_decoded_body() {
        let gz = zipwire_codec::compress(Format::Gzip, Level::FASTEST, b"hello");
        let mut trailers = HeaderMap::new();
        trailers.insert("repr-digest", http::HeaderValue::from_static("sha-256=:x:"));
        trailers.insert("digest", http::HeaderValue::from_static("md5=y"));
        trailers.insert("x-checksum", http::HeaderValue::from_static("abc"));
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![
            Ok(Frame::data(Bytes::from(gz))),
            Ok(Frame::trailers(trailers)),
        ];
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let body = DecompressBody::new(upstream, Limits::default(), Arc::new(BodyMeter::default()));
        let collected = body.collect().await.expect("no error");
        let names: Vec<_> = collected
            .trailers()
            .map(|t| t.keys().map(|k| k.as_str().to_owned()).collect())
            .unwrap_or_default();
        assert_eq!(names, ["x-checksum"]);
        assert_eq!(collected.to_bytes(), &b"hello"[..]);
    }

    #[tokio::test]
    async fn hitting_the_size_cap_is_reported_as_the_cap() {
        let gz = zipwire_codec::compress(Format::Gzip, Level::FASTEST, &text(50_000));
        let frames: Vec<Result<Frame<Bytes>, Infallible>> = vec![Ok(Frame::data(Bytes::from(gz)))];
        let upstream = http_body_util::StreamBody::new(futures_iter(frames));
        let limits = Limits {
            max_output: Some(10_000),
            max_ratio: None,
        };
        let body = DecompressBody::new(upstream, limits, Arc::new(BodyMeter::default()));
        let error = body.collect().await.expect_err("over the cap");
        assert!(
            matches!(
                error,
                BodyError::Decode(DecodeError::LimitExceeded { limit: 10_000 })
            ),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            "upstream gzip body decodes past compression.gunzip_max_output (10000 bytes)"
        );
    }

    #[tokio::test]
    async fn truncated_or_corrupt_gzip_upstream_is_an_error() {
        let data = text(50_000);
        let gz = zipwire_codec::compress(Format::Gzip, Level::FASTEST, &data);
        let mut corrupt = gz.clone();
        corrupt[gz.len() - 6] ^= 0xff; // inside the CRC/ISIZE trailer
        for (name, bytes) in [
            ("truncated", gz[..gz.len() - 3].to_vec()),
            ("corrupt", corrupt),
        ] {
            let frames: Vec<Result<Frame<Bytes>, Infallible>> =
                vec![Ok(Frame::data(Bytes::from(bytes)))];
            let upstream = http_body_util::StreamBody::new(futures_iter(frames));
            let body =
                DecompressBody::new(upstream, Limits::default(), Arc::new(BodyMeter::default()));
            let error = body.collect().await.expect_err(name);
            assert!(matches!(error, BodyError::Decode(_)), "{name}");
            assert_eq!(error.to_string(), "upstream gzip body does not decode");
        }
    }
}
