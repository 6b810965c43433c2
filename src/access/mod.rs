//! Access control and limits, as NGINX's access, auth_basic, limit_req and
//! limit_conn modules do them: the parts that need no request — address
//! rules (`allow`/`deny`), Basic credentials and NGINX's base64, the
//! htpasswd file and its hash formats, the system's `crypt()`, and the
//! `limit_req`/`limit_conn` zones shared by every worker. The request
//! phase that uses them is `handlers::access`; the directives are
//! `config::directives::access`.
//!
//! This folder imports nothing of porter's but `vars` (a zone's key is a
//! template), so the configuration, the handlers and the request context
//! can all use it.

pub mod basic;
pub mod crypt;
pub mod htpasswd;
pub mod limit_conn;
pub mod limit_req;
pub mod rules;

/// What the limit phases recorded on one request (NGINX keeps these on the
/// main request, so internal redirects do not count it twice).
#[derive(Debug, Default)]
pub struct RequestLimits {
    /// `$limit_req_status`, once `limit_req` ran.
    pub limit_req_status: Option<&'static str>,
    /// `$limit_conn_status`, once `limit_conn` ran.
    pub limit_conn_status: Option<&'static str>,
    /// The `limit_conn` slots this request holds, freed when it ends.
    pub held: Vec<limit_conn::Held>,
}
