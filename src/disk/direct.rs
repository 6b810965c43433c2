//! `directio N` (NGINX's directive): the body of a file of at least N bytes
//! is read around the page cache, with `O_DIRECT`, so a large file read
//! once does not push the hot small ones out of memory.
//!
//! A flag on the open file ([`OpenFile::set_direct`], set by the handler
//! that opened it) turns its [`OpenFile::read_at`] into [`read`]: the
//! aligned middle of the range with `O_DIRECT` on a second descriptor
//! (opened through `/proc/self/fd`: the shared descriptor of
//! `open_file_cache` must keep its own flags, where NGINX sets `O_DIRECT`
//! with `fcntl` on its one), the unaligned start and end through the page
//! cache, as NGINX reads them (`ngx_output_chain_align_file_buf` turns
//! direct I/O off for the part before the first boundary of
//! `directio_alignment` and for a last piece that does not fill a block).
//! A direct read always goes to the device, so it never runs on an event
//! loop: it takes the file's pool (`aio threads`, and `aio on`, whose ring
//! buffers are not aligned), or the `default` pool under `aio off` (the
//! directive declares it). Such a file is never `sendfile`d (NGINX copies
//! it through its output buffers too). A file system that refuses
//! `O_DIRECT` is read through the page cache, as NGINX serves it when its
//! `fcntl` fails.

use std::cell::RefCell;
use std::fs::File;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::fs::FileExt;
use std::sync::Arc;

use super::io::offload;
use super::open::{pread_full, OpenFile};
use super::pool::{Lane, ThreadPool};
use super::types::file_error;
use super::Disk;

/// How an open file's direct reads are made.
#[derive(Debug, Clone)]
pub(super) struct Direct {
    /// `directio_alignment`: offsets, lengths and buffers of direct reads
    /// are multiples of it.
    align: u64,
    /// Where the reads run (`None` only in unit tests: inline).
    pool: Option<Arc<ThreadPool>>,
    /// The `O_DIRECT` descriptor, opened by the first read; `None` inside
    /// once opening it failed (read through the page cache then).
    fd: RefCell<Option<Option<Arc<File>>>>,
}

impl Disk {
    /// `directio`: reads of `file` from now on bypass the page cache,
    /// aligned to `align` bytes (a power of two), on the file's pool, or
    /// the `default` pool when its route has none (`aio off`).
    pub fn set_direct(&self, file: &mut OpenFile, align: u64) {
        let pool = self.pools.get("default").cloned();
        file.set_direct(align, pool);
    }
}

impl OpenFile {
    /// Reads of this file from now on bypass the page cache, aligned to
    /// `align` bytes, on the file's own pool when its route has one, else
    /// on `pool`.
    pub(super) fn set_direct(&mut self, align: u64, pool: Option<Arc<ThreadPool>>) {
        // The few bytes read through the page cache bring no readahead in
        // with them (a flag on the open file: no I/O).
        let _ = rustix::fs::fadvise(&*self.file, 0, None, rustix::fs::Advice::Random);
        self.direct = Some(Direct {
            align: align.max(1),
            pool: self.io.pool.clone().or(pool),
            fd: RefCell::new(None),
        });
    }

    /// `directio_alignment` when reads bypass the page cache (such a file
    /// is not `sendfile`d): a reader that starts its reads on a multiple
    /// of it reads no page through the page cache but the file's last.
    pub fn direct_alignment(&self) -> Option<u64> {
        self.direct.as_ref().map(|d| d.align)
    }

    /// [`OpenFile::read_at`] of a file read with direct I/O.
    pub(super) async fn read_direct(
        &self,
        d: &Direct,
        buf: &mut [u8],
        offset: u64,
    ) -> io::Result<usize> {
        let file = self.file.clone();
        let fd = d.fd.borrow().clone();
        let (size, align, want) = (self.meta.size, d.align, buf.len());
        let task = move || -> io::Result<(Vec<u8>, Option<Arc<File>>)> {
            let fd = match fd {
                Some(known) => known,
                None => reopen(&file).ok().map(Arc::new),
            };
            let mut out = vec![0u8; want];
            let n = read(&file, fd.as_deref(), &mut out, offset, size, align)?;
            out.truncate(n);
            Ok((out, fd))
        };
        let (got, fd) = match &d.pool {
            Some(pool) => offload(pool, Lane::Bulk, task).await,
            None => task(),
        }
        .map_err(|e| file_error("pread", e))?;
        *d.fd.borrow_mut() = Some(fd);
        buf[..got.len()].copy_from_slice(&got);
        Ok(got.len())
    }
}

/// A second descriptor of `file` opened with `O_DIRECT`.
pub(super) fn reopen(file: &File) -> io::Result<File> {
    let path = format!("/proc/self/fd/{}", file.as_raw_fd());
    let fd = rustix::fs::open(
        path.as_str(),
        rustix::fs::OFlags::RDONLY | rustix::fs::OFlags::DIRECT | rustix::fs::OFlags::CLOEXEC,
        rustix::fs::Mode::empty(),
    )?;
    Ok(File::from(fd))
}

/// Reads `buf.len()` bytes of `file` (of `size` bytes) at `offset`, fewer
/// only at its end: the whole blocks of `align` bytes with `direct` (the
/// page cache when `None`), the part before the first boundary and after
/// the last whole block through `file`. Runs on a pool thread.
pub(super) fn read(
    file: &File,
    direct: Option<&File>,
    buf: &mut [u8],
    offset: u64,
    size: u64,
    align: u64,
) -> io::Result<usize> {
    let end = (offset + buf.len() as u64).min(size.max(offset));
    let mid_start = offset.next_multiple_of(align).min(end);
    let mid_end = mid_start + (end - mid_start) / align * align;
    let len = (end - offset) as usize;
    let (head, rest) = buf[..len].split_at_mut((mid_start - offset) as usize);
    let (mid, tail) = rest.split_at_mut((mid_end - mid_start) as usize);
    let mut n = pread_full(file, head, offset)?;
    if n < head.len() {
        return Ok(n);
    }
    let got = match direct {
        Some(d) if !mid.is_empty() => read_aligned(d, mid, mid_start, align)?,
        _ => pread_full(file, mid, mid_start)?,
    };
    n += got;
    if got < mid.len() {
        return Ok(n);
    }
    Ok(n + pread_full(file, tail, mid_end)?)
}

/// Fills `out` (a multiple of `align` bytes) from `d` at the aligned
/// `start` through a buffer aligned to `align`, until it is full or the
/// file ends.
fn read_aligned(d: &File, out: &mut [u8], start: u64, align: u64) -> io::Result<usize> {
    let align = align as usize;
    let mut space = vec![0u8; out.len() + align];
    let pad = space.as_ptr().align_offset(align);
    let aligned = &mut space[pad..pad + out.len()];
    let mut done = 0;
    while done < aligned.len() {
        match d.read_at(&mut aligned[done..], start + done as u64) {
            Ok(0) => break,
            Ok(n) => {
                done += n;
                if !n.is_multiple_of(align) {
                    // a short read ends at the end of the file
                    break;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    out[..done].copy_from_slice(&aligned[..done]);
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn temp_file(len: usize) -> (std::path::PathBuf, File) {
        let dir = std::env::temp_dir().join(format!("porter-direct-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join(format!("f{len}"));
        let mut f = File::create(&p).unwrap();
        let body: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        f.write_all(&body).unwrap();
        f.sync_all().unwrap();
        (p.clone(), File::open(&p).unwrap())
    }

    #[test]
    fn every_range_reads_the_files_bytes_around_the_alignment() {
        let len = 70_000;
        let (path, f) = temp_file(len);
        let d = reopen(&f).ok();
        for align in [512u64, 4096] {
            for (offset, want) in [
                (0u64, 65_536usize),
                (0, 100_000),
                (1, 511),
                (511, 2),
                (512, 512),
                (513, 4096),
                (4096, 69_999 - 4096),
                (69_632, 1000),
                (69_999, 10),
                (70_000, 10),
            ] {
                let mut buf = vec![0u8; want];
                let n = read(&f, d.as_ref(), &mut buf, offset, len as u64, align).unwrap();
                let end = (offset + want as u64).min(len as u64).max(offset);
                assert_eq!(n as u64, end - offset, "{offset}+{want} align {align}");
                let expect: Vec<u8> = (offset..end).map(|i| (i % 251) as u8).collect();
                assert!(buf[..n] == expect[..], "bytes at {offset} align {align}");
            }
        }
        std::fs::remove_file(path).unwrap();
    }
}
