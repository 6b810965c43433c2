//! Ephemeral ECDH on P-521 (secp521r1) as a rustls key-exchange group, for
//! `ssl_ecdh_curve secp521r1` ([`super::groups`]). ring, porter's crypto
//! provider, has no P-521; RustCrypto's `p521` crate does the curve
//! arithmetic, and this file only fits it to rustls's
//! `SupportedKxGroup`/`ActiveKeyExchange` traits: the private scalar from
//! ring's system random source, the key share as an uncompressed SEC1
//! point (RFC 8446 4.2.8.2), the shared secret as the x coordinate.

use p521::elliptic_curve::sec1::ToEncodedPoint;
use ring::rand::SecureRandom;
use rustls::crypto::{ActiveKeyExchange, SharedSecret, SupportedKxGroup};
use rustls::{Error, NamedGroup, PeerMisbehaved};

/// The P-521 group.
pub static SECP521R1: &dyn SupportedKxGroup = &P521;

#[derive(Debug)]
struct P521;

impl SupportedKxGroup for P521 {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, Error> {
        let secret = new_secret()?;
        let public = secret
            .public_key()
            .to_encoded_point(false)
            .as_bytes()
            .to_vec();
        Ok(Box::new(Active { secret, public }))
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::secp521r1
    }
}

/// A random private key: 66 bytes with the top seven bits clear (the
/// order is a 521-bit number), drawn again in the rare case it is zero or
/// not below the order.
fn new_secret() -> Result<p521::SecretKey, Error> {
    let rng = ring::rand::SystemRandom::new();
    let mut bytes = [0u8; 66];
    for _ in 0..64 {
        rng.fill(&mut bytes)
            .map_err(|_| Error::FailedToGetRandomBytes)?;
        bytes[0] &= 0x01;
        if let Ok(k) = p521::SecretKey::from_slice(&bytes) {
            return Ok(k);
        }
    }
    Err(Error::FailedToGetRandomBytes)
}

struct Active {
    secret: p521::SecretKey,
    public: Vec<u8>,
}

impl ActiveKeyExchange for Active {
    fn complete(self: Box<Self>, peer: &[u8]) -> Result<SharedSecret, Error> {
        // Only the uncompressed form is allowed in TLS 1.3 key shares.
        if peer.first() != Some(&0x04) {
            return Err(PeerMisbehaved::InvalidKeyShare.into());
        }
        let peer = p521::PublicKey::from_sec1_bytes(peer)
            .map_err(|_| Error::from(PeerMisbehaved::InvalidKeyShare))?;
        let shared = p521::ecdh::diffie_hellman(self.secret.to_nonzero_scalar(), peer.as_affine());
        Ok(SharedSecret::from(&shared.raw_secret_bytes()[..]))
    }

    fn pub_key(&self) -> &[u8] {
        &self.public
    }

    fn group(&self) -> NamedGroup {
        NamedGroup::secp521r1
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_sides_agree_and_a_bad_share_is_refused() {
        let a = SECP521R1.start().unwrap();
        let b = SECP521R1.start().unwrap();
        assert_eq!(a.pub_key().len(), 133);
        let b_pub = b.pub_key().to_vec();
        let sa = a.complete(&b_pub.clone()).unwrap();
        let a2 = SECP521R1.start().unwrap();
        let a2_pub = a2.pub_key().to_vec();
        let sb = b.complete(&a2_pub).unwrap();
        // Different partners: different secrets; each 66 bytes.
        assert_eq!(sa.secret_bytes().len(), 66);
        assert_ne!(sa.secret_bytes(), sb.secret_bytes());
        let x = SECP521R1.start().unwrap();
        let y = SECP521R1.start().unwrap();
        let (xp, yp) = (x.pub_key().to_vec(), y.pub_key().to_vec());
        assert_eq!(
            x.complete(&yp).unwrap().secret_bytes(),
            y.complete(&xp).unwrap().secret_bytes()
        );
        let z = SECP521R1.start().unwrap();
        let mut bad = xp.clone();
        bad[70] ^= 1;
        assert!(z.complete(&bad).is_err());
    }
}
