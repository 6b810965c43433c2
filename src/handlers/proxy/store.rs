//! `proxy_store` (`fastcgi_store`, `uwsgi_store`, `scgi_store`): an
//! upstream's 200 answer saved as a file while it is sent, as NGINX's
//! `ngx_http_upstream_store`. [`StoreBody`] wraps the response's body
//! stream: each piece passed on is appended to a temp file under the
//! module's temp path (`*_temp_path`, else `proxy_temp` under the
//! prefix) on the disk layer's pool, and once the body has ended whole
//! (its `Content-Length` met, or the upstream's close) the file is moved
//! into place (`disk::StoreFile::commit`: `*_store_access`, the
//! `Last-Modified` time, missing directories made) before the last piece
//! is handed on, so a client that has the whole answer finds the file.
//! A client that leaves mid-body does not stop the store: as NGINX (which
//! neither checks for a broken client connection nor stops reading on a
//! downstream error when `u->store` is set) the rest of the body is read
//! into the file by a task of its own. A body cut short or a failed write
//! unlinks the temp file: no partial file is ever left. Only what NGINX
//! stores is stored: a 200 to a request other than HEAD, with
//! `*_buffering` on.

use std::path::PathBuf;

use tokio::task::JoinHandle;

use super::fill::Ended;
use super::knobs::Knobs;
use super::request::next_temp_number;
use crate::cache::TempPath;
use crate::disk::{Io, StoreFile};
use crate::handlers::disk_io;
use crate::handlers::outcome::Env;
use crate::http::context::RequestCtx;
use crate::http::response::{Body, BodyStream, ChunkFuture, Response, StreamBody};
use crate::log::{Level, RequestLog};

/// What a response needs to be stored, taken before it becomes the
/// client's.
pub struct StorePlan {
    saver: Saver,
    to: PathBuf,
    access: u32,
    mtime: Option<i64>,
    expect: Option<u64>,
}

/// The plan for `ctx`'s upstream answer (`status`, its `Content-Length`
/// and `Last-Modified`), when the location stores it.
pub fn plan(
    ctx: &RequestCtx,
    env: &Env<'_>,
    k: &Knobs<'_>,
    status: u16,
    expect: Option<u64>,
    last_modified: Option<&str>,
) -> Option<StorePlan> {
    let store = k.store?;
    if status != 200 || ctx.is_head() || !k.buffering {
        return None;
    }
    let to = match &store.path {
        Some(t) => t.render(ctx),
        None => ctx.uri_file(),
    };
    let io = env.disk.offloaded(disk_io::route(ctx, env).ok()?);
    let temp = k.cache.temp_path.clone().unwrap_or_else(|| TempPath {
        path: store.default_temp.clone(),
        levels: Default::default(),
    });
    let mtime = last_modified
        .and_then(|v| httpdate::parse_http_date(v.trim()).ok())
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map(|d| d.as_secs() as i64);
    Some(StorePlan {
        saver: Saver {
            io,
            temp,
            file: None,
            log: ctx.log(env.log),
        },
        to: PathBuf::from(to),
        access: k.store_access,
        mtime,
        expect,
    })
}

/// Wraps `r`'s body so that it is stored by `plan` (a response without
/// a body stream is stored as an empty file now, as NGINX stores an empty
/// 200).
pub async fn wrap(r: &mut Response, plan: StorePlan) {
    match std::mem::replace(&mut r.body, Body::Empty) {
        Body::Stream(sb) => {
            let body = StoreBody {
                inner: sb.into_inner(),
                saver: Some(plan.saver),
                pending: None,
                finishing: None,
                held: None,
                to: plan.to,
                access: plan.access,
                mtime: plan.mtime,
                expect: plan.expect,
                seen: 0,
                ended: false,
                detached: false,
            };
            r.body = Body::Stream(StreamBody::new(Box::new(body)));
        }
        other => {
            r.body = other;
            if plan.expect.is_none_or(|n| n == 0) {
                plan.saver.commit(plan.to, plan.access, plan.mtime).await;
            }
        }
    }
}

/// The temp file being written, made at the first piece.
struct Saver {
    io: Io,
    temp: TempPath,
    file: Option<StoreFile>,
    log: RequestLog,
}

impl Saver {
    /// Appends `data` (the file made first if need be); `None` when that
    /// failed (logged, the temp file gone with the saver).
    async fn write(mut self, data: Vec<u8>) -> Option<Saver> {
        if self.file.is_none() {
            self.file = Some(self.create().await?);
        }
        let f = self.file.as_mut()?;
        if let Err(e) = f.append(data).await {
            let line = crate::disk::Failure::of(&e, "write", &f.temp_path().to_string_lossy());
            self.log.line(Level::Crit, format_args!("{}", line.line));
            return None;
        }
        Some(self)
    }

    /// A new temp file named as NGINX names one (the next number on a
    /// clash).
    async fn create(&self) -> Option<StoreFile> {
        loop {
            let name = format!("{:010}", next_temp_number());
            let path = self.temp.levels.dir_of(&self.temp.path, &name).join(&name);
            match StoreFile::create(&self.io, &path).await {
                Ok(f) => return Some(f),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => {
                    let f = crate::disk::Failure::of(&e, "open", &path.to_string_lossy());
                    self.log.line(Level::Crit, format_args!("{}", f.line));
                    return None;
                }
            }
        }
    }

    /// Moves the file into place (an empty one made for an empty body).
    async fn commit(mut self, to: PathBuf, access: u32, mtime: Option<i64>) {
        if self.file.is_none() {
            self.file = self.create().await;
        }
        if let Some(f) = self.file.take() {
            if let Err(line) = f.commit(&to, access, mtime).await {
                self.log.line(Level::Crit, format_args!("{line}"));
            }
        }
    }
}

/// A body stream that stores what it passes on. Cancel-safe as the
/// connection loop needs (a dropped `read_chunk` future loses nothing):
/// the write in flight, the commit and the last piece held back until
/// the commit is done all live in `self`.
struct StoreBody {
    inner: Box<dyn BodyStream>,
    /// The saver, when no write is in flight (`None` once given up).
    saver: Option<Saver>,
    pending: Option<JoinHandle<Option<Saver>>>,
    finishing: Option<JoinHandle<()>>,
    held: Option<Vec<u8>>,
    to: PathBuf,
    access: u32,
    mtime: Option<i64>,
    expect: Option<u64>,
    seen: u64,
    ended: bool,
    /// Moved to a task of its own: the client is gone.
    detached: bool,
}

impl Drop for StoreBody {
    fn drop(&mut self) {
        // Dropped before its end: the client went away. The rest is read
        // into the file by a task of its own; dropped in that task (cut
        // short), the temp file goes with the saver.
        let saving = self.saver.is_some() || self.pending.is_some();
        if self.detached || self.ended || !saving {
            return;
        }
        let rest = StoreBody {
            inner: std::mem::replace(&mut self.inner, Box::new(Ended)),
            saver: self.saver.take(),
            pending: self.pending.take(),
            finishing: None,
            held: None,
            to: std::mem::take(&mut self.to),
            access: self.access,
            mtime: self.mtime,
            expect: self.expect,
            seen: self.seen,
            ended: false,
            detached: true,
        };
        crate::metrics::timed::spawn(super::fill::drain(Box::new(rest)));
    }
}

impl StoreBody {
    /// Starts moving the file into place, with `last` written first.
    fn finish(&mut self, last: Option<Vec<u8>>) -> bool {
        let Some(saver) = self.saver.take() else {
            return false;
        };
        let (to, access, mtime) = (self.to.clone(), self.access, self.mtime);
        self.finishing = Some(crate::metrics::timed::spawn(async move {
            let saver = match last {
                Some(data) => saver.write(data).await,
                None => Some(saver),
            };
            if let Some(s) = saver {
                s.commit(to, access, mtime).await;
            }
        }));
        true
    }

    /// Waits for what is in flight: the write (its saver back, or given
    /// up) and the commit.
    async fn settle(&mut self) {
        if let Some(h) = self.pending.as_mut() {
            let back = h.await.ok().flatten();
            self.pending = None;
            self.saver = back;
        }
        if let Some(h) = self.finishing.as_mut() {
            let _ = h.await;
            self.finishing = None;
        }
    }
}

impl BodyStream for StoreBody {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(async move {
            self.settle().await;
            if let Some(piece) = self.held.take() {
                out.extend_from_slice(&piece);
                return Ok(true);
            }
            if self.ended {
                return Ok(false);
            }
            let r = self.inner.read_chunk(out).await;
            match &r {
                Ok(true) => {
                    self.seen += out.len() as u64;
                    if self.expect == Some(self.seen) && self.finish(Some(out.clone())) {
                        // Held in `self` first: a dropped future resumes
                        // waiting, then hands the piece on.
                        self.held = Some(std::mem::take(out));
                        self.settle().await;
                        if let Some(piece) = self.held.take() {
                            out.extend_from_slice(&piece);
                        }
                    } else if let Some(saver) = self.saver.take() {
                        let data = out.clone();
                        self.pending = Some(crate::metrics::timed::spawn(saver.write(data)));
                    }
                }
                Ok(false) => {
                    self.ended = true;
                    if self.expect.is_none_or(|n| n == self.seen) && self.finish(None) {
                        self.settle().await;
                    }
                    self.saver = None;
                }
                // Cut short: the temp file goes with the saver.
                Err(_) => self.saver = None,
            }
            r
        })
    }
}
