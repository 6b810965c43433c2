//! `split_clients STRING $VARIABLE { PERCENT VALUE; … * VALUE; }`: a
//! variable whose value is chosen by hashing a string, so the same string
//! always lands in the same bucket — `aio threads=pool_$disk` and
//! `proxy_cache cache_$disk` spread keys over disks with it.
//!
//! The hash is MurmurHash2 with seed 0, exactly as NGINX's `ngx_murmur_hash2`
//! computes it, and the buckets are NGINX's: each percentage (two decimals,
//! `33.3%` is 3330 hundredths) becomes a cumulative bound
//! `sum × 0xffffffff / 10000` and the first bucket whose bound exceeds the
//! hash wins; `*` takes whatever is left. Same keys, same disks as NGINX —
//! a cache tree written by NGINX stays where porter looks for it.
//!
//! Written by hand because the function is ten lines whose exact output is
//! the spec: NGINX's variant reads the tail bytes in its own order and uses
//! seed 0 and the length as the initial value; a general-purpose crate is a
//! dependency for no gain and a risk of a subtly different variant.

use super::template::{Template, VarSource};

/// NGINX's `ngx_murmur_hash2`.
pub fn murmur2(data: &[u8]) -> u32 {
    const M: u32 = 0x5bd1_e995;
    let mut h: u32 = data.len() as u32;
    let mut chunks = data.chunks_exact(4);
    for c in &mut chunks {
        let mut k = u32::from_le_bytes([c[0], c[1], c[2], c[3]]);
        k = k.wrapping_mul(M);
        k ^= k >> 24;
        k = k.wrapping_mul(M);
        h = h.wrapping_mul(M);
        h ^= k;
    }
    let tail = chunks.remainder();
    if !tail.is_empty() {
        if tail.len() >= 3 {
            h ^= (tail[2] as u32) << 16;
        }
        if tail.len() >= 2 {
            h ^= (tail[1] as u32) << 8;
        }
        h ^= tail[0] as u32;
        h = h.wrapping_mul(M);
    }
    h ^= h >> 13;
    h = h.wrapping_mul(M);
    h ^= h >> 15;
    h
}

/// One `split_clients` block, compiled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SplitClients {
    /// The variable's name (without `$`), for `-T` and messages.
    pub name: String,
    /// The string hashed.
    pub source: Template,
    /// Buckets in order: (upper bound of the hash, exclusive; `None` for `*`,
    /// which takes every hash), value.
    parts: Vec<(Option<u32>, String)>,
}

impl SplitClients {
    /// Compiles a block from its lines `(percent, value)`; errors are
    /// NGINX's messages.
    pub fn new(name: &str, source: Template, lines: &[(&str, &str)]) -> Result<Self, String> {
        let mut parts = Vec::with_capacity(lines.len());
        let mut sum: u32 = 0;
        let mut last: u32 = 0;
        for &(percent, value) in lines {
            let hundredths = if percent == "*" {
                None
            } else {
                let n = percent
                    .strip_suffix('%')
                    .and_then(parse_hundredths)
                    .filter(|&n| n != 0)
                    .ok_or_else(|| format!("invalid percent value \"{percent}\""))?;
                Some(n)
            };
            sum = match hundredths {
                Some(n) => sum.saturating_add(n),
                None => 10_000,
            };
            if sum > 10_000 {
                return Err("percent total is greater than 100%".to_string());
            }
            let bound = hundredths.map(|n| {
                last = last.wrapping_add((n as u64 * 0xffff_ffff / 10_000) as u32);
                last
            });
            parts.push((bound, value.to_string()));
        }
        Ok(SplitClients {
            name: name.to_string(),
            source,
            parts,
        })
    }

    /// The value for a hashed string (empty when no bucket takes it, as
    /// NGINX's not-found value renders).
    pub fn pick(&self, hash: u32) -> &str {
        self.parts
            .iter()
            .find(|(bound, _)| bound.is_none_or(|b| hash < b))
            .map_or("", |(_, v)| v.as_str())
    }

    /// Renders the source for a request and appends the chosen value.
    pub fn append(&self, src: &dyn VarSource, out: &mut String) {
        let key = self.source.render(src);
        out.push_str(self.pick(murmur2(key.as_bytes())));
    }
}

/// NGINX's `ngx_atofp(s, len, 2)`: a decimal with at most two fractional
/// digits, in hundredths.
fn parse_hundredths(s: &str) -> Option<u32> {
    if s.is_empty() {
        return None;
    }
    let mut value: u64 = 0;
    let mut point = 2u32;
    let mut dot = false;
    for c in s.bytes() {
        if point == 0 {
            return None;
        }
        if c == b'.' {
            if dot {
                return None;
            }
            dot = true;
            continue;
        }
        if !c.is_ascii_digit() {
            return None;
        }
        value = value * 10 + (c - b'0') as u64;
        if value > u32::MAX as u64 {
            return None;
        }
        if dot {
            point -= 1;
        }
    }
    value = value.checked_mul(10u64.pow(point))?;
    u32::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_fall_in_the_buckets_nginx_chose() {
        // Debian's nginx 1.22 with `split_clients "$arg_k" $b { 1% b0; …
        // 1% b98; * b99; }` answered these buckets (every tail length).
        let lines: Vec<(String, String)> = (0..100)
            .map(|i| {
                let p = if i == 99 { "*".into() } else { "1%".into() };
                (p, format!("b{i}"))
            })
            .collect();
        let refs: Vec<(&str, &str)> = lines
            .iter()
            .map(|(a, b)| (a.as_str(), b.as_str()))
            .collect();
        let s = SplitClients::new("b", Template::literal(""), &refs).unwrap();
        for (key, bucket) in [
            ("", "b0"),
            ("a", "b57"),
            ("ab", "b10"),
            ("abc", "b7"),
            ("abcd", "b15"),
            ("abcde", "b37"),
            ("jzde8gx.d6ncf10epf91d", "b83"),
        ] {
            assert_eq!(s.pick(murmur2(key.as_bytes())), bucket, "{key:?}");
        }
        assert_eq!(murmur2(b""), 0);
    }

    #[test]
    fn percentages_parse_like_ngx_atofp() {
        assert_eq!(parse_hundredths("33.3"), Some(3330));
        assert_eq!(parse_hundredths("50"), Some(5000));
        assert_eq!(parse_hundredths(".5"), Some(50));
        assert_eq!(parse_hundredths("0.01"), Some(1));
        assert_eq!(parse_hundredths("33.333"), None);
        assert_eq!(parse_hundredths("1.2.3"), None);
        assert_eq!(parse_hundredths("x"), None);
    }

    fn block(lines: &[(&str, &str)]) -> Result<SplitClients, String> {
        SplitClients::new("v", Template::literal("k"), lines)
    }

    #[test]
    fn errors_are_nginx_messages() {
        assert_eq!(
            block(&[("33.333%", "a")]).unwrap_err(),
            "invalid percent value \"33.333%\""
        );
        assert_eq!(
            block(&[("0%", "a")]).unwrap_err(),
            "invalid percent value \"0%\""
        );
        assert_eq!(
            block(&[("50", "a")]).unwrap_err(),
            "invalid percent value \"50\""
        );
        assert_eq!(
            block(&[("*", "a"), ("10%", "b")]).unwrap_err(),
            "percent total is greater than 100%"
        );
        assert_eq!(
            block(&[("60%", "a"), ("50%", "b")]).unwrap_err(),
            "percent total is greater than 100%"
        );
    }

    #[test]
    fn buckets_are_cumulative_and_star_takes_the_rest() {
        let s = block(&[("33.3%", "1"), ("33.3%", "2"), ("*", "3")]).unwrap();
        let b1 = (3330u64 * 0xffff_ffff / 10_000) as u32;
        assert_eq!(s.pick(0), "1");
        assert_eq!(s.pick(b1 - 1), "1");
        assert_eq!(s.pick(b1), "2");
        assert_eq!(s.pick(b1 * 2 - 1), "2");
        assert_eq!(s.pick(b1 * 2), "3");
        assert_eq!(s.pick(u32::MAX), "3");
        // Without `*`, hashes past the last bound get the empty value.
        let s = block(&[("10%", "a")]).unwrap();
        assert_eq!(s.pick(u32::MAX), "");
    }
}
