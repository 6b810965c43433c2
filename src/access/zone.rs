//! A zone that `limit_req_zone` or `limit_conn_zone` declares: named by
//! whichever directive mentions it first, defined once by its `*_zone`
//! line, and holding one state shared by every worker behind a mutex.
//! Defining it takes the state of the running configuration's zone of the
//! same module, name, size and key ([`super::kept`]), as NGINX keeps a
//! shared-memory zone across a reload. What the state is and how a
//! request uses it is each module's own ([`super::limit_req`],
//! [`super::limit_conn`]).

use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::vars::template::Template;

/// What a `*_zone` directive declared, as far as the shared zone needs it.
pub trait ZoneDef {
    /// The state the zone holds (the module's counts or buckets).
    type State: Default + Send + std::fmt::Debug + 'static;
    /// The module's name, which keeps zones of the two modules apart.
    const MODULE: &'static str;
    /// The key the zone counts by.
    fn key(&self) -> &Template;
    /// Bytes the zone's states may use.
    fn size(&self) -> u64;
}

/// One zone, shared by every worker.
#[derive(Debug)]
pub struct SharedZone<D: ZoneDef> {
    /// Its name.
    pub name: String,
    def: OnceLock<D>,
    state: OnceLock<Arc<Mutex<D::State>>>,
}

impl<D: ZoneDef> SharedZone<D> {
    /// A zone named by a limit or a `*_zone` line, defined by the latter.
    pub fn new(name: &str) -> Arc<Self> {
        Arc::new(SharedZone {
            name: name.to_string(),
            def: OnceLock::new(),
            state: OnceLock::new(),
        })
    }

    /// Defines the zone (taking the state of the running configuration's
    /// zone of the same name, size and key); `Err` with the key it is
    /// already bound to.
    pub fn define(&self, def: D) -> Result<(), String> {
        if let Some(d) = self.def() {
            return Err(d.key().raw().to_string());
        }
        let state = super::kept::<D::State>(D::MODULE, &self.name, def.size(), def.key().raw());
        let _ = self.state.set(state);
        let _ = self.def.set(def);
        Ok(())
    }

    /// Its definition, once its `*_zone` line gave it.
    pub fn def(&self) -> Option<&D> {
        self.def.get()
    }

    /// The state, locked; `None` until the zone is defined.
    pub(super) fn lock(&self) -> Option<MutexGuard<'_, D::State>> {
        let m = self.state.get()?;
        Some(m.lock().unwrap_or_else(|e| e.into_inner()))
    }
}
