//! Debian's php-fpm for the FastCGI tests (`tests/fastcgi.rs`,
//! `tests/fastcgi_cache.rs`): a master in the foreground with its own
//! pools, one on a unix socket in a temp dir and one on a loopback TCP
//! port, serving the PHP app in `tests/common/php/`.

use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::{free_port, set_mode, TempDir};

/// The PHP app.
pub fn app_root() -> PathBuf {
    super::support("php")
}

/// Debian's php-fpm binary (`php-fpm` in `.ci/run`'s packages).
pub fn fpm_binary() -> PathBuf {
    let dir = std::fs::read_dir("/usr/sbin").unwrap();
    let mut found: Vec<PathBuf> = dir
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("php-fpm"))
        })
        .collect();
    found.sort();
    found
        .pop()
        .expect("php-fpm is not installed (apt-get install php-fpm)")
}

/// A php-fpm master in the foreground with a pool on a unix socket and
/// one on a TCP port; stopped by PID on drop.
pub struct Fpm {
    child: Child,
    /// The unix pool's socket.
    pub sock: PathBuf,
    /// The TCP pool's port.
    pub port: u16,
    _dir: TempDir,
}

impl Fpm {
    /// Starts php-fpm and waits for both pools to listen.
    pub fn start() -> Fpm {
        let dir = TempDir::new("fpm");
        set_mode(dir.path(), 0o755);
        let sock = dir.path().join("fpm.sock");
        let port = free_port();
        let d = dir.path().display();
        // Workers run as nobody when the test runs as root (php-fpm
        // ignores `user` otherwise); `post_max_size` lets the upload in.
        let pool = |name: &str, listen: &str| {
            format!(
                "[{name}]\nuser = nobody\ngroup = nogroup\nlisten = {listen}\nlisten.mode = 0666\n\
                 pm = static\npm.max_children = 4\n\
                 php_admin_value[post_max_size] = 0\nphp_admin_value[memory_limit] = 64M\n"
            )
        };
        let conf = dir.write(
            "fpm.conf",
            format!(
                "[global]\nerror_log = {d}/fpm.log\npid = {d}/fpm.pid\ndaemonize = no\n{}{}",
                pool("unix", &sock.display().to_string()),
                pool("tcp", &format!("127.0.0.1:{port}"))
            ),
        );
        let child = Command::new(fpm_binary())
            .args(["-F", "-n", "-y"])
            .arg(&conf)
            .arg("-p")
            .arg(dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let f = Fpm {
            child,
            sock,
            port,
            _dir: dir,
        };
        let deadline = Instant::now() + Duration::from_secs(10);
        while !(f.sock.exists() && TcpStream::connect(("127.0.0.1", f.port)).is_ok()) {
            assert!(Instant::now() < deadline, "php-fpm did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        f
    }
}

impl Drop for Fpm {
    fn drop(&mut self) {
        // SIGQUIT: php-fpm's graceful stop.
        super::stop_child(&mut self.child, 3);
    }
}
