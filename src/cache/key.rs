//! Cache keys and where their files live: the key's MD5, and NGINX's
//! `levels` layout, so a porter cache directory looks exactly like an
//! NGINX one (`levels=1:2`, key hash `b7f5…029c` →
//! `PATH/c/29/b7f54b2df7773722d382f4809d65029c`: the last hex digit names
//! the first directory, the two before it the second).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use md5::{Digest, Md5};

/// The MD5 of a cache key: the entry's identity in the index and on disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct KeyHash(pub [u8; 16]);

impl KeyHash {
    /// Hashes a rendered `proxy_cache_key`.
    pub fn of(key: &[u8]) -> KeyHash {
        KeyHash(Md5::digest(key).into())
    }

    /// The 32 lowercase hex digits NGINX names the file with.
    pub fn hex(&self) -> String {
        let mut s = String::with_capacity(32);
        for b in self.0 {
            let _ = write!(s, "{b:02x}");
        }
        s
    }

    /// Parses a file name of exactly 32 lowercase hex digits.
    pub fn from_hex(name: &str) -> Option<KeyHash> {
        let b = name.as_bytes();
        if b.len() != 32 || !b.iter().all(|c| matches!(c, b'0'..=b'9' | b'a'..=b'f')) {
            return None;
        }
        let mut out = [0u8; 16];
        for (i, o) in out.iter_mut().enumerate() {
            *o = u8::from_str_radix(&name[2 * i..2 * i + 2], 16).ok()?;
        }
        Some(KeyHash(out))
    }
}

/// `levels=1:2`: up to three directory levels of one or two hex digits,
/// taken from the end of the name.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Levels(pub Vec<u8>);

impl Levels {
    /// Parses the value of `levels=` as NGINX does: `1`, `2`, `1:2`,
    /// `2:2:1`… (each 1 or 2, at most three).
    /// An empty value means no levels, as NGINX takes it.
    pub fn parse(v: &str) -> Option<Levels> {
        if v.is_empty() {
            return Some(Levels::default());
        }
        let parts: Vec<&str> = v.split(':').collect();
        if parts.len() > 3 {
            return None;
        }
        let mut out = Vec::new();
        for p in parts {
            match p {
                "1" => out.push(1),
                "2" => out.push(2),
                _ => return None,
            }
        }
        Some(Levels(out))
    }

    /// The level directories (relative) for a file name, outermost first:
    /// `["c", "c/29"]` for `…029c` with `1:2`.
    pub fn dirs(&self, name: &str) -> Vec<String> {
        let mut end = name.len();
        let mut rel = String::new();
        let mut out = Vec::new();
        for &n in &self.0 {
            let n = n as usize;
            if end < n {
                break;
            }
            if !rel.is_empty() {
                rel.push('/');
            }
            rel.push_str(&name[end - n..end]);
            end -= n;
            out.push(rel.clone());
        }
        out
    }

    /// The directory a file named `name` lives in under `root`.
    pub fn dir_of(&self, root: &Path, name: &str) -> PathBuf {
        match self.dirs(name).pop() {
            Some(rel) => root.join(rel),
            None => root.to_path_buf(),
        }
    }

    /// The path of the entry for `hash` under `root`.
    pub fn path_of(&self, root: &Path, hash: &KeyHash) -> PathBuf {
        let name = hash.hex();
        self.dir_of(root, &name).join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn md5_matches_known_vectors() {
        assert_eq!(KeyHash::of(b"").hex(), "d41d8cd98f00b204e9800998ecf8427e");
        // The NGINX documentation's example key hash.
        assert_eq!(
            KeyHash::of(b"The quick brown fox jumps over the lazy dog").hex(),
            "9e107d9d372bb6826bd81d3542a419d6"
        );
    }

    #[test]
    fn layout_is_nginx_levels() {
        let h = KeyHash::from_hex("b7f54b2df7773722d382f4809d65029c").unwrap();
        let root = Path::new("/data/nginx/cache");
        let l = Levels::parse("1:2").unwrap();
        assert_eq!(
            l.path_of(root, &h),
            Path::new("/data/nginx/cache/c/29/b7f54b2df7773722d382f4809d65029c")
        );
        assert_eq!(
            Levels::parse("2").unwrap().path_of(root, &h),
            Path::new("/data/nginx/cache/9c/b7f54b2df7773722d382f4809d65029c")
        );
        assert_eq!(
            Levels::parse("2:2:1").unwrap().path_of(root, &h),
            Path::new("/data/nginx/cache/9c/02/5/b7f54b2df7773722d382f4809d65029c")
        );
        assert_eq!(
            Levels::default().path_of(root, &h),
            Path::new("/data/nginx/cache/b7f54b2df7773722d382f4809d65029c")
        );
        assert_eq!(l.dirs(&h.hex()), vec!["c".to_string(), "c/29".to_string()]);
    }

    #[test]
    fn levels_parse_like_nginx() {
        assert_eq!(Levels::parse(""), Some(Levels::default()));
        for bad in ["3", "1:3:2", "1:2:2:2", "1:", ":1", "0", "1:x"] {
            assert_eq!(Levels::parse(bad), None, "{bad}");
        }
        assert_eq!(Levels::parse("1:2"), Some(Levels(vec![1, 2])));
        assert_eq!(Levels::parse("2:2:2"), Some(Levels(vec![2, 2, 2])));
    }

    #[test]
    fn hex_round_trip_and_rejects() {
        let h = KeyHash::of(b"k");
        assert_eq!(KeyHash::from_hex(&h.hex()), Some(h));
        assert_eq!(KeyHash::from_hex("B7F54B2DF7773722D382F4809D65029C"), None);
        assert_eq!(KeyHash::from_hex("b7f54b2df7773722d382f4809d65029"), None);
        assert_eq!(
            KeyHash::from_hex("b7f54b2df7773722d382f4809d65029c.0001"),
            None
        );
    }
}
