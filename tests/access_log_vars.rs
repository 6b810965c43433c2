//! `access_log` beyond a fixed file (issue 26, nginx-tests'
//! `access_log.t` and `mirror.t`): a path with variables rendered per
//! request (written by the log thread for such paths, as the workers'
//! user), `gzip` with `buffer=`/`flush=`, and `log_subrequest on` — each
//! compared with Debian's nginx on the same config.

use std::path::Path;
use std::time::{Duration, Instant};

use crate::common::*;

/// Waits up to 5 s for `path` to hold at least `len` bytes; its bytes.
fn wait_file(path: &Path, len: usize) -> Vec<u8> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let b = std::fs::read(path).unwrap_or_default();
        if b.len() >= len || Instant::now() >= deadline {
            return b;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A directory both servers' workers (`nobody` under root) may write.
fn log_dir(tag: &str) -> TempDir {
    let d = TempDir::new(tag);
    set_mode(d.path(), 0o777);
    d
}

fn server(dir: &Path) -> String {
    format!(
        "root {d};
         location /v {{ access_log {d}/v_$arg_n.log t; return 200 ok; }}
         location /gz {{ access_log {d}/gz.log t buffer=1k gzip flush=100ms; return 200 ok; }}
         location /m {{ mirror /mirror; }}
         location /mirror {{ log_subrequest on; access_log {d}/sub$args.log t; return 204; }}",
        d = dir.display()
    )
}

/// The log lines `ask` leaves in `dir`, by file.
fn logs(port: u16, dir: &Path) -> Vec<String> {
    for p in ["/v?n=a", "/v?n=b", "/v?n=a", "/gz", "/m?1"] {
        assert_eq!(get(port, p).status, 200, "{p}");
    }
    let gz = wait_file(&dir.join("gz.log"), 1);
    let mut text = String::new();
    use std::io::Read as _;
    flate2::read::MultiGzDecoder::new(&gz[..])
        .read_to_string(&mut text)
        .unwrap();
    vec![
        String::from_utf8_lossy(&wait_file(&dir.join("v_a.log"), 14)).into_owned(),
        String::from_utf8_lossy(&wait_file(&dir.join("v_b.log"), 7)).into_owned(),
        text,
        String::from_utf8_lossy(&wait_file(&dir.join("sub1.log"), 12)).into_owned(),
    ]
}

#[test]
fn paths_with_variables_gzip_and_subrequests_log_as_nginx() {
    let http = "log_format t \"$uri:$status\";";
    let pd = log_dir("alv-porter");
    pd.write("m", "m");
    let p = Server::start(&one_server_conf(http, &server(pd.path())));
    let porter = logs(p.port, pd.path());
    assert_eq!(
        porter,
        ["/v:200\n/v:200\n", "/v:200\n", "/gz:200\n", "/mirror:204\n"]
    );
    let nd = log_dir("alv-nginx");
    nd.write("m", "m");
    let n = Nginx::start(&format!(
        "{http}\nserver {{ listen 127.0.0.1:{{PORT}}; server_name localhost;\n{}\n}}",
        server(nd.path())
    ));
    match n {
        Some(n) => assert_eq!(porter, logs(n.port, nd.path())),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}

#[test]
fn a_buffered_log_cannot_have_variables_in_its_name() {
    let server = |line: &str| one_worker_conf(&format!("server {{ listen 127.0.0.1:1; {line} }}"));
    let e = config_error(&server("access_log {PREFIX}/$host.log combined buffer=4k;"));
    assert!(
        e.contains("buffered logs cannot have variables in name"),
        "{e}"
    );
    let e = config_error(&server("access_log {PREFIX}/a.log combined flush=1s;"));
    assert!(e.contains("no buffer is defined for access_log"), "{e}");
}
