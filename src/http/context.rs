//! One request's state as it moves through location selection, handlers and
//! logging, and the variable values NGINX derives from it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Instant;

use super::request::{RequestHead, Version};
use super::upstream_vars::UpstreamVars;
use crate::config::{ListenGroup, LocationConf, ServerConf};
use crate::vars::regex::{Captures, Matched, Regex};
use crate::vars::template::{Indexed, SslVar, Var, VarSource};
use std::cell::RefCell;

/// Facts about the connection a request arrived on.
#[derive(Debug, Clone)]
pub struct ConnInfo {
    /// Connection serial number (`$connection`, `*N` in the error log).
    pub id: u64,
    /// Client address.
    pub peer: SocketAddr,
    /// Local address the connection was accepted on.
    pub local: SocketAddr,
    /// The TLS session, on a `listen ... ssl` connection.
    pub tls: Option<Arc<TlsInfo>>,
    /// `$http2`: `h2` or `h2c` on an HTTP/2 connection, else empty.
    pub http2: &'static str,
    /// `$http3`: `h3` on an HTTP/3 connection (QUIC), else empty.
    pub http3: &'static str,
    /// What the PROXY header named (`listen ... proxy_protocol`).
    pub proxy_protocol: Option<Arc<super::proxy_protocol::ProxyInfo>>,
    /// When the connection was accepted (`$connection_time`).
    pub accepted: Instant,
    /// On a `listen unix:PATH` connection, PATH: `peer` and `local` are
    /// placeholders, `$remote_addr` is `unix:`, `$server_addr` `unix:PATH`.
    pub unix: Option<Arc<std::path::Path>>,
}

impl ConnInfo {
    /// A plain connection `id` from `peer` to `local`, accepted now.
    pub fn accepted(id: u64, peer: SocketAddr, local: SocketAddr) -> ConnInfo {
        ConnInfo {
            id,
            peer,
            local,
            tls: None,
            http2: "",
            http3: "",
            proxy_protocol: None,
            accepted: Instant::now(),
            unix: None,
        }
    }
}

impl ConnInfo {
    /// Whether requests share the connection as streams (HTTP/2 or
    /// HTTP/3): no `Connection` semantics, no Upgrade, no 100-continue.
    pub fn multiplexed(&self) -> bool {
        !self.http2.is_empty() || !self.http3.is_empty()
    }
}

/// Connection serial numbers, process-wide (`$connection`, `*N`).
static NEXT_CONN: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// The next connection's serial number.
pub fn next_conn_id() -> u64 {
    NEXT_CONN.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}

pub use super::tls_vars::TlsInfo;

/// A request method, as the handlers tell them apart (NGINX's
/// `NGX_HTTP_*` method bits): the request's own (`RequestCtx::method`,
/// which an `error_page` redirect turns into GET) or a token's
/// ([`Method::from_token`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// GET.
    Get,
    /// HEAD.
    Head,
    /// POST.
    Post,
    /// PUT.
    Put,
    /// DELETE.
    Delete,
    /// OPTIONS.
    Options,
    /// TRACE (refused once the head is read, as NGINX).
    Trace,
    /// PATCH (not idempotent: never retried on another upstream).
    Patch,
    /// LOCK (WebDAV; not idempotent either).
    Lock,
    /// Any other token.
    Other,
}

impl Method {
    /// Classifies a method token (case matters, as in HTTP).
    pub fn from_token(m: &str) -> Method {
        match m {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "OPTIONS" => Method::Options,
            "TRACE" => Method::Trace,
            "PATCH" => Method::Patch,
            "LOCK" => Method::Lock,
            _ => Method::Other,
        }
    }

    /// Whether NGINX counts the method idempotent (not POST, LOCK or
    /// PATCH): only such a request goes to the next upstream after a
    /// failure unless `proxy_next_upstream non_idempotent`.
    pub fn idempotent(self) -> bool {
        !matches!(self, Method::Post | Method::Lock | Method::Patch)
    }

    /// Whether the method is safe (RFC 9110 9.2.1: GET, HEAD, OPTIONS;
    /// TRACE is refused anyway): the only requests served from TLS early
    /// data, which an attacker can replay (RFC 8470). PUT and DELETE are
    /// idempotent, but a replay after a later change would undo it.
    pub fn safe(self) -> bool {
        matches!(self, Method::Get | Method::Head | Method::Options)
    }
}

/// What [`RequestCtx::map_uri`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Mapped {
    /// `$request_filename`: the root with the URI.
    File,
    /// `$document_root`: the root alone.
    Root,
}

/// Whether a request's URI could be normalised ([`RequestCtx::start`]):
/// one that could not is answered 400 before any location, by the
/// default server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestUri {
    /// Normalised: the request goes on to its server and location.
    Normalised,
    /// Not normalisable (NGINX's "client sent invalid request").
    Invalid,
}

/// One request in flight.
pub struct RequestCtx {
    /// The connection.
    pub conn: ConnInfo,
    /// Requests served on this connection, this one included.
    pub conn_requests: u64,
    /// The parsed head.
    pub head: RequestHead,
    /// The method class.
    pub method: Method,
    /// Current URI (normalised; changes on internal redirects).
    pub uri: String,
    /// Current arguments (without `?`).
    pub args: Option<String>,
    /// The server block chosen by `Host`.
    pub server: Arc<ServerConf>,
    /// The location in effect.
    pub loc: Arc<LocationConf>,
    /// True after an internal redirect (`internal` locations allow it).
    pub internal: bool,
    /// True once an `error_page` redirect happened (no second one).
    pub error_page: bool,
    /// The URI still starts with the location's prefix as selected
    /// (NGINX's `r->valid_location`): a `rewrite ... break` clears it, and
    /// `proxy_pass`'s URI part then gives way to the whole URI.
    pub valid_location: bool,
    /// `try_files` chose a file in a regex location with `alias`: the
    /// URI is appended to the alias from then on (NGINX's
    /// `r->add_uri_to_alias`).
    pub add_uri_to_alias: bool,
    /// Header lines a handler set before turning to an error page, kept
    /// on that page (an intercepted 401's `WWW-Authenticate`, as NGINX
    /// copies it into `headers_out`).
    pub carried_headers: Vec<(String, String)>,
    /// `gzip_static on` found a `.gz`: the response gets `Vary:
    /// Accept-Encoding` when `gzip_vary` is on (NGINX's `r->gzip_vary`).
    pub gzip_vary: bool,
    /// The request body when a handler read it whole into memory (the
    /// proxy's small or re-framed bodies), for `$request_body`.
    pub request_body: Option<Vec<u8>>,
    /// The length of a body read whole into a temp file (the proxy's
    /// `*_request_buffering`), for `$content_length` of a chunked one.
    pub request_body_file_len: Option<u64>,
    /// The name of that temp file, for `$request_body_file`.
    pub request_body_file: Option<String>,
    /// `Expect: 100-continue` was dealt with, or an error response made it
    /// moot (NGINX's `expect_tested`).
    pub expect_tested: bool,
    /// Send `100 Continue` before the response: a handler that reads or
    /// discards the body ran before any error response.
    pub send_continue: bool,
    /// When the head was complete.
    pub start: Instant,
    /// The head was read from bytes the previous request left (`$pipe`).
    pub pipelined: bool,
    /// The request came in TLS early data (0-RTT), before the handshake
    /// finished: `$ssl_early_data` is `1` and the proxy says
    /// `Early-Data: 1`.
    pub early_data: bool,
    /// The response went out in full (`$request_completion`).
    pub completed: bool,
    /// Final status (for logs).
    pub status: u16,
    /// Body bytes written.
    pub body_bytes_sent: u64,
    /// All bytes written.
    pub bytes_sent: u64,
    /// Response headers as sent (for `$sent_http_*`).
    pub sent_headers: Vec<(String, String)>,
    /// `$document_root`.
    pub document_root: Option<String>,
    /// `$request_filename`.
    pub request_filename: Option<String>,
    /// What proxying this request recorded (`$proxy_host`, `$upstream_*`).
    pub upstream: Option<Box<UpstreamVars>>,
    /// What `limit_req`/`limit_conn` recorded, and the slots it holds.
    pub limits: crate::access::RequestLimits,
    /// The captures of the last regular expression matched (`$1`…`$9`).
    pub captures: Captures,
    /// Per-request variables: `set`, named captures, cached `map` values.
    pub slots: RefCell<Vec<Option<String>>>,
    /// Internal redirects and URI changes left (NGINX's `uri_changes`).
    pub uri_changes: u8,
    /// A `rewrite` changed the URI: search the locations again.
    pub uri_changed: bool,
    /// `set` variables read before they were set, for the
    /// `uninitialized_variable_warn` lines the handlers log.
    pub unset_read: RefCell<Vec<Arc<Indexed>>>,
    /// The connection's own peer once realip replaced `conn.peer` by the
    /// client's address (`$realip_remote_addr`); realip runs once.
    pub realip_peer: Option<SocketAddr>,
    /// The first byte of the slice `$slice_range` names: set when the
    /// main request first reads it (`slice` on), preset for a slice's
    /// subrequest (`handlers::slice`).
    pub slice: std::cell::Cell<Option<u64>>,
    /// A subrequest (`auth_request`, `mirror`, a slice): no access phase,
    /// no header filters, as NGINX runs them only for the main request.
    pub subrequest: bool,
    /// State a body filter shares between a main request and its
    /// subrequests (SSI's variables and blocks: NGINX keeps them in the
    /// module's context of `r->main`), handed on by `Subrequest`.
    pub filter_state: Option<std::rc::Rc<dyn std::any::Any>>,
    /// Background subrequests (`mirror`) still running: the connection
    /// reads its next request once they end, as NGINX's does.
    pub background: Vec<tokio::task::JoinHandle<()>>,
    /// `post_action`'s request, not started: the connection runs it once
    /// the response is sent, before the access log line
    /// ([`RequestCtx::wait_background`]).
    pub post_action: Option<std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>>,
    /// `set $limit_rate`: the rate the request was given, in place of
    /// the location's `limit_rate` (`$limit_rate`).
    pub limit_rate: Option<u64>,
    /// The userid module's uid state (`$uid_got`, `$uid_set`, the cookie).
    pub userid: RefCell<Option<Box<super::userid::UidState>>>,
}

/// NGINX's bound on URI changes and internal redirects per request (10
/// allowed, the eleventh is a cycle).
pub const MAX_URI_CHANGES: u8 = 11;

impl RequestCtx {
    /// The context of a request whose head was read on a connection to
    /// `listen` (HTTP/1.1 and HTTP/2 alike), at the level of the server its
    /// host picks, and whether its URI could be normalised. The request
    /// starts now (`$request_time`, TTFB): at the loop's clock reading of
    /// this turn.
    pub fn start(
        conn: &ConnInfo,
        listen: &ListenGroup,
        requests: u64,
        head: RequestHead,
    ) -> (RequestCtx, RequestUri) {
        let default = &listen.servers[listen.default];
        let (path, args) = super::uri::split_target(head.target());
        let normalized = super::uri::normalize_with(path, default.limits.merge_slashes);
        let args = args.map(str::to_string);
        // A URI NGINX cannot normalise is refused while it parses the
        // request line, before Host picks a server: the default server
        // answers.
        let (server, matched) = if normalized.is_ok() {
            listen.find_server_matched(head.host().map(strip_port))
        } else {
            (default, None)
        };
        let mut ctx = RequestCtx::new(conn, requests, head, server);
        // Over TCP: read before the client's Finished (QUIC: `http3::stream`).
        ctx.early_data = conn.tls.as_ref().is_some_and(|t| t.in_early_data());
        if let Some(m) = matched {
            ctx.keep_match(m);
        }
        let uri = if normalized.is_ok() {
            RequestUri::Normalised
        } else {
            RequestUri::Invalid
        };
        // NGINX never parsed one it refuses: `$uri` is empty (its line
        // is in `$request`).
        ctx.uri = normalized.unwrap_or_default();
        ctx.args = args;
        (ctx, uri)
    }

    /// A request's state at the start of processing, at `server`'s level.
    pub fn new(
        conn: &ConnInfo,
        requests: u64,
        head: RequestHead,
        server: &Arc<ServerConf>,
    ) -> RequestCtx {
        RequestCtx {
            conn: conn.clone(),
            conn_requests: requests,
            method: Method::from_token(head.method()),
            uri: String::new(),
            args: None,
            server: Arc::clone(server),
            loc: Arc::clone(&server.base),
            internal: false,
            error_page: false,
            add_uri_to_alias: false,
            valid_location: true,
            expect_tested: false,
            carried_headers: Vec::new(),
            gzip_vary: false,
            request_body: None,
            request_body_file_len: None,
            request_body_file: None,
            send_continue: false,
            // The loop's clock reading of this turn (`metrics::timed::now`).
            start: crate::metrics::timed::now(),
            pipelined: false,
            early_data: false,
            completed: false,
            status: 0,
            body_bytes_sent: 0,
            bytes_sent: 0,
            sent_headers: Vec::new(),
            document_root: None,
            request_filename: None,
            upstream: None,
            limits: Default::default(),
            captures: Captures::default(),
            slots: RefCell::new(Vec::new()),
            uri_changes: MAX_URI_CHANGES,
            uri_changed: false,
            unset_read: RefCell::new(Vec::new()),
            realip_peer: None,
            slice: std::cell::Cell::new(None),
            subrequest: false,
            filter_state: None,
            background: Vec::new(),
            post_action: None,
            limit_rate: None,
            userid: RefCell::new(None),
            head,
        }
    }

    /// The value of request header `name` (case-insensitive).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.head.header(name)
    }

    /// `$host`: Host header (port stripped), else the server name.
    pub fn host(&self) -> &str {
        match self.head.host() {
            Some(h) => strip_port(h),
            None => &self.server.primary_name,
        }
    }

    /// Whether this is a HEAD request, whose response goes out without a
    /// body. It stays one through internal redirects: an `error_page`
    /// turns other methods into GET, not HEAD.
    pub fn is_head(&self) -> bool {
        self.method == Method::Head
    }

    /// The request line as sent, without the CRLF.
    pub fn request_line(&self) -> &str {
        self.head.line()
    }

    /// A handler is about to read or discard the body: answer `Expect:
    /// 100-continue` unless that was already decided (NGINX's test_expect).
    /// Never on an HTTP/2 stream, as NGINX (the stream's window lets the
    /// client send at once).
    pub fn test_expect(&mut self) {
        if self.expect_tested {
            return;
        }
        self.expect_tested = true;
        self.send_continue = self.head.version == Version::Http11
            && !self.conn.multiplexed()
            && self
                .header("expect")
                .is_some_and(|v| v.eq_ignore_ascii_case("100-continue"));
    }

    /// The error log for this request: its location's `error_log`, else
    /// `global` (the main context's).
    pub fn error_log<'a>(&'a self, global: &'a crate::log::ErrorLog) -> &'a crate::log::ErrorLog {
        self.loc.s.error_log.as_ref().unwrap_or(global)
    }

    /// The request's error log: its location's `error_log` (else
    /// `global`), with NGINX's tail naming the request.
    pub fn log(&self, global: &crate::log::ErrorLog) -> crate::log::RequestLog {
        self.log_in(self.error_log(global))
    }

    /// The request's lines written to `log` itself: the worker's, for the
    /// lines NGINX writes before the location's log is set (a refused
    /// head) or on the connection's (a failed send).
    pub fn log_in(&self, log: &crate::log::ErrorLog) -> crate::log::RequestLog {
        let subject = crate::log::Subject {
            client: self.conn.peer.ip(),
            server: &self.server.primary_name,
            request: self.request_line(),
            subrequest: self.subrequest.then_some(self.uri.as_str()),
            host: self.head.host(),
        };
        crate::log::RequestLog::new(log, self.conn.id, subject)
    }
}

/// Strips `:port` (everything from the first `:`) from a Host value; IPv6
/// literals keep their brackets.
pub fn strip_port(h: &str) -> &str {
    &h[..super::request::host_name_len(h)]
}

pub(super) fn arg<'a>(args: &'a str, name: &str) -> Option<&'a str> {
    if name.is_empty() {
        return None;
    }
    args.split('&').find_map(|kv| {
        let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
        k.eq_ignore_ascii_case(name).then_some(v)
    })
}

impl VarSource for RequestCtx {
    fn append(&self, var: &Var, out: &mut String) {
        match var {
            Var::Uri
            | Var::Args
            | Var::IsArgs
            | Var::Arg(_)
            | Var::RequestUri
            | Var::Host
            | Var::Hostname
            | Var::ServerName
            | Var::ServerProtocol
            | Var::Scheme
            | Var::Https
            | Var::Http2
            | Var::Http3
            | Var::Quic
            | Var::SslProtocol
            | Var::SslCipher
            | Var::SslServerName
            | Var::SslSessionReused
            | Var::SslClientVerify
            | Var::RequestMethod
            | Var::RequestBody
            | Var::RequestBodyFile
            | Var::Request
            | Var::RequestLength
            | Var::RequestFilename
            | Var::DocumentRoot
            | Var::RealpathRoot => self.append_request(var, out),
            Var::SliceRange => super::derived::slice_range(self, out),
            Var::RequestTime
            | Var::Status
            | Var::BodyBytesSent
            | Var::BytesSent
            | Var::Msec
            | Var::DateLocal
            | Var::DateGmt
            | Var::RequestCompletion
            | Var::TimeLocal
            | Var::TimeIso8601
            | Var::Pid
            | Var::Version => self.append_figure(var, out),
            Var::ContentLength
            | Var::ContentType
            | Var::Http(_)
            | Var::SentHttp(_)
            | Var::ProxyAddXForwardedFor
            | Var::Cookie(_) => self.append_header(var, out),
            Var::ProxyHost
            | Var::ProxyPort
            | Var::UpstreamAddr
            | Var::UpstreamStatus
            | Var::UpstreamResponseTime
            | Var::UpstreamConnectTime
            | Var::UpstreamHeaderTime
            | Var::UpstreamResponseLength
            | Var::UpstreamBytesReceived
            | Var::UpstreamBytesSent
            | Var::UpstreamCacheStatus
            | Var::UpstreamHttp(_) => {
                if let Some(u) = &self.upstream {
                    u.append(var, out)
                }
            }
            Var::Ssl(SslVar::EarlyData) => {
                if self.early_data {
                    out.push('1')
                }
            }
            Var::Ssl(v) => super::tls_vars::append(self.conn.tls.as_deref(), *v, out),
            Var::LimitReqStatus => out.push_str(self.limits.limit_req_status.unwrap_or("")),
            Var::LimitConnStatus => out.push_str(self.limits.limit_conn_status.unwrap_or("")),
            Var::Capture(n) => self.capture(*n, out),
            Var::Indexed(v) => self.indexed(v, out),
            // `split_clients`, `map`, `geo`, modules' variables, then the
            // connection and its addresses (`defined_vars.rs`,
            // `conn_vars.rs`).
            _ => self.append_defined(var, out),
        }
    }

    fn slot(&self, index: usize) -> Option<String> {
        self.slots.borrow().get(index).cloned().flatten()
    }

    fn store_slot(&self, index: usize, value: &str) {
        self.set_slot(index, value.to_string());
    }

    fn capture(&self, n: u8, out: &mut String) {
        out.push_str(self.captures.get(n as usize));
    }
}

impl RequestCtx {
    /// A `set`, capture or `map` slot's value; reading a `set` variable
    /// before it is set is noted for `uninitialized_variable_warn`.
    fn indexed(&self, v: &Arc<Indexed>, out: &mut String) {
        if let Some(Some(s)) = self.slots.borrow().get(v.index) {
            out.push_str(s);
            return;
        }
        if let Some(b) = &v.builtin {
            // `set $http_foo` not run (yet): the header's value.
            self.append(b, out);
        } else if v.by_set.load(std::sync::atomic::Ordering::Relaxed)
            && self.loc.s.uninitialized_variable_warn
        {
            self.unset_read.borrow_mut().push(Arc::clone(v));
        }
    }

    /// Runs `post_action`'s request, then waits for the background
    /// subrequests (`mirror`) to end.
    pub async fn wait_background(&mut self) {
        if let Some(post) = self.post_action.take() {
            post.await;
        }
        for task in std::mem::take(&mut self.background) {
            let _ = task.await;
        }
    }

    /// Writes this request's lines to the location's access logs. Every
    /// request ends here once, logged or not: its status class is counted
    /// here (`metrics::STATUS_CLASSES`).
    pub fn write_access_log(&self) {
        crate::metrics::count_status(self.status);
        let cache = self.loc.s.open_log_file_cache.as_ref();
        for l in self.loc.s.access_log.iter() {
            l.write(self, cache);
        }
    }

    /// The file the location's `root` or `alias` maps the URI to
    /// (NGINX's `ngx_http_map_uri_to_path`: where `proxy_store on` puts
    /// a response).
    pub fn uri_file(&self) -> String {
        let mut out = String::new();
        self.map_uri(&mut out, Mapped::File);
        out
    }

    /// `$request_filename` (`file`) or `$document_root` before a handler
    /// set them (`if (-f $request_filename)` in the rewrite phase): the
    /// location's `root` or `alias` with the URI, as NGINX maps it.
    pub(super) fn map_uri(&self, out: &mut String, what: Mapped) {
        let file = what == Mapped::File;
        use crate::config::{alias_tail, DocRoot};
        let loc = &self.loc;
        match &loc.s.root {
            DocRoot::Root(t) => {
                let root = t.render(self);
                out.push_str(root.trim_end_matches('/'));
                if file {
                    out.push_str(&self.uri);
                }
            }
            DocRoot::Alias(t, cut) => {
                t.render_into(self, out);
                if file {
                    out.push_str(alias_tail(*cut, &self.uri, self.add_uri_to_alias));
                }
            }
        }
    }

    /// Sets a per-request variable.
    pub fn set_slot(&self, index: usize, value: String) {
        let mut slots = self.slots.borrow_mut();
        if slots.len() <= index {
            slots.resize(index + 1, None);
        }
        slots[index] = Some(value);
    }

    /// Matches `re` against `subject` as NGINX's `ngx_http_regex_exec`:
    /// on a match, a pattern with groups replaces the captures and each
    /// named group sets its variable; `false` when it does not match.
    pub fn regex_exec(&mut self, re: &Regex, subject: &str) -> bool {
        match re.exec(subject) {
            Some(m) => {
                self.keep_match(m);
                true
            }
            None => false,
        }
    }

    /// Keeps what a match found (a regex `server_name`'s, a location's):
    /// its captures, and the values of its named groups.
    pub fn keep_match(&mut self, m: Matched) {
        if let Some(c) = m.captures {
            self.captures = c;
        }
        for (v, value) in m.named {
            self.set_slot(v.index, value);
        }
    }
}
