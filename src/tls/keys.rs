//! Files the `ssl_*` directives name beside certificates: private keys,
//! plain or encrypted with a passphrase of `ssl_password_file` (PKCS#8
//! `ENCRYPTED PRIVATE KEY` with PBES2 — what `openssl genpkey -aes256` and
//! `openssl pkcs8 -topk8` write — through the `pkcs8` crate, and OpenSSL's
//! traditional `Proc-Type: 4,ENCRYPTED` PEM with AES-CBC, decrypted here
//! with OpenSSL's `EVP_BytesToKey`); `ssl_stapling_file` (a DER OCSP
//! response); `ssl_trusted_certificate` (PEM certificates); `ssl_dhparam`
//! (checked, not used).

use std::path::Path;

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockDecryptMut, KeyIvInit};
use md5::{Digest, Md5};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

fn io_text(e: &std::io::Error) -> String {
    let s = e.to_string();
    match s.rfind(" (os error") {
        Some(i) => s[..i].to_string(),
        None => s,
    }
}

/// The private key in `path`, decrypted with the first of `passwords`
/// that opens it when it is encrypted. The error is NGINX's wording.
pub fn read_key(path: &Path, passwords: &[String]) -> Result<PrivateKeyDer<'static>, String> {
    let fail = |why: String| {
        format!(
            "cannot load certificate key \"{}\": PEM_read_bio_PrivateKey() failed ({why})",
            path.display()
        )
    };
    let text = std::fs::read(path).map_err(|e| fail(io_text(&e)))?;
    let encrypted = memchr::memmem::find(&text, b"-----BEGIN ENCRYPTED PRIVATE KEY-----").is_some()
        || memchr::memmem::find(&text, b"Proc-Type: 4,ENCRYPTED").is_some();
    if !encrypted {
        return PrivateKeyDer::from_pem_slice(&text).map_err(|e| fail(super::pem_error(&e)));
    }
    if passwords.is_empty() {
        return Err(fail(
            "the key is encrypted and no \"ssl_password_file\" is given".into(),
        ));
    }
    let text = String::from_utf8_lossy(&text);
    for pass in passwords {
        let key = if text.contains("Proc-Type: 4,ENCRYPTED") {
            traditional(&text, pass.as_bytes()).map_err(fail)?
        } else {
            pkcs8(&text, pass.as_bytes())
        };
        if let Some(k) = key {
            return Ok(k);
        }
    }
    Err(fail(
        "bad decrypt: no password of \"ssl_password_file\" opens it".into(),
    ))
}

/// PKCS#8 `ENCRYPTED PRIVATE KEY` opened with `pass` (`None`: it does not open).
fn pkcs8(text: &str, pass: &[u8]) -> Option<PrivateKeyDer<'static>> {
    use pkcs8::der::Decode;
    let b64 = pem_body(text, "ENCRYPTED PRIVATE KEY")?;
    let der = base64_decode(&b64)?;
    let info = pkcs8::EncryptedPrivateKeyInfo::from_der(&der).ok()?;
    let doc = info.decrypt(pass).ok()?;
    Some(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        doc.as_bytes().to_vec(),
    )))
}

/// OpenSSL's traditional encrypted PEM (`-----BEGIN RSA PRIVATE KEY-----`
/// or `EC PRIVATE KEY` with `Proc-Type: 4,ENCRYPTED` and `DEK-Info:
/// AES-256-CBC,IV`): `Ok(None)` when `pass` does not open it, `Err` for a
/// cipher porter does not decrypt (DES).
fn traditional(text: &str, pass: &[u8]) -> Result<Option<PrivateKeyDer<'static>>, String> {
    let (label, body) = ["RSA PRIVATE KEY", "EC PRIVATE KEY"]
        .iter()
        .find_map(|l| Some((*l, pem_body(text, l)?)))
        .ok_or("no traditional key block")?;
    let mut lines = body.lines();
    let mut dek = None;
    let mut b64 = String::new();
    for line in &mut lines {
        if let Some(v) = line.strip_prefix("DEK-Info:") {
            dek = Some(v.trim().to_string());
        } else if !line.contains(':') {
            b64.push_str(line.trim());
        }
    }
    let dek = dek.ok_or("no DEK-Info")?;
    let (cipher, iv_hex) = dek.split_once(',').ok_or("bad DEK-Info")?;
    let key_len = match cipher {
        "AES-128-CBC" => 16,
        "AES-192-CBC" => 24,
        "AES-256-CBC" => 32,
        c => {
            return Err(format!(
                "unsupported cipher {c}: re-encrypt the key with AES"
            ))
        }
    };
    let iv = hex(iv_hex).filter(|v| v.len() == 16).ok_or("bad IV")?;
    let der = base64_decode(&b64).ok_or("bad base64")?;
    let key = bytes_to_key(pass, &iv[..8], key_len);
    let plain = match key_len {
        16 => cbc::Decryptor::<aes::Aes128>::new_from_slices(&key, &iv)
            .map_err(|e| e.to_string())?
            .decrypt_padded_vec_mut::<Pkcs7>(&der),
        24 => cbc::Decryptor::<aes::Aes192>::new_from_slices(&key, &iv)
            .map_err(|e| e.to_string())?
            .decrypt_padded_vec_mut::<Pkcs7>(&der),
        _ => cbc::Decryptor::<aes::Aes256>::new_from_slices(&key, &iv)
            .map_err(|e| e.to_string())?
            .decrypt_padded_vec_mut::<Pkcs7>(&der),
    };
    // A wrong password mostly fails the padding; else the DER must parse
    // (a SEQUENCE whose length spans the rest).
    let Ok(plain) = plain else { return Ok(None) };
    if !der_sequence(&plain) {
        return Ok(None);
    }
    Ok(Some(match label {
        "RSA PRIVATE KEY" => PrivateKeyDer::Pkcs1(plain.into()),
        _ => PrivateKeyDer::Sec1(plain.into()),
    }))
}

/// OpenSSL's `EVP_BytesToKey` with MD5 and one round, as PEM encryption uses.
fn bytes_to_key(pass: &[u8], salt: &[u8], len: usize) -> Vec<u8> {
    let mut out = Vec::new();
    let mut prev: Vec<u8> = Vec::new();
    while out.len() < len {
        let mut h = Md5::new();
        h.update(&prev);
        h.update(pass);
        h.update(salt);
        prev = h.finalize().to_vec();
        out.extend_from_slice(&prev);
    }
    out.truncate(len);
    out
}

/// The text between `-----BEGIN label-----` and `-----END label-----`.
fn pem_body(text: &str, label: &str) -> Option<String> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let a = text.find(&begin)? + begin.len();
    let b = a + text[a..].find(&end)?;
    Some(text[a..b].to_string())
}

fn hex(s: &str) -> Option<Vec<u8>> {
    let s = s.trim();
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

fn base64_decode(s: &str) -> Option<Vec<u8>> {
    const T: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let (mut out, mut acc, mut bits) = (Vec::new(), 0u32, 0);
    for c in s.bytes().filter(|c| !c.is_ascii_whitespace()) {
        if c == b'=' {
            break;
        }
        let v = T.iter().position(|t| *t == c)? as u32;
        acc = (acc << 6) | v;
        bits += 6;
        if bits >= 8 {
            bits -= 8;
            out.push((acc >> bits) as u8);
        }
    }
    Some(out)
}

/// Whether `b` is one DER SEQUENCE whose length spans all of `b`.
fn der_sequence(b: &[u8]) -> bool {
    if b.len() < 2 || b[0] != 0x30 {
        return false;
    }
    let (len, head) = match b[1] {
        n if n < 0x80 => (n as usize, 2),
        n @ 0x81..=0x84 => {
            let k = (n & 0x7f) as usize;
            let Some(bytes) = b.get(2..2 + k) else {
                return false;
            };
            (
                bytes.iter().fold(0usize, |a, x| a << 8 | *x as usize),
                2 + k,
            )
        }
        _ => return false,
    };
    head + len == b.len()
}

/// `ssl_stapling_file`: a DER OCSP response, read and checked to be one
/// DER structure (NGINX: `d2i_OCSP_RESPONSE_bio() failed`).
pub fn read_ocsp(path: &Path) -> Result<Vec<u8>, String> {
    let b = std::fs::read(path).map_err(|e| {
        format!(
            "BIO_new_file(\"{}\") failed ({})",
            path.display(),
            io_text(&e)
        )
    })?;
    if !der_sequence(&b) {
        return Err(format!(
            "d2i_OCSP_RESPONSE_bio(\"{}\") failed (not a DER OCSP response)",
            path.display()
        ));
    }
    Ok(b)
}

/// `ssl_trusted_certificate`: PEM certificates, at least one.
pub fn read_trusted(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let fail = |why: String| {
        format!(
            "SSL_CTX_load_verify_locations(\"{}\") failed ({why})",
            path.display()
        )
    };
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| fail(super::pem_error(&e)))?;
    if certs.is_empty() {
        return Err(fail("no certificate or crl found".into()));
    }
    let mut store = rustls::RootCertStore::empty();
    for c in &certs {
        store
            .add(c.clone())
            .map_err(|e| fail(format!("bad certificate: {e}")))?;
    }
    Ok(certs)
}

/// `ssl_dhparam`: read and checked as NGINX's `PEM_read_bio_DHparams`
/// would (a `DH PARAMETERS` block holding one DER structure); the
/// parameters themselves are not used (rustls has no DHE).
pub fn check_dhparam(path: &Path) -> Result<(), String> {
    let text = std::fs::read(path).map_err(|e| {
        format!(
            "BIO_new_file(\"{}\") failed ({})",
            path.display(),
            io_text(&e)
        )
    })?;
    let text = String::from_utf8_lossy(&text);
    let der = ["DH PARAMETERS", "X9.42 DH PARAMETERS"]
        .iter()
        .find_map(|l| pem_body(&text, l))
        .and_then(|b| base64_decode(&b));
    match der {
        Some(d) if der_sequence(&d) => Ok(()),
        _ => Err(format!(
            "PEM_read_bio_DHparams(\"{}\") failed (no DH PARAMETERS: Expecting: DH PARAMETERS)",
            path.display()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "C9E5A1BD216DBE1317E230CEF48F38EE7F0E17AD64022144BCCEC4A1AA2879AB";

    #[test]
    fn bytes_to_key_is_openssl_s() {
        // `openssl enc -aes-256-cbc -P -md md5 -S 0102030405060708 -pass pass:secret`
        let k = bytes_to_key(b"secret", &[1, 2, 3, 4, 5, 6, 7, 8], 32);
        assert_eq!(hex(KEY).unwrap(), k);
    }

    #[test]
    fn base64_hex_and_der_framing() {
        assert_eq!(base64_decode("aGVs\nbG8=").unwrap(), b"hello");
        assert_eq!(base64_decode("a*"), None);
        assert_eq!(hex("0aFF").unwrap(), [10, 255]);
        assert!(der_sequence(&[0x30, 0x01, 0x00]));
        assert!(der_sequence(&[&[0x30, 0x81, 0x80][..], &[0; 128]].concat()));
        assert!(!der_sequence(&[0x30, 0x02, 0x00]));
        assert!(!der_sequence(&[0x04, 0x01, 0x00]));
        assert_eq!(
            pem_body("x-----BEGIN A-----\nQQ==\n-----END A-----", "A").unwrap(),
            "\nQQ==\n"
        );
    }

    #[test]
    fn an_encrypted_key_without_passwords_is_an_error_saying_so() {
        let dir = std::env::temp_dir().join(format!("porter-keys-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("k.pem");
        std::fs::write(
            &p,
            "-----BEGIN ENCRYPTED PRIVATE KEY-----\nMAA=\n-----END ENCRYPTED PRIVATE KEY-----\n",
        )
        .unwrap();
        let e = read_key(&p, &[]).unwrap_err();
        assert!(e.contains("no \"ssl_password_file\""), "{e}");
        let e = read_key(&p, &["x".into()]).unwrap_err();
        assert!(e.contains("no password"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
