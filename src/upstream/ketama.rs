//! The hashes of `hash KEY consistent` (NGINX's
//! `ngx_http_upstream_hash_module.c`): CRC-32 and the ketama ring of
//! points a key walks to its server, so a config moved from NGINX maps
//! keys to the same servers ([`super::balance`] walks the ring).

use super::balance::PeerSpec;

/// CRC-32 (IEEE, as NGINX's `ngx_crc32_long`).
pub fn crc32(data: &[u8]) -> u32 {
    crc32fast::hash(data)
}

/// The ketama ring over `peers`, as NGINX's `ngx_http_upstream_update_chash`
/// builds it: points sorted by hash, equal hashes kept once (the first).
pub fn ketama_ring(peers: &[PeerSpec]) -> Vec<(u32, usize)> {
    let mut points = Vec::new();
    for (i, p) in peers.iter().enumerate() {
        let s = p.server.as_bytes();
        // HOST and PORT: the digits after the last `:`, if all are digits.
        let (host, port): (&[u8], &[u8]) = if s.len() >= 5 && s[..5].eq_ignore_ascii_case(b"unix:")
        {
            (&s[5..], b"")
        } else {
            let digits = s.iter().rev().take_while(|c| c.is_ascii_digit()).count();
            if digits < s.len() && s[s.len() - digits - 1] == b':' {
                (&s[..s.len() - digits - 1], &s[s.len() - digits..])
            } else {
                (s, b"")
            }
        };
        let mut base = crc32fast::Hasher::new();
        base.update(host);
        base.update(b"\0");
        base.update(port);
        let mut prev: u32 = 0;
        for _ in 0..p.weight * 160 {
            let mut h = base.clone();
            h.update(&prev.to_le_bytes());
            let v = h.finalize();
            points.push((v, i));
            prev = v;
        }
    }
    // NGINX sorts with qsort (not stable); equal hashes then keep whichever
    // came first, which for distinct servers is a one-in-billions tie.
    points.sort_by_key(|&(h, _)| h);
    points.dedup_by_key(|&mut (h, _)| h);
    points
}

/// The index of the first point whose hash is at least `hash` (may be
/// `points.len()`, which wraps to 0).
pub(super) fn find_point(points: &[(u32, usize)], hash: u32) -> usize {
    points.partition_point(|&(h, _)| h < hash)
}
