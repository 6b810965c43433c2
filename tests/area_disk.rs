//! One test binary for the disk: aio, the pools, the ring, read-ahead, slow and throttled disks: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_disk FILE::`.

mod common;

mod aio;
mod aio_on;
mod directio;
mod disk_queue;
mod miss_scheduling;
mod readahead;
mod slow_disk;
