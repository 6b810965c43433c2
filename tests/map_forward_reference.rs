//! A `map` (or `geo`, `split_clients`) value or source may name a variable
//! that another `map` written below it defines, as NGINX resolves
//! variables once the whole configuration is read; a cycle stays an
//! error. nginx answers the same configuration the same.

use crate::common::*;

const BODY: &str = "map $args $x { default \"x:$y\"; }
  map $arg_a $y { default none; 1 \"one:$z\"; }
  split_clients $args $s { 50% \"half:$y\"; * \"rest:$y\"; }
  map $arg_b $z { default zed; }
  server { listen 127.0.0.1:{PORT}; location / { return 200 \"$x|$y|$z|$s\\n\"; } }";

#[test]
fn a_map_may_use_a_later_map() {
    let s = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {BODY} }}\n"
    ));
    let paths = ["/", "/?a=1", "/?a=1&b=2", "/?a=2"];
    let porter: Vec<String> = paths.iter().map(|p| get(s.port, p).text()).collect();
    assert_eq!(
        porter[1],
        format!(
            "x:one:zed|one:zed|zed|{}",
            porter[1].rsplit('|').next().unwrap()
        )
    );
    assert!(porter[0].starts_with("x:none|none|zed|"), "{}", porter[0]);
    if let Some(n) = Nginx::start(BODY) {
        let nginx: Vec<String> = paths.iter().map(|p| get(n.port, p).text()).collect();
        assert_eq!(porter, nginx);
    }
}

#[test]
fn a_cycle_is_still_an_error() {
    let dir = TempDir::new("mapcycle");
    let conf = dir.write(
        "t.conf",
        "events {} http { map $args $p { default $q; } map $args $q { default $p; } }",
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
    assert!(err.contains("unknown \"q\" variable"), "{err}");
}

/// A `geo` (or `map`) may define a variable an earlier block defined: the
/// last block wins, as NGINX's changeable variables do (perusio's
/// drupal-with-nginx `blacklist.conf` has `map $http_referer $bad_referer`
/// then `geo $bad_referer`). porter refused the second as a duplicate.
#[test]
fn a_later_geo_or_map_redefines_a_variable() {
    const TWICE: &str = "map $http_referer $bad { default 0; ~bad 1; }
  geo $bad { default 2; 127.0.0.1 3; }
  map $args $again { default first; }
  map $args $again { default second; }
  server { listen 127.0.0.1:{PORT}; location / { return 200 \"$bad|$again\\n\"; } }";
    let s = Server::start(&format!(
        "daemon off; worker_processes 1; pid {{PREFIX}}/porter.pid;\n\
         error_log {{PREFIX}}/error.log info; events {{}}\n\
         http {{ access_log off; {TWICE} }}\n"
    ));
    let req = "GET / HTTP/1.1\r\nHost: x\r\nReferer: http://bad/\r\nConnection: close\r\n\r\n";
    assert_eq!(raw(s.port, req.as_bytes()).text(), "3|second\n");
    if let Some(n) = Nginx::start(TWICE) {
        assert_eq!(raw(n.port, req.as_bytes()).text(), "3|second\n");
    }
}
