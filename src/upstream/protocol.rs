//! [`Protocol`]: what a location speaks to its peers (HTTP/1, FastCGI,
//! uwsgi, SCGI, gRPC), the one parameter of the proxy's upstream core,
//! and [`app_url`], an application server's address as a URL.

/// The protocol spoken to a peer: the one difference between
/// `proxy_pass` and `fastcgi_pass` the proxy's core knows of (how the
/// request is encoded, how the response head and body are decoded, which
/// settings apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    /// HTTP/1.x (`proxy_pass`).
    Http,
    /// FastCGI (`fastcgi_pass`, `upstream::fastcgi`).
    FastCgi,
    /// uwsgi (`uwsgi_pass`, `upstream::uwsgi`).
    Uwsgi,
    /// SCGI (`scgi_pass`, `upstream::scgi`).
    Scgi,
    /// gRPC over HTTP/2 (`grpc_pass`, `upstream::http2`; its exchange is
    /// `handlers::grpc`'s, the tries the proxy's).
    Grpc,
}

impl Protocol {
    /// An application server addressed without a scheme (`fastcgi_pass`,
    /// `uwsgi_pass`, `scgi_pass`).
    pub fn is_app(self) -> bool {
        matches!(self, Protocol::FastCgi | Protocol::Uwsgi | Protocol::Scgi)
    }
}

/// An application server's address (`fastcgi_pass`, `uwsgi_pass`,
/// `scgi_pass`, as written or rendered) made a URL `split_url` reads: `uwsgi://` dropped as
/// NGINX's `ngx_http_uwsgi_eval` drops it, `suwsgi://` made `https://`
/// (TLS to the application, `uwsgi_ssl_*`).
pub fn app_url(proto: Protocol, url: &mut String) -> Result<(), String> {
    if proto == Protocol::Uwsgi {
        let lower = url.get(..9).unwrap_or(url).to_ascii_lowercase();
        if lower.starts_with("suwsgi://") {
            url.drain(..9);
            url.insert_str(0, "https://");
            return Ok(());
        }
        if lower.starts_with("uwsgi://") {
            url.drain(..8);
        }
    }
    url.insert_str(0, "http://");
    Ok(())
}
