//! The values of the request's own variables (`$uri`, `$args`, `$host`,
//! `$request_time`, `$http_NAME`, `$cookie_NAME`…) that
//! `RequestCtx`'s `VarSource` (context.rs) hands out by kind.

use super::context::{arg, Mapped, RequestCtx};
use super::request::Version;
use crate::vars::template::Var;

impl RequestCtx {
    /// Whether `var` has a value (NGINX's `not_found` unset): an absent
    /// argument, header line, cookie, or a `set` variable never set has
    /// none, which differs from an empty one (SSI's `echo` prints its
    /// `default` for the first only).
    pub fn var_found(&self, var: &Var) -> bool {
        use crate::vars::template::VarSource as _;
        match var {
            Var::Arg(n) => self.args.as_deref().and_then(|a| arg(a, n)).is_some(),
            Var::Http(n) => self.head.headers().any(|(h, _)| http_var_matches(h, n)),
            Var::Cookie(_) | Var::Indexed(_) | Var::SentHttp(_) | Var::UpstreamHttp(_) => {
                let mut v = String::new();
                self.append(var, &mut v);
                !v.is_empty()
            }
            _ => true,
        }
    }

    /// `$request_method`: an internal redirect that made the main request
    /// a GET (`error_page`, `X-Accel-Redirect` to a URI) renames it, as
    /// NGINX sets `r->method_name`; a subrequest reads the main request's
    /// (`r->main->method_name`).
    fn request_method(&self) -> &str {
        if !self.subrequest && self.method == super::context::Method::Get {
            "GET"
        } else {
            self.head.method()
        }
    }

    /// The request line, URI and what the request resolved to.
    pub(super) fn append_request(&self, var: &Var, out: &mut String) {
        use std::fmt::Write as _;
        match var {
            Var::Uri => out.push_str(&self.uri),
            Var::Args => out.push_str(self.args.as_deref().unwrap_or("")),
            Var::IsArgs if self.args.is_some() => out.push('?'),
            Var::Arg(n) => {
                if let Some(v) = self.args.as_deref().and_then(|a| arg(a, n)) {
                    out.push_str(v)
                }
            }
            Var::RequestUri => out.push_str(self.head.target()),
            Var::Host => out.push_str(self.host()),
            Var::Hostname => out.push_str(&hostname()),
            Var::ServerName => out.push_str(&self.server.primary_name),
            Var::ServerProtocol => {
                // The version as sent (`HTTP/1.2` stays so).
                match self.head.line().rsplit_once(' ') {
                    Some((_, v)) if v.starts_with("HTTP/") => out.push_str(v),
                    _ => out.push_str(match self.head.version {
                        Version::Http10 => "HTTP/1.0",
                        Version::Http11 => "HTTP/1.1",
                    }),
                }
            }
            Var::Scheme if self.conn.tls.is_some() => out.push_str("https"),
            Var::Scheme => out.push_str("http"),
            Var::Https if self.conn.tls.is_some() => out.push_str("on"),
            Var::Http2 => out.push_str(self.conn.http2),
            Var::Http3 => out.push_str(self.conn.http3),
            Var::Quic if !self.conn.http3.is_empty() => out.push_str("quic"),
            Var::SslProtocol
            | Var::SslCipher
            | Var::SslServerName
            | Var::SslSessionReused
            | Var::SslClientVerify => {
                super::tls_vars::append_var(self.conn.tls.as_deref(), var, out)
            }
            Var::RequestMethod => out.push_str(self.request_method()),
            Var::RequestBody => {
                if let Some(b) = &self.request_body {
                    out.push_str(&String::from_utf8_lossy(b))
                }
            }
            Var::RequestBodyFile => out.push_str(self.request_body_file.as_deref().unwrap_or("")),
            Var::Request => out.push_str(self.request_line()),
            Var::RequestLength => {
                let _ = write!(out, "{}", self.head.head_len);
            }
            Var::RequestFilename => match &self.request_filename {
                Some(f) => out.push_str(f),
                None => self.map_uri(out, Mapped::File),
            },
            Var::DocumentRoot => match &self.document_root {
                Some(r) => out.push_str(r),
                None => self.map_uri(out, Mapped::Root),
            },
            Var::RealpathRoot => {
                let mut root = String::new();
                self.append_request(&Var::DocumentRoot, &mut root);
                // A root that does not resolve leaves it empty.
                if let Ok(real) = crate::disk::realpath_now(&root) {
                    out.push_str(&real);
                }
            }
            _ => {}
        }
    }

    /// What was sent, when, and by which process.
    pub(super) fn append_figure(&self, var: &Var, out: &mut String) {
        use std::fmt::Write as _;
        match var {
            Var::RequestTime => {
                let ms = self.start.elapsed().as_millis();
                let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
            }
            Var::Status => {
                let _ = write!(out, "{:03}", self.status);
            }
            Var::BodyBytesSent => {
                let _ = write!(out, "{}", self.body_bytes_sent);
            }
            Var::BytesSent => {
                let _ = write!(out, "{}", self.bytes_sent);
            }
            Var::Msec => {
                let (s, ms) = crate::util::time::now();
                let _ = write!(out, "{s}.{ms:03}");
            }
            Var::DateLocal => out.push_str(&crate::util::time::strftime(
                crate::util::time::SSI_TIMEFMT,
                crate::util::time::now().0,
                false,
            )),
            Var::DateGmt => out.push_str(&crate::util::time::strftime(
                crate::util::time::SSI_TIMEFMT,
                crate::util::time::now().0,
                true,
            )),
            Var::RequestCompletion if self.completed => out.push_str("OK"),
            Var::TimeLocal => crate::util::time::time_local(out),
            Var::TimeIso8601 => crate::util::time::time_iso8601(out),
            Var::Pid => {
                let _ = write!(out, "{}", std::process::id());
            }
            Var::Version => out.push_str(env!("CARGO_PKG_VERSION")),
            _ => {}
        }
    }

    /// Values read from request or response headers.
    pub(super) fn append_header(&self, var: &Var, out: &mut String) {
        use std::fmt::Write as _;
        match var {
            Var::ContentLength => {
                if let Some(v) = self.header("content-length") {
                    out.push_str(v)
                } else if let Some(b) = &self.request_body {
                    // A chunked body read whole has its length, as NGINX
                    // sets `content_length_n` once it has read one (what
                    // `uwsgi_params` and `fastcgi_params` send).
                    let _ = write!(out, "{}", b.len());
                } else if let Some(n) = self.request_body_file_len {
                    let _ = write!(out, "{n}");
                }
            }
            Var::ContentType => {
                if let Some(v) = self.header("content-type") {
                    out.push_str(v)
                }
            }
            Var::Http(name) => {
                // Repeated headers join with ", " except cookies ("; ").
                let sep = if name == "cookie" { "; " } else { ", " };
                let mut first = true;
                for (n, v) in self.head.headers() {
                    if http_var_matches(n, name) {
                        if !first {
                            out.push_str(sep);
                        }
                        out.push_str(v);
                        first = false;
                    }
                }
            }
            Var::SentHttp(name) => self.sent_http(name, out),
            Var::ProxyAddXForwardedFor => {
                let mut first = true;
                for (n, v) in self.head.headers() {
                    if n.eq_ignore_ascii_case("x-forwarded-for") {
                        if !first {
                            out.push_str(", ");
                        }
                        out.push_str(v);
                        first = false;
                    }
                }
                if !first {
                    out.push_str(", ");
                }
                out.push_str(&self.remote_addr());
            }
            Var::Cookie(name) => {
                for (n, v) in self.head.headers() {
                    if n.eq_ignore_ascii_case("cookie") {
                        for c in v.split(';') {
                            let (k, val) = c.trim().split_once('=').unwrap_or((c.trim(), ""));
                            if k == name {
                                out.push_str(val);
                                return;
                            }
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

impl RequestCtx {
    /// `$sent_http_NAME`: repeated lines join with ", " (NGINX 1.23 on;
    /// 1.22 did so for `Cache-Control` and `Link`).
    fn sent_http(&self, name: &str, out: &mut String) {
        let mut lines = self
            .sent_headers
            .iter()
            .filter(|(n, _)| n.eq_ignore_ascii_case(name));
        if let Some((_, first)) = lines.next() {
            out.push_str(first);
            for (_, v) in lines {
                out.push_str(", ");
                out.push_str(v);
            }
        }
    }
}

fn hostname() -> String {
    rustix::system::uname()
        .nodename()
        .to_string_lossy()
        .into_owned()
}

/// Whether header `n` is the one `$http_NAME` names (`name` lowercase,
/// `_` already `-`): NGINX compares the header's name lowercased with `-`
/// and `_` alike, so `$http_x_u` sees both `X-U` and (with
/// `underscores_in_headers on`) `X_U`.
fn http_var_matches(n: &str, name: &str) -> bool {
    n.len() == name.len()
        && n.bytes().zip(name.bytes()).all(|(a, b)| {
            let a = if a == b'_' {
                b'-'
            } else {
                a.to_ascii_lowercase()
            };
            a == b
        })
}
