//! Whether a zone's directory can be used. A directory that disappears (a
//! disk unmounted or removed) or turns read-only (a failing disk remounted
//! `ro` by the kernel) takes its zone out of service with one log line:
//! the zone's requests then go to the upstream uncached, while the other
//! zones and the node keep serving. When the directory can be written
//! again the zone comes back with one line.
//!
//! The zone's manager thread decides, never an event loop: about once a
//! second (and at once when a writer failed, [`CacheZone::suspect`]) it
//! asks the file system for the directory's free space while the zone is
//! in service, and creates and removes a probe file in it after a writer
//! failed or while the zone is out of service. Only a failure that says
//! the directory itself is unusable counts (missing, read-only, I/O
//! error, permission, device gone); a full disk is the business of
//! `max_size` and `min_free`. NGINX has no such state: it logs every failed
//! fill and keeps going to the disk.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};

use super::CacheZone;
use crate::disk::Io;
use crate::log::Level;
use crate::util::errno_text;

/// A zone's service state.
#[derive(Debug, Default)]
pub(crate) struct Health {
    /// Out of service: requests bypass the zone.
    out: AtomicBool,
    /// A writer failed: probe the directory now.
    suspect: AtomicBool,
}

/// The probe file, at the top of the zone's directory (the loader ignores
/// files there).
const PROBE: &str = ".porter-probe";

/// Errors that say the directory cannot be used, as opposed to one entry's
/// trouble or a full disk.
fn directory_lost(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(
            libc::ENOENT
                | libc::ENOTDIR
                | libc::EROFS
                | libc::EIO
                | libc::EACCES
                | libc::EPERM
                | libc::ENXIO
                | libc::ENODEV
                | libc::ESTALE
                | libc::ENOTCONN
        )
    )
}

impl CacheZone {
    /// False while the zone's directory is unusable: its requests go to
    /// the upstream without the cache.
    pub fn in_service(&self) -> bool {
        !self.health.out.load(Ordering::Acquire)
    }

    /// A write into the zone failed: the manager probes the directory at
    /// once.
    pub(crate) fn suspect(&self) {
        if self.in_service() && !self.health.suspect.swap(true, Ordering::AcqRel) {
            self.chores.wake.notify_one();
        }
    }

    fn take_out(&self, op: &str, path: &std::path::Path, e: &io::Error) {
        if !self.health.out.swap(true, Ordering::AcqRel) {
            self.error_log().log(
                Level::Crit,
                format_args!(
                    "cache \"{}\" is out of service: {op}() \"{}\" failed {}; its requests \
                     go to the upstream uncached until the directory can be written again",
                    self.name(),
                    path.display(),
                    errno_text(e)
                ),
            );
        }
    }

    fn bring_back(&self) {
        if self.health.out.swap(false, Ordering::AcqRel) {
            self.error_log().log(
                Level::Notice,
                format_args!(
                    "cache \"{}\" is back in service: \"{}\" can be written",
                    self.name(),
                    self.path().display()
                ),
            );
        }
    }
}

/// Creates and removes the probe file: `Err((op, error))` on the first
/// call that fails.
async fn probe(zone: &CacheZone, io: &Io) -> Result<(), (&'static str, io::Error)> {
    let path = zone.path().join(PROBE);
    // A probe file left by a crash.
    let _ = io.unlink(&path).await;
    let file = io.create(&path).await.map_err(|e| ("open", e))?;
    drop(file);
    io.unlink(&path).await.map_err(|e| ("unlink", e))
}

/// One check of `zone`'s directory, on its manager thread.
pub(crate) async fn check(zone: &CacheZone, io: &Io) {
    let suspect = zone.health.suspect.swap(false, Ordering::AcqRel);
    if zone.in_service() && !suspect {
        // Cheap: one statvfs. A directory that is gone fails it.
        match io.free_space(zone.path()).await {
            Err(e) if directory_lost(&e) => zone.take_out("statvfs", zone.path(), &e),
            _ => {}
        }
        return;
    }
    match probe(zone, io).await {
        Ok(()) => zone.bring_back(),
        Err((op, e)) if directory_lost(&e) => zone.take_out(op, &zone.path().join(PROBE), &e),
        Err(_) => {}
    }
}
