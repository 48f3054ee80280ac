//! `Accept-Encoding` negotiation on arbitrary header lines, then the compression decision and
//! header rewrite for a request carrying them; the same bytes as the request and response
//! heads of `fuzzing::rules` (the decision, and the cache's admission and freshness rules).
//! The checks live in `zipwire_proxy::fuzzing`.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    zipwire_proxy::fuzzing::accept_encoding(data);
    zipwire_proxy::fuzzing::rules(data);
});
