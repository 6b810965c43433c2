//! Header values with variables NGINX reads per request (nginx-tests'
//! `headers.t` and `charset.t`): `expires modified $var` and `charset
//! $var` / `source_charset $var`, compared with Debian's nginx.

use crate::common::*;

fn server(root: &std::path::Path) -> String {
    format!(
        "root {};
         location /e {{ expires modified $arg_e; }}
         location /c {{ charset $arg_c; }}",
        root.display()
    )
}

/// `Cache-Control` and `Content-Type` of each request.
fn answers(port: u16) -> Vec<String> {
    [
        "/e.html?e=2048",
        "/e.html?e=epoch",
        "/e.html?e=@15h",
        "/e.html",
        "/c.html?c=utf-8",
        "/c.html?c=koi8-r",
    ]
    .iter()
    .map(|p| {
        let r = get(port, p);
        format!(
            "{p} {} cc={} ct={}",
            r.status,
            // `max-age=204x`: the last digit follows the clock.
            r.header("cache-control")
                .map_or("-", |v| &v[..v.len().min(10)]),
            r.header("content-type").unwrap_or("-")
        )
    })
    .collect()
}

#[test]
fn expires_modified_and_charset_take_variables() {
    let root = TempDir::new("hvv");
    root.write("e.html", "e");
    root.write("c.html", "c");
    let (p, n) = both("", &server(root.path()));
    let porter = answers(p.port);
    // The file is new: max-age is 2048 less the seconds since it was
    // written (the value is cut to `max-age=20`).
    assert!(porter[0].contains("cc=max-age=20 "), "{porter:#?}");
    assert!(porter[1].contains("cc=-"), "{porter:#?}");
    assert!(
        porter[4].contains("text/html; charset=utf-8"),
        "{porter:#?}"
    );
    match n {
        Some(n) => assert_eq!(porter, answers(n.port)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}
