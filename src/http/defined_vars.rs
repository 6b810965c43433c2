//! The values of variables the configuration defines (`split_clients`,
//! `map`, `geo`) or a module's directives decide (`$invalid_referer`,
//! `$secure_link`),
//! rendered for a request:
//! kept out of `context.rs` so each module adds its arm here.

use super::context::RequestCtx;
use crate::access::secure_link;
use crate::vars::families::UidVar;
use crate::vars::template::{ConnCount, Var, VarSource};

/// `$connections_*`: the `stub_status` page's figures (waiting is what
/// is neither reading nor writing, as the page counts it).
fn connections(which: ConnCount, out: &mut String) {
    use crate::metrics::{get, ACTIVE, READING, WRITING};
    use std::fmt::Write as _;
    let n = match which {
        ConnCount::Active => get(&ACTIVE),
        ConnCount::Reading => get(&READING),
        ConnCount::Writing => get(&WRITING),
        ConnCount::Waiting => get(&ACTIVE).saturating_sub(get(&READING) + get(&WRITING)),
    };
    let _ = write!(out, "{n}");
}

impl RequestCtx {
    /// Appends the value of a configuration-defined variable.
    pub(super) fn append_defined(&self, var: &Var, out: &mut String) {
        match var {
            Var::Split(sc) => sc.append(self, out),
            Var::Map(m) => m.append(self, out),
            Var::Geo(g) => g.append(self, out),
            Var::InvalidReferer => {
                if let Some(rules) = &self.loc.s.valid_referers {
                    let server = &self.server;
                    if !rules.is_valid(self.header("referer"), &|h| server.has_name(h)) {
                        out.push('1');
                    }
                }
            }
            Var::SecureLink => self.secure_link(out),
            Var::SecureLinkExpires => {
                if let Some((_, slot)) = &self.loc.s.secure_link {
                    if let Some(v) = self.slot(*slot) {
                        out.push_str(&v);
                    }
                }
            }
            Var::FastcgiScriptName | Var::FastcgiPathInfo => {
                let (script, info) = super::derived::fastcgi_split(self);
                match var {
                    Var::FastcgiScriptName => {
                        out.push_str(script);
                        if let (true, Some(i)) = (script.ends_with('/'), &self.loc.s.fastcgi.index)
                        {
                            out.push_str(i);
                        }
                    }
                    _ => out.push_str(info),
                }
            }
            Var::UpstreamCookie(_) => {
                if let Some(u) = &self.upstream {
                    u.append(var, out)
                }
            }
            Var::Connections(which) => connections(*which, out),
            Var::Userid(UidVar::Got) => self.uid_got(out),
            Var::Userid(UidVar::Set) => self.uid_set(out),
            Var::LimitRate => {
                use std::fmt::Write as _;
                let _ = write!(out, "{}", self.limit_rate.unwrap_or(0));
            }
            _ => self.append_connection(var, out),
        }
    }

    /// `$secure_link`: `secure_link` with `secure_link_md5` when both
    /// apply, else `secure_link_secret` (see `access::secure_link`).
    fn secure_link(&self, out: &mut String) {
        let s = &self.loc.s;
        match (&s.secure_link, &s.secure_link_md5, &s.secure_link_secret) {
            (Some((link, slot)), Some(md5), _) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| d.as_secs() as i64);
                let link = link.render(self);
                if let Some(e) = secure_link::expires(&link) {
                    self.set_slot(*slot, e.to_string());
                }
                out.push_str(secure_link::check(&link, || md5.render(self), now).value);
            }
            (_, _, Some(secret)) => {
                let mut uri = String::new();
                self.append(&Var::RequestUri, &mut uri);
                if let Some(link) = secure_link::check_secret(&uri, secret) {
                    out.push_str(link);
                }
            }
            _ => {}
        }
    }
}
