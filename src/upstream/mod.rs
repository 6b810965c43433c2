//! Upstreams: the groups `upstream { }` and `proxy_pass` define
//! ([`balance`]: peers, their shared state and NGINX's balancers), the
//! per-worker keep-alive pools ([`pool`]), HTTP/1.x client framing
//! ([`wire`]), the application-server codecs ([`fastcgi`], [`uwsgi`],
//! [`scgi`], and [`app_head`] for the latter two's answers), HTTP/2 to
//! peers for gRPC ([`http2`]), `Set-Cookie` rewriting ([`cookie`]), the peer's address, TCP or unix socket ([`addr`]), the
//! socket plain or TLS ([`stream`]), names resolved at run time
//! ([`resolver`], its DNS messages in `dns_wire`), and the pieces a
//! proxied exchange is made of: connecting with `proxy_connect_timeout`,
//! the parsed [`UpstreamResponse`] and its streaming [`UpstreamBody`].
//!
//! The proxy handler (`handlers::proxy`) drives these: it picks a peer,
//! sends the request, reads the head, and hands the body to the
//! connection loop as a [`BodyStream`], which pulls it piece by piece while
//! writing to the client. A body read to its end on a reusable connection
//! puts the connection back into the pool.

pub mod addr;
pub mod app_head;
pub mod balance;
pub mod cookie;
mod dns_wire;
pub mod fastcgi;
pub mod http2;
mod ketama;
pub mod pool;
mod protocol;
pub mod resolver;
pub mod scgi;
pub mod stream;
pub mod uwsgi;
pub mod wire;

use std::io;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use addr::{connect, connect_with, ConnectOptions, PeerAddr, Socket};
pub use balance::{PeerRef, PeerSpec, UpstreamGroup};
pub use pool::UpstreamConn;
pub use protocol::{app_url, Protocol};
pub use stream::UpStream;
use wire::{Framing, ResponseHead};

use crate::h1::stream::{logged_error, BodyStream, ChunkFuture};
use crate::log::{Level, RequestLog};
use crate::util::span::SharedSpan;
use crate::vars::template::Template;

/// Most bytes one read from an upstream takes: the bound on what a
/// proxied body holds in memory per request.
pub const READ_CHUNK: usize = 64 * 1024;

/// `proxy_next_upstream` conditions, as bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextUpstream(pub u16);

impl NextUpstream {
    /// `error`: connecting, sending or reading the head failed.
    pub const ERROR: u16 = 1;
    /// `timeout`.
    pub const TIMEOUT: u16 = 2;
    /// `invalid_header`.
    pub const INVALID_HEADER: u16 = 4;
    /// `http_500`.
    pub const HTTP_500: u16 = 8;
    /// `http_502`.
    pub const HTTP_502: u16 = 16;
    /// `http_503`.
    pub const HTTP_503: u16 = 32;
    /// `http_504`.
    pub const HTTP_504: u16 = 64;
    /// `http_403`.
    pub const HTTP_403: u16 = 128;
    /// `http_404`.
    pub const HTTP_404: u16 = 256;
    /// `http_429`.
    pub const HTTP_429: u16 = 512;
    /// `non_idempotent`: also retry POST, LOCK, PATCH.
    pub const NON_IDEMPOTENT: u16 = 1024;
    /// NGINX's default, `error timeout`.
    pub const DEFAULT: NextUpstream = NextUpstream(Self::ERROR | Self::TIMEOUT);

    /// Parses the directive's arguments (NGINX's bitmask values).
    pub fn parse(args: &[String]) -> Result<NextUpstream, String> {
        let mut bits = 0;
        for a in args {
            bits |= match a.as_str() {
                "error" => Self::ERROR,
                "timeout" => Self::TIMEOUT,
                "invalid_header" => Self::INVALID_HEADER,
                "http_500" => Self::HTTP_500,
                "http_502" => Self::HTTP_502,
                "http_503" => Self::HTTP_503,
                "http_504" => Self::HTTP_504,
                "http_403" => Self::HTTP_403,
                "http_404" => Self::HTTP_404,
                "http_429" => Self::HTTP_429,
                "non_idempotent" => Self::NON_IDEMPOTENT,
                "off" => 0,
                "updating" => 0,
                _ => return Err(format!("invalid value \"{a}\"")),
            };
        }
        if args.len() > 1 && args.iter().any(|a| a == "off") {
            return Err("invalid value \"off\"".to_string());
        }
        Ok(NextUpstream(bits))
    }

    /// Whether condition `bit` is on.
    pub fn has(self, bit: u16) -> bool {
        self.0 & bit != 0
    }

    /// The condition bit an upstream status answers to, if any.
    pub fn status_bit(status: u16) -> Option<u16> {
        Some(match status {
            500 => Self::HTTP_500,
            502 => Self::HTTP_502,
            503 => Self::HTTP_503,
            504 => Self::HTTP_504,
            403 => Self::HTTP_403,
            404 => Self::HTTP_404,
            429 => Self::HTTP_429,
            _ => return None,
        })
    }
}

/// Every group of one configuration (the `upstream` blocks, then the
/// implicit groups of `proxy_pass` addresses, by name), set once the
/// whole file is read: what `porter_status` and `porter_metrics` list.
#[derive(Debug, Default)]
pub struct AllGroups(std::sync::OnceLock<Vec<Arc<UpstreamGroup>>>);

impl AllGroups {
    /// Sets the list (the config's last step; a second call is ignored).
    pub fn set(&self, groups: Vec<Arc<UpstreamGroup>>) {
        let _ = self.0.set(groups);
    }

    /// The groups (none before [`AllGroups::set`]).
    pub fn get(&self) -> &[Arc<UpstreamGroup>] {
        self.0.get().map_or(&[], Vec::as_slice)
    }
}

/// Where `proxy_pass` sends requests.
#[derive(Debug, Clone)]
pub enum ProxyTarget {
    /// A group known at config time (an `upstream` block or the implicit
    /// group of an address).
    Group(Arc<UpstreamGroup>),
    /// A URL with variables, rendered per request; its host must name an
    /// `upstream` block or be an IP address (porter has no resolver).
    Dynamic(Template),
}

/// One `proxy_redirect` rule, applied to an upstream's `Location`.
#[derive(Debug, Clone)]
pub enum RedirectRule {
    /// `default`: the `proxy_pass` URL (with `/` when it has no URI part)
    /// becomes the location's path (`/`).
    Default,
    /// `proxy_redirect redirect replacement`: a prefix and what replaces it.
    Replace(Template, Template),
    /// `proxy_redirect ~regex replacement` (`~*` caseless): a match
    /// anywhere in the value replaces all of it, captures available to the
    /// replacement (NGINX's `ngx_http_proxy_rewrite_regex_handler`).
    Regex(Arc<crate::vars::regex::Regex>, Template),
}

/// A `proxy_pass` (or `fastcgi_pass`) directive, compiled.
#[derive(Debug)]
pub struct ProxyPass {
    /// The protocol spoken to the peers.
    pub proto: Protocol,
    /// The target.
    pub target: ProxyTarget,
    /// The URI part of a literal URL (`/new/` in `http://b/new/`), if any.
    pub uri: Option<String>,
    /// `$proxy_host`: the host as written, with the port unless it is the
    /// scheme's (80, or 443 for `https://`).
    pub proxy_host: String,
    /// `https://`: the upstream is spoken to over TLS (for a URL with
    /// variables, the rendered URL decides).
    pub tls: bool,
    /// `$proxy_port` (empty for a unix socket, as NGINX's).
    pub proxy_port: String,
    /// The path of the location `proxy_pass` is in (replaced by `uri`).
    pub location: String,
    /// The `upstream` blocks, for a dynamic target to name one.
    pub groups: Arc<Vec<Arc<UpstreamGroup>>>,
    /// Every group of the configuration, the implicit ones of other
    /// `proxy_pass` addresses too (set once the file is read): a dynamic
    /// target's `host:port` names one as NGINX's upstream list does.
    pub all_groups: Arc<AllGroups>,
    /// What `proxy_redirect default` replaces, and with what (None with
    /// variables in the URL).
    pub redirect_default: Option<(String, String)>,
}

/// A URL `proxy_pass` accepts, split: `http[s]://HOST[:PORT][URI]`, or
/// `http://unix:PATH[:URI]` (NGINX's form for a unix socket: the path
/// ends at the first `:`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitUrl {
    /// `https://`: the connection speaks TLS.
    pub tls: bool,
    /// The host as written (brackets kept for IPv6; `unix:PATH` for a
    /// unix socket).
    pub host: String,
    /// The port, if written.
    pub port: Option<u16>,
    /// The URI part (from the first `/`), if any.
    pub uri: Option<String>,
}

impl SplitUrl {
    /// The port connected to: as written, else the scheme's.
    pub fn port_or_default(&self) -> u16 {
        self.port.unwrap_or(if self.tls { 443 } else { 80 })
    }

    /// The socket path of a `unix:PATH` host.
    pub fn unix_path(&self) -> Option<&str> {
        unix_path(&self.host)
    }

    /// `$proxy_port`: the port, empty for a unix socket.
    pub fn proxy_port(&self) -> String {
        match self.unix_path() {
            Some(_) => String::new(),
            None => self.port_or_default().to_string(),
        }
    }

    /// `$proxy_host`: the host, with the port when it is not the scheme's
    /// (`localhost` for a unix socket, as NGINX sends it).
    pub fn proxy_host(&self) -> String {
        if self.unix_path().is_some() {
            return "localhost".to_string();
        }
        let default = if self.tls { 443 } else { 80 };
        match self.port {
            Some(p) if p != default => format!("{}:{p}", self.host),
            _ => self.host.clone(),
        }
    }
}

/// The length of `url`'s scheme prefix and whether it is `https://`, if it
/// has one `proxy_pass` accepts.
pub fn url_scheme(url: &str) -> Option<(usize, bool)> {
    let has = |p: &str| {
        url.get(..p.len())
            .is_some_and(|h| h.eq_ignore_ascii_case(p))
    };
    if has("http://") {
        Some((7, false))
    } else if has("https://") {
        Some((8, true))
    } else {
        None
    }
}

/// The path of a `unix:PATH` address (the prefix in any case, as NGINX).
pub fn unix_path(host: &str) -> Option<&str> {
    host.get(..5)
        .filter(|p| p.eq_ignore_ascii_case("unix:"))
        .map(|_| &host[5..])
}

/// Splits a `proxy_pass` URL; the error is NGINX's message.
pub fn split_url(url: &str) -> Result<SplitUrl, String> {
    let Some((skip, tls)) = url_scheme(url) else {
        return Err(format!("invalid URL prefix in \"{url}\""));
    };
    let rest = &url[skip..];
    if let Some(path) = unix_path(rest) {
        // NGINX: the path ends at the first `:`, the URI follows it.
        let (path, uri) = match path.split_once(':') {
            Some((p, u)) => (p, (!u.is_empty()).then(|| u.to_string())),
            None => (path, None),
        };
        PeerAddr::unix(path)?;
        return Ok(SplitUrl {
            tls,
            host: format!("{}{path}", &rest[..5]),
            port: None,
            uri,
        });
    }
    let (hostport, uri) = match rest.find(['/', '?']) {
        Some(i) => (&rest[..i], Some(rest[i..].to_string())),
        None => (rest, None),
    };
    if hostport.is_empty() {
        return Err(format!("no host in \"{rest}\""));
    }
    let (host, port) = if let Some(end) = hostport.strip_prefix('[').and_then(|h| h.find(']')) {
        let after = &hostport[end + 2..];
        let host = &hostport[..end + 2];
        match after.strip_prefix(':') {
            Some(p) => (host, Some(p)),
            None => (host, None),
        }
    } else {
        match hostport.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = match port {
        Some(p) => match p.parse::<u16>() {
            Ok(n) if n > 0 => Some(n),
            _ => return Err(format!("invalid port in \"{rest}\"")),
        },
        None => None,
    };
    Ok(SplitUrl {
        tls,
        host: host.to_string(),
        port,
        uri,
    })
}

/// Writes all of `data` to an upstream, each wait bounded by `timeout`.
pub async fn write_all(stream: &UpStream, data: &[u8], timeout: Duration) -> io::Result<()> {
    stream.write_all(data, timeout).await
}

/// Reads what is available into `buf` (at most [`READ_CHUNK`] more),
/// waiting at most `timeout`; `Ok(0)` when the upstream closed. Cancel-safe:
/// `buf` only grows by bytes actually read.
pub async fn read_some(
    stream: &UpStream,
    buf: &mut Vec<u8>,
    timeout: Duration,
) -> io::Result<usize> {
    stream.read_some(buf, READ_CHUNK, timeout).await
}

/// What the upstream answered: the parsed head, and the body still to be
/// read from the connection.
pub struct UpstreamResponse {
    /// The head as received.
    pub head: ResponseHead,
    /// The peer that answered.
    pub addr: PeerAddr,
    /// The body.
    pub body: UpstreamBody,
}

impl UpstreamResponse {
    /// Status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// Header lines in order.
    pub fn headers(&self) -> &crate::h1::fields::Fields {
        &self.head.headers
    }

    /// The first value of `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// `Cache-Control`, every line joined with `, `.
    pub fn cache_control(&self) -> Option<String> {
        let v: Vec<&str> = self.all("cache-control").collect();
        (!v.is_empty()).then(|| v.join(", "))
    }

    /// `Expires`.
    pub fn expires(&self) -> Option<&str> {
        self.header("expires")
    }

    /// Every `Set-Cookie` line.
    pub fn set_cookie(&self) -> impl Iterator<Item = &str> {
        self.all("set-cookie")
    }

    /// `Vary`.
    pub fn vary(&self) -> Option<&str> {
        self.header("vary")
    }

    /// `ETag`.
    pub fn etag(&self) -> Option<&str> {
        self.header("etag")
    }

    /// `Last-Modified`.
    pub fn last_modified(&self) -> Option<&str> {
        self.header("last-modified")
    }

    /// `Content-Length`, when the body is length-delimited.
    pub fn content_length(&self) -> Option<u64> {
        match self.body.framing {
            Framing::Length(n) => Some(n),
            Framing::FastCgi(ref d) => d.length(),
            Framing::Empty => self
                .header("content-length")
                .and_then(|v| v.trim().parse().ok()),
            _ => None,
        }
    }

    fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.head
            .headers
            .iter()
            .filter(move |(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
}

/// Where a connection goes when its response was read completely.
#[derive(Debug, Clone, Copy)]
pub struct PoolReturn {
    /// The group's id.
    pub group: u64,
    /// `keepalive N`.
    pub max: usize,
    /// `keepalive_timeout`.
    pub timeout: Duration,
    /// `keepalive_requests`.
    pub requests: u64,
    /// `keepalive_time`.
    pub time: Duration,
}

/// An upstream connection that switched protocols (`101`), with what
/// the tunnel needs of the exchange.
pub struct Switched {
    /// The connection.
    pub conn: UpstreamConn,
    /// Bytes the upstream sent after its head.
    pub early: Vec<u8>,
    /// `$upstream_bytes_received` of the try.
    pub received: Option<Arc<AtomicU64>>,
    /// Where the tunnel logs (the try's log, naming the upstream).
    pub log: Option<RequestLog>,
}

/// A response body read from the upstream connection as the client
/// connection asks for it.
pub struct UpstreamBody {
    conn: Option<UpstreamConn>,
    /// Raw bytes read and not yet decoded.
    buf: Vec<u8>,
    framing: Framing,
    done: bool,
    read_timeout: Duration,
    /// Set when the connection may be reused after this body.
    pool: Option<PoolReturn>,
    log: Option<RequestLog>,
    /// `$upstream_bytes_received` and `$upstream_response_length` of the
    /// try, added to as the body is read and decoded.
    counters: Option<(Arc<AtomicU64>, Arc<AtomicU64>)>,
    /// `fastcgi_limit_rate`: the pace of the reads from the upstream.
    pacer: Option<crate::h1::rate::Pacer>,
    /// The peer's count of requests in flight, ended with the body.
    pub in_flight: Option<balance::InFlight>,
    /// The try's `$upstream_response_time`, ended with the body.
    span: Option<SharedSpan>,
}

impl UpstreamBody {
    /// A body over `conn`, with `buf` holding what followed the head.
    pub fn new(
        conn: UpstreamConn,
        buf: Vec<u8>,
        framing: Framing,
        read_timeout: Duration,
        pool: Option<PoolReturn>,
    ) -> UpstreamBody {
        let done = matches!(framing, Framing::Empty);
        let mut b = UpstreamBody {
            conn: Some(conn),
            buf,
            framing,
            done,
            read_timeout,
            pool,
            log: None,
            counters: None,
            pacer: None,
            in_flight: None,
            span: None,
        };
        if done {
            b.release();
        }
        b
    }

    /// The "body" of a `101 Switching Protocols`: none, the connection
    /// kept (never pooled) to become the upstream's side of a tunnel
    /// ([`into_upgrade`](Self::into_upgrade)); `buf` holds what followed
    /// the head.
    pub fn switched(conn: UpstreamConn, buf: Vec<u8>) -> UpstreamBody {
        UpstreamBody {
            conn: Some(conn),
            buf,
            framing: Framing::Empty,
            done: true,
            read_timeout: Duration::ZERO,
            pool: None,
            log: None,
            counters: None,
            pacer: None,
            in_flight: None,
            span: None,
        }
    }

    /// The connection of a [`switched`](Self::switched) body, for the
    /// tunnel (`None` for any other body).
    pub fn into_upgrade(mut self) -> Option<Switched> {
        if self.pool.is_some() || !self.done {
            return None;
        }
        Some(Switched {
            conn: self.conn.take()?,
            early: std::mem::take(&mut self.buf),
            received: self.counters.take().map(|(rx, _)| rx),
            log: self.log.take(),
        })
    }

    /// Reads at most `rate` bytes a second from the upstream (0: no limit).
    pub fn set_rate(&mut self, rate: u64) {
        self.pacer = crate::h1::rate::Pacer::new(rate, 0);
    }

    /// Where to log a truncated body.
    pub fn set_log(&mut self, log: RequestLog) {
        self.log = Some(log);
    }

    /// Counts the bytes read (raw) and decoded into these counters.
    pub fn set_counters(&mut self, received: Arc<AtomicU64>, length: Arc<AtomicU64>) {
        received.fetch_add(self.buf.len() as u64, Ordering::Relaxed);
        self.counters = Some((received, length));
    }

    /// Ends `span` (`$upstream_response_time`) when the body has been
    /// read, failed, or was dropped.
    pub fn set_span(&mut self, span: SharedSpan) {
        self.span = Some(span);
    }

    /// Whether the body was read to its end.
    pub fn is_complete(&self) -> bool {
        self.done
    }

    /// The body ended: the connection goes back to the pool when it may.
    fn release(&mut self) {
        self.in_flight = None;
        self.span.take().inspect(SharedSpan::end);
        let Some(conn) = self.conn.take() else {
            return;
        };
        if let Some(p) = self.pool {
            if self.buf.is_empty() && conn.requests < p.requests && conn.opened.elapsed() < p.time {
                pool::put(p.group, p.max, p.timeout, conn);
            }
        }
    }

    fn fail(&mut self, msg: std::fmt::Arguments<'_>) -> io::Error {
        self.conn = None;
        self.span.take().inspect(SharedSpan::end);
        if let Some(l) = &self.log {
            l.error(msg);
        }
        logged_error()
    }

    /// Logs what a FastCGI body's decoder noted (the application's stderr,
    /// output past `Content-Length`), as NGINX logs it.
    fn log_notes(&mut self) {
        let Framing::FastCgi(d) = &mut self.framing else {
            return;
        };
        let Some(l) = &self.log else {
            return;
        };
        for n in d.take_notes() {
            let (level, msg) = match n {
                fastcgi::Note::Stderr(t) => {
                    (Level::Error, format!("FastCGI sent in stderr: \"{t}\""))
                }
                fastcgi::Note::TooMuch => (
                    Level::Warn,
                    "upstream sent more data than specified in \"Content-Length\" header"
                        .to_string(),
                ),
            };
            l.line(level, format_args!("{msg} while reading upstream"));
        }
    }

    /// Appends the next decoded piece to `out`; `Ok(false)` at the end.
    pub async fn next(&mut self, out: &mut Vec<u8>) -> io::Result<bool> {
        loop {
            if self.done {
                return Ok(false);
            }
            if !self.buf.is_empty() {
                let before = out.len();
                let decoded = self.framing.decode(&self.buf, out);
                self.log_notes();
                let (used, done) = match decoded {
                    Ok(r) => r,
                    Err(e) => return Err(self.fail(format_args!("{e} while reading upstream"))),
                };
                self.buf.drain(..used);
                if let Some((_, len)) = &self.counters {
                    len.fetch_add((out.len() - before) as u64, Ordering::Relaxed);
                }
                if done {
                    self.done = true;
                    self.release();
                }
                if !out.is_empty() || done {
                    return Ok(!out.is_empty());
                }
            }
            let Some(conn) = &self.conn else {
                return Ok(false);
            };
            let had = self.buf.len();
            let max = match &self.pacer {
                Some(p) => p.take(READ_CHUNK).await,
                None => READ_CHUNK,
            };
            let read = conn
                .stream
                .read_some(&mut self.buf, max, self.read_timeout)
                .await;
            if let Some(p) = &self.pacer {
                p.sent((self.buf.len() - had) as u64);
            }
            if let (Some((rx, _)), Ok(_)) = (&self.counters, &read) {
                rx.fetch_add((self.buf.len() - had) as u64, Ordering::Relaxed);
            }
            match read {
                Ok(0) => {
                    if self.framing.complete_at_eof() {
                        self.done = true;
                        self.conn = None;
                        self.span.take().inspect(SharedSpan::end);
                        return Ok(false);
                    }
                    return Err(self.fail(format_args!(
                        "upstream prematurely closed connection while reading upstream"
                    )));
                }
                Ok(_) => {}
                Err(e) if e.raw_os_error() == Some(libc::ETIMEDOUT) => {
                    return Err(self.fail(format_args!(
                        "upstream timed out (110: Connection timed out) while reading upstream"
                    )))
                }
                Err(e) => {
                    let text = crate::util::errno_text(&e);
                    return Err(
                        self.fail(format_args!("recv() failed {text} while reading upstream"))
                    );
                }
            }
        }
    }
}

impl Drop for UpstreamBody {
    fn drop(&mut self) {
        self.span.take().inspect(SharedSpan::end);
    }
}

impl BodyStream for UpstreamBody {
    fn read_chunk<'a>(&'a mut self, out: &'a mut Vec<u8>) -> ChunkFuture<'a> {
        Box::pin(self.next(out))
    }
}
