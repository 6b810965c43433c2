//! What proxying records on a request for the variables that read it:
//! `$proxy_host`, `$proxy_port`, `$upstream_cache_status` and the
//! `$upstream_*` values, one entry per try at a peer (the byte counts of
//! a streamed body are shared counters the body stream adds to, and its
//! response time a shared span the body stream ends, so the access log,
//! written after the body, sees the whole). The proxy handler
//! fills it in (`RequestCtx::upstream`); it
//! lives here, beside the request it describes, so that `http` needs
//! nothing from `upstream`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::h1::fields::{Fields, HeaderLines};
use crate::util::span::SharedSpan;
use crate::vars::template::Var;

/// One try at a peer, for the `$upstream_*` variables.
#[derive(Debug, Clone, Default)]
pub struct TryRecord {
    /// `$upstream_addr` part.
    pub addr: String,
    /// The status it answered, or the status its failure gave (502, 504).
    pub status: Option<u16>,
    /// Time to connect (None: not connected).
    pub connect: Option<Duration>,
    /// Time to the end of the response head (None: no head).
    pub header: Option<Duration>,
    /// The try's time, from its start to the end of its response's body
    /// (or its failure); not ended while the body is still to come.
    pub response: SharedSpan,
    /// Bytes sent to the peer (head and the body's length).
    pub bytes_sent: u64,
    /// Bytes read from the peer, counted on as the body streams.
    pub bytes_received: Arc<AtomicU64>,
    /// Decoded body bytes of its response, counted on as it streams.
    pub response_length: Arc<AtomicU64>,
}

/// What proxying recorded on a request, for variables.
#[derive(Debug, Clone, Default)]
pub struct UpstreamVars {
    /// `$proxy_host`.
    pub proxy_host: String,
    /// `$proxy_port`.
    pub proxy_port: String,
    /// Every try, in order.
    pub tries: Vec<TryRecord>,
    /// The last response head's headers (`$upstream_http_*`), shared
    /// with the response they came in.
    pub headers: Fields,
    /// `$upstream_cache_status` (None: the cache was not consulted).
    pub cache_status: Option<crate::cache::CacheStatus>,
}

fn secs(d: Duration, out: &mut String) {
    use std::fmt::Write as _;
    let ms = d.as_millis();
    let _ = write!(out, "{}.{:03}", ms / 1000, ms % 1000);
}

/// The value `line` (a `Set-Cookie` value) gives the cookie `name`, as
/// NGINX's `ngx_http_parse_set_cookie_lines`: the name (any case), spaces,
/// `=`, spaces, then up to the first `;` (trailing spaces kept, as NGINX).
/// A line naming another cookie, or without `=` after the name, gives none.
fn set_cookie<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let head = line.get(..name.len())?;
    if !head.eq_ignore_ascii_case(name) || line.len() <= name.len() {
        return None;
    }
    let rest = line[name.len()..].trim_start_matches(' ');
    let rest = rest.strip_prefix('=')?.trim_start_matches(' ');
    rest.split(';').next()
}

impl UpstreamVars {
    /// Appends the value of a proxy or upstream variable to `out`; tries
    /// are joined with `, ` and a missing value is `-`, as in NGINX.
    pub fn append(&self, var: &Var, out: &mut String) {
        use std::fmt::Write as _;
        let each = |out: &mut String, f: &dyn Fn(&TryRecord, &mut String)| {
            for (i, t) in self.tries.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                f(t, out);
            }
        };
        match var {
            Var::ProxyHost => out.push_str(&self.proxy_host),
            Var::UpstreamCacheStatus => {
                if let Some(c) = self.cache_status {
                    out.push_str(c.as_str())
                }
            }
            Var::ProxyPort => out.push_str(&self.proxy_port),
            Var::UpstreamAddr => each(out, &|t, o| o.push_str(&t.addr)),
            Var::UpstreamStatus => each(out, &|t, o| match t.status {
                Some(s) => {
                    let _ = write!(o, "{s}");
                }
                None => o.push('-'),
            }),
            Var::UpstreamResponseTime => each(out, &|t, o| match t.response.ended() {
                Some(d) => secs(d, o),
                None => o.push('-'),
            }),
            Var::UpstreamConnectTime => each(out, &|t, o| match t.connect {
                Some(d) => secs(d, o),
                None => o.push('-'),
            }),
            Var::UpstreamHeaderTime => each(out, &|t, o| match t.header {
                Some(d) => secs(d, o),
                None => o.push('-'),
            }),
            Var::UpstreamResponseLength => each(out, &|t, o| {
                let _ = write!(o, "{}", t.response_length.load(Ordering::Relaxed));
            }),
            Var::UpstreamBytesReceived => each(out, &|t, o| {
                let _ = write!(o, "{}", t.bytes_received.load(Ordering::Relaxed));
            }),
            Var::UpstreamBytesSent => each(out, &|t, o| {
                let _ = write!(o, "{}", t.bytes_sent);
            }),
            Var::UpstreamHttp(name) => {
                if let Some(v) = self.headers.get(name) {
                    out.push_str(v)
                }
            }
            Var::UpstreamCookie(name) => {
                if let Some(v) = self
                    .headers
                    .all("set-cookie")
                    .find_map(|l| set_cookie(l, name))
                {
                    out.push_str(v)
                }
            }
            _ => {}
        }
    }
}
