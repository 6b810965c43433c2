//! The destination address of a datagram that reached a wildcard UDP
//! socket (`listen 53 udp`, `listen [::]:53 udp`), and answers sent from
//! it, as NGINX does with `IP_PKTINFO` and `IPV6_RECVPKTINFO`: without
//! them `$server_addr` would be the wildcard, and the kernel would pick an
//! answer's source address by route — one a client that sent to another
//! of the host's addresses drops. Written over `libc::recvmsg` and
//! `sendmsg` as `tls/ktls.rs` is: neither socket2 nor rustix builds
//! `IP_PKTINFO` control messages, and nix's need a crate porter does not
//! build.

use std::io;
use std::mem::size_of;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::RawFd;

use socket2::SockAddr;

/// Room for one `in6_pktinfo` control message (the larger of the two).
const CONTROL: usize = 64;

/// Asks the kernel for each datagram's destination address.
pub(super) fn enable(fd: RawFd, v6: bool) -> io::Result<()> {
    let (level, opt) = match v6 {
        false => (libc::IPPROTO_IP, libc::IP_PKTINFO),
        true => (libc::IPPROTO_IPV6, libc::IPV6_RECVPKTINFO),
    };
    let on: libc::c_int = 1;
    // SAFETY: a pointer to an int and its size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&on as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    match r {
        0 => Ok(()),
        _ => Err(io::Error::last_os_error()),
    }
}

/// One datagram into `buf`, without waiting: its length, its source and
/// the address it was sent to (when the kernel said).
pub(super) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, SocketAddr, Option<IpAddr>)> {
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let mut control = [0u64; CONTROL / 8];
    let mut dst = None;
    // SAFETY: `msg` points at live buffers of the lengths it names (the
    // name's storage and length are socket2's); the CMSG walk stays in
    // the control bytes the kernel wrote.
    let (n, from) = unsafe {
        SockAddr::try_init(|name, len| {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_name = name.cast();
            msg.msg_namelen = *len;
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = CONTROL as _;
            let n = libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT);
            if n < 0 {
                return Err(io::Error::last_os_error());
            }
            *len = msg.msg_namelen;
            dst = destination(&msg);
            Ok(n as usize)
        })?
    };
    let from = from.as_socket().ok_or(io::ErrorKind::InvalidData)?;
    Ok((n, from, dst))
}

/// The destination address in `msg`'s control messages.
///
/// # Safety
/// `msg` is a `recvmsg` result whose control bytes the kernel wrote.
unsafe fn destination(msg: &libc::msghdr) -> Option<IpAddr> {
    let mut c = libc::CMSG_FIRSTHDR(msg);
    while !c.is_null() {
        let data = libc::CMSG_DATA(c);
        match ((*c).cmsg_level, (*c).cmsg_type) {
            (libc::IPPROTO_IP, libc::IP_PKTINFO) => {
                let p = std::ptr::read_unaligned(data as *const libc::in_pktinfo);
                return Some(Ipv4Addr::from(u32::from_be(p.ipi_addr.s_addr)).into());
            }
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) => {
                let p = std::ptr::read_unaligned(data as *const libc::in6_pktinfo);
                return Some(Ipv6Addr::from(p.ipi6_addr.s6_addr).into());
            }
            _ => {}
        }
        c = libc::CMSG_NXTHDR(msg, c);
    }
    None
}

/// Sends `data` to `peer` from `src`, without waiting.
pub(super) fn send(fd: RawFd, data: &[u8], peer: SocketAddr, src: IpAddr) -> io::Result<usize> {
    let to = SockAddr::from(peer);
    let mut iov = libc::iovec {
        iov_base: data.as_ptr() as *mut _,
        iov_len: data.len(),
    };
    let mut control = [0u64; CONTROL / 8];
    // SAFETY: zeroed msghdr is valid; its name, data and control point at
    // live buffers of the lengths given, the control message built in
    // `control`, which has room for it.
    let n = unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_name = to.as_ptr() as *mut _;
        msg.msg_namelen = to.len();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        let (level, kind, size) = match src {
            IpAddr::V4(_) => (
                libc::IPPROTO_IP,
                libc::IP_PKTINFO,
                size_of::<libc::in_pktinfo>(),
            ),
            IpAddr::V6(_) => (
                libc::IPPROTO_IPV6,
                libc::IPV6_PKTINFO,
                size_of::<libc::in6_pktinfo>(),
            ),
        };
        msg.msg_controllen = libc::CMSG_SPACE(size as u32) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = level;
        (*c).cmsg_type = kind;
        (*c).cmsg_len = libc::CMSG_LEN(size as u32) as _;
        let data = libc::CMSG_DATA(c);
        match src {
            IpAddr::V4(a) => {
                let mut p: libc::in_pktinfo = std::mem::zeroed();
                p.ipi_spec_dst.s_addr = u32::from(a).to_be();
                std::ptr::write_unaligned(data as *mut libc::in_pktinfo, p);
            }
            IpAddr::V6(a) => {
                let mut p: libc::in6_pktinfo = std::mem::zeroed();
                p.ipi6_addr.s6_addr = a.octets();
                std::ptr::write_unaligned(data as *mut libc::in6_pktinfo, p);
            }
        }
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL)
    };
    match n {
        n if n < 0 => Err(io::Error::last_os_error()),
        n => Ok(n as usize),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::fd::AsRawFd;

    #[test]
    fn a_wildcard_socket_learns_the_destination_and_answers_from_it() {
        let server = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
        let port = server.local_addr().unwrap().port();
        enable(server.as_raw_fd(), false).unwrap();
        let client = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // Connected to 127.0.0.2: only an answer from there is taken.
        client.connect(("127.0.0.2", port)).unwrap();
        client.send(b"ping").unwrap();
        let mut buf = [0u8; 16];
        server
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        // Wait (blocking) for the datagram, then read it with recvmsg.
        let mut peek = [0u8; 1];
        let _ = server.peek(&mut peek);
        let (n, from, dst) = recv(server.as_raw_fd(), &mut buf).unwrap();
        assert_eq!(
            (&buf[..n], from),
            (&b"ping"[..], client.local_addr().unwrap())
        );
        let dst = dst.expect("the destination");
        assert_eq!(dst, IpAddr::from([127, 0, 0, 2]));
        send(server.as_raw_fd(), b"pong", from, dst).unwrap();
        client
            .set_read_timeout(Some(std::time::Duration::from_secs(2)))
            .unwrap();
        let n = client.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"pong");
    }
}
