//! Keeps porter's own machine code in memory. Under a memory cgroup at its
//! limit (a cache node whose page cache is full) the kernel reclaims clean
//! file pages — the executable's and the C library's code pages too — and
//! the next instruction fetched from an evicted page is a page fault that
//! reads it back from the disk, behind every cold read in the disk's queue:
//! an event loop then waits seconds for its own code (kernel stacks sampled
//! during bench S1 showed porter's threads in `filemap_fault` →
//! `folio_wait_bit_common`). So the master locks the read-only file
//! mappings of the executable and its libraries (`r-xp` and `r--p` in
//! `/proc/self/maps`: code, and the constants, unwinding tables and
//! relocation data beside it) with `mlock` before any worker starts: about
//! 4.5 MiB, resident for the life of the process. A table in `.rodata`
//! evicted under pressure faults just as code does.
//!
//! Written over `libc` and `/proc/self/maps`: no crate offers locking one
//! process's code mappings (memmap2 locks only its own mappings).

use std::io;

/// Locks every read-only file mapping of this process; returns the bytes
/// locked, or the first failure (for one `notice` line: the server runs on
/// without it, as before).
pub fn lock_code() -> io::Result<usize> {
    let maps = std::fs::read_to_string("/proc/self/maps")?;
    let mut locked = 0;
    for (start, end) in code_ranges(&maps) {
        let len = end - start;
        // SAFETY: the range is a mapping of this process that /proc listed;
        // mlock only pins its pages and changes no content.
        if unsafe { libc::mlock(start as *const libc::c_void, len) } != 0 {
            return Err(io::Error::last_os_error());
        }
        locked += len;
    }
    Ok(locked)
}

/// The (start, end) of the read-only (executable or not), file-backed
/// mappings in a `/proc/PID/maps` text: the program and its libraries at
/// start-up (writable ones are the data each process changes).
fn code_ranges(maps: &str) -> Vec<(usize, usize)> {
    maps.lines()
        .filter_map(|l| {
            let mut f = l.split_whitespace();
            let range = f.next()?;
            let perms = f.next()?;
            let path = f.nth(3)?;
            if !(perms.starts_with("r-x") || perms.starts_with("r--")) || !path.starts_with('/') {
                return None;
            }
            let (a, b) = range.split_once('-')?;
            Some((
                usize::from_str_radix(a, 16).ok()?,
                usize::from_str_radix(b, 16).ok()?,
            ))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_read_only_file_mappings_are_locked() {
        let maps = "\
55d0a000-55d0b000 r--p 00000000 fe:00 123 /usr/bin/porter
55d0b000-55d4b000 r-xp 00001000 fe:00 123 /usr/bin/porter
7f00a000-7f00c000 rw-p 00000000 00:00 0 
7f10a000-7f20a000 r-xp 00028000 fe:00 77 /usr/lib/x86_64-linux-gnu/libc.so.6
7ffd1000-7ffd3000 r-xp 00000000 00:00 0 [vdso]
";
        assert_eq!(
            code_ranges(maps),
            [
                (0x55d0a000, 0x55d0b000),
                (0x55d0b000, 0x55d4b000),
                (0x7f10a000, 0x7f20a000)
            ]
        );
        // The real process: its code is mapped and can be locked as root
        // (or within RLIMIT_MEMLOCK).
        let own = code_ranges(&std::fs::read_to_string("/proc/self/maps").unwrap());
        assert!(!own.is_empty());
    }
}
