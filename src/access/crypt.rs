//! The system's `crypt()` (libxcrypt, `-lcrypt`), as NGINX calls it for
//! htpasswd hashes that are not one of its own formats: DES, `$1$`
//! (MD5-crypt), `$5$`/`$6$` (SHA-crypt), `$2y$` (bcrypt), `$y$`
//! (yescrypt) — whatever the system's library knows. A tiny FFI rather
//! than a crate: the point is to accept exactly what the system's
//! `crypt()` accepts, as NGINX does. `crypt_r` with a buffer of our own
//! keeps it safe on several threads at once. It can take tens of
//! milliseconds (bcrypt, SHA-crypt with many rounds), so it runs on the
//! hasher pool, never on an event loop.

use std::ffi::{c_char, CStr, CString};

/// `sizeof(struct crypt_data)` in libxcrypt (`crypt.h`: 32768 bytes).
const CRYPT_DATA_SIZE: usize = 32768;

#[link(name = "crypt")]
extern "C" {
    fn crypt_r(phrase: *const c_char, setting: *const c_char, data: *mut c_char) -> *mut c_char;
}

/// Cuts at the first NUL, as C strings do.
fn c_string(b: &[u8]) -> CString {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    CString::new(&b[..end]).unwrap_or_default()
}

/// `crypt(phrase, setting)`; `None` when the library fails (libxcrypt
/// then gives a failure token such as `*0`, which matches no stored hash).
pub fn crypt(phrase: &[u8], setting: &[u8]) -> Option<Vec<u8>> {
    let phrase = c_string(phrase);
    let setting = c_string(setting);
    // `crypt_r` needs the area zeroed before its first use.
    let mut data = vec![0u8; CRYPT_DATA_SIZE];
    // SAFETY: both strings are NUL-terminated and live across the call;
    // `data` is a writable area of `sizeof(struct crypt_data)` bytes that
    // the returned pointer (into `data`) does not outlive below.
    let out = unsafe { crypt_r(phrase.as_ptr(), setting.as_ptr(), data.as_mut_ptr().cast()) };
    if out.is_null() {
        return None;
    }
    // SAFETY: a non-null result is a NUL-terminated string inside `data`.
    let v = unsafe { CStr::from_ptr(out) }.to_bytes().to_vec();
    (!v.starts_with(b"*")).then_some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system_crypt_reproduces_known_hashes() {
        // `openssl passwd -1 -salt saltsalt secret`
        let md5 = b"$1$saltsalt$9xy1btjgzLYfb7hivXtC//";
        assert_eq!(crypt(b"secret", md5).as_deref(), Some(&md5[..]));
        assert_ne!(crypt(b"wrong", md5).as_deref(), Some(&md5[..]));
        assert_eq!(crypt(b"x", b"$unknown$"), None);
    }
}
