#![no_main]
//! `porter::fuzzing::request_head` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::request_head(data));
