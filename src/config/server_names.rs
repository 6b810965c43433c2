//! Which server a `Host` names: NGINX's order over `server_name` entries
//! (exact, longest leading wildcard, longest trailing wildcard, regexes in
//! file order, then the default server).

use std::sync::Arc;

use super::model::{ListenGroup, ServerConf};
use crate::vars::regex::{Matched, Regex};

impl ListenGroup {
    /// Picks the server for a `Host` value (lowercase, port stripped), NGINX
    /// order: exact name, longest leading wildcard, longest trailing wildcard,
    /// the first regex name in file order, then the default server.
    pub fn find_server(&self, host: Option<&str>) -> &Arc<ServerConf> {
        self.find_server_matched(host).0
    }

    /// [`find_server`](Self::find_server), with the match of a regex name
    /// (its captures and named groups become the request's).
    pub fn find_server_matched(&self, host: Option<&str>) -> (&Arc<ServerConf>, Option<Matched>) {
        if let Some(host) = host {
            let mut best: Option<(usize, usize, &Arc<ServerConf>)> = None; // (rank, len)
            for s in &self.servers {
                for n in &s.names {
                    let cand = match n {
                        ServerName::Exact(e) if e == host => Some((0, e.len())),
                        // `*.example.com` does not name `example.com`;
                        // `.example.com` does, as its own exact entry.
                        ServerName::Suffix(suf) if host.ends_with(suf.as_str()) => {
                            Some((1, suf.len()))
                        }
                        ServerName::Prefix(pre) if host.starts_with(pre.as_str()) => {
                            Some((2, pre.len()))
                        }
                        _ => None,
                    };
                    if let Some((rank, len)) = cand {
                        let better = match best {
                            None => true,
                            Some((r, l, _)) => rank < r || (rank == r && len > l),
                        };
                        if better {
                            best = Some((rank, len, s));
                        }
                    }
                }
            }
            if let Some((_, _, s)) = best {
                return (s, None);
            }
            for s in &self.servers {
                for n in &s.names {
                    if let ServerName::Regex(re) = n {
                        if let Some(m) = re.exec(host) {
                            return (s, Some(m));
                        }
                    }
                }
            }
        } else if let Some(s) = self
            .servers
            .iter()
            .find(|s| s.names.contains(&ServerName::Exact(String::new())))
        {
            // No `Host` (HTTP/1.0): NGINX looks the empty name up, which
            // `server_name ""` has; no regex is tried.
            return (s, None);
        }
        (&self.servers[self.default], None)
    }
}

/// A `server_name` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerName {
    /// `example.com`.
    Exact(String),
    /// `*.example.com` (stored as `.example.com`) or `.example.com`.
    Suffix(String),
    /// `www.example.*` (stored as `www.example.`).
    Prefix(String),
    /// `~regex`: tried in file order after every name and wildcard.
    Regex(Arc<Regex>),
}

impl ServerConf {
    /// Whether a lowercased host is one of this server's names, as the
    /// referer module adds them to its hostnames (`*.example.com` does not
    /// name `example.com`; `.example.com` does, as its own exact entry).
    pub fn has_name(&self, host: &str) -> bool {
        self.names.iter().any(|n| match n {
            ServerName::Exact(e) => e == host,
            ServerName::Suffix(suf) => host.ends_with(suf.as_str()),
            ServerName::Prefix(pre) => host.starts_with(pre.as_str()),
            ServerName::Regex(re) => re.is_match(host),
        })
    }
}
