#![no_main]
//! `porter::fuzzing::upstream_response` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::upstream_response(data));
