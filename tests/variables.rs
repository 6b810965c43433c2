//! Variables stock configs log and pass on: `$request_id` (NGINX's shape:
//! 32 hexadecimal digits, the same within a request, new for each).

use std::collections::HashSet;

use crate::common::{get, one_server_conf, Server};

#[test]
fn request_id_is_32_hex_digits_stable_within_a_request_and_unique() {
    let srv = Server::start(&one_server_conf(
        "",
        "location / { add_header X-Request-Id $request_id; return 200 \"$request_id $request_id\"; }",
    ));
    let mut seen = HashSet::new();
    for _ in 0..200 {
        let r = get(srv.port, "/");
        let text = r.text();
        let (a, b) = text.split_once(' ').unwrap();
        assert_eq!(a, b);
        assert_eq!(r.header("x-request-id"), Some(a));
        assert_eq!(a.len(), 32, "{a}");
        assert!(a
            .bytes()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
        assert!(seen.insert(a.to_string()), "repeated {a}");
    }
}
