//! QUIC's UDP sockets and how a datagram finds its worker.
//!
//! Each worker has its own `SO_REUSEPORT` UDP socket per `listen ...
//! quic` address (as for TCP), and its own QUIC endpoint on it. The
//! kernel's default spread hashes the 4-tuple, which keeps a connection
//! on one worker only while the client's address and port stay the same;
//! after a NAT rebinding or a migration its datagrams would hash to
//! another worker, which knows nothing of the connection. So porter
//! attaches a classic BPF program to the group (`SO_ATTACH_REUSEPORT_CBPF`,
//! no `CAP_BPF` and no eBPF map, unlike NGINX's `quic_bpf`): it reads the
//! first byte of the packet's destination connection ID and returns it
//! modulo the number of sockets. Every connection ID a worker issues
//! starts with that worker's index (`http3::endpoint::WorkerCids`), so
//! all of a connection's datagrams after the client's first flight reach
//! its worker whatever their source address; the client's first Initial
//! (a random ID it chose) lands on a worker by that ID, the same one for
//! each of its retransmissions. The socket's index in the group is its
//! order of binding, which `Listeners` keeps (worker i's socket is the
//! i-th bound; a reload that keeps the address keeps the sockets).

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;

use socket2::{Domain, Protocol, Socket, Type};

use crate::config::model::SocketBufs;
use crate::util::errno_text;

/// One worker's UDP socket for `addr`, non-blocking, in the address's
/// `SO_REUSEPORT` group.
pub fn bind_udp(addr: SocketAddr, bufs: SocketBufs) -> Result<UdpSocket, String> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| format!("socket() {addr} failed {}", errno_text(&e)))?;
    let setup = || -> io::Result<()> {
        s.set_reuse_port(true)?;
        if addr.is_ipv6() {
            s.set_only_v6(true)?;
        }
        s.set_nonblocking(true)?;
        s.set_cloexec(true)?;
        if let Some(n) = bufs.sndbuf {
            s.set_send_buffer_size(n)?;
        }
        if let Some(n) = bufs.rcvbuf {
            s.set_recv_buffer_size(n)?;
        }
        Ok(())
    };
    setup().map_err(|e| format!("setsockopt() {addr} failed {}", errno_text(&e)))?;
    s.bind(&addr.into())
        .map_err(|e| format!("bind() to {addr} failed {}", errno_text(&e)))?;
    Ok(s.into())
}

/// A plain UDP bind of `addr` first, so that another server on the port
/// is "Address already in use" rather than a silent share of it.
pub fn probe_free_udp(addr: SocketAddr) -> Result<(), String> {
    let s = Socket::new(Domain::for_address(addr), Type::DGRAM, Some(Protocol::UDP))
        .map_err(|e| format!("socket() {addr} failed {}", errno_text(&e)))?;
    if addr.is_ipv6() {
        let _ = s.set_only_v6(true);
    }
    s.bind(&addr.into())
        .map_err(|e| format!("bind() to {addr} failed {}", errno_text(&e)))
}

/// The steering program for a group of `n` sockets (see the module
/// header): the destination connection ID's first byte, modulo `n`.
fn program(n: u32) -> Vec<libc::sock_filter> {
    // The program sees the UDP payload: the QUIC packet.
    const LD_B_ABS: u16 = (libc::BPF_LD | libc::BPF_B | libc::BPF_ABS) as u16;
    const JSET: u16 = (libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K) as u16;
    const MOD: u16 = (libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K) as u16;
    const RET_A: u16 = (libc::BPF_RET | libc::BPF_A) as u16;
    let op = |code, jt, jf, k| libc::sock_filter { code, jt, jf, k };
    vec![
        // The header form bit: long (handshake) or short (1-RTT) header.
        op(LD_B_ABS, 0, 0, 0),
        op(JSET, 3, 0, 0x80),
        // Short header: the connection ID starts at byte 1.
        op(LD_B_ABS, 0, 0, 1),
        op(MOD, 0, 0, n),
        op(RET_A, 0, 0, 0),
        // Long header: version (4 bytes), the ID's length, then the ID.
        op(LD_B_ABS, 0, 0, 6),
        op(MOD, 0, 0, n),
        op(RET_A, 0, 0, 0),
    ]
}

/// Attaches the steering program to the `SO_REUSEPORT` group of `socket`
/// (one socket of the group carries it for all), for `n` sockets.
pub fn steer(socket: &UdpSocket, n: usize) -> io::Result<()> {
    let mut code = program(n.clamp(1, 256) as u32);
    let prog = libc::sock_fprog {
        len: code.len() as u16,
        filter: code.as_mut_ptr(),
    };
    // SAFETY: `prog` points at `code`, alive for the call; the kernel
    // copies the program.
    let r = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&prog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sends `payload` to the group's address and says which socket
    /// (by its index) received it.
    fn lands_on(socks: &[UdpSocket], payload: &[u8]) -> usize {
        let to = socks[0].local_addr().unwrap();
        let client = UdpSocket::bind("127.0.0.1:0").unwrap();
        client.send_to(payload, to).unwrap();
        let mut buf = [0u8; 64];
        for _ in 0..200 {
            for (i, s) in socks.iter().enumerate() {
                if s.recv_from(&mut buf).is_ok() {
                    return i;
                }
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        panic!("datagram lost");
    }

    #[test]
    fn datagrams_reach_the_socket_their_connection_id_names() {
        let first = bind_udp("127.0.0.1:0".parse().unwrap(), SocketBufs::default()).unwrap();
        let addr = first.local_addr().unwrap();
        let mut socks = vec![first];
        for _ in 1..4 {
            socks.push(bind_udp(addr, SocketBufs::default()).unwrap());
        }
        steer(&socks[0], socks.len()).unwrap();
        for worker in 0..4u8 {
            // A short header: flags, then the connection ID.
            let short = [0x40, worker, 0xaa, 0xbb, 0xcc, 1, 2, 3, 4, 5];
            assert_eq!(lands_on(&socks, &short), worker as usize);
            // A long header: flags, version, ID length 8, the ID.
            let long = [0xc0, 0, 0, 0, 1, 8, worker + 4, 9, 9, 9, 9, 9, 9, 9, 0];
            assert_eq!(lands_on(&socks, &long), worker as usize);
        }
    }
}
