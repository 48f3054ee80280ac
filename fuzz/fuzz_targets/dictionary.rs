//! RFC 9842's header fields (`Use-As-Dictionary`, `Available-Dictionary`, `Dictionary-ID`, the
//! dictionary codings in `Accept-Encoding`, a dictionary's lifetime), the version patterns of
//! asset paths, and `dcz`/`dcb` bodies, on arbitrary bytes. The checks live in
//! `zipwire_proxy::fuzzing::dictionary`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    zipwire_proxy::fuzzing::dictionary(data);
});
