//! The `stream` and `http` blocks keep their variables apart, as NGINX
//! does: a name `map`, `geo`, `split_clients` or `set` defines in one
//! block is unknown in the other, and inside `stream` only the stream
//! modules' built-in names exist (`$uri` there is unknown). `porter -t`
//! refuses each with NGINX's `unknown "NAME" variable` at file:line;
//! `nginx -t` with Debian's stream module refuses the same files (NGINX
//! names no place for an unknown variable). One name defined in both
//! blocks is two variables, each block seeing its own.

use std::io::Read;
use std::net::TcpStream;
use std::time::Duration;

use crate::common::stream_beside::nginx_t;
use crate::common::*;

/// A file whose line holding `at` names the unknown variable `name`.
struct Bad {
    text: &'static str,
    name: &'static str,
    at: &'static str,
}

const BAD: &[Bad] = &[
    Bad {
        text: "events {}\nstream {\nmap $remote_addr $stream_only_var { default a; }\n\
               server { listen 127.0.0.1:1; return $stream_only_var; }\n}\n\
               http {\nserver { listen 127.0.0.1:2;\nlocation / { return 200 $stream_only_var; }\n}\n}\n",
        name: "stream_only_var",
        at: "return 200",
    },
    Bad {
        text: "events {}\nhttp {\nmap $uri $http_only_var { default a; }\n\
               server { listen 127.0.0.1:2; location / { return 200 $http_only_var; } }\n}\n\
               stream {\nserver { listen 127.0.0.1:1;\nreturn $http_only_var; }\n}\n",
        name: "http_only_var",
        at: "return $http_only_var",
    },
    Bad {
        text: "events {}\nstream {\nserver { listen 127.0.0.1:1;\nset $s 1;\nreturn $s; }\n}\n\
               http {\nserver { listen 127.0.0.1:2;\nlocation / { return 200 $s; }\n}\n}\n",
        name: "s",
        at: "return 200",
    },
    Bad {
        text: "events {}\nstream {\nsplit_clients $remote_addr $sc { * a; }\n\
               server { listen 127.0.0.1:1; return $sc; }\n}\n\
               http {\nserver { listen 127.0.0.1:2;\nlocation / { return 200 $sc; }\n}\n}\n",
        name: "sc",
        at: "return 200",
    },
    Bad {
        text: "events {}\nstream {\nserver { listen 127.0.0.1:1;\nreturn $uri; }\n}\n",
        name: "uri",
        at: "return $uri",
    },
    Bad {
        text: "events {}\nstream {\nserver { listen 127.0.0.1:1;\nreturn $http_host; }\n}\n",
        name: "http_host",
        at: "return $http_host",
    },
];

#[test]
fn a_variable_of_one_block_is_unknown_in_the_other() {
    let dir = TempDir::new("stream-ns");
    for b in BAD {
        let line = b.text.lines().position(|l| l.contains(b.at)).unwrap() + 1;
        let path = dir.write("ns.conf", b.text);
        let out = run(&["-t", "-c", path.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        let want = format!("unknown \"{}\" variable", b.name);
        let at = format!("{}:{line}", path.display());
        assert!(
            !out.status.success() && err.contains(&want) && err.contains(&at),
            "{}: want {want} at {at}, got {err}",
            b.text
        );
        if let Some(n) = nginx_t(b.text) {
            assert!(n.contains(&want), "{}: nginx says {n}", b.text);
        }
    }
}

/// `stream` and `http` each define `$x`, and each block's server
/// answers with its own.
fn both_define(http_port: &str, stream_port: u16) -> String {
    format!(
        "events {{}}\nstream {{\nmap $remote_addr $x {{ default from-stream; }}\n\
         server {{ listen 127.0.0.1:{stream_port}; return $x; }}\n}}\n\
         http {{\naccess_log off;\nmap $uri $x {{ default from-http; }}\n\
         server {{ listen 127.0.0.1:{http_port}; location / {{ return 200 $x; }} }}\n}}\n"
    )
}

fn read_session(port: u16) -> String {
    let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    out
}

#[test]
fn one_name_in_both_blocks_is_two_variables() {
    let sp = free_port();
    let porter = Server::start(&format!(
        "daemon off;\nworker_processes 1;\npid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/logs/error.log info;\n{}",
        both_define("{PORT}", sp)
    ));
    assert_eq!(read_session(sp), "from-stream");
    assert_eq!(get(porter.port, "/").text(), "from-http");
    if let Some(n) = nginx_t(&both_define("8", 9)) {
        assert!(n.contains("test is successful"), "nginx says {n}");
    }
}
