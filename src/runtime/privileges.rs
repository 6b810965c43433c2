//! `user NAME [GROUP]`: dropping root privileges in worker threads only.
//!
//! porter is one process, so it cannot split privileges between a master
//! and worker processes as NGINX does. Linux credentials are per thread at
//! the system-call level, though: each worker thread (and every thread it
//! starts) switches to the unprivileged user with the raw per-thread calls,
//! while the master thread keeps root to bind new ports and reopen logs on
//! reload, exactly NGINX's split.

use nix::unistd::{Group, User};
use rustix::process::{Gid, Uid};

use crate::util::thread_user::ThreadUser;

/// Resolved credentials to switch to.
#[derive(Debug, Clone)]
pub struct Credentials {
    /// The user name (for messages).
    pub name: String,
    uid: Uid,
    gid: Gid,
    groups: Vec<Gid>,
}

impl Credentials {
    /// (uid, gid), for `chown` of directories the workers write to.
    pub fn ids(&self) -> (u32, u32) {
        (self.uid.as_raw(), self.gid.as_raw())
    }
}

/// Looks up `user [group]` (group defaults to the user's primary group).
pub fn resolve(user: &str, group: Option<&str>) -> Result<Credentials, String> {
    let u = User::from_name(user)
        .map_err(|e| format!("getpwnam(\"{user}\") failed ({}: {})", e as i32, e.desc()))?
        .ok_or_else(|| format!("getpwnam(\"{user}\") failed"))?;
    let gid = match group {
        Some(g) => {
            Group::from_name(g)
                .map_err(|e| format!("getgrnam(\"{g}\") failed ({}: {})", e as i32, e.desc()))?
                .ok_or_else(|| format!("getgrnam(\"{g}\") failed"))?
                .gid
        }
        None => u.gid,
    };
    let c_user = std::ffi::CString::new(user).map_err(|_| "bad user name".to_string())?;
    let groups = nix::unistd::getgrouplist(&c_user, gid).map_err(|e| {
        format!(
            "getgrouplist(\"{user}\") failed ({}: {})",
            e as i32,
            e.desc()
        )
    })?;
    Ok(Credentials {
        name: user.to_string(),
        uid: Uid::from_raw(u.uid.as_raw()),
        gid: Gid::from_raw(gid.as_raw()),
        groups: groups
            .into_iter()
            .map(|g| Gid::from_raw(g.as_raw()))
            .collect(),
    })
}

/// Switches the calling thread (and threads it creates later) to `c`.
pub fn drop_thread(c: &Credentials) -> std::io::Result<()> {
    rustix::thread::set_thread_groups(&c.groups)?;
    rustix::thread::set_thread_res_gid(c.gid, c.gid, c.gid)?;
    rustix::thread::set_thread_res_uid(c.uid, c.uid, c.uid)?;
    Ok(())
}

/// The user as the lower layers' threads (pools, cache loader and manager)
/// take it: its name, ids and this module's per-thread switch.
pub fn thread_user(creds: &Option<Credentials>) -> Option<ThreadUser> {
    let c = creds.clone()?;
    Some(ThreadUser::new(c.name.clone(), c.ids(), move || {
        drop_thread(&c)
    }))
}
