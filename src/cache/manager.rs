//! The cache manager: a dedicated thread per zone (NGINX's cache manager
//! process) that keeps the zone within its limits, least recently used
//! first:
//!
//! - `inactive`: entries not used for that long go, even if still valid;
//! - `max_size`: entries go until the sum of on-disk sizes fits;
//! - `min_free`: entries go while the file system has less free space;
//! - files handed over by request paths: temp files of writers dropped
//!   mid-fill, and entries the index evicted when the keys zone was full;
//! - before each pass, whether the zone's directory can still be used
//!   (`health.rs`).
//!
//! Each pass removes at most `manager_files` entries per batch and stops
//! batching after `manager_threshold`; with work left it sleeps
//! `manager_sleep`, otherwise up to a second (it wakes at once when a
//! request hands it a file). Removal is by `unlink` through the disk layer
//! inline — on this thread, never on an event loop. An entry is not
//! removed if a new complete file of its key was stored meanwhile.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use super::{CacheZone, Chores, Evicted, KeyHash};
use crate::disk::Io;
use crate::util::thread_user::ThreadUser;

/// Longest idle sleep between passes.
const IDLE: Duration = Duration::from_secs(1);

/// Starts the manager thread of `zone`; it ends when the zone is dropped.
pub(crate) fn spawn(zone: &Arc<CacheZone>, user: Option<ThreadUser>) -> io::Result<()> {
    let chores = zone.chores.clone();
    super::loader::spawn_thread(
        zone,
        user,
        "cm-",
        "manager",
        |_| {},
        move |weak| {
            let Ok(rt) = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            else {
                return;
            };
            let io = Io::inline();
            loop {
                rt.block_on(drain(&weak, &chores, &io));
                let Some(zone) = weak.upgrade() else { return };
                rt.block_on(super::health::check(&zone, &io));
                let more = rt.block_on(pass(&zone, &io));
                let sleep = if more {
                    zone.spec().manager_sleep
                } else {
                    IDLE
                };
                drop(zone);
                let files = chores.files.lock().unwrap();
                if files.is_empty() {
                    drop(chores.wake.wait_timeout(files, sleep).unwrap());
                }
            }
        },
    )
}

async fn unlink(zone: Option<&CacheZone>, io: &Io, path: &Path) {
    if let Err(e) = io.unlink(path).await {
        if e.kind() != io::ErrorKind::NotFound {
            if let Some(z) = zone {
                z.log_failure(&e, "unlink", path);
            }
        }
    }
}

/// Removes the files requests handed over.
async fn drain(zone: &Weak<CacheZone>, chores: &Chores, io: &Io) {
    loop {
        let Some(path) = chores.files.lock().unwrap().pop_front() else {
            return;
        };
        let z = zone.upgrade();
        if let Some(z) = &z {
            // A new entry of the key was stored meanwhile: keep it.
            let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
            if let Some(h) = KeyHash::from_hex(name) {
                if z.index.peek(&h).is_some_and(|n| n.exists) {
                    continue;
                }
            }
        }
        unlink(z.as_deref(), io, &path).await;
    }
}

async fn remove_all(zone: &CacheZone, io: &Io, gone: Vec<Evicted>) {
    for e in gone.into_iter().filter(|e| e.exists) {
        if zone.index.peek(&e.hash).is_some_and(|n| n.exists) {
            continue;
        }
        let path: PathBuf = zone.entry_path(&e.hash);
        unlink(Some(zone), io, &path).await;
    }
}

/// One manager pass over `zone`; `true` when work is left.
pub async fn pass(zone: &CacheZone, io: &Io) -> bool {
    let spec = zone.spec();
    let started = Instant::now();
    let batch = spec.manager_files.max(1);
    loop {
        let gone = zone
            .index
            .expire(Instant::now(), spec.inactive, spec.max_size, batch);
        let full = gone.len() >= batch;
        remove_all(zone, io, gone).await;
        if !full {
            break;
        }
        if started.elapsed() >= spec.manager_threshold {
            return true;
        }
    }
    if let Some(min) = spec.min_free {
        // One entry at a time, then look again, as NGINX's forced expiry
        // does: free space is a fact of the file system, not of the index.
        let mut removed = 0;
        loop {
            let free = match io.free_space(zone.path()).await {
                Ok(f) => f,
                Err(_) => break,
            };
            if free >= min {
                break;
            }
            let gone = zone.index.evict_lru(1);
            if gone.is_empty() {
                break;
            }
            remove_all(zone, io, gone).await;
            removed += 1;
            if removed >= batch || started.elapsed() >= spec.manager_threshold {
                return true;
            }
        }
    }
    false
}
