//! `msie_refresh` (nginx-tests' `msie_refresh.t`): a 301 or 302 porter
//! makes itself is answered to MSIE as a page that refreshes to the
//! target, the target escaped; other browsers get the redirect.

use crate::common::*;

const SERVER: &str = "msie_refresh on;
    location / { return 301 text; }
    location /space { return 302 \"a b'\"; }
    location /off { msie_refresh off; return 301 text; }";

fn answers(port: u16) -> Vec<String> {
    [
        ("/", "MSIE foo"),
        ("/space", "MSIE 6.0; x"),
        ("/off", "MSIE foo"),
        ("/", "curl/8"),
    ]
    .iter()
    .map(|(p, ua)| {
        let r = get_with(port, p, &format!("User-Agent: {ua}\r\n"));
        format!(
            "{p} {} {} {}",
            r.status,
            r.header("location").unwrap_or("-"),
            if r.status == 200 {
                r.text()
            } else {
                String::new()
            }
        )
    })
    .collect()
}

#[test]
fn msie_gets_a_refresh_page_for_a_redirect() {
    let (p, n) = both("", SERVER);
    let porter = answers(p.port);
    assert_eq!(
        porter[0],
        "/ 200 - <html><head><meta http-equiv=\"Refresh\" content=\"0; URL=text\"></head><body></body></html>\r\n"
    );
    assert!(porter[1].contains("URL=a%20b%27\""), "{porter:#?}");
    assert!(porter[2].starts_with("/off 301 text"), "{porter:#?}");
    match n {
        Some(n) => assert_eq!(porter, answers(n.port)),
        None => eprintln!("skipped the comparison: nginx is not installed"),
    }
}
