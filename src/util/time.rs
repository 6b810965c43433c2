//! Time strings for headers and logs, cached per thread for the current
//! second: a busy worker formats each at most once a second.

use std::cell::RefCell;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds and milliseconds since the epoch.
pub fn now() -> (i64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs() as i64, d.subsec_millis())
}

unsafe extern "C" {
    /// POSIX `tzset` (the libc crate does not declare it).
    fn tzset();
}

/// Loads the local time zone (`/etc/localtime`, `TZ`) now. Call once at
/// start, before any worker runs: the C library reads the zone file on its
/// first `localtime_r`, and a worker's first log line would otherwise
/// open and read that file on its event loop (a disk read, after a cold
/// start). Later calls use the loaded zone, as NGINX's do.
pub fn load_zone() {
    // SAFETY: tzset only initialises the C library's time-zone state; it is
    // called before any other thread exists.
    unsafe { tzset() };
}

struct Cache {
    secs: i64,
    http: String,
    local: String,
    errlog: String,
    iso: String,
}

thread_local! {
    static CACHE: RefCell<Cache> = const { RefCell::new(Cache {
        secs: i64::MIN,
        http: String::new(),
        local: String::new(),
        errlog: String::new(),
        iso: String::new(),
    }) };
}

const MONTHS: [&str; 12] = [
    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
];

fn refresh(c: &mut Cache, secs: i64) {
    c.secs = secs;
    c.http =
        httpdate::fmt_http_date(UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64));
    // SAFETY: localtime_r only writes into the tm we hand it.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    let t: libc::time_t = secs as libc::time_t;
    unsafe { libc::localtime_r(&t, &mut tm) };
    let off = tm.tm_gmtoff / 60;
    let (sign, off) = if off < 0 { ('-', -off) } else { ('+', off) };
    let (y, mo, d, h, mi, s) = (
        tm.tm_year + 1900,
        tm.tm_mon + 1,
        tm.tm_mday,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
    );
    c.local = format!(
        "{d:02}/{}/{y}:{h:02}:{mi:02}:{s:02} {sign}{:02}{:02}",
        MONTHS[(mo - 1) as usize],
        off / 60,
        off % 60
    );
    c.errlog = format!("{y}/{mo:02}/{d:02} {h:02}:{mi:02}:{s:02}");
    c.iso = format!(
        "{y}-{mo:02}-{d:02}T{h:02}:{mi:02}:{s:02}{sign}{:02}:{:02}",
        off / 60,
        off % 60
    );
}

fn with<R>(f: impl FnOnce(&Cache) -> R) -> R {
    let secs = now().0;
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if c.secs != secs {
            refresh(&mut c, secs);
        }
        f(&c)
    })
}

/// `Date:` header value for now.
pub fn http_date_now(out: &mut String) {
    with(|c| out.push_str(&c.http));
}

/// Calls `f` with the `Date:` header value for now, borrowed from the
/// per-second cache (no string is built).
pub fn with_http_date<R>(f: impl FnOnce(&str) -> R) -> R {
    with(|c| f(&c.http))
}

/// The current HTTP date as a new string (a `Date` header's value).
pub fn http_date_string() -> String {
    let mut d = String::with_capacity(29);
    http_date_now(&mut d);
    d
}

/// `$time_local` for now.
pub fn time_local(out: &mut String) {
    with(|c| out.push_str(&c.local));
}

/// `$time_iso8601` for now.
pub fn time_iso8601(out: &mut String) {
    with(|c| out.push_str(&c.iso));
}

/// The error log's timestamp for now (`2026/11/22 08:00:00`).
pub fn error_log_time() -> String {
    with(|c| c.errlog.clone())
}

/// Formats an HTTP date (`Last-Modified`).
pub fn http_date(secs: i64) -> String {
    with_date_of(secs, str::to_string)
}

/// The next moment after `now` whose local time of day is `secs` seconds
/// after midnight (`expires @TIME`), as NGINX's `ngx_next_time`: today's
/// if it is still ahead, else tomorrow's.
pub fn next_time_of_day(now: i64, secs: i64) -> i64 {
    let t: libc::time_t = now as libc::time_t;
    // SAFETY: localtime_r and mktime only read and write the tm given.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe { libc::localtime_r(&t, &mut tm) };
    tm.tm_hour = (secs / 3600) as libc::c_int;
    tm.tm_min = (secs / 60 % 60) as libc::c_int;
    tm.tm_sec = (secs % 60) as libc::c_int;
    tm.tm_isdst = -1;
    let today = unsafe { libc::mktime(&mut tm) } as i64;
    if today > now {
        return today;
    }
    tm.tm_mday += 1;
    tm.tm_isdst = -1;
    unsafe { libc::mktime(&mut tm) as i64 }
}

/// Calls `f` with the HTTP date of `secs`, borrowed from a one-entry
/// cache: hot files repeat the same `Last-Modified`, so it is formatted
/// once and no string is built per response.
pub fn with_date_of<R>(secs: i64, f: impl FnOnce(&str) -> R) -> R {
    thread_local! {
        static LAST: RefCell<(i64, String)> = const { RefCell::new((i64::MIN, String::new())) };
    }
    LAST.with(|l| {
        let mut l = l.borrow_mut();
        if l.0 != secs {
            *l = (
                secs,
                httpdate::fmt_http_date(
                    UNIX_EPOCH + std::time::Duration::from_secs(secs.max(0) as u64),
                ),
            );
        }
        f(&l.1)
    })
}

/// The SSI module's default `timefmt` for `$date_local` and `$date_gmt`.
pub const SSI_TIMEFMT: &str = "%A, %d-%b-%Y %H:%M:%S %Z";

/// `secs` formatted by the C library's `strftime` with `fmt`, in GMT or
/// local time, as NGINX's SSI date variables (`%s` alone is the epoch
/// seconds); empty when the result would exceed NGINX's 2048 bytes.
pub fn strftime(fmt: &str, secs: i64, gmt: bool) -> String {
    if fmt == "%s" {
        return secs.to_string();
    }
    let Ok(cfmt) = std::ffi::CString::new(fmt) else {
        return String::new();
    };
    let t: libc::time_t = secs as libc::time_t;
    // SAFETY: gmtime_r/localtime_r write only into the tm given; strftime
    // writes at most `buf.len()` bytes into buf and reads the C string.
    let mut tm: libc::tm = unsafe { std::mem::zeroed() };
    unsafe {
        if gmt {
            libc::gmtime_r(&t, &mut tm);
        } else {
            libc::localtime_r(&t, &mut tm);
        }
    }
    let mut buf = vec![0u8; 2048];
    let n = unsafe { libc::strftime(buf.as_mut_ptr().cast(), buf.len(), cfmt.as_ptr(), &tm) };
    buf.truncate(n);
    String::from_utf8_lossy(&buf).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_have_nginx_shapes() {
        let mut s = String::new();
        http_date_now(&mut s);
        assert!(s.ends_with(" GMT") && s.len() == 29, "{s}");
        let mut l = String::new();
        time_local(&mut l);
        assert_eq!(l.len(), 26, "{l}");
        assert_eq!(error_log_time().len(), 19);
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}
