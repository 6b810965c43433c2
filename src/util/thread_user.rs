//! [`ThreadUser`]: the user that threads started by lower layers (thread
//! pools, the proxy cache's loader and manager) switch to. The runtime
//! resolves `user` and hands this value down, so those layers run the
//! switch without importing the runtime (see `runtime::privileges`).

use std::fmt;
use std::sync::Arc;

/// The user a background thread runs as, and the switch to it.
#[derive(Clone)]
pub struct ThreadUser {
    /// The user name, for messages.
    pub name: String,
    /// (uid, gid), for `chown` of directories those threads write to.
    pub ids: (u32, u32),
    switch: Arc<dyn Fn() -> std::io::Result<()> + Send + Sync>,
}

impl ThreadUser {
    /// A user whose `switch` changes the calling thread's credentials.
    pub fn new(
        name: String,
        ids: (u32, u32),
        switch: impl Fn() -> std::io::Result<()> + Send + Sync + 'static,
    ) -> ThreadUser {
        ThreadUser {
            name,
            ids,
            switch: Arc::new(switch),
        }
    }

    /// Switches the calling thread to this user.
    pub fn switch(&self) -> std::io::Result<()> {
        (self.switch)()
    }
}

impl fmt::Debug for ThreadUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ThreadUser")
            .field("name", &self.name)
            .field("ids", &self.ids)
            .finish()
    }
}
