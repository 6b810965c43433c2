//! `ssl_session_ticket_key`: session tickets sealed with keys read from
//! files, so that several servers (or porter after a restart) resume each
//! other's sessions. The format is NGINX's (and so OpenSSL's ticket
//! callback's): a key file is 48 bytes — a 16-byte key name, a 16-byte
//! AES-128 key, a 16-byte HMAC key — or 80 bytes — the name, a 32-byte
//! HMAC key, a 32-byte AES-256 key; a ticket is
//! `name(16) ‖ IV(16) ‖ AES-CBC(PKCS#7-padded state) ‖ HMAC-SHA256(32)`,
//! the HMAC over all before it. The first key seals; every key opens the
//! tickets that name it.

use aes::cipher::block_padding::Pkcs7;
use aes::cipher::{BlockDecryptMut, BlockEncryptMut, KeyIvInit};
use hmac::{Hmac, Mac};
use rustls::server::ProducesTickets;
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// One key file's contents.
#[derive(Clone)]
struct Key {
    name: [u8; 16],
    /// 16 bytes (AES-128-CBC) or 32 (AES-256-CBC).
    aes: Vec<u8>,
    /// 16 or 32 bytes.
    hmac: Vec<u8>,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key material.
        write!(f, "Key({:02x?})", &self.name[..4])
    }
}

impl Key {
    fn from_bytes(b: &[u8]) -> Option<Key> {
        let name: [u8; 16] = b.get(..16)?.try_into().ok()?;
        let (aes, hmac) = match b.len() {
            48 => (&b[16..32], &b[32..48]),
            80 => (&b[48..80], &b[16..48]),
            _ => return None,
        };
        Some(Key {
            name,
            aes: aes.to_vec(),
            hmac: hmac.to_vec(),
        })
    }

    fn mac(&self, data: &[u8]) -> HmacSha256 {
        let mut m = HmacSha256::new_from_slice(&self.hmac).expect("HMAC takes any key length");
        m.update(data);
        m
    }

    fn seal(&self, iv: &[u8; 16], plain: &[u8]) -> Vec<u8> {
        if self.aes.len() == 16 {
            cbc::Encryptor::<aes::Aes128>::new_from_slices(&self.aes, iv)
                .expect("16-byte key")
                .encrypt_padded_vec_mut::<Pkcs7>(plain)
        } else {
            cbc::Encryptor::<aes::Aes256>::new_from_slices(&self.aes, iv)
                .expect("32-byte key")
                .encrypt_padded_vec_mut::<Pkcs7>(plain)
        }
    }

    fn open(&self, iv: &[u8], sealed: &[u8]) -> Option<Vec<u8>> {
        if self.aes.len() == 16 {
            cbc::Decryptor::<aes::Aes128>::new_from_slices(&self.aes, iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(sealed)
                .ok()
        } else {
            cbc::Decryptor::<aes::Aes256>::new_from_slices(&self.aes, iv)
                .ok()?
                .decrypt_padded_vec_mut::<Pkcs7>(sealed)
                .ok()
        }
    }
}

/// The tickets of a server with `ssl_session_ticket_key` files.
#[derive(Debug)]
pub struct FileTickets {
    keys: Vec<Key>,
}

impl FileTickets {
    /// Keys from the contents of the key files, in the directives' order.
    /// `Err(i)`: file `i` is not 48 or 80 bytes.
    pub fn new(files: &[Vec<u8>]) -> Result<FileTickets, usize> {
        let keys = files
            .iter()
            .enumerate()
            .map(|(i, b)| Key::from_bytes(b).ok_or(i))
            .collect::<Result<Vec<_>, _>>()?;
        if keys.is_empty() {
            return Err(0);
        }
        Ok(FileTickets { keys })
    }
}

/// Sealed state shorter than this cannot be a ticket: name, IV, one block, HMAC.
const MIN_TICKET: usize = 16 + 16 + 16 + 32;

impl ProducesTickets for FileTickets {
    fn enabled(&self) -> bool {
        true
    }

    fn lifetime(&self) -> u32 {
        // TimedTickets, which wraps this, says `ssl_session_timeout`.
        300
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        let key = &self.keys[0];
        let mut iv = [0u8; 16];
        super::provider().secure_random.fill(&mut iv).ok()?;
        let sealed = key.seal(&iv, plain);
        let mut out = Vec::with_capacity(32 + sealed.len() + 32);
        out.extend_from_slice(&key.name);
        out.extend_from_slice(&iv);
        out.extend_from_slice(&sealed);
        let tag = key.mac(&out).finalize().into_bytes();
        out.extend_from_slice(&tag);
        Some(out)
    }

    fn decrypt(&self, ticket: &[u8]) -> Option<Vec<u8>> {
        if ticket.len() < MIN_TICKET {
            return None;
        }
        let key = self.keys.iter().find(|k| k.name == ticket[..16])?;
        let (body, tag) = ticket.split_at(ticket.len() - 32);
        key.mac(body).verify_slice(tag).ok()?;
        key.open(&body[16..32], &body[32..])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(name: u8, len: usize) -> Vec<u8> {
        let mut b = vec![name; 16];
        b.extend((0..len - 16).map(|i| i as u8 ^ name));
        b
    }

    #[test]
    fn the_first_key_seals_and_every_key_opens_its_own() {
        let k48 = file(1, 48);
        let k80 = file(2, 80);
        let a = FileTickets::new(&[k48.clone(), k80.clone()]).unwrap();
        let b = FileTickets::new(&[k80.clone(), k48.clone()]).unwrap();
        let t = a.encrypt(b"session state").unwrap();
        assert_eq!(&t[..16], &[1; 16], "named by the first key");
        assert_eq!(t.len(), 16 + 16 + 16 + 32, "one padded block");
        assert_eq!(a.decrypt(&t).unwrap(), b"session state");
        assert_eq!(b.decrypt(&t).unwrap(), b"session state", "second key opens");
        let t80 = b.encrypt(&[7u8; 40]).unwrap();
        assert_eq!(a.decrypt(&t80).unwrap(), vec![7u8; 40]);
        // Another instance with only a different key opens neither.
        let c = FileTickets::new(&[file(3, 80)]).unwrap();
        assert_eq!(c.decrypt(&t), None);
        // A flipped byte fails the HMAC.
        let mut bad = t.clone();
        bad[40] ^= 1;
        assert_eq!(a.decrypt(&bad), None);
        assert_eq!(a.decrypt(&t[..40]), None);
    }

    #[test]
    fn the_layout_is_nginx_s() {
        // 48 bytes: name, AES key, HMAC key; 80: name, HMAC key, AES key.
        let k = Key::from_bytes(&file(9, 48)).unwrap();
        assert_eq!(k.aes, file(9, 48)[16..32]);
        assert_eq!(k.hmac, file(9, 48)[32..48]);
        let k = Key::from_bytes(&file(9, 80)).unwrap();
        assert_eq!(k.hmac, file(9, 80)[16..48]);
        assert_eq!(k.aes, file(9, 80)[48..80]);
        assert!(Key::from_bytes(&[0; 47]).is_none());
        assert_eq!(
            FileTickets::new(&[file(1, 48), vec![0; 50]]).unwrap_err(),
            1
        );
        // A ticket sealed by hand as OpenSSL would: AES-128-CBC, then
        // HMAC-SHA256 over name ‖ IV ‖ ciphertext.
        let raw = file(4, 48);
        let iv = [5u8; 16];
        let ct = cbc::Encryptor::<aes::Aes128>::new_from_slices(&raw[16..32], &iv)
            .unwrap()
            .encrypt_padded_vec_mut::<Pkcs7>(b"x");
        let mut t = raw[..16].to_vec();
        t.extend_from_slice(&iv);
        t.extend_from_slice(&ct);
        let mut m = HmacSha256::new_from_slice(&raw[32..48]).unwrap();
        m.update(&t);
        t.extend_from_slice(&m.finalize().into_bytes());
        let f = FileTickets::new(&[raw]).unwrap();
        assert_eq!(f.decrypt(&t).unwrap(), b"x");
    }
}
