//! Kernel TLS (kTLS): after rustls's handshake, the record layer of a
//! client connection moves into the kernel, so the disk layer's
//! `sendfile` paths (and plain `send`/`recv`) work on TLS connections as
//! on plain ones — the kernel encrypts the pages on their way out.
//!
//! - [`probe`], once per process (the master calls it at start and logs
//!   one `notice`): does the kernel offer the `tls` ULP, and which of
//!   TLS 1.3's / 1.2's AEADs (AES-128-GCM, AES-256-GCM,
//!   ChaCha20-Poly1305) does it take for both directions? A throw-away
//!   loopback connection per cipher tries `TLS_TX` and `TLS_RX` with a
//!   zero key, so a connection is only switched to a cipher the kernel
//!   is known to accept.
//! - [`set_ulp`] on the accepted socket: fails harmlessly (the caller
//!   stays in user space) before anything of rustls is given up.
//! - [`install`]: rustls's exported traffic secrets and sequence numbers
//!   as `TLS_TX` and `TLS_RX` (both: rustls cannot keep decrypting once
//!   its secrets are extracted).
//! - [`recv`]: `recvmsg` with the record type in a control message:
//!   application data is returned, the peer's `close_notify` is the end,
//!   any other alert an error; a handshake record after the handshake (a
//!   TLS 1.3 `KeyUpdate`, a TLS 1.2 renegotiation) answers `close_notify`
//!   and ends the connection with an error: porter does not rekey a kTLS
//!   socket (the kernel could from 6.14 on, not 6.1), so the connection
//!   is closed cleanly instead.
//! - [`send_close_notify`]: the alert as a control record
//!   (`TLS_SET_RECORD_TYPE`).
//!
//! Written with `libc` rather than the `ktls` crate: that crate drives a
//! tokio-rustls stream (its `CorkStream` stops reads at the handshake's
//! end), while porter's loop reads records itself (`conn.rs` reads whole
//! records only when kTLS may follow) and owns the socket; the kernel ABI
//! is four `#[repr(C)]` structs. TLS 1.2 AES-GCM needs care that crate
//! does not take: the kernel sends an 8-byte explicit nonce that starts
//! at the given IV and is incremented per record, while rustls's nonces
//! were `IV ^ seq`; the kernel's start is placed past every nonce rustls
//! used ([`tls12_explicit_start`]), so no nonce repeats under the key.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;

use rustls::{ConnectionTrafficSecrets, ProtocolVersion};

/// `<linux/tls.h>` (libc does not carry them).
const TLS_TX: libc::c_int = 1;
const TLS_RX: libc::c_int = 2;
const TLS_SET_RECORD_TYPE: libc::c_int = 1;
const TLS_GET_RECORD_TYPE: libc::c_int = 2;
const TLS_1_2_VERSION: u16 = 0x0303;
const TLS_1_3_VERSION: u16 = 0x0304;
const TLS_CIPHER_AES_GCM_128: u16 = 51;
const TLS_CIPHER_AES_GCM_256: u16 = 52;
const TLS_CIPHER_CHACHA20_POLY1305: u16 = 54;

/// TLS record content types.
const RECORD_ALERT: u8 = 21;
const RECORD_HANDSHAKE: u8 = 22;
const RECORD_DATA: u8 = 23;

#[repr(C)]
#[derive(Clone, Copy)]
struct CryptoInfo {
    version: u16,
    cipher_type: u16,
}

#[repr(C)]
struct AesGcm128 {
    info: CryptoInfo,
    iv: [u8; 8],
    key: [u8; 16],
    salt: [u8; 4],
    rec_seq: [u8; 8],
}

#[repr(C)]
struct AesGcm256 {
    info: CryptoInfo,
    iv: [u8; 8],
    key: [u8; 32],
    salt: [u8; 4],
    rec_seq: [u8; 8],
}

#[repr(C)]
struct Chacha20Poly1305 {
    info: CryptoInfo,
    iv: [u8; 12],
    key: [u8; 32],
    rec_seq: [u8; 8],
}

/// Connections switched to kTLS (`porter_ktls_connections_total`).
pub static SWITCHED: AtomicU64 = AtomicU64::new(0);
/// Connections that could have been switched and stayed in user space
/// (a cipher the kernel did not take, the ULP refused, input already
/// buffered past the handshake).
pub static STAYED: AtomicU64 = AtomicU64::new(0);
/// Connections lost because the kernel refused the keys after rustls
/// gave them up.
pub static FAILED: AtomicU64 = AtomicU64::new(0);

/// Adds one to one of the counters above.
pub fn count(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

/// The AEADs the kernel may take, as the probe names them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cipher {
    Aes128Gcm,
    Aes256Gcm,
    Chacha20Poly1305,
}

impl Cipher {
    const ALL: [Cipher; 3] = [
        Cipher::Aes128Gcm,
        Cipher::Aes256Gcm,
        Cipher::Chacha20Poly1305,
    ];

    /// OpenSSL's name, for the start-up notice.
    pub fn name(self) -> &'static str {
        match self {
            Cipher::Aes128Gcm => "AES-128-GCM",
            Cipher::Aes256Gcm => "AES-256-GCM",
            Cipher::Chacha20Poly1305 => "CHACHA20-POLY1305",
        }
    }

    /// The kTLS cipher of a negotiated rustls suite, by its AEAD.
    pub fn of_suite(suite: rustls::SupportedCipherSuite) -> Option<Cipher> {
        use rustls::CipherSuite as C;
        match suite.suite() {
            C::TLS13_AES_128_GCM_SHA256
            | C::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256
            | C::TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256 => Some(Cipher::Aes128Gcm),
            C::TLS13_AES_256_GCM_SHA384
            | C::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384
            | C::TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384 => Some(Cipher::Aes256Gcm),
            C::TLS13_CHACHA20_POLY1305_SHA256
            | C::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256
            | C::TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256 => Some(Cipher::Chacha20Poly1305),
            _ => None,
        }
    }
}

/// What the start-up probe found.
#[derive(Debug, Clone)]
pub struct Support {
    /// The kernel has the `tls` ULP.
    pub ulp: bool,
    /// The ciphers it took for both `TLS_TX` and `TLS_RX`.
    pub ciphers: Vec<Cipher>,
    /// Why kTLS is not used, when it is not (for the notice).
    pub why_not: Option<String>,
}

impl Support {
    /// Whether connections may be switched to kTLS at all.
    pub fn usable(&self) -> bool {
        self.ulp && !self.ciphers.is_empty()
    }

    /// Whether the kernel takes `c`.
    pub fn takes(&self, c: Cipher) -> bool {
        self.ulp && self.ciphers.contains(&c)
    }
}

/// The kernel's kTLS support, probed on the first call (once per process).
pub fn probe() -> &'static Support {
    static PROBED: OnceLock<Support> = OnceLock::new();
    PROBED.get_or_init(run_probe)
}

fn run_probe() -> Support {
    let none = |why: String| Support {
        ulp: false,
        ciphers: Vec::new(),
        why_not: Some(why),
    };
    match kernel_has_tls() {
        Ok(true) => {}
        Ok(false) => return none("the kernel has no \"tls\" module".into()),
        Err(e) => return none(format!("the \"tls\" module could not be probed ({e})")),
    }
    let mut ciphers = Vec::new();
    let mut last_err = None;
    for c in Cipher::ALL {
        match probe_cipher(c) {
            Ok(()) => ciphers.push(c),
            Err(e) => last_err = Some(format!("{}: {e}", c.name())),
        }
    }
    let why_not = match (&ciphers[..], last_err) {
        ([], Some(e)) => Some(format!("the kernel's \"tls\" module took no cipher ({e})")),
        _ => None,
    };
    Support {
        ulp: true,
        ciphers,
        why_not,
    }
}

/// Whether the kernel offers the `tls` upper-layer protocol: a socket
/// that is not connected answers `ENOTCONN` when the module exists (or
/// can be loaded) and `ENOENT` when it does not.
pub fn kernel_has_tls() -> io::Result<bool> {
    let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)?;
    match set_ulp(s.as_raw_fd()) {
        Ok(()) => Ok(true),
        Err(e) => match e.raw_os_error() {
            Some(libc::ENOTCONN) | Some(libc::EEXIST) => Ok(true),
            Some(libc::ENOENT) => Ok(false),
            _ => Err(e),
        },
    }
}

/// Tries `c` for both directions on a throw-away loopback connection.
fn probe_cipher(c: Cipher) -> io::Result<()> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .or_else(|_| std::net::TcpListener::bind("[::1]:0"))?;
    let client = std::net::TcpStream::connect(l.local_addr()?)?;
    let (_server, _) = l.accept()?;
    let fd = client.as_raw_fd();
    set_ulp(fd)?;
    let zero = [0u8; 32];
    let key = match c {
        Cipher::Aes128Gcm => &zero[..16],
        _ => &zero[..],
    };
    set_crypto(fd, TLS_TX, true, 0, c, key, &zero[..12])?;
    set_crypto(fd, TLS_RX, true, 0, c, key, &zero[..12])
}

/// Attaches the `tls` ULP to a connected socket. Until keys are
/// installed the socket still carries plain TCP, so a failure here (or
/// the decision not to go on) leaves the connection to user-space TLS.
pub fn set_ulp(fd: RawFd) -> io::Result<()> {
    let name = b"tls";
    // SAFETY: a socket descriptor, and a name with its length.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The traffic secrets of both directions, as rustls exported them:
/// `(sequence number, secrets)`.
pub struct Secrets {
    pub version: ProtocolVersion,
    pub tx: (u64, ConnectionTrafficSecrets),
    pub rx: (u64, ConnectionTrafficSecrets),
}

/// Installs both directions' keys on `fd` (the ULP already attached).
/// After an error the connection cannot go on (rustls gave its keys up).
pub fn install(fd: RawFd, s: &Secrets) -> io::Result<()> {
    let v13 = match s.version {
        ProtocolVersion::TLSv1_3 => true,
        ProtocolVersion::TLSv1_2 => false,
        _ => return Err(io::Error::other("kTLS: not TLS 1.2 or 1.3")),
    };
    for (dir, (seq, secrets)) in [(TLS_TX, &s.tx), (TLS_RX, &s.rx)] {
        let (cipher, key, iv) = match secrets {
            ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
            ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
            ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
                (Cipher::Chacha20Poly1305, key, iv)
            }
            _ => return Err(io::Error::other("kTLS: cipher not offered")),
        };
        set_crypto(fd, dir, v13, *seq, cipher, key.as_ref(), iv.as_ref())?;
    }
    Ok(())
}

/// The first explicit nonce the kernel sends on a TLS 1.2 AES-GCM
/// connection whose records up to `seq` were sealed by rustls with the
/// nonces `x ^ s` (`s < seq`): the kernel counts up from its start, so it
/// starts past the aligned block holding all of rustls's nonces and
/// would only come back to it after 2^64 minus that block's size records.
fn tls12_explicit_start(x: u64, seq: u64) -> u64 {
    let mask = seq.max(1).next_power_of_two() - 1;
    (x | mask).wrapping_add(1)
}

/// One direction's `setsockopt(SOL_TLS, dir)` for `cipher` with the
/// traffic `key` and 12-byte `iv`, the next record being number `seq`.
fn set_crypto(
    fd: RawFd,
    dir: libc::c_int,
    v13: bool,
    seq: u64,
    cipher: Cipher,
    key: &[u8],
    iv: &[u8],
) -> io::Result<()> {
    let version = if v13 {
        TLS_1_3_VERSION
    } else {
        TLS_1_2_VERSION
    };
    let rec_seq = seq.to_be_bytes();
    let iv: [u8; 12] = fixed(iv)?;
    // GCM: salt = the IV's first 4 bytes; the other 8 are the nonce's
    // (TLS 1.3: XORed with the sequence number by the kernel, as rustls
    // does; TLS 1.2: the explicit nonce, see `tls12_explicit_start`).
    let mut salt = [0u8; 4];
    let mut rest = [0u8; 8];
    salt.copy_from_slice(&iv[..4]);
    rest.copy_from_slice(&iv[4..]);
    if !v13 && dir == TLS_TX {
        rest = tls12_explicit_start(u64::from_be_bytes(rest), seq).to_be_bytes();
    }
    let info = |cipher_type| CryptoInfo {
        version,
        cipher_type,
    };
    match cipher {
        Cipher::Aes128Gcm => setsockopt_tls(
            fd,
            dir,
            &AesGcm128 {
                info: info(TLS_CIPHER_AES_GCM_128),
                iv: rest,
                key: fixed(key)?,
                salt,
                rec_seq,
            },
        ),
        Cipher::Aes256Gcm => setsockopt_tls(
            fd,
            dir,
            &AesGcm256 {
                info: info(TLS_CIPHER_AES_GCM_256),
                iv: rest,
                key: fixed(key)?,
                salt,
                rec_seq,
            },
        ),
        // The whole IV, XORed with the sequence number by the kernel
        // (TLS 1.2 and 1.3 alike), as rustls does.
        Cipher::Chacha20Poly1305 => setsockopt_tls(
            fd,
            dir,
            &Chacha20Poly1305 {
                info: info(TLS_CIPHER_CHACHA20_POLY1305),
                iv,
                key: fixed(key)?,
                rec_seq,
            },
        ),
    }
}

fn fixed<const N: usize>(b: &[u8]) -> io::Result<[u8; N]> {
    b.try_into()
        .map_err(|_| io::Error::other("kTLS: unexpected key or IV length"))
}

fn setsockopt_tls<T>(fd: RawFd, dir: libc::c_int, info: &T) -> io::Result<()> {
    // SAFETY: `info` is one of the `#[repr(C)]` `tls12_crypto_info_*`
    // structs, passed with its exact size.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_TLS,
            dir,
            (info as *const T).cast(),
            std::mem::size_of::<T>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Room for one control message carrying the one-byte record type.
const CMSG_ROOM: usize = 32;

/// One `recvmsg` on a kTLS socket into `buf`'s spare capacity: the bytes
/// of application data read, `Ok(0)` at the end (FIN or `close_notify`),
/// `WouldBlock` when nothing is there, `InvalidData` for a record porter
/// refuses (a failed decryption, an alert, a key update — after a
/// `close_notify` sent back).
pub fn recv(fd: RawFd, buf: &mut Vec<u8>) -> io::Result<usize> {
    if buf.capacity() - buf.len() < 1024 {
        buf.reserve(16 * 1024);
    }
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    let mut control = [0u64; CMSG_ROOM / 8];
    // SAFETY: zeroed msghdr is valid; its pointers are set below.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = CMSG_ROOM as _;
    // SAFETY: `msg` points at live buffers of the lengths it names.
    let n = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_DONTWAIT) };
    if n < 0 {
        let e = io::Error::last_os_error();
        return Err(match e.raw_os_error() {
            Some(libc::EBADMSG) => invalid("decryption failed or bad record mac"),
            Some(libc::EMSGSIZE) => invalid("record too long"),
            Some(libc::EINVAL) => invalid("bad record"),
            _ => e,
        });
    }
    let n = n as usize;
    let kind = record_type(&msg).unwrap_or(RECORD_DATA);
    match kind {
        RECORD_DATA => {
            // SAFETY: the kernel wrote `n` bytes of the spare capacity.
            unsafe { buf.set_len(buf.len() + n) };
            Ok(n)
        }
        RECORD_ALERT => {
            // SAFETY: as above; the alert is read from what was written.
            let alert = unsafe { std::slice::from_raw_parts(iov.iov_base as *const u8, n) };
            match alert {
                [_, 0] => Ok(0), // close_notify
                [_, d] => Err(invalid(&format!("alert {d} from the peer"))),
                _ => Err(invalid("bad alert")),
            }
        }
        RECORD_HANDSHAKE => {
            send_close_notify(fd);
            Err(invalid(
                "handshake message after the handshake (key update or renegotiation) on a kTLS connection: closed",
            ))
        }
        t => Err(invalid(&format!("unexpected record type {t}"))),
    }
}

fn invalid(what: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.to_string())
}

/// The record type the kernel put in `msg`'s control data.
fn record_type(msg: &libc::msghdr) -> Option<u8> {
    // SAFETY: the CMSG_* walk stays within `msg_controllen` bytes of
    // `msg_control`, which the kernel filled.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_TLS && (*c).cmsg_type == TLS_GET_RECORD_TYPE {
                return Some(*libc::CMSG_DATA(c));
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    None
}

/// Sends a `close_notify` alert as a control record, without waiting.
pub fn send_close_notify(fd: RawFd) {
    let alert = [1u8, 0u8]; // warning, close_notify
    let mut iov = libc::iovec {
        iov_base: alert.as_ptr() as *mut _,
        iov_len: alert.len(),
    };
    let mut control = [0u64; CMSG_ROOM / 8];
    // SAFETY: zeroed msghdr is valid; the control message is built in
    // `control`, which is large enough for one byte of data.
    unsafe {
        let mut msg: libc::msghdr = std::mem::zeroed();
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = libc::CMSG_SPACE(1) as _;
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_TLS;
        (*c).cmsg_type = TLS_SET_RECORD_TYPE;
        (*c).cmsg_len = libc::CMSG_LEN(1) as _;
        *libc::CMSG_DATA(c) = RECORD_ALERT;
        libc::sendmsg(fd, &msg, libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crypto_info_sizes_are_the_kernels() {
        assert_eq!(std::mem::size_of::<AesGcm128>(), 40);
        assert_eq!(std::mem::size_of::<AesGcm256>(), 56);
        assert_eq!(std::mem::size_of::<Chacha20Poly1305>(), 56);
    }

    #[test]
    fn tls12_nonces_never_repeat_rustls_ones() {
        for x in [
            0u64,
            1,
            2,
            3,
            0xffff_ffff_ffff_fffe,
            u64::MAX,
            0x1234_5678_9abc_def1,
        ] {
            for seq in 1..40u64 {
                let start = tls12_explicit_start(x, seq);
                // The kernel's first 300 nonces against rustls's.
                for k in 0..300u64 {
                    let n = start.wrapping_add(k);
                    for s in 0..seq {
                        assert_ne!(n, x ^ s, "x={x:#x} seq={seq} k={k}");
                    }
                }
            }
        }
    }

    #[test]
    fn the_probe_answers_on_any_kernel() {
        let s = probe();
        assert_eq!(s.usable(), s.why_not.is_none(), "{s:?}");
    }
}
