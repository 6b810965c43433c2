//! The userid module's request side (`ngx_http_userid_filter_module`):
//! the uid cookie a request sent (`$uid_got`), the one it is given
//! (`$uid_set`, made once per request whether the variable or the filter
//! asks first) and the `Set-Cookie` line the filter in
//! `handlers/userid.rs` sends, byte for byte as NGINX writes them.
//!
//! A uid is 16 bytes: four 32-bit words, in host order for `userid v1`
//! and network order for `userid on` (service — the server's IPv4
//! address, the last four bytes of its IPv6 one, 0 on a UNIX socket, or
//! `userid_service` —, the time, a per-process start value, a sequence).
//! The cookie is their base64 with `userid_mark` in place of the first
//! `=`; the variables print the words as host-order hex, as NGINX's
//! `%08XD` does. Only the first 22 characters of a cookie are decoded
//! (the mark and a broken trail are ignored), with NGINX's base64
//! (`access::basic`).

use std::cell::RefMut;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::OnceLock;

use super::context::RequestCtx;
use crate::access::basic;
use crate::config::userid_conf::*;
use crate::log::Level;
use crate::vars::template::VarSource;

/// The `userid v1` sequence (NGINX's `sequencer_v1`), shared by the
/// workers, which are threads of one process here.
static SEQUENCER_V1: AtomicU32 = AtomicU32::new(1);

/// The `userid on` sequence (NGINX's `sequencer_v2`).
static SEQUENCER_V2: AtomicU32 = AtomicU32::new(0x0303_0302);

/// NGINX's `start_value`: microseconds / 20 in the high half, the pid in
/// the low one, taken once per process.
fn start_value() -> u32 {
    static START: OnceLock<u32> = OnceLock::new();
    *START.get_or_init(|| {
        let (_, micros) = now_parts();
        ((micros / 20) << 16) | std::process::id()
    })
}

/// Seconds and microseconds since the epoch.
fn now_parts() -> (u64, u32) {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_micros())
}

/// One request's uid state (NGINX's `ngx_http_userid_ctx_t`).
#[derive(Debug, Default)]
pub struct UidState {
    /// The uid the cookie carried (all zero when none, or invalid).
    got: [u8; 16],
    /// The uid set (all zero until made, or when none is set).
    set: [u8; 16],
    /// Whether [`RequestCtx::userid_create`] ran.
    created: bool,
    /// The cookie's value as sent.
    cookie: String,
    /// `$uid_reset` asked for a new uid.
    reset: bool,
    /// Error-log lines waiting for the filter, which has the log.
    pending: Vec<(Level, String)>,
}

/// Whether a uid is there: NGINX tests its fourth word.
fn present(uid: &[u8; 16]) -> bool {
    uid[12..] != [0, 0, 0, 0]
}

/// NGINX's `%V=%08XD%08XD%08XD%08XD`: the words in host order.
fn hex(name: &str, uid: &[u8; 16], out: &mut String) {
    use std::fmt::Write as _;
    out.push_str(name);
    out.push('=');
    for w in uid.chunks(4) {
        let _ = write!(out, "{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]]));
    }
}

/// NGINX's `ngx_http_parse_cookie_lines`: the value of cookie `name` in
/// one `Cookie` line (name matched without regard to case; spaces
/// around `=` skipped).
pub fn cookie_value<'a>(line: &'a str, name: &str) -> Option<&'a str> {
    let b = line.as_bytes();
    let n = name.len();
    let mut i = 0;
    while i < b.len() {
        if b.len() - i >= n && b[i..i + n].eq_ignore_ascii_case(name.as_bytes()) {
            let mut j = i + n;
            while j < b.len() && b[j] == b' ' {
                j += 1;
            }
            if j < b.len() && b[j] == b'=' {
                j += 1;
                while j < b.len() && b[j] == b' ' {
                    j += 1;
                }
                let end = b[j..]
                    .iter()
                    .position(|&c| c == b';')
                    .map_or(b.len(), |e| j + e);
                return Some(&line[j..end]);
            }
        }
        while i < b.len() && b[i] != b';' {
            i += 1;
        }
        i += 1;
        while i < b.len() && b[i] == b' ' {
            i += 1;
        }
    }
    None
}

impl RequestCtx {
    /// The request's uid state, read from its cookie the first time.
    fn userid_state(&self) -> RefMut<'_, UidState> {
        let mut slot = self.userid.borrow_mut();
        if slot.is_none() {
            *slot = Some(Box::new(self.userid_read()));
        }
        RefMut::map(slot, |s| &mut **s.as_mut().expect("just made"))
    }

    /// NGINX's `ngx_http_userid_get_uid`: the cookie, decoded.
    fn userid_read(&self) -> UidState {
        let name = &self.loc.s.userid.name;
        let mut st = UidState::default();
        let Some((line, value)) = self
            .head
            .headers()
            .filter(|(n, _)| n.eq_ignore_ascii_case("cookie"))
            .find_map(|(_, v)| cookie_value(v, name).map(|c| (v, c)))
        else {
            return st;
        };
        st.cookie = value.to_string();
        if value.len() < 22 {
            let m = format!("client sent too short userid cookie \"{line}\"");
            st.pending.push((Level::Error, m));
            return st;
        }
        match basic::decode(&value.as_bytes()[..22]) {
            Some(uid) => {
                let n = uid.len().min(16);
                st.got[..n].copy_from_slice(&uid[..n]);
            }
            None => {
                let m = format!("client sent invalid userid cookie \"{line}\"");
                st.pending.push((Level::Error, m));
            }
        }
        st
    }

    /// `$uid_got`.
    pub(super) fn uid_got(&self, out: &mut String) {
        let conf = &self.loc.s.userid;
        if conf.mode == UseridMode::Off {
            return;
        }
        let st = self.userid_state();
        if present(&st.got) {
            hex(&conf.name, &st.got, out);
        }
    }

    /// `$uid_set`.
    pub(super) fn uid_set(&self, out: &mut String) {
        let conf = &self.loc.s.userid;
        if conf.mode < UseridMode::V1 {
            return;
        }
        self.userid_create();
        let st = self.userid_state();
        if present(&st.set) {
            hex(&conf.name, &st.set, out);
        }
    }

    /// The value of `$uid_reset` (a `map` or `set` may define it; it is
    /// empty otherwise).
    fn uid_reset_value(&self) -> String {
        let mut v = String::new();
        if let Some(var) = self.server.variables.get("uid_reset") {
            self.append(var, &mut v);
        }
        v
    }

    /// NGINX's `ngx_http_userid_create_uid`: the uid to set, once: none
    /// when the cookie is kept, the cookie's own when only its mark is
    /// missing, else a new one.
    pub fn userid_create(&self) {
        let conf = &self.loc.s.userid;
        let (got, created) = {
            let st = self.userid_state();
            (present(&st.got), st.created)
        };
        if created {
            return;
        }
        // Rendered before the state is borrowed again: a `map` may read
        // `$uid_got`.
        let reset = if got {
            self.uid_reset_value()
        } else {
            String::new()
        };
        let mut st = self.userid_state();
        st.created = true;
        if got {
            if reset.is_empty() || reset == "0" {
                let c = st.cookie.as_bytes();
                let marked = c.len() > 23 && c[22] == conf.mark && c[23] == b'=';
                if conf.mark != 0 && !marked {
                    st.set = st.got;
                }
                return;
            }
            st.reset = true;
            if reset == "log" {
                let mut m = String::from("userid cookie \"");
                hex(&conf.name, &st.got, &mut m);
                m.push_str("\" was reset");
                st.pending.push((Level::Notice, m));
            }
        }
        st.set = new_uid(conf, &self.conn.local, self.conn.unix.is_some());
    }

    /// The `Set-Cookie` value to send, and `P3P`'s, when a uid is set
    /// (after [`RequestCtx::userid_create`]).
    pub fn userid_cookie(&self) -> Option<String> {
        let conf = &self.loc.s.userid;
        let st = self.userid_state();
        if !present(&st.set) {
            return None;
        }
        let mut c = format!("{}=", conf.name);
        if !present(&st.got) || st.reset {
            let mut b64 = basic::encode(&st.set);
            if conf.mark != 0 {
                b64.replace_range(22..23, &(conf.mark as char).to_string());
            }
            c.push_str(&b64);
        } else {
            c.push_str(&st.cookie[..22]);
            c.push(conf.mark as char);
            c.push('=');
        }
        if conf.expires == UID_MAX_EXPIRES {
            c.push_str("; expires=Thu, 31-Dec-37 23:55:55 GMT");
        } else if conf.expires != 0 {
            c.push_str("; expires=");
            c.push_str(&cookie_time(now_parts().0 + conf.expires));
        }
        c.push_str(&conf.domain);
        c.push_str(&conf.path);
        for (bit, text) in [
            (UID_SECURE, "; secure"),
            (UID_HTTPONLY, "; httponly"),
            (UID_STRICT, "; samesite=strict"),
            (UID_LAX, "; samesite=lax"),
            (UID_NONE, "; samesite=none"),
        ] {
            if conf.flags & bit != 0 {
                c.push_str(text);
            }
        }
        Some(c)
    }

    /// The error-log lines reading and making the uid left.
    pub fn userid_log_lines(&self) -> Vec<(Level, String)> {
        match self.userid.borrow_mut().as_mut() {
            Some(st) => std::mem::take(&mut st.pending),
            None => Vec::new(),
        }
    }
}

/// A new uid (see the module header).
fn new_uid(conf: &UseridSettings, local: &SocketAddr, unix: bool) -> [u8; 16] {
    let now = now_parts().0 as u32;
    let mut uid = [0u8; 16];
    if conf.mode == UseridMode::V1 {
        let seq = SEQUENCER_V1.fetch_add(0x100, Ordering::Relaxed);
        let words = [conf.service.unwrap_or(0), now, start_value(), seq];
        for (i, w) in words.iter().enumerate() {
            uid[i * 4..i * 4 + 4].copy_from_slice(&w.to_ne_bytes());
        }
        return uid;
    }
    let service = match (conf.service, local) {
        (Some(s), _) => s.to_be_bytes(),
        (None, _) if unix => [0; 4],
        (None, SocketAddr::V4(a)) => a.ip().octets(),
        (None, SocketAddr::V6(a)) => {
            let o = a.ip().octets();
            [o[12], o[13], o[14], o[15]]
        }
    };
    let seq = next_v2();
    uid[..4].copy_from_slice(&service);
    uid[4..8].copy_from_slice(&now.to_be_bytes());
    uid[8..12].copy_from_slice(&start_value().to_be_bytes());
    uid[12..].copy_from_slice(&seq.to_be_bytes());
    uid
}

/// The next `userid on` sequence number; past its range it starts over
/// at NGINX's first value.
fn next_v2() -> u32 {
    let mut cur = SEQUENCER_V2.load(Ordering::Relaxed);
    loop {
        let mut next = cur.wrapping_add(0x100);
        if next < 0x0303_0302 {
            next = 0x0303_0302;
        }
        match SEQUENCER_V2.compare_exchange_weak(cur, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return cur,
            Err(c) => cur = c,
        }
    }
}

/// NGINX's `ngx_http_cookie_time`: `Thu, 31-Dec-37 23:55:55 GMT` (a
/// four-digit year after 2037).
fn cookie_time(secs: u64) -> String {
    let d = crate::util::time::http_date(secs as i64);
    // `Www, DD Mon YYYY HH:MM:SS GMT`.
    let p: Vec<&str> = d.split(' ').collect();
    if p.len() != 6 {
        return d;
    }
    let year = p[3];
    let short = match year.parse::<u32>() {
        Ok(y) if y <= 2037 => format!("{:02}", y % 100),
        _ => year.to_string(),
    };
    format!("{} {}-{}-{} {} GMT", p[0], p[1], p[2], short, p[4])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cookies_are_found_as_nginx_finds_them() {
        assert_eq!(cookie_value("a=1; uid=xyz; b=2", "uid"), Some("xyz"));
        assert_eq!(cookie_value("UID = xyz", "uid"), Some("xyz"));
        assert_eq!(cookie_value("xuid=1; uid=2", "uid"), Some("2"));
        assert_eq!(cookie_value("uidx=1", "uid"), None);
    }

    #[test]
    fn cookie_time_has_a_two_digit_year_until_2037() {
        assert_eq!(cookie_time(2_145_916_555), "Thu, 31-Dec-37 23:55:55 GMT");
        assert_eq!(cookie_time(0), "Thu, 01-Jan-70 00:00:00 GMT");
        assert_eq!(cookie_time(2_209_032_000), "Sun, 01-Jan-2040 12:00:00 GMT");
    }

    #[test]
    fn variables_print_host_order_words() {
        let mut uid = [0u8; 16];
        uid[..4].copy_from_slice(&[127, 0, 0, 1]);
        let mut s = String::new();
        hex("uid", &uid, &mut s);
        let first = u32::from_ne_bytes([127, 0, 0, 1]);
        assert_eq!(&s[..12], format!("uid={first:08X}"));
    }
}
