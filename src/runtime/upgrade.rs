//! Binary upgrade on the fly, NGINX's way.
//!
//! SIGUSR2: the pid file is renamed to `PID.oldbin` and the binary porter
//! was started as (`argv[0]`, as NGINX: after a package upgrade
//! `/proc/self/exe` names the deleted old file) is executed with the same
//! arguments and every listening socket, their numbers in NGINX's
//! environment variable (`NGINX="6;7;"`). The new binary starts from those
//! sockets ([`take_inherited`]; it does not daemonise, it writes the pid
//! file) so both serve the same accept queues and no connection is
//! refused. Then SIGWINCH to the old one stops its workers gracefully (its
//! master stays), SIGQUIT retires it; or, to roll back, SIGHUP to the old
//! one starts its workers again on its configuration and SIGQUIT goes to
//! the new one. When the new binary exits while the old one runs (a bad
//! configuration, a binary that does not start, a rollback) the old one
//! renames `PID.oldbin` back and, if its workers were stopped, starts them.

use std::ffi::OsString;
use std::net::{TcpListener, UdpSocket};
use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};

use crate::log::{ErrorLog, Level};
use crate::util::errno_text;

/// The environment variable that lists inherited sockets, NGINX's.
pub const ENV: &str = "NGINX";

/// Sockets handed down by the binary that started this one.
pub struct Inherited {
    /// The listening sockets, in the order given.
    pub sockets: Vec<TcpListener>,
    /// The UDP sockets of `listen ... quic` addresses, in the order given.
    pub udp: Vec<UdpSocket>,
    /// The old binary's pid (this process's parent at start): while it
    /// runs, SIGUSR2 is ignored here, as NGINX does.
    pub parent: i32,
}

/// Reads and removes [`ENV`]: the sockets a binary upgrade passed down
/// (NGINX's `ngx_add_inherited_sockets`: an invalid number ends the list).
pub fn take_inherited(log: &ErrorLog) -> Option<Inherited> {
    let text = std::env::var(ENV).ok()?;
    std::env::remove_var(ENV);
    log.log(
        Level::Notice,
        format_args!("using inherited sockets from \"{text}\""),
    );
    let mut sockets = Vec::new();
    let mut udp = Vec::new();
    for part in text.split([';', ':']).filter(|p| !p.is_empty()) {
        match part.parse::<RawFd>().ok().and_then(listening_socket) {
            Some(Passed::Tcp(l)) => sockets.push(l),
            Some(Passed::Udp(u)) => udp.push(u),
            None => {
                log.log(
                    Level::Emerg,
                    format_args!(
                        "invalid socket number \"{part}\" in {ENV} environment variable, \
                         ignoring the rest of the variable"
                    ),
                );
                break;
            }
        }
    }
    Some(Inherited {
        sockets,
        udp,
        parent: rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get()),
    })
}

/// A socket handed down: a listening TCP socket or a bound UDP one.
enum Passed {
    Tcp(TcpListener),
    Udp(UdpSocket),
}

/// `fd` as a listening socket of this process (or a bound UDP socket of a
/// `listen ... quic` address), close-on-exec again.
fn listening_socket(fd: RawFd) -> Option<Passed> {
    // SAFETY: fcntl on any number is harmless; F_GETFD says if it is open.
    if fd < 3 || unsafe { libc::fcntl(fd, libc::F_GETFD) } == -1 {
        return None;
    }
    // SAFETY: the descriptor is open and, given to us by the old binary
    // for this purpose, owned by nothing else in this process.
    let s = unsafe { socket2::Socket::from_raw_fd(fd) };
    let passed = match s.r#type() {
        Ok(socket2::Type::STREAM) if s.is_listener().unwrap_or(false) => {
            Passed::Tcp(TcpListener::from(s))
        }
        Ok(socket2::Type::DGRAM) if s.local_addr().is_ok_and(|a| a.as_socket().is_some()) => {
            Passed::Udp(UdpSocket::from(s))
        }
        _ => {
            std::mem::forget(s);
            return None;
        }
    };
    let cloexec = match &passed {
        Passed::Tcp(l) => socket2::SockRef::from(l).set_cloexec(true),
        Passed::Udp(u) => socket2::SockRef::from(u).set_cloexec(true),
    };
    cloexec.ok()?;
    Some(passed)
}

/// `PID.oldbin`, NGINX's name for the old binary's pid file.
pub fn oldbin_path(pid: &Path) -> PathBuf {
    let mut s = pid.as_os_str().to_owned();
    s.push(".oldbin");
    PathBuf::from(s)
}

/// The new binary, while the old one waits to be retired or to take back.
pub struct NewBinary {
    child: Child,
}

impl NewBinary {
    /// The new binary's pid.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Its exit code once it has exited (reaped here; SIGCHLD).
    pub fn exited(&mut self) -> Option<i32> {
        match self.child.try_wait() {
            Ok(Some(st)) => Some(st.code().unwrap_or(-1)),
            Ok(None) => None,
            Err(_) => Some(-1),
        }
    }
}

/// SIGUSR2: renames the pid file and executes the new binary with the
/// listening sockets `fds`. On failure the pid file is renamed back and
/// nothing changes.
pub fn exec_new_binary(fds: &[RawFd], pid: Option<&Path>, log: &ErrorLog) -> Option<NewBinary> {
    let args: Vec<OsString> = std::env::args_os().collect();
    let oldbin = pid.map(oldbin_path);
    if let (Some(p), Some(o)) = (pid, &oldbin) {
        if let Err(e) = std::fs::rename(p, o) {
            log.log(
                Level::Alert,
                format_args!(
                    "rename() {} to {} failed {}, old binary is not executed",
                    p.display(),
                    o.display(),
                    errno_text(&e)
                ),
            );
            return None;
        }
    }
    let list: String = fds.iter().map(|fd| format!("{fd};")).collect();
    let mut cmd = Command::new(&args[0]);
    cmd.args(&args[1..]).env(ENV, &list);
    let keep = fds.to_vec();
    // SAFETY: only fcntl, async-signal-safe, runs between fork and exec.
    unsafe {
        cmd.pre_exec(move || {
            for &fd in &keep {
                if libc::fcntl(fd, libc::F_SETFD, 0) == -1 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
    match cmd.spawn() {
        Ok(child) => {
            log.log(
                Level::Notice,
                format_args!("start new binary process {}", child.id()),
            );
            Some(NewBinary { child })
        }
        Err(e) => {
            log.log(
                Level::Alert,
                format_args!(
                    "execve() failed while executing new binary process \"{}\" {}",
                    args[0].to_string_lossy(),
                    errno_text(&e)
                ),
            );
            restore_pid(pid, log);
            None
        }
    }
}

/// `PID.oldbin` back to `PID`, when the new binary has gone.
pub fn restore_pid(pid: Option<&Path>, log: &ErrorLog) {
    let Some(p) = pid else { return };
    let o = oldbin_path(p);
    if let Err(e) = std::fs::rename(&o, p) {
        log.log(
            Level::Alert,
            format_args!(
                "rename() {} back to {} failed {} after the new binary process exited",
                o.display(),
                p.display(),
                errno_text(&e)
            ),
        );
    }
}

impl super::master::Master<'_> {
    /// SIGUSR2: executes the new binary, unless one is running already or
    /// this is the new binary and the old one still runs (NGINX ignores
    /// the signal then).
    pub(super) fn change_binary(&mut self, sig: i32) {
        let ppid = rustix::process::getppid().map_or(0, |p| p.as_raw_nonzero().get());
        if self.new_binary.is_some() || (ppid > 1 && self.inherited_from == Some(ppid)) {
            self.log.log(
                Level::Notice,
                format_args!("signal {sig} (SIGUSR2) received, ignoring"),
            );
            return;
        }
        self.log.log(
            Level::Notice,
            format_args!("signal {sig} (SIGUSR2) received, changing binary"),
        );
        let fds = self.listeners.raw_fds();
        self.new_binary = exec_new_binary(&fds, self.pid_path.as_deref(), &self.log);
    }

    /// SIGWINCH: the workers stop gracefully and the master stays (the
    /// old binary of an upgrade). Only in the background, as NGINX: on a
    /// terminal it is the window's resize.
    pub(super) fn stop_accepting(&mut self, sig: i32) {
        if !self.daemonized {
            self.log.log(
                Level::Notice,
                format_args!("signal {sig} (SIGWINCH) received, ignoring: not a daemon"),
            );
            return;
        }
        self.log.log(
            Level::Notice,
            format_args!("signal {sig} (SIGWINCH) received, stop accepting connections"),
        );
        self.stop_workers();
    }

    /// SIGCHLD: when the new binary has exited, its pid file becomes this
    /// one's again and stopped workers start again.
    pub(super) fn reap_new_binary(&mut self) {
        let Some(nb) = self.new_binary.as_mut() else {
            return;
        };
        let pid = nb.pid();
        let Some(code) = nb.exited() else { return };
        let level = if code == 0 {
            Level::Notice
        } else {
            Level::Alert
        };
        self.log.log(
            level,
            format_args!("new binary process {pid} exited with code {code}"),
        );
        self.new_binary = None;
        restore_pid(self.pid_path.as_deref(), &self.log);
        self.start_workers_again(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldbin_is_the_pid_file_with_nginx_suffix() {
        assert_eq!(
            oldbin_path(Path::new("/run/porter.pid")),
            PathBuf::from("/run/porter.pid.oldbin")
        );
    }

    #[test]
    fn a_descriptor_that_is_not_a_listening_socket_is_refused() {
        let f = std::fs::File::open("/dev/null").unwrap();
        use std::os::fd::AsRawFd;
        assert!(listening_socket(f.as_raw_fd()).is_none());
        assert!(listening_socket(99_999).is_none());
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        use std::os::fd::IntoRawFd;
        let fd = l.into_raw_fd();
        let back = listening_socket(fd).expect("a listening socket");
        assert!(matches!(back, Passed::Tcp(l) if l.local_addr().is_ok()));
        let u = UdpSocket::bind("127.0.0.1:0").unwrap();
        let back = listening_socket(u.into_raw_fd()).expect("a bound UDP socket");
        assert!(matches!(back, Passed::Udp(u) if u.local_addr().is_ok()));
    }
}
