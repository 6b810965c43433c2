//! Strings with NGINX variables (`"$scheme://$host$request_uri"`), compiled
//! once at config time into literal and variable parts.
//!
//! An unknown variable is a config error (`unknown "foo" variable`), as in
//! NGINX. Values come from whoever renders the template through [`VarSource`]
//! (the HTTP request context), so this module knows names, not requests.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

pub use super::families::ConnCount;
use super::split_clients::SplitClients;
pub use super::ssl_var::SslVar;

/// One NGINX variable porter knows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Var {
    /// `$uri`, `$document_uri`: the normalised URI, after internal redirects.
    Uri,
    /// `$args`, `$query_string`.
    Args,
    /// `$is_args`: `?` when there are arguments.
    IsArgs,
    /// `$arg_NAME`.
    Arg(String),
    /// `$request_uri`: the target as the client sent it.
    RequestUri,
    /// `$host`.
    Host,
    /// `$hostname`: the machine's host name.
    Hostname,
    /// `$remote_addr`.
    RemoteAddr,
    /// `$binary_remote_addr`: the client's address as NGINX's 4 or 16 raw
    /// bytes, each carried as the character of the same number (U+0000 to
    /// U+00FF) in porter's text values; [`Template::render_key`] and the
    /// access log turn them back into those bytes.
    BinaryRemoteAddr,
    /// `$remote_port`.
    RemotePort,
    /// `$remote_user`: the user of Basic credentials, if sent.
    RemoteUser,
    /// `$realip_remote_addr`: the connection's peer, before realip.
    RealipRemoteAddr,
    /// `$realip_remote_port`.
    RealipRemotePort,
    /// `$proxy_protocol_addr`: the client address of the PROXY header.
    ProxyProtocolAddr,
    /// `$proxy_protocol_port`.
    ProxyProtocolPort,
    /// `$proxy_protocol_server_addr`: the server address of the PROXY header.
    ProxyProtocolServerAddr,
    /// `$proxy_protocol_server_port`.
    ProxyProtocolServerPort,
    /// `$server_addr`.
    ServerAddr,
    /// `$server_port`.
    ServerPort,
    /// `$server_name`.
    ServerName,
    /// `$server_protocol`.
    ServerProtocol,
    /// `$scheme`: `https` on a TLS connection.
    Scheme,
    /// `$https`: `on` on a TLS connection, else empty.
    Https,
    /// `$http2`: `h2` (HTTP/2 over TLS), `h2c` (cleartext), else empty.
    Http2,
    /// `$http3`: `h3` on an HTTP/3 connection.
    Http3,
    /// `$quic`: `quic` on a QUIC connection.
    Quic,
    /// `$ssl_protocol`.
    SslProtocol,
    /// `$ssl_cipher`.
    SslCipher,
    /// `$ssl_server_name`: the SNI name.
    SslServerName,
    /// `$ssl_session_reused`: `r` or `.`.
    SslSessionReused,
    /// `$ssl_client_verify`: `NONE`, `SUCCESS` or `FAILED:reason`.
    SslClientVerify,
    /// The other `$ssl_*` variables: the client certificate, the session.
    Ssl(SslVar),
    /// `$request_method`.
    RequestMethod,
    /// `$request`: the request line.
    Request,
    /// `$request_length`.
    RequestLength,
    /// `$request_time`: seconds with millisecond resolution.
    RequestTime,
    /// `$request_filename`.
    RequestFilename,
    /// `$document_root`.
    DocumentRoot,
    /// `$status`.
    Status,
    /// `$body_bytes_sent`.
    BodyBytesSent,
    /// `$bytes_sent`.
    BytesSent,
    /// `$content_length` (request header).
    ContentLength,
    /// `$content_type` (request header).
    ContentType,
    /// `$connection`: the connection serial number.
    Connection,
    /// `$connection_requests`.
    ConnectionRequests,
    /// `$connection_time`: seconds since the connection was accepted,
    /// with millisecond resolution.
    ConnectionTime,
    /// `$pipe`: `p` when the request was pipelined, else `.`.
    Pipe,
    /// `$request_completion`: `OK` once the response was sent in full.
    RequestCompletion,
    /// `$realpath_root`: `$document_root` with its symbolic links resolved.
    RealpathRoot,
    /// `$request_id`: 32 hexadecimal digits, unique to the request.
    RequestId,
    /// `$slice_range`: `bytes=START-END` of the slice being fetched, once
    /// `slice` is on (`handlers::slice`).
    SliceRange,
    /// `$msec`.
    Msec,
    /// `$date_local`: the local time in the SSI `timefmt` (NGINX's SSI
    /// module's variable; `%A, %d-%b-%Y %H:%M:%S %Z` outside SSI).
    DateLocal,
    /// `$date_gmt`: the same in GMT.
    DateGmt,
    /// `$time_local`.
    TimeLocal,
    /// `$time_iso8601`.
    TimeIso8601,
    /// `$pid`.
    Pid,
    /// `$nginx_version` / `$porter_version`.
    Version,
    /// `$http_NAME`: a request header (`_` matches `-`, case-insensitive).
    Http(String),
    /// `$sent_http_NAME`: a response header.
    SentHttp(String),
    /// `$cookie_NAME`.
    Cookie(String),
    /// A variable a `split_clients` block defines.
    Split(Arc<SplitClients>),
    /// `$proxy_host`.
    ProxyHost,
    /// `$proxy_port`.
    ProxyPort,
    /// `$proxy_add_x_forwarded_for`.
    ProxyAddXForwardedFor,
    /// `$upstream_addr`.
    UpstreamAddr,
    /// `$upstream_status`.
    UpstreamStatus,
    /// `$upstream_response_time`.
    UpstreamResponseTime,
    /// `$upstream_connect_time`.
    UpstreamConnectTime,
    /// `$upstream_header_time`.
    UpstreamHeaderTime,
    /// `$request_body`: the body, when it was read into memory.
    RequestBody,
    /// `$request_body_file`: the body's temp file, when it went to one.
    RequestBodyFile,
    /// `$upstream_response_length`: body bytes of each try's response.
    UpstreamResponseLength,
    /// `$upstream_bytes_received`: bytes read from each try's peer.
    UpstreamBytesReceived,
    /// `$upstream_bytes_sent`: bytes sent to each try's peer.
    UpstreamBytesSent,
    /// `$upstream_http_NAME`: a header of the upstream's response.
    UpstreamHttp(String),
    /// `$upstream_cache_status`.
    UpstreamCacheStatus,
    /// `$limit_req_status`: `PASSED`, `DELAYED`, `REJECTED`, … (`limit_req`).
    LimitReqStatus,
    /// `$limit_conn_status`: `PASSED`, `REJECTED`, … (`limit_conn`).
    LimitConnStatus,
    /// `$invalid_referer`: `1` when `valid_referers` refuses the referer.
    InvalidReferer,
    /// `$secure_link`: the secure link module's verdict.
    SecureLink,
    /// `$secure_link_expires`: the expiry the link named.
    SecureLinkExpires,
    /// `$fastcgi_script_name`: the URI (or `fastcgi_split_path_info`'s
    /// first capture), with `fastcgi_index` after a final `/`.
    FastcgiScriptName,
    /// `$fastcgi_path_info`: `fastcgi_split_path_info`'s second capture.
    FastcgiPathInfo,
    /// `$0`…`$9`: a capture of the last regular expression matched.
    Capture(u8),
    /// A variable set per request: by `set`, or by a named capture.
    Indexed(Arc<Indexed>),
    /// A variable a `map` block defines, evaluated when used.
    Map(Arc<super::map::Map>),
    /// A variable a `geo` block defines, evaluated when used.
    Geo(Arc<super::geo::Geo>),
    /// `$upstream_cookie_NAME`: a cookie the upstream's `Set-Cookie` sets.
    UpstreamCookie(String),
    /// `$sent_trailer_NAME`: a trailer `add_trailer` set before this one.
    SentTrailer(String),
    /// `$connections_active`, `_reading`, `_writing`, `_waiting`: the
    /// figures of the `stub_status` page.
    Connections(ConnCount),
    /// `$limit_rate`: the rate `set $limit_rate` gave the request (0: none).
    LimitRate,
    /// `$uid_got`, `$uid_set`, `$uid_reset` (the userid module).
    Userid(super::families::UidVar),
    /// A variable only `stream { }` has (`$protocol`, `$ssl_preread_*`, …).
    Stream(super::stream_names::StreamVar),
}

/// A variable whose per-request value lives in the request's slots: set
/// by `set` or a named regex capture, or a `map`'s cached value.
#[derive(Debug)]
pub struct Indexed {
    /// The name, without `$` (for the uninitialized-variable warning).
    pub name: String,
    /// The slot in the request's variable table.
    pub index: usize,
    /// A `set` names it: reading it unset logs NGINX's
    /// `using uninitialized "NAME" variable` (`uninitialized_variable_warn`).
    pub by_set: std::sync::atomic::AtomicBool,
    /// A built-in variable `set` made its own (`set $http_foo`): its
    /// value while the slot is unset, as NGINX's changeable variables.
    pub builtin: Option<Var>,
}

impl PartialEq for Indexed {
    fn eq(&self, other: &Indexed) -> bool {
        self.index == other.index
    }
}

impl Eq for Indexed {}

thread_local! {
    /// Variables the configuration being built defines (`map`, `geo`,
    /// `split_clients`, `set`, …), by name: `http`'s first, `stream`'s
    /// second, as NGINX keeps each block's variables its own. A build
    /// runs on one thread, so the walker registers them here and every
    /// template compiled during that build in the same block sees them.
    static DEFINED: RefCell<[HashMap<String, Var>; 2]> =
        RefCell::new([HashMap::new(), HashMap::new()]);
    /// The next free slot in a request's variable table.
    static NEXT_SLOT: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Runs `f` on the names the block being read defines: `stream`'s while
/// the walker is inside `stream { }`, else `http`'s.
fn with_defined<R>(f: impl FnOnce(&mut HashMap<String, Var>) -> R) -> R {
    let block = usize::from(super::stream_names::in_stream());
    DEFINED.with(|d| f(&mut d.borrow_mut()[block]))
}

/// Forgets the variables an earlier build on this thread defined.
pub fn reset_defined() {
    DEFINED.with(|d| d.borrow_mut().iter_mut().for_each(HashMap::clear));
    NEXT_SLOT.with(|n| n.set(0));
}

/// A new slot in the request's variable table (for an [`Indexed`]
/// variable or a `map`'s cached value).
pub fn new_slot() -> usize {
    NEXT_SLOT.with(|n| {
        let i = n.get();
        n.set(i + 1);
        i
    })
}

/// The per-request variable `name` (`set $name`, a named capture): the one
/// already declared, or a new one.
pub fn declare_indexed(name: &str) -> Arc<Indexed> {
    if let Some(Var::Indexed(v)) = with_defined(|d| d.get(name).cloned()) {
        return v;
    }
    let builtin = Var::from_name(name).filter(Var::changeable);
    let v = Arc::new(Indexed {
        name: name.to_string(),
        index: new_slot(),
        by_set: std::sync::atomic::AtomicBool::new(false),
        builtin,
    });
    define(name, Var::Indexed(Arc::clone(&v)));
    v
}

/// The variables this build defined so far, by name (for lookups by
/// name when requests run: SSI's `echo`).
pub fn defined() -> HashMap<String, Var> {
    with_defined(|d| d.clone())
}

/// Whether the configuration itself defines `name` (`map`, `geo`,
/// `split_clients`, `set`, a named capture), as opposed to porter.
pub fn is_defined_by_config(name: &str) -> bool {
    with_defined(|d| d.contains_key(name))
}

/// Whether `name` is a variable the configuration defines or porter knows.
pub fn is_known(name: &str) -> bool {
    Var::from_name(name).is_some()
}

/// Defines (or, as NGINX allows, redefines) a variable for templates
/// compiled after this on this thread.
pub fn define(name: &str, var: Var) {
    with_defined(|d| d.insert(name.to_string(), var));
}

impl Var {
    /// The variables of the connection's addresses.
    fn address(name: &str) -> Option<Var> {
        Some(match name {
            "remote_addr" => Var::RemoteAddr,
            "binary_remote_addr" => Var::BinaryRemoteAddr,
            "remote_port" => Var::RemotePort,
            "remote_user" => Var::RemoteUser,
            "realip_remote_addr" => Var::RealipRemoteAddr,
            "realip_remote_port" => Var::RealipRemotePort,
            "proxy_protocol_addr" => Var::ProxyProtocolAddr,
            "proxy_protocol_port" => Var::ProxyProtocolPort,
            "proxy_protocol_server_addr" => Var::ProxyProtocolServerAddr,
            "proxy_protocol_server_port" => Var::ProxyProtocolServerPort,
            "server_addr" => Var::ServerAddr,
            "server_port" => Var::ServerPort,
            _ => return None,
        })
    }

    /// Looks a variable up by name (without `$`).
    pub fn from_name(name: &str) -> Option<Var> {
        // The configuration's own (`set`, `map`, …), before a built-in
        // of the name: only a changeable built-in can have one.
        if let Some(v) = with_defined(|d| d.get(name).cloned()) {
            return Some(v);
        }
        if let Some(v) = super::stream_names::lookup(name) {
            return Some(Var::Stream(v));
        }
        if super::stream_names::in_stream() && !super::stream_names::shared(name) {
            return None;
        }
        if let Some(v) = Self::prefixed(name) {
            return Some(v);
        }
        if let Some(v) = Self::address(name) {
            return Some(v);
        }
        Some(match name {
            "uri" | "document_uri" => Var::Uri,
            "args" | "query_string" => Var::Args,
            "is_args" => Var::IsArgs,
            "request_uri" => Var::RequestUri,
            "host" => Var::Host,
            "hostname" => Var::Hostname,
            "server_name" => Var::ServerName,
            "server_protocol" => Var::ServerProtocol,
            "scheme" => Var::Scheme,
            "https" => Var::Https,
            "http2" => Var::Http2,
            "http3" => Var::Http3,
            "quic" => Var::Quic,
            "request_method" => Var::RequestMethod,
            "request" => Var::Request,
            "request_length" => Var::RequestLength,
            "request_time" => Var::RequestTime,
            "request_filename" => Var::RequestFilename,
            "document_root" => Var::DocumentRoot,
            "status" => Var::Status,
            "body_bytes_sent" => Var::BodyBytesSent,
            "bytes_sent" => Var::BytesSent,
            "content_length" => Var::ContentLength,
            "content_type" => Var::ContentType,
            "connection" => Var::Connection,
            "connection_requests" => Var::ConnectionRequests,
            "connection_time" => Var::ConnectionTime,
            "pipe" => Var::Pipe,
            "request_completion" => Var::RequestCompletion,
            "realpath_root" => Var::RealpathRoot,
            "request_id" => Var::RequestId,
            "slice_range" => Var::SliceRange,
            "msec" => Var::Msec,
            "date_local" => Var::DateLocal,
            "date_gmt" => Var::DateGmt,
            "time_local" => Var::TimeLocal,
            "time_iso8601" => Var::TimeIso8601,
            "pid" => Var::Pid,
            "nginx_version" | "porter_version" => Var::Version,
            "proxy_host" => Var::ProxyHost,
            "proxy_port" => Var::ProxyPort,
            "proxy_add_x_forwarded_for" => Var::ProxyAddXForwardedFor,
            "upstream_addr" => Var::UpstreamAddr,
            "upstream_status" => Var::UpstreamStatus,
            "upstream_response_time" => Var::UpstreamResponseTime,
            "upstream_connect_time" => Var::UpstreamConnectTime,
            "upstream_header_time" => Var::UpstreamHeaderTime,
            "upstream_response_length" => Var::UpstreamResponseLength,
            "request_body" => Var::RequestBody,
            "request_body_file" => Var::RequestBodyFile,
            "upstream_bytes_received" => Var::UpstreamBytesReceived,
            "upstream_bytes_sent" => Var::UpstreamBytesSent,
            "upstream_cache_status" => Var::UpstreamCacheStatus,
            _ => {
                return module_var(name)
                    .or_else(|| SslVar::var(name))
                    .or_else(|| super::families::UidVar::var(name))
                    .or_else(|| with_defined(|d| d.get(name).cloned()))
            }
        })
    }

    /// A variable of a prefixed family (`$arg_NAME`, `$http_NAME`, …) or
    /// a capture (`$1`).
    fn prefixed(name: &str) -> Option<Var> {
        let prefixed = |p: &str| name.strip_prefix(p).filter(|s| !s.is_empty());
        // `$arg_` (no name) is a variable never found, as in NGINX.
        if let Some(rest) = name.strip_prefix("arg_") {
            return Some(Var::Arg(rest.to_string()));
        }
        if let Some(rest) = prefixed("http_") {
            return Some(Var::Http(rest.to_ascii_lowercase().replace('_', "-")));
        }
        if let Some(rest) = prefixed("sent_http_") {
            return Some(Var::SentHttp(rest.to_ascii_lowercase().replace('_', "-")));
        }
        if let Some(rest) = prefixed("upstream_http_") {
            return Some(Var::UpstreamHttp(
                rest.to_ascii_lowercase().replace('_', "-"),
            ));
        }
        if let Some(rest) = prefixed("cookie_") {
            return Some(Var::Cookie(rest.to_string()));
        }
        if let Some(rest) = prefixed("upstream_cookie_") {
            return Some(Var::UpstreamCookie(rest.to_string()));
        }
        if let Some(rest) = prefixed("sent_trailer_") {
            return Some(Var::SentTrailer(
                rest.to_ascii_lowercase().replace('_', "-"),
            ));
        }
        if let [d @ b'0'..=b'9'] = name.as_bytes() {
            return Some(Var::Capture(d - b'0'));
        }
        None
    }
}

/// The variables modules provide (`limit_req`, `limit_conn`, `referer`,
/// `secure_link`).
fn module_var(name: &str) -> Option<Var> {
    Some(match name {
        "limit_req_status" => Var::LimitReqStatus,
        "limit_conn_status" => Var::LimitConnStatus,
        "invalid_referer" => Var::InvalidReferer,
        "secure_link" => Var::SecureLink,
        "secure_link_expires" => Var::SecureLinkExpires,
        "fastcgi_script_name" => Var::FastcgiScriptName,
        "fastcgi_path_info" => Var::FastcgiPathInfo,
        "connections_active" => Var::Connections(ConnCount::Active),
        "connections_reading" => Var::Connections(ConnCount::Reading),
        "connections_writing" => Var::Connections(ConnCount::Writing),
        "connections_waiting" => Var::Connections(ConnCount::Waiting),
        "limit_rate" => Var::LimitRate,
        _ => return None,
    })
}

/// Supplies variable values while a template renders.
pub trait VarSource {
    /// Appends the value of `var` to `out` (nothing when it has none).
    fn append(&self, var: &Var, out: &mut String);

    /// The value a per-request slot holds (`set`, named captures, a
    /// `map`'s cached value), if any.
    fn slot(&self, _index: usize) -> Option<String> {
        None
    }

    /// Keeps `value` in a per-request slot (a `map`'s cache).
    fn store_slot(&self, _index: usize, _value: &str) {}

    /// The captures of the last regular expression matched.
    fn capture(&self, _n: u8, _out: &mut String) {}
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Part {
    Lit(String),
    Var(Var),
}

/// A compiled string with variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Template {
    parts: Vec<Part>,
    raw: String,
}

/// Why a template failed to compile; the caller adds file:line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateError(pub String);

impl fmt::Display for TemplateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl Template {
    /// Compiles `raw`, resolving every `$name` / `${name}`.
    pub fn compile(raw: &str) -> Result<Template, TemplateError> {
        let mut parts = Vec::new();
        let mut lit = String::new();
        let bytes = raw.as_bytes();
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] != b'$' {
                let start = i;
                while i < bytes.len() && bytes[i] != b'$' {
                    i += 1;
                }
                lit.push_str(&raw[start..i]);
                continue;
            }
            i += 1;
            let braced = bytes.get(i) == Some(&b'{');
            if braced {
                i += 1;
            }
            let start = i;
            if bytes.get(i).is_some_and(u8::is_ascii_digit) {
                // `$1` is one digit: `$12` is `$1` then "2", as in NGINX.
                i += 1;
            } else {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
            }
            let name = &raw[start..i];
            if braced {
                if bytes.get(i) != Some(&b'}') {
                    return Err(TemplateError(format!(
                        "the closing bracket in \"{name}\" variable is missing"
                    )));
                }
                i += 1;
            }
            if name.is_empty() {
                return Err(TemplateError(format!("invalid variable name in \"{raw}\"")));
            }
            let var = Var::from_name(name)
                .ok_or_else(|| TemplateError(format!("unknown \"{name}\" variable")))?;
            if !lit.is_empty() {
                parts.push(Part::Lit(std::mem::take(&mut lit)));
            }
            parts.push(Part::Var(var));
        }
        if !lit.is_empty() {
            parts.push(Part::Lit(lit));
        }
        Ok(Template {
            parts,
            raw: raw.to_string(),
        })
    }

    /// A template with no variables.
    pub fn literal(s: &str) -> Template {
        Template {
            parts: if s.is_empty() {
                Vec::new()
            } else {
                vec![Part::Lit(s.to_string())]
            },
            raw: s.to_string(),
        }
    }

    /// Whether rendering reads the response's header lines
    /// (`$sent_http_*`), directly or through the source or values of a
    /// `map`, `split_clients` or `geo` variable.
    pub fn reads_sent_http(&self) -> bool {
        self.parts.iter().any(|p| match p {
            Part::Var(Var::SentHttp(_)) => true,
            Part::Var(Var::Map(m)) => m.reads_sent_http(),
            Part::Var(Var::Split(sc)) => sc.source.reads_sent_http(),
            Part::Var(Var::Geo(g)) => g.reads_sent_http(),
            _ => false,
        })
    }

    /// True when the template contains no variables.
    pub fn is_literal(&self) -> bool {
        self.parts.iter().all(|p| matches!(p, Part::Lit(_)))
    }

    /// The source text, as written in the config.
    pub fn raw(&self) -> &str {
        &self.raw
    }

    /// Renders into `out`.
    pub fn render_into(&self, src: &dyn VarSource, out: &mut String) {
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Var(Var::Split(sc)) => sc.append(src, out),
                Part::Var(v) => src.append(v, out),
            }
        }
    }

    /// Renders a key (`limit_req_zone`, `limit_conn_zone`) as bytes: one
    /// byte per character when every character is below U+0100 — so
    /// `$binary_remote_addr` is its 4 or 16 bytes, also through a `map`,
    /// as NGINX counts a zone's states by them — else the UTF-8 text.
    pub fn render_key(&self, src: &dyn VarSource) -> Vec<u8> {
        let text = self.render(src);
        if text.chars().all(|c| (c as u32) < 0x100) {
            text.chars().map(|c| c as u8).collect()
        } else {
            text.into_bytes()
        }
    }

    /// Renders into `out`, passing each variable's value and the variable
    /// through `value` (access logs escape values and print `-` for empty
    /// ones).
    pub fn render_with(
        &self,
        src: &dyn VarSource,
        out: &mut String,
        value: &dyn Fn(&str, &Var, &mut String),
    ) {
        let mut tmp = String::new();
        for p in &self.parts {
            match p {
                Part::Lit(s) => out.push_str(s),
                Part::Var(v) => {
                    tmp.clear();
                    match v {
                        Var::Split(sc) => sc.append(src, &mut tmp),
                        _ => src.append(v, &mut tmp),
                    }
                    value(&tmp, v, out);
                }
            }
        }
    }

    /// Renders to a new string.
    pub fn render(&self, src: &dyn VarSource) -> String {
        let mut out = String::new();
        self.render_into(src, &mut out);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Fixed;
    impl VarSource for Fixed {
        fn append(&self, var: &Var, out: &mut String) {
            match var {
                Var::Host => out.push_str("example.com"),
                Var::Uri => out.push_str("/a b"),
                Var::Arg(n) => out.push_str(&format!("<{n}>")),
                Var::Http(n) => out.push_str(&format!("[{n}]")),
                Var::BinaryRemoteAddr => out.extend([192u8, 168, 0, 1].map(char::from)),
                _ => {}
            }
        }
    }

    #[test]
    fn renders_vars_and_literals() {
        let t = Template::compile("http://$host${uri}x?$arg_p&$http_user_agent").unwrap();
        assert_eq!(t.render(&Fixed), "http://example.com/a bx?<p>&[user-agent]");
        assert!(!t.is_literal());
        assert!(Template::compile("plain").unwrap().is_literal());
    }

    #[test]
    fn a_key_of_the_binary_address_is_its_four_bytes() {
        let t = Template::compile("$binary_remote_addr").unwrap();
        assert_eq!(t.render_key(&Fixed), [192, 168, 0, 1]);
        // text with a character beyond one byte stays UTF-8
        let t = Template::compile("€$host").unwrap();
        assert_eq!(t.render_key(&Fixed), "€example.com".as_bytes());
    }

    #[test]
    fn unknown_variable_is_an_error() {
        assert_eq!(
            Template::compile("$nosuch").unwrap_err().0,
            "unknown \"nosuch\" variable"
        );
        assert!(Template::compile("${host").is_err());
        assert!(Template::compile("a$").is_err());
    }
}
