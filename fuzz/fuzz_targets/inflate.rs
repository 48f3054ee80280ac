//! The decoder on arbitrary bytes and limits, one shot and in chunks
//! (`zipwire_codec::fuzzing::inflate`).

#![no_main]

libfuzzer_sys::fuzz_target!(|case: zipwire_codec::fuzzing::InflateCase| {
    zipwire_codec::fuzzing::inflate(&case)
});
