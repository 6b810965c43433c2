#![no_main]
//! `porter::fuzzing::h3_request` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::h3_request(data));
