//! The life of a windowed stream (zstd, brotli): compressing, then, once the budget's switch
//! is seen, stepped down for the rest of the body, then finished. The states and their
//! transitions are the same for every windowed coding; what a coding does in each (its
//! compressed calls, how it closes the compressed part, how it writes stored bytes) is its
//! [`Stream`].

use crate::{Encode, EncodeFailure, Flush};
use zipwire_rules::Coding;

/// What a windowed coding does at each step of its stream.
pub trait Stream: Send {
    /// The coding, for failures.
    const CODING: Coding;

    /// Compresses a call of the body: [`Flush::Continue`] for a full call, [`Flush::Sync`]
    /// when everything so far must decode.
    fn compress(
        &mut self,
        input: &[u8],
        flush: Flush,
        out: &mut Vec<u8>,
    ) -> Result<(), &'static str>;

    /// Compresses the last `input` and ends the compressed stream; its state is freed.
    fn end(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), &'static str>;

    /// Closes the compressed part at a point where stored bytes may follow, and frees the
    /// state: the step-down's first call.
    fn close(&mut self, out: &mut Vec<u8>) -> Result<(), &'static str>;

    /// Appends `input` uncompressed, in the coding's own stored form, and the stream's end
    /// when `is_final`.
    fn store(&mut self, input: &[u8], is_final: bool, out: &mut Vec<u8>);

    /// Bytes of state the stream holds now.
    fn memory(&self) -> usize;
}

/// Where a stream stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stage {
    Compressing,
    /// Step-down asked: the compressed part is closed at the next call.
    Asked,
    Storing,
}

/// A windowed stream driven through its stages: [`Encode`] for any [`Stream`].
pub struct Stepped<S> {
    stream: S,
    stage: Stage,
    finished: bool,
}

impl<S: Stream> Stepped<S> {
    /// A stream that starts compressing.
    pub(crate) fn starting(stream: S) -> Stepped<S> {
        Stepped {
            stream,
            stage: Stage::Compressing,
            finished: false,
        }
    }

    /// The coding's stream, to set up before the first call.
    pub(crate) fn stream_mut(&mut self) -> &mut S {
        &mut self.stream
    }

    fn failure(reason: &'static str) -> EncodeFailure {
        EncodeFailure {
            coding: S::CODING,
            reason,
        }
    }

    /// After a step-down: closes the compressed part once, then stores `input`.
    fn store(
        &mut self,
        input: &[u8],
        is_final: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeFailure> {
        if self.stage == Stage::Asked {
            self.stream.close(out).map_err(Self::failure)?;
            self.stage = Stage::Storing;
        }
        self.stream.store(input, is_final, out);
        Ok(())
    }
}

impl<S: Stream> Encode for Stepped<S> {
    fn encode(
        &mut self,
        input: &[u8],
        flush: Flush,
        out: &mut Vec<u8>,
    ) -> Result<(), EncodeFailure> {
        if self.finished {
            return Err(Self::failure("stream already finished"));
        }
        match self.stage {
            Stage::Asked | Stage::Storing => self.store(input, false, out),
            Stage::Compressing if input.is_empty() && flush == Flush::Continue => Ok(()),
            Stage::Compressing => self
                .stream
                .compress(input, flush, out)
                .map_err(Self::failure),
        }
    }

    fn finish(&mut self, input: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeFailure> {
        if self.finished {
            return Err(Self::failure("stream already finished"));
        }
        self.finished = true;
        match self.stage {
            Stage::Asked | Stage::Storing => self.store(input, true, out),
            Stage::Compressing => self.stream.end(input, out).map_err(Self::failure),
        }
    }

    fn step_down(&mut self, on: bool) {
        if on && self.stage == Stage::Compressing {
            self.stage = Stage::Asked;
        }
    }

    fn is_storing(&self) -> bool {
        self.stage != Stage::Compressing
    }

    fn memory(&self) -> usize {
        self.stream.memory()
    }

    fn is_windowed(&self) -> bool {
        true
    }
}
