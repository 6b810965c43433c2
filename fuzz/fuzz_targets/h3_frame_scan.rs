#![no_main]
//! `porter::fuzzing::h3_frame_scan` (see src/fuzzing.rs).

libfuzzer_sys::fuzz_target!(|data: &[u8]| porter::fuzzing::h3_frame_scan(data));
