//! The windowed encoder driven by arbitrary calls (`zipwire_codec::fuzzing::window`).

#![no_main]

libfuzzer_sys::fuzz_target!(|case: zipwire_codec::fuzzing::WindowCase| {
    zipwire_codec::fuzzing::window(&case)
});
