//! What a client certificate says, in the forms NGINX's `$ssl_client_*`
//! variables give it (OpenSSL's printers): the subject and issuer as
//! RFC 2253 strings (`X509_NAME_print_ex(XN_FLAG_RFC2253)`: last RDN
//! first, OpenSSL's short names, `\`-escapes, bytes past ASCII as `\XX`),
//! the serial as `i2a_ASN1_INTEGER` prints it (upper-case hex), the SHA-1
//! fingerprint, the PEM (`PEM_write_bio_X509`) and its two derived forms,
//! and the validity dates as `ASN1_TIME_print` writes them.
//!
//! The DER is parsed with `x509-parser` (rusticata's: well kept, fuzzed,
//! no C, and already what the rustls ecosystem reaches for when it needs
//! more of a certificate than webpki checks); the printing is ours, to
//! match OpenSSL byte for byte.

use std::fmt::Write;

use sha1::{Digest, Sha1};
use x509_parser::asn1_rs::ToDer;
use x509_parser::prelude::{FromDer, X509Certificate, X509Name};

/// A client certificate's fields, as `$ssl_client_*` render them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerCert {
    /// `$ssl_client_s_dn`.
    pub subject: String,
    /// `$ssl_client_i_dn`.
    pub issuer: String,
    /// `$ssl_client_serial`.
    pub serial: String,
    /// `$ssl_client_fingerprint`.
    pub fingerprint: String,
    /// `$ssl_client_raw_cert`: PEM, with its last newline.
    pub pem: String,
    /// `$ssl_client_v_start`.
    pub v_start: String,
    /// `$ssl_client_v_end`.
    pub v_end: String,
    /// The end of validity, Unix seconds (for `$ssl_client_v_remain`).
    pub not_after: i64,
}

impl PeerCert {
    /// The fields of the DER certificate `der` (`None`: it does not parse;
    /// rustls has already checked the handshake's signature with it).
    pub fn parse(der: &[u8]) -> Option<PeerCert> {
        let (_, cert) = X509Certificate::from_der(der).ok()?;
        let validity = cert.validity();
        Some(PeerCert {
            subject: rfc2253(cert.subject()),
            issuer: rfc2253(cert.issuer()),
            serial: serial(cert.raw_serial()),
            fingerprint: hex_lower(&Sha1::digest(der)),
            pem: pem(der),
            v_start: asn1_time(validity.not_before.timestamp()),
            v_end: asn1_time(validity.not_after.timestamp()),
            not_after: validity.not_after.timestamp(),
        })
    }

    /// `$ssl_client_cert` (deprecated in NGINX): the PEM without its last
    /// newline, each line after the first starting with a tab.
    pub fn tabbed(&self) -> String {
        self.pem
            .strip_suffix('\n')
            .unwrap_or(&self.pem)
            .replace('\n', "\n\t")
    }

    /// `$ssl_client_v_remain` at `now` (Unix seconds): whole days left,
    /// `0` when less than one.
    pub fn v_remain(&self, now: i64) -> String {
        if self.not_after < now + 86400 {
            "0".into()
        } else {
            ((self.not_after - now) / 86400).to_string()
        }
    }
}

fn hex_lower(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

/// `i2a_ASN1_INTEGER`: the magnitude's bytes in upper-case hex (`00` for
/// zero), `-` first for a negative number.
fn serial(der: &[u8]) -> String {
    let negative = der.first().is_some_and(|b| b & 0x80 != 0);
    let magnitude: Vec<u8> = if negative {
        // Two's complement back to the magnitude.
        let mut m: Vec<u8> = der.iter().map(|b| !b).collect();
        for b in m.iter_mut().rev() {
            let (v, carry) = b.overflowing_add(1);
            *b = v;
            if !carry {
                break;
            }
        }
        m
    } else {
        der.to_vec()
    };
    let first = magnitude.iter().position(|&b| b != 0);
    let digits = first.map_or(&[][..], |i| &magnitude[i..]);
    let mut s = String::from(if negative { "-" } else { "" });
    if digits.is_empty() {
        s.push_str("00");
    }
    for b in digits {
        let _ = write!(s, "{b:02X}");
    }
    s
}

/// `PEM_write_bio_X509`: base64 in lines of 64, between the markers.
fn pem(der: &[u8]) -> String {
    const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut b64 = String::with_capacity(der.len() * 4 / 3 + 4);
    for chunk in der.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, &b)| n | u32::from(b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                b64.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                b64.push('=');
            }
        }
    }
    let mut out = String::from("-----BEGIN CERTIFICATE-----\n");
    for line in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).unwrap_or_default());
        out.push('\n');
    }
    out.push_str("-----END CERTIFICATE-----\n");
    out
}

/// `ASN1_TIME_print`: `Mon DD HH:MM:SS YYYY GMT`, the day padded with a
/// space.
fn asn1_time(t: i64) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let (days, secs) = (t.div_euclid(86400), t.rem_euclid(86400));
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{} {day:>2} {:02}:{:02}:{:02} {year} GMT",
        MONTHS[(month - 1) as usize],
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

/// OpenSSL's short names of the attribute types certificates carry.
const SHORT_NAMES: &[(&str, &str)] = &[
    ("2.5.4.3", "CN"),
    ("2.5.4.4", "SN"),
    ("2.5.4.5", "serialNumber"),
    ("2.5.4.6", "C"),
    ("2.5.4.7", "L"),
    ("2.5.4.8", "ST"),
    ("2.5.4.9", "street"),
    ("2.5.4.10", "O"),
    ("2.5.4.11", "OU"),
    ("2.5.4.12", "title"),
    ("2.5.4.13", "description"),
    ("2.5.4.15", "businessCategory"),
    ("2.5.4.17", "postalCode"),
    ("2.5.4.41", "name"),
    ("2.5.4.42", "GN"),
    ("2.5.4.43", "initials"),
    ("2.5.4.44", "generationQualifier"),
    ("2.5.4.45", "x500UniqueIdentifier"),
    ("2.5.4.46", "dnQualifier"),
    ("2.5.4.65", "pseudonym"),
    ("2.5.4.97", "organizationIdentifier"),
    ("1.2.840.113549.1.9.1", "emailAddress"),
    ("0.9.2342.19200300.100.1.1", "UID"),
    ("0.9.2342.19200300.100.1.25", "DC"),
    ("1.3.6.1.4.1.311.60.2.1.1", "jurisdictionL"),
    ("1.3.6.1.4.1.311.60.2.1.2", "jurisdictionST"),
    ("1.3.6.1.4.1.311.60.2.1.3", "jurisdictionC"),
];

/// `X509_NAME_print_ex(…, XN_FLAG_RFC2253)`.
fn rfc2253(name: &X509Name<'_>) -> String {
    let mut out = String::new();
    for (i, rdn) in name
        .iter()
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .enumerate()
    {
        if i > 0 {
            out.push(',');
        }
        for (j, atv) in rdn.iter().enumerate() {
            if j > 0 {
                out.push('+');
            }
            let oid = atv.attr_type().to_id_string();
            let known = SHORT_NAMES.iter().find(|(o, _)| *o == oid);
            out.push_str(known.map_or(oid.as_str(), |(_, n)| n));
            out.push('=');
            let value = atv.attr_value();
            let chars = known.and_then(|_| decode(value.header.tag().0, value.data));
            match chars {
                Some(chars) => escape(&chars, &mut out),
                // Unknown fields and types: `#` and the DER in hex.
                None => {
                    out.push('#');
                    for b in value.to_der_vec().unwrap_or_default() {
                        let _ = write!(out, "{b:02X}");
                    }
                }
            }
        }
    }
    out
}

/// The characters of a string of ASN.1 type `tag` (`None`: not a string
/// type OpenSSL prints).
fn decode(tag: u32, data: &[u8]) -> Option<Vec<u32>> {
    match tag {
        12 => Some(
            std::str::from_utf8(data)
                .ok()?
                .chars()
                .map(u32::from)
                .collect(),
        ),
        18 | 19 | 20 | 22 | 23 | 24 | 26 => Some(data.iter().map(|&b| u32::from(b)).collect()),
        28 => Some(
            data.chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect(),
        ),
        30 => Some(
            data.chunks_exact(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .collect(),
        ),
        _ => None,
    }
}

/// OpenSSL's RFC 2253 escaping of a value (`do_buf` with UTF-8
/// conversion): `,+"\<>;` always, `#` and space first, space last,
/// control characters and every byte of a non-ASCII character as `\XX`.
fn escape(chars: &[u32], out: &mut String) {
    let last = chars.len().saturating_sub(1);
    for (i, &c) in chars.iter().enumerate() {
        let mut utf8 = [0u8; 4];
        let bytes: &[u8] = match char::from_u32(c) {
            Some(ch) => ch.encode_utf8(&mut utf8).as_bytes(),
            None => continue,
        };
        for &b in bytes {
            let special = matches!(b, b',' | b'+' | b'"' | b'\\' | b'<' | b'>' | b';')
                || (i == 0 && matches!(b, b'#' | b' '))
                || (i == last && b == b' ');
            if special {
                out.push('\\');
                out.push(b as char);
            } else if !(0x20..0x7f).contains(&b) {
                let _ = write!(out, "\\{b:02X}");
            } else {
                out.push(b as char);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serials_print_as_openssl_does() {
        assert_eq!(serial(&[0x00, 0x9a, 0x01]), "9A01");
        assert_eq!(serial(&[0x01, 0x02]), "0102");
        assert_eq!(serial(&[0x00]), "00");
        assert_eq!(serial(&[0xff]), "-01");
    }

    #[test]
    fn times_print_as_asn1_time_print() {
        assert_eq!(asn1_time(0), "Jan  1 00:00:00 1970 GMT");
        assert_eq!(asn1_time(1_709_251_199), "Feb 29 23:59:59 2024 GMT");
        assert_eq!(asn1_time(4_102_444_800), "Jan  1 00:00:00 2100 GMT");
    }

    #[test]
    fn pem_lines_are_64_wide() {
        let p = pem(&[0u8; 100]);
        let lines: Vec<&str> = p.lines().collect();
        assert_eq!(lines[1].len(), 64);
        assert_eq!(lines[3], "AAAAAA==");
        assert_eq!(lines[4], "-----END CERTIFICATE-----");
    }

    #[test]
    fn values_escape_as_rfc_2253() {
        let mut s = String::new();
        let v: Vec<u32> = " a,b+é#".chars().map(u32::from).collect();
        escape(&v, &mut s);
        assert_eq!(s, "\\ a\\,b\\+\\C3\\A9#");
        let mut s = String::new();
        escape(&"#x ".chars().map(u32::from).collect::<Vec<_>>(), &mut s);
        assert_eq!(s, "\\#x\\ ");
    }
}
