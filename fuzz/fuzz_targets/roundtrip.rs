//! The encoders on arbitrary chunks, decoded back with ours and flate2
//! (`zipwire_codec::fuzzing::roundtrip`).

#![no_main]

libfuzzer_sys::fuzz_target!(|case: zipwire_codec::fuzzing::RoundtripCase| {
    zipwire_codec::fuzzing::roundtrip(&case)
});
