//! One test binary for static files, locations and media: each file listed below is a
//! module of this crate, as tests are filed by feature (docs/design.md,
//! "Tests"). One crate per area rather than one per file: each binary
//! compiles `tests/common/` and links the library once, which is most of
//! the test build's time. Run one file's tests with
//! `cargo test --release --test area_static FILE::`.

mod common;

mod autoindex;
mod conditional_requests;
mod dav;
mod disable_symlinks;
mod empty_gif;
mod error_page_redirect;
mod first_minute;
mod flv;
mod if_range_date;
mod locations;
mod mp4;
mod msie_refresh;
mod random_index;
mod ranges;
mod rewrite_escaping;
mod startup_notices;
mod static_files;
mod try_files_alias;
