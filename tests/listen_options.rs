//! `listen` socket options as NGINX on Linux sets them: `fastopen=`,
//! `deferred`, `backlog=`, `so_keepalive=`, `ipv6only=`, port ranges, the
//! FreeBSD-only parameters' answers, and options changed by a reload on a
//! socket the reload keeps. The options are read back from the listening
//! socket itself (a copy of the server's descriptor taken with
//! `pidfd_getfd`, then `getsockopt`; the backlog from `ss -ltn`) and
//! compared with Debian's nginx on the same `listen` line.

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::process::Command;
use std::time::Duration;

use crate::common::*;

/// What a listening socket says about itself.
#[derive(Debug, PartialEq, Eq)]
struct Opts {
    keepalive: i32,
    keepidle: i32,
    keepintvl: i32,
    keepcnt: i32,
    fastopen: i32,
    defer_accept: i32,
    backlog: u64,
}

fn getsockopt(fd: RawFd, level: i32, opt: i32) -> i32 {
    let mut v: i32 = -1;
    let mut len = std::mem::size_of::<i32>() as libc::socklen_t;
    // SAFETY: an int and its size.
    let r = unsafe { libc::getsockopt(fd, level, opt, (&mut v as *mut i32).cast(), &mut len) };
    assert_eq!(r, 0, "getsockopt({level}, {opt})");
    v
}

/// The local port of socket `fd`, when it is a listening TCP socket.
fn listening_port(fd: RawFd) -> Option<u16> {
    if getsockopt(fd, libc::SOL_SOCKET, libc::SO_ACCEPTCONN) != 1 {
        return None;
    }
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
    // SAFETY: a sockaddr_storage and its size.
    unsafe {
        libc::getsockname(
            fd,
            (&mut ss as *mut libc::sockaddr_storage).cast(),
            &mut len,
        )
    };
    let port = match ss.ss_family as i32 {
        libc::AF_INET => unsafe { (*(&ss as *const _ as *const libc::sockaddr_in)).sin_port },
        libc::AF_INET6 => unsafe { (*(&ss as *const _ as *const libc::sockaddr_in6)).sin6_port },
        _ => return None,
    };
    Some(u16::from_be(port))
}

/// A copy of the first socket process `pid` listens with on `port`.
fn listening_socket(pid: u32, port: u16) -> OwnedFd {
    // SAFETY: plain system calls; the descriptors returned are ours.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as i32, 0) } as RawFd;
    assert!(
        pidfd >= 0,
        "pidfd_open: {}",
        std::io::Error::last_os_error()
    );
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd) };
    use std::os::fd::AsRawFd;
    let dir = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    for e in dir.flatten() {
        let link = std::fs::read_link(e.path()).unwrap_or_default();
        if !link.to_string_lossy().starts_with("socket:") {
            continue;
        }
        let target: i32 = e.file_name().to_string_lossy().parse().unwrap();
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), target, 0) };
        if fd < 0 {
            continue;
        }
        let fd = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
        if listening_port(fd.as_raw_fd()) == Some(port) {
            return fd;
        }
    }
    panic!("no socket of {pid} listens on {port}");
}

/// `ss -ltn`'s Send-Q of a listening socket: its backlog.
fn backlog(port: u16) -> u64 {
    let out = Command::new("ss")
        .args(["-Hltn", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().next().unwrap_or_else(|| panic!("ss: {text}"));
    line.split_whitespace().nth(2).unwrap().parse().unwrap()
}

fn opts(pid: u32, port: u16) -> Opts {
    use std::os::fd::AsRawFd;
    let s = listening_socket(pid, port);
    let fd = s.as_raw_fd();
    let tcp = |o| getsockopt(fd, libc::IPPROTO_TCP, o);
    Opts {
        keepalive: getsockopt(fd, libc::SOL_SOCKET, libc::SO_KEEPALIVE),
        keepidle: tcp(libc::TCP_KEEPIDLE),
        keepintvl: tcp(libc::TCP_KEEPINTVL),
        keepcnt: tcp(libc::TCP_KEEPCNT),
        fastopen: tcp(libc::TCP_FASTOPEN),
        defer_accept: tcp(libc::TCP_DEFER_ACCEPT),
        backlog: backlog(port),
    }
}

fn conf(listen_params: &str) -> String {
    format!(
        "daemon off; worker_processes 2; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; server {{ listen 127.0.0.1:{{PORT}} {listen_params}; \
         location / {{ return 200 $server_port; }} }} }}\n"
    )
}

#[test]
fn options_are_set_on_the_socket_as_nginx_sets_them() {
    let params = "fastopen=64 deferred backlog=77 so_keepalive=30m:15s:7 reuseport";
    let s = Server::start(&conf(params));
    assert_eq!(get(s.port, "/").text(), s.port.to_string());
    let porter = opts(s.child.id(), s.port);
    let want = Opts {
        keepalive: 1,
        keepidle: 1800,
        keepintvl: 15,
        keepcnt: 7,
        fastopen: 64,
        defer_accept: 1,
        backlog: 77,
    };
    assert_eq!(porter, want);
    let line = format!("server {{ listen 127.0.0.1:{{PORT}} {params}; }}");
    match Nginx::start(&line) {
        Some(n) => assert_eq!(porter, opts(n.child.id(), n.port), "porter vs nginx"),
        None => eprintln!("nginx not installed: porter's values checked alone"),
    }
}

#[test]
fn so_keepalive_off_and_defaults_match_nginx() {
    let s = Server::start(&conf("so_keepalive=off"));
    let porter = opts(s.child.id(), s.port);
    assert_eq!(
        (porter.keepalive, porter.fastopen, porter.defer_accept),
        (0, 0, 0)
    );
    assert_eq!(porter.backlog, 511);
    let line = "server { listen 127.0.0.1:{PORT} so_keepalive=off; }";
    if let Some(n) = Nginx::start(line) {
        assert_eq!(porter, opts(n.child.id(), n.port), "porter vs nginx");
    }
}

#[test]
fn a_reload_sets_changed_options_on_the_sockets_it_keeps() {
    let s = Server::start(&conf("deferred fastopen=8 backlog=50"));
    let before = opts(s.child.id(), s.port);
    assert_eq!(
        (before.defer_accept, before.fastopen, before.backlog),
        (1, 8, 50)
    );
    let next = config_text(&conf("fastopen=16 backlog=60"), s.port, s.prefix.path());
    s.prefix.write("porter.conf", next);
    s.signal(libc::SIGHUP);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut after = opts(s.child.id(), s.port);
    // Polled until the reload is seen whole (`opts` reads the socket and
    // `ss` one after the other).
    let reloaded = |o: &Opts| (o.defer_accept, o.fastopen, o.backlog) == (0, 16, 60);
    while !reloaded(&after) && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
        after = opts(s.child.id(), s.port);
    }
    // NGINX's reload: listen() again for the backlog, TCP_DEFER_ACCEPT
    // taken off, the new fastopen queue.
    assert_eq!(
        (after.defer_accept, after.fastopen, after.backlog),
        (0, 16, 60)
    );
    assert_eq!(get(s.port, "/").status, 200);
}

#[test]
fn ipv6only_off_takes_ipv4_connections() {
    if std::net::TcpListener::bind("[::1]:0").is_err() {
        eprintln!("no IPv6 on this host: skipped");
        return;
    }
    let body = "daemon off; worker_processes 1; pid {PREFIX}/porter.pid;\n\
         error_log {PREFIX}/error.log info; events {}\n\
         http { access_log off; server { listen [::]:{PORT} ipv6only=off; \
         location / { return 200 $server_addr; } } }\n";
    let s = Server::start(body);
    let r = get(s.port, "/");
    assert_eq!(r.status, 200);
    assert_eq!(
        r.text(),
        "::ffff:127.0.0.1",
        "NGINX names the mapped address"
    );
}

#[test]
fn a_port_range_listens_on_every_port() {
    // Two free ports in a row, both handed out by `free_port` (so no
    // other test of this process is given the second).
    let first = (0..50)
        .find_map(|_| {
            let (a, b) = (free_port(), free_port());
            (b == a + 1).then_some(a)
        })
        .expect("two free ports in a row");
    let body = format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; server {{ listen 127.0.0.1:{{PORT}}; \
         listen 127.0.0.1:{first}-{}; location / {{ return 200 $server_port; }} }} }}\n",
        first + 1
    );
    let s = Server::start(&body);
    assert!(wait_port(first + 1, Duration::from_secs(5)));
    assert_eq!(get(first, "/").text(), first.to_string());
    assert_eq!(get(first + 1, "/").text(), (first + 1).to_string());
    drop(s);
}

/// `porter -t` on a server with `listen ARGS`.
fn check(args: &str) -> (bool, String) {
    let dir = TempDir::new("listen-opts");
    let conf = dir.write(
        "t.conf",
        format!("events {{}} http {{ server {{ listen {args}; }} }}"),
    );
    let out = run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn bad_values_are_nginx_s_errors() {
    for (params, err) in [
        ("fastopen=x", "invalid fastopen \"fastopen=x\""),
        ("backlog=0", "invalid backlog \"backlog=0\""),
        ("so_keepalive=::", "invalid so_keepalive value: \"::\""),
        ("so_keepalive=1:x", "invalid so_keepalive value: \"1:x\""),
        ("ipv6only=ox", "invalid ipv6only flags \"ox\""),
        // FreeBSD's; NGINX on Linux does not know it.
        ("setfib=1", "invalid parameter \"setfib=1\""),
        (
            "quic fastopen=1",
            "\"fastopen\" parameter is incompatible with \"quic\"",
        ),
    ] {
        let (ok, stderr) = check(&format!("127.0.0.1:8080 {params}"));
        assert!(!ok, "{params} accepted");
        assert!(stderr.contains(err), "{params}: {stderr}");
        assert!(stderr.contains("t.conf:1"), "{params}: {stderr}");
    }
    let (ok, stderr) = check("127.0.0.1:9-8");
    assert!(!ok && stderr.contains("invalid port range"), "{stderr}");
}

#[test]
fn accept_filter_is_ignored_with_nginx_s_line() {
    let (ok, stderr) = check("127.0.0.1:8080 accept_filter=dataready");
    assert!(ok, "{stderr}");
    assert!(
        stderr.contains(
            "[emerg] accept filters \"accept_filter=dataready\" are not supported on this platform, ignored in "
        ),
        "{stderr}"
    );
}
