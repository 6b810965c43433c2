//! Debian's nginx with its dynamic stream module (`ngx_stream_module.so`,
//! unpacked under /work/nginx-mods, as the nginx-tests runs use it) beside
//! porter for the `stream { }` tests: [`StreamNginx::start`] runs a whole
//! configuration, [`nginx_t`] asks `nginx -t` about one. Both give `None`
//! without nginx or the module; the caller then checks porter alone and
//! says so.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use super::{stop_child, wait_port, TempDir, NGINX};

/// Debian's stream module, loaded with `load_module`.
pub const STREAM_MODULE: &str = "/work/nginx-mods/usr/lib/nginx/modules/ngx_stream_module.so";

fn available() -> bool {
    let ok = Path::new(NGINX).exists() && Path::new(STREAM_MODULE).exists();
    if !ok {
        eprintln!("nginx or {STREAM_MODULE} missing: checking porter alone");
    }
    ok
}

/// `body` (`events { }`, `stream { }`, …, `{PREFIX}` replaced by
/// `prefix`) after the main-level lines nginx needs: the module, one
/// worker, the pid file and error log in `prefix`.
fn text(body: &str, prefix: &Path) -> String {
    let p = prefix.display().to_string();
    format!(
        "load_module {STREAM_MODULE};\nworker_processes 1;\npid {p}/nginx.pid;\n\
         error_log {p}/logs/error.log info;\n{}",
        body.replace("{PREFIX}", &p)
    )
}

/// nginx running a stream configuration, stopped by PID on drop.
pub struct StreamNginx {
    /// The master process.
    pub child: Child,
    /// Its prefix (`logs/error.log` in it).
    pub prefix: TempDir,
}

impl StreamNginx {
    /// Starts nginx on `body` and waits until `port` accepts.
    pub fn start(body: &str, port: u16) -> Option<StreamNginx> {
        if !available() {
            return None;
        }
        let prefix = TempDir::new("nginx-stream");
        std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
        let conf = prefix.write("nginx.conf", text(body, prefix.path()));
        let child = Command::new(NGINX)
            .arg("-p")
            .arg(prefix.path())
            .arg("-e")
            .arg(prefix.path().join("logs/error.log"))
            .arg("-c")
            .arg(&conf)
            .arg("-g")
            .arg("daemon off;")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let n = StreamNginx { child, prefix };
        assert!(
            wait_port(port, Duration::from_secs(10)),
            "nginx did not start: {}",
            n.error_log()
        );
        Some(n)
    }

    /// Its error log so far.
    pub fn error_log(&self) -> String {
        std::fs::read_to_string(self.prefix.path().join("logs/error.log")).unwrap_or_default()
    }

    /// A file of its prefix (an access log), empty if not there yet.
    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.prefix.path().join(rel)).unwrap_or_default()
    }
}

impl Drop for StreamNginx {
    fn drop(&mut self) {
        stop_child(&mut self.child, 15);
    }
}

/// `nginx -t` on `body`: what it printed on stderr.
pub fn nginx_t(body: &str) -> Option<String> {
    if !available() {
        return None;
    }
    let prefix = TempDir::new("nginx-t");
    std::fs::create_dir_all(prefix.path().join("logs")).unwrap();
    let conf = prefix.write("nginx.conf", text(body, prefix.path()));
    let out = Command::new(NGINX)
        .arg("-t")
        .arg("-p")
        .arg(prefix.path())
        .arg("-e")
        .arg("/dev/stderr")
        .arg("-c")
        .arg(&conf)
        .output()
        .unwrap();
    Some(String::from_utf8_lossy(&out.stderr).into_owned())
}
