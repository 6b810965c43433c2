//! `listen ... sndbuf=size rcvbuf=size`: the listening sockets get
//! `SO_SNDBUF`/`SO_RCVBUF` (which their connections inherit), seen with
//! `ss -ltm` as nginx's are on the same line; a bad size is NGINX's error.

use std::process::Command;

use crate::common::*;

/// `ss -ltm`'s `skmem:(r…,rb<rcvbuf>,t…,tb<sndbuf>,…)` of every socket
/// listening on `port`, as (rb, tb).
fn buffers(port: u16) -> Vec<(u64, u64)> {
    let out = Command::new("ss")
        .args(["-Hltmn", &format!("sport = :{port}")])
        .output()
        .expect("ss (iproute2) runs");
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |mem: &str, key: &str| -> u64 {
        mem.split(',')
            .find_map(|f| f.strip_prefix(key))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{key} in {mem}"))
    };
    text.split("skmem:(")
        .skip(1)
        .map(|rest| {
            let mem = &rest[..rest.find(')').unwrap()];
            (field(mem, "rb"), field(mem, "tb"))
        })
        .collect()
}

#[test]
fn listen_sets_socket_buffers_as_nginx() {
    let line =
        "server { listen 127.0.0.1:{PORT} sndbuf=32k rcvbuf=48k; location / { return 204; } }";
    let s = Server::start(&format!(
        "daemon off; worker_processes 2; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {line} }}\n"
    ));
    assert_eq!(get(s.port, "/").status, 204);
    let porter = buffers(s.port);
    assert_eq!(porter.len(), 2, "one socket per worker: {porter:?}");
    if let Some(n) = Nginx::start(line) {
        let nginx = buffers(n.port);
        assert!(!nginx.is_empty());
        for b in &porter {
            assert_eq!(*b, nginx[0], "porter {porter:?}, nginx {nginx:?}");
        }
    } else {
        // Linux doubles the value set.
        assert!(porter.iter().all(|b| *b == (2 * 48 * 1024, 2 * 32 * 1024)));
    }
}

#[test]
fn bad_buffer_size_is_an_error() {
    let dir = TempDir::new("sndbuf");
    let conf = dir.write(
        "t.conf",
        "events {} http { server { listen 127.0.0.1:8080 sndbuf=lots; } }",
    );
    let out = run(&[
        "-t",
        "-p",
        dir.path().to_str().unwrap(),
        "-c",
        conf.to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("invalid sndbuf \"sndbuf=lots\""), "{err}");
}
