//! Kernel TLS: probed once at start, not used. With the `tls` ULP a
//! server could hand rustls's traffic secrets to the kernel and go back to
//! `sendfile` on TLS connections. This machine's kernel has no
//! `CONFIG_TLS`, so such a data path could not be tested here; it is not
//! built (docs/design.md, *TLS*). The probe tells the operator which case
//! holds: a socket that is not connected answers `ENOTCONN` when the
//! module exists and `ENOENT` when it does not.

use std::io;

/// Whether the kernel offers the `tls` upper-layer protocol.
pub fn kernel_has_tls() -> io::Result<bool> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    let name = b"tls\0";
    // SAFETY: a valid socket, and a NUL-terminated name with its length.
    let r = unsafe {
        libc::setsockopt(
            std::os::fd::AsRawFd::as_raw_fd(&s),
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        Some(libc::ENOTCONN) | Some(libc::EEXIST) => Ok(true),
        Some(libc::ENOENT) => Ok(false),
        _ => Err(e),
    }
}
