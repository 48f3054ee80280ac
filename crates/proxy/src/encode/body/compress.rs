//! [`CompressBody`]: compresses an upstream body as it streams, in encoder calls gathered
//! by a [`FlushPolicy`].

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::HeaderMap;
use http_body::{Body, Frame};
use tokio::time::Sleep;
use zipwire_adapt::Permit;

use super::gather::{GatherGate, Reserve, Share, STALL};
use super::{recoded_trailers, BodyError, BodyMeter, FlushPolicy, State};
use zipwire_codings::{BodyEncoder, Flush};

/// Why an encoder call is made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Call {
    /// The call is full and more of the body follows.
    Full,
    /// The upstream paused: what was gathered must reach the client decodable.
    Pause,
    /// The body ended.
    Final,
}

/// What `poll_frame` returns.
type Polled = Poll<Option<Result<Frame<Bytes>, BodyError>>>;

/// Smallest growth of the input buffer, so a body arriving in small frames is not copied on
/// every frame.
const GROW_STEP: usize = 16 * 1024;

/// A body that compresses another body as it streams.
pub struct CompressBody<B: Body> {
    inner: B,
    encoder: BodyEncoder,
    pub(super) pending: Vec<u8>,
    /// Input bytes of the call being gathered (see [`Self::call_size`]).
    call: usize,
    /// The part of an upstream frame past the end of the last call, taken before anything new.
    carry: Option<B::Data>,
    policy: FlushPolicy,
    timer: Option<Pin<Box<Sleep>>>,
    trailers: Option<HeaderMap>,
    state: State,
    store_only: Option<Arc<AtomicBool>>,
    /// A windowed encoder may hold input of full calls back: a pause must flush it even when
    /// nothing new was gathered.
    unflushed: bool,
    /// This body's share of the proxy's gather budget, if it has one ([`GatherGate`]).
    share: Option<Share>,
    /// The memory gate's permit for this stream (its buffers and its encoder's state), if
    /// the proxy has a gate: held while the body lives, and cut to the buffers once the
    /// encoder has stepped down and let its state go.
    permit: Option<Permit>,
    meter: Arc<BodyMeter>,
}

impl<B: Body> CompressBody<B> {
    /// Wraps `inner`, compressing with `encoder` (a fresh stream of any coding: a
    /// [`BodyEncoder`], or an encoder that converts into one, such as
    /// [`zipwire_codec::Encoder`] for gzip levels 1-3 or a
    /// [`ZstdEncoder`](zipwire_codings::ZstdEncoder)).
    pub fn new(
        inner: B,
        encoder: impl Into<BodyEncoder>,
        policy: FlushPolicy,
        meter: Arc<BodyMeter>,
    ) -> CompressBody<B> {
        CompressBody {
            inner,
            encoder: encoder.into(),
            pending: Vec::new(),
            call: policy.coalesce,
            carry: None,
            policy,
            timer: None,
            trailers: None,
            state: State::Streaming,
            store_only: None,
            unflushed: false,
            share: None,
            permit: None,
            meter,
        }
    }

    /// Holds `permit`, the memory gate's for this stream, until the body is dropped; once the
    /// encoder steps down, the part for state it no longer holds goes back to the gate (a
    /// zstd or brotli stream frees its window then), so that new responses can compress.
    pub fn with_permit(mut self, permit: Permit) -> CompressBody<B> {
        self.permit = Some(permit);
        self
    }

    /// Gathers calls within `gate`'s budget: the input of each call is read only once the
    /// budget has room for it (see [`GatherGate`]).
    pub fn with_gather_gate(mut self, gate: GatherGate) -> CompressBody<B> {
        self.share = Some(Share::new(gate));
        self
    }

    /// Follows a budget's step-down switch: while it is set, calls of a stateless gzip encoder
    /// write stored blocks; the other encoders stop compressing for the rest of the body once
    /// they have seen the switch set ([`Encode::step_down`](zipwire_codings::Encode)).
    pub fn with_step_down(mut self, store_only: Arc<AtomicBool>) -> CompressBody<B> {
        self.store_only = Some(store_only);
        self
    }

    /// Whether calls are gathered whole whatever the pauses: the upstream announced the body's
    /// length and the flush delay is not zero (see [`FlushPolicy`]). Otherwise gathered input
    /// is compressed when the upstream pauses, at once or after the delay.
    pub fn gathers_whole_calls(&self) -> bool {
        !self.policy.delay.is_zero() && self.inner.size_hint().upper().is_some()
    }

    /// Makes room for `more` bytes of input. A body of known length gets its whole call at
    /// once: its bytes are on their way, and growing in steps would copy the input again at
    /// each step. Otherwise the buffer grows in steps with what arrives and never past the
    /// call, never by doubling: with hundreds of streams waiting on slow upstreams,
    /// half-filled buffers are most of the proxy's memory.
    fn grow_pending(&mut self, more: usize, known_length: bool) {
        let need = self.pending.len() + more;
        if need <= self.pending.capacity() {
            return;
        }
        let step = if known_length {
            self.call
        } else {
            self.pending.capacity() + GROW_STEP
        };
        let target = need.max(step).min(self.call.max(need));
        self.pending.reserve_exact(target - self.pending.len());
    }

    /// Input bytes for the next call, which starts with a frame of `first` bytes after which
    /// the upstream says `rest` more will come, if it knows.
    ///
    /// A body of known length is cut into the fewest calls of at most `coalesce` bytes, all
    /// of the same size: a 77 KB page is two calls of 38 KB rather than 64 KB and 13 KB. The
    /// short tail call would compress poorly on its own; two halves lose 2% of ratio against
    /// one 77 KB call, but compress 12% faster (on the haproxy.org page the encoder finds
    /// fewer, costlier matches in a smaller window) and hold half the memory while gathering.
    /// A body of unknown length is cut every `coalesce` bytes.
    ///
    /// A windowed encoder (zstd, brotli) refers back across calls, so a body of known length
    /// up to two calls is one call, compressed and freed at once (see
    /// `zipwire_codings`); a longer one is cut every `coalesce` bytes.
    fn call_size(&self, first: usize, rest: Option<u64>) -> usize {
        let call = self.call_size_unbounded(first, rest);
        // Never more than the whole gather budget: a share cannot grow past it, and a call it could
        // never cover would wait for it forever (with a 64 KiB budget, a zstd call of 2 ×
        // `coalesce` would spin the worker).
        match &self.share {
            Some(share) => call.min(share.capacity()),
            None => call,
        }
    }

    fn call_size_unbounded(&self, first: usize, rest: Option<u64>) -> usize {
        let coalesce = self.policy.coalesce.max(1);
        match rest {
            Some(rest) if self.encoder.as_encode().is_windowed() => {
                let body = rest.saturating_add(first as u64);
                if body <= 2 * coalesce as u64 {
                    usize::try_from(body).map_or(coalesce, |call| call.max(1))
                } else {
                    coalesce
                }
            }
            Some(rest) => {
                let body = rest.saturating_add(first as u64);
                let calls = body.div_ceil(coalesce as u64).max(1);
                usize::try_from(body.div_ceil(calls)).map_or(coalesce, |call| call.max(1))
            }
            None => coalesce,
        }
    }

    /// The upstream has nothing ready: compress what was gathered at once when the delay is
    /// zero, after `delay` when the body's length is unknown, else wait for the call to fill.
    /// A share of the gather budget is held at most [`STALL`] while the upstream is silent and
    /// other bodies wait for the budget: then what was gathered is compressed, or the share
    /// given back if nothing was.
    fn wait_for_more(
        &mut self,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let gathered = !self.pending.is_empty() || self.unflushed;
        let holding = self.share.as_ref().is_some_and(|share| share.held() > 0);
        let (wait, stall) = if !gathered {
            if !holding {
                return Poll::Pending;
            }
            (STALL, true)
        } else if self.policy.delay.is_zero() {
            return self.compress(Call::Pause);
        } else if self.gathers_whole_calls() {
            if !holding {
                return Poll::Pending;
            }
            (STALL, true)
        } else {
            (self.policy.delay, false)
        };
        let timer = self
            .timer
            .get_or_insert_with(|| Box::pin(tokio::time::sleep(wait)));
        if timer.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        if stall && !self.share.as_ref().is_some_and(Share::others_wait) {
            // Nobody waits for the budget: keep the share (and the call whole), look again
            // after another stall time.
            timer.as_mut().reset(tokio::time::Instant::now() + STALL);
            let _ = timer.as_mut().poll(cx);
            return Poll::Pending;
        }
        if !gathered {
            // The inner body holds the waker: the next input asks for a share again.
            self.timer = None;
            self.release_share();
            return Poll::Pending;
        }
        self.compress(Call::Pause)
    }

    /// Takes the share of the gather budget that the next input needs, before it is read.
    /// `Some` when the body must answer now instead: waiting for the budget, or a call cut
    /// short because the share could not grow.
    fn reserve_input(&mut self, cx: &mut Context<'_>) -> Option<Polled> {
        let rest = self.inner.size_hint().upper();
        let carried = self.carry.as_ref().map_or(0, bytes::Buf::remaining);
        if self.pending.is_empty() {
            self.call = self.call_size(carried, rest);
        }
        // A known length takes its whole call before reading it (see `grow_pending`);
        // otherwise the share grows with each frame read, before it is gathered.
        let want = if rest.is_some() {
            self.call
        } else {
            self.call.min(self.pending.len() + carried)
        };
        let share = self.share.as_mut()?;
        if want == 0 {
            return None;
        }
        match share.reserve(want, cx) {
            Reserve::Ready => None,
            Reserve::Unlimited => {
                self.share = None;
                None
            }
            Reserve::Cut if self.pending.is_empty() => None,
            Reserve::Cut => match self.compress(Call::Full) {
                // The encoder kept the call back; the share went with it, so this now waits
                // in line or goes on.
                Poll::Pending => self.reserve_input(cx),
                ready => Some(ready),
            },
            Reserve::Wait if self.unflushed => Some(self.compress(Call::Pause)),
            Reserve::Wait => {
                // Hold nothing while waiting: the last call's buffer goes back too.
                self.pending = Vec::new();
                Some(Poll::Pending)
            }
        }
    }

    /// Bytes of input the share covers beyond what was gathered; `usize::MAX` without a
    /// gate.
    fn share_room(&self) -> usize {
        self.share.as_ref().map_or(usize::MAX, |share| {
            share.held().saturating_sub(self.pending.len())
        })
    }

    fn release_share(&mut self) {
        if let Some(share) = self.share.as_mut() {
            share.release();
        }
    }

    /// Runs one encoder call over the gathered input and makes the frame of its output:
    /// nothing (pending) when the encoder kept a full call back for better matches.
    fn compress(&mut self, call: Call) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let started = super::thread_cpu();
        let mut out = Vec::with_capacity(self.pending.len() / 2 + 64);
        let encoder = self.encoder.as_encode_mut();
        if let Some(flag) = &self.store_only {
            encoder.step_down(flag.load(Ordering::Relaxed));
        }
        let stored = encoder.is_storing();
        let result = match call {
            Call::Full => encoder.encode(&self.pending, Flush::Continue, &mut out),
            Call::Pause => encoder.encode(&self.pending, Flush::Sync, &mut out),
            Call::Final => encoder.finish(&self.pending, &mut out),
        };
        self.meter.record(
            self.pending.len(),
            out.len(),
            super::thread_cpu().saturating_sub(started),
            stored,
        );
        if let Some(permit) = &mut self.permit {
            let encoder = self.encoder.as_encode();
            if encoder.is_storing() {
                // Input and output of a call, and what state the encoder still holds.
                let keep = 2 * self.policy.coalesce as u64 + encoder.memory() as u64;
                permit.shrink(permit.bytes().saturating_sub(keep));
            }
        }
        if call == Call::Final {
            // Nothing more will be gathered: give the buffer back now rather than when the
            // client has read the last frame.
            self.pending = Vec::new();
        } else {
            self.pending.clear();
        }
        self.timer = None;
        self.release_share();
        self.unflushed = call == Call::Full && self.encoder.as_encode().is_windowed();
        if let Err(failure) = result {
            self.state = State::Done;
            return Poll::Ready(Some(Err(BodyError::Encode(failure))));
        }
        if call == Call::Final {
            self.state = State::Trailers;
        } else if out.is_empty() {
            return Poll::Pending;
        }
        // The frame waits in the connection's queue until the client reads it: do not keep the
        // unused half of the estimate with it (shrinking in place costs no copy in practice).
        if out.capacity() - out.len() > 4096 {
            out.shrink_to_fit();
        }
        Poll::Ready(Some(Ok(Frame::data(Bytes::from(out)))))
    }
}

impl<B> Body for CompressBody<B>
where
    B: Body + Unpin,
    B::Data: bytes::Buf + Unpin,
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
            if let Some(answer) = this.reserve_input(cx) {
                return answer;
            }
            // What a frame held past the end of the last call comes before anything new.
            let mut data = match this.carry.take() {
                Some(data) => data,
                None => match Pin::new(&mut this.inner).poll_frame(cx) {
                    Poll::Ready(Some(Ok(frame))) => match frame.into_data() {
                        Ok(data) => data,
                        Err(frame) => {
                            if let Ok(trailers) = frame.into_trailers() {
                                this.trailers = recoded_trailers(trailers);
                            }
                            continue;
                        }
                    },
                    Poll::Ready(Some(Err(e))) => {
                        this.state = State::Done;
                        return Poll::Ready(Some(Err(BodyError::Upstream(e.into()))));
                    }
                    Poll::Ready(None) => return this.compress(Call::Final),
                    Poll::Pending => return this.wait_for_more(cx),
                },
            };
            let rest = this.inner.size_hint().upper();
            let available = bytes::Buf::remaining(&data);
            if this.pending.is_empty() {
                this.call = this.call_size(available, rest);
            }
            let mut take = available.min(this.call - this.pending.len());
            if take > this.share_room() {
                // Not covered yet: the share is asked for it first (`reserve_input`).
                this.carry = Some(data);
                continue;
            }
            this.grow_pending(take, rest.is_some());
            while take > 0 {
                let chunk = bytes::Buf::chunk(&data);
                let n = chunk.len().min(take);
                this.pending.extend_from_slice(&chunk[..n]);
                bytes::Buf::advance(&mut data, n);
                take -= n;
            }
            let more = bytes::Buf::has_remaining(&data) || rest != Some(0);
            if bytes::Buf::has_remaining(&data) {
                this.carry = Some(data);
            }
            // A full call goes out now, unless it is the body's last: that one waits for the
            // end, so it can be the final block.
            if this.pending.len() >= this.call && more {
                match this.compress(Call::Full) {
                    // The encoder kept the call back: go on reading.
                    Poll::Pending => continue,
                    ready => return ready,
                }
            }
        }
    }
    fn is_end_stream(&self) -> bool {
        self.state.is_end(&self.trailers)
    }
}

impl<B: Body> fmt::Debug for CompressBody<B> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CompressBody")
            .field("state", &self.state)
            .field("pending", &self.pending.len())
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests;
