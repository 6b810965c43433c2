//! Access control and limits, as NGINX's access, auth_basic, limit_req and
//! limit_conn modules do them: the parts that need no request — address
//! rules (`allow`/`deny`), Basic credentials and NGINX's base64, the
//! htpasswd file and its hash formats, the system's `crypt()`, and the
//! `limit_req`/`limit_conn` zones shared by every worker (one generic
//! zone type, `zone`, each module adding its own state and use). The request
//! phase that uses them is `handlers::access`; the directives are
//! `config::directives::access`. `realip` holds the realip module's
//! address walk (`set_real_ip_from`, `real_ip_header`), applied by
//! `handlers::realip`.
//!
//! This folder imports nothing of porter's but `vars` (a zone's key is a
//! template), so the configuration, the handlers and the request context
//! can all use it.

pub mod basic;
pub mod crypt;
pub mod htpasswd;
pub mod limit_conn;
pub mod limit_req;
pub mod realip;
pub mod referer;
pub mod rules;
pub mod secure_link;
pub mod zone;

use std::any::Any;
use std::sync::{Arc, Mutex, Weak};

/// The zones' states in use, by module, name, size and key, held weakly:
/// a configuration that declares a zone like one in use takes its state.
type Kept = Vec<(
    &'static str,
    String,
    u64,
    String,
    Weak<dyn Any + Send + Sync>,
)>;

static KEPT: Mutex<Kept> = Mutex::new(Vec::new());

/// The state for a zone of `module` called `name` with `size` and `key`:
/// the one a zone alike uses now, else a new one (registered).
pub(crate) fn kept<S: Default + Send + 'static>(
    module: &'static str,
    name: &str,
    size: u64,
    key: &str,
) -> Arc<Mutex<S>> {
    let mut kept = KEPT.lock().unwrap_or_else(|e| e.into_inner());
    kept.retain(|k| k.4.strong_count() > 0);
    let alike = kept
        .iter()
        .filter(|k| k.0 == module && k.1 == name && k.2 == size && k.3 == key)
        .find_map(|k| k.4.upgrade()?.downcast::<Mutex<S>>().ok());
    if let Some(state) = alike {
        return state;
    }
    let state = Arc::new(Mutex::new(S::default()));
    let any: Arc<dyn Any + Send + Sync> = state.clone();
    kept.push((
        module,
        name.to_string(),
        size,
        key.to_string(),
        Arc::downgrade(&any),
    ));
    state
}

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
