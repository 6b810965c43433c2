//! The state path of an issuer (`state_path`, default `acme_NAME` under
//! the prefix): `account.key` (the account's PKCS#8 key, PEM), and per
//! certificate `ID.crt` (the chain) and `ID.key` (its key), all 0600 in
//! a 0700 directory, each replaced atomically (`disk::state_file`). A
//! restart serves what is there and renews it when due, so the issuer
//! is not asked again (rate limits). These calls block: the
//! configuration loads on the master; the ACME runtime calls them on its
//! blocking threads.

use std::path::PathBuf;

use super::slot::Installed;
use super::{AccountKey, Certificate, Issuer};
use crate::disk::state_file;

/// The account key's file: `account_key FILE`, else `account.key` under
/// the state path (none with `state_path off`).
pub fn account_key_path(issuer: &Issuer) -> Option<PathBuf> {
    match &issuer.account_key {
        AccountKey::File(p) => Some(p.clone()),
        AccountKey::Generate => issuer.state_path.as_ref().map(|d| d.join("account.key")),
    }
}

/// The account key (PEM), if one is kept.
pub fn read_account_key(issuer: &Issuer) -> Result<Option<Vec<u8>>, String> {
    let Some(path) = account_key_path(issuer) else {
        return Ok(None);
    };
    state_file::read_optional(&path)
        .map_err(|e| format!("open() \"{}\" failed ({e})", path.display()))
}

/// Keeps a generated account key (PEM) under the state path.
pub fn save_account_key(issuer: &Issuer, pem: &str) -> Result<(), String> {
    let (Some(dir), AccountKey::Generate) = (&issuer.state_path, &issuer.account_key) else {
        return Ok(());
    };
    write(dir, "account.key", pem)
}

fn files(dir: &std::path::Path, id: &str) -> (PathBuf, PathBuf) {
    (dir.join(format!("{id}.crt")), dir.join(format!("{id}.key")))
}

/// The certificate kept for `cert`, if any and readable; a file that
/// cannot be used is said in the error (the certificate is then issued
/// again).
pub fn read_certificate(cert: &Certificate) -> Result<Option<Installed>, String> {
    let Some(dir) = &cert.issuer.state_path else {
        return Ok(None);
    };
    let (crt, key) = files(dir, &cert.id);
    let read = |p: &PathBuf| {
        state_file::read_optional(p).map_err(|e| format!("open() \"{}\" failed ({e})", p.display()))
    };
    let (Some(c), Some(k)) = (read(&crt)?, read(&key)?) else {
        return Ok(None);
    };
    let text = |b: Vec<u8>| String::from_utf8(b).unwrap_or_default();
    Installed::from_pem(&text(c), &text(k))
        .map(Some)
        .map_err(|e| format!("cannot use \"{}\": {e}", crt.display()))
}

/// Keeps an issued certificate and its key under the state path (the
/// key first: a chain never names a key that is not there yet).
pub fn save_certificate(cert: &Certificate, chain_pem: &str, key_pem: &str) -> Result<(), String> {
    let Some(dir) = &cert.issuer.state_path else {
        return Ok(());
    };
    write(dir, &format!("{}.key", cert.id), key_pem)?;
    write(dir, &format!("{}.crt", cert.id), chain_pem)
}

fn write(dir: &std::path::Path, name: &str, text: &str) -> Result<(), String> {
    state_file::make_private_dir(dir)
        .map_err(|e| format!("mkdir() \"{}\" failed ({e})", dir.display()))?;
    let path = dir.join(name);
    state_file::write_private(&path, text.as_bytes())
        .map_err(|e| format!("write() \"{}\" failed ({e})", path.display()))
}
