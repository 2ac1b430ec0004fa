//! The certificate, its chain and its key, read from their PEM files at each run (so that
//! cert-manager's renewals need nothing more), and checked against each other before anything
//! is sent.
//!
//! The forms read are the ones cert-manager writes (`tls.crt`: the certificate, then the
//! intermediates; `tls.key`: PKCS#1 `RSA PRIVATE KEY` or SEC 1 `EC PRIVATE KEY` by default,
//! PKCS#8 `PRIVATE KEY` with `privateKey.encoding: PKCS8`) and openssl's. The CA (`ca.crt`) is
//! never read: the trust anchor holds it on AWS's side. Keys: RSA (2048 bits or more), EC P-256
//! and P-384. Roles Anywhere signs with SHA-256 whatever the curve (`AWS4-X509-ECDSA-SHA256`;
//! AWS's helper passes `crypto.SHA256` for every key): aws-lc-rs signs RSA and P-256 so, and
//! P-384 only with SHA-384, so a P-384 key signs a SHA-256 prehash with RustCrypto's p384.

use std::fmt;
use std::path::Path;
use std::time::SystemTime;

use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair, KeyPair as _, RsaKeyPair,
};
use rustls_pki_types::pem::{self, PemObject as _};
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use secrecy::{ExposeSecret as _, SecretSlice};
use x509_cert::Certificate;
use x509_cert::der::Decode as _;

use super::RolesAnywhere;

/// Why the certificate, the chain or the key can't be used, found before anything is sent.
/// Each names the variable and the file; none quotes the key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdentityError {
    #[error(
        "{variable}: cannot read {path}: {error}; check the certificate Secret's volume and its mount"
    )]
    Unreadable {
        variable: &'static str,
        path: String,
        error: String,
    },
    #[error("{variable}: {path} {why}")]
    Malformed {
        variable: &'static str,
        path: String,
        why: String,
    },
    #[error(
        "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY: {path} {why}; Roles Anywhere signs with RSA \
         (2048 bits or more), EC P-256 or EC P-384 keys, unencrypted, in PEM (PKCS#8, PKCS#1 or SEC 1)"
    )]
    UnsupportedKey { path: String, why: String },
    #[error(
        "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY: the key in {key} is not the key of the certificate \
         in {certificate} (ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE, serial {serial}); mount the \
         tls.key and tls.crt of the same Secret"
    )]
    KeyMismatch {
        key: String,
        certificate: String,
        serial: String,
    },
}

/// The signing key. Its bytes stay inside aws-lc-rs or p384, which print none of them.
pub(super) enum SigningKey {
    Rsa(RsaKeyPair),
    EcP256(EcdsaKeyPair),
    EcP384(p384::ecdsa::SigningKey, Vec<u8>),
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rsa(_) => "SigningKey::Rsa([redacted])",
            Self::EcP256(_) => "SigningKey::EcP256([redacted])",
            Self::EcP384(..) => "SigningKey::EcP384([redacted])",
        })
    }
}

impl SigningKey {
    /// The signature algorithm CreateSession names: `AWS4-X509-RSA-SHA256` or
    /// `AWS4-X509-ECDSA-SHA256`.
    pub(super) fn algorithm(&self) -> &'static str {
        match self {
            Self::Rsa(_) => "AWS4-X509-RSA-SHA256",
            Self::EcP256(_) | Self::EcP384(..) => "AWS4-X509-ECDSA-SHA256",
        }
    }

    /// `message` signed with SHA-256: RSA PKCS#1 v1.5, or ECDSA as an ASN.1 DER
    /// `Ecdsa-Sig-Value`, as AWS's helper signs (`rsa.SignPKCS1v15`, `ecdsa.SignASN1`).
    pub(super) fn sign(&self, message: &[u8]) -> Vec<u8> {
        let rng = aws_lc_rs::rand::SystemRandom::new();
        match self {
            Self::Rsa(key) => {
                let mut signature = vec![0; key.public_modulus_len()];
                key.sign(
                    &aws_lc_rs::signature::RSA_PKCS1_SHA256,
                    &rng,
                    message,
                    &mut signature,
                )
                .expect("an RSA key aws-lc-rs accepted signs");
                signature
            }
            Self::EcP256(key) => key
                .sign(&rng, message)
                .expect("an EC key aws-lc-rs accepted signs")
                .as_ref()
                .to_vec(),
            Self::EcP384(key, _) => {
                use p384::ecdsa::signature::hazmat::PrehashSigner as _;
                use sha2::Digest as _;
                let prehash = sha2::Sha256::digest(message);
                let signature: p384::ecdsa::DerSignature = key
                    .sign_prehash(&prehash)
                    .expect("a P-384 key signs a 32-byte prehash");
                signature.as_bytes().to_vec()
            }
        }
    }

    /// The public key as the certificate's SubjectPublicKeyInfo carries it in its bit string:
    /// RSAPublicKey DER, or the uncompressed EC point.
    fn public_key(&self) -> &[u8] {
        match self {
            Self::Rsa(key) => key.public_key().as_ref(),
            Self::EcP256(key) => key.public_key().as_ref(),
            Self::EcP384(_, public) => public,
        }
    }
}

/// The certificate and key of one run, read and checked.
#[derive(Debug)]
pub struct Identity {
    /// The end-entity certificate, DER (sent in `X-Amz-X509`).
    pub certificate: Vec<u8>,
    /// The intermediates, DER, in file order (sent in `X-Amz-X509-Chain`).
    pub chain: Vec<Vec<u8>>,
    /// The certificate's serial number in decimal, as `Credential=` names it.
    pub serial: String,
    /// The certificate's subject (RFC 4514), for the logs and the trust policy's conditions.
    pub subject: String,
    pub not_before: SystemTime,
    pub not_after: SystemTime,
    pub(super) key: SigningKey,
}

impl Identity {
    /// Reads the certificate (the first block of ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE; its
    /// further blocks are intermediates), the chain file's blocks after them, and the key,
    /// which must be the certificate's.
    pub fn load(config: &RolesAnywhere) -> Result<Self, IdentityError> {
        const CERTIFICATE: &str = "ECR_REFRESH_ROLES_ANYWHERE_CERTIFICATE";
        const CHAIN: &str = "ECR_REFRESH_ROLES_ANYWHERE_CHAIN";
        let mut blocks = certificates(CERTIFICATE, &config.certificate)?;
        if blocks.is_empty() {
            return Err(malformed(
                CERTIFICATE,
                &config.certificate,
                "holds no PEM CERTIFICATE block",
            ));
        }
        let certificate = blocks.remove(0);
        let mut chain = blocks;
        if let Some(path) = &config.chain {
            for block in certificates(CHAIN, path)? {
                // cert-manager's tls.crt and a bundle often both hold the intermediates: each is sent once.
                if block != certificate && !chain.contains(&block) {
                    chain.push(block);
                }
            }
        }
        for block in &chain {
            parse(
                CHAIN,
                config.chain.as_deref().unwrap_or(&config.certificate),
                block,
            )?;
        }
        let parsed = parse(CERTIFICATE, &config.certificate, &certificate)?;
        let tbs = parsed.tbs_certificate();
        let serial = decimal(tbs.serial_number().as_bytes());
        let spki = tbs.subject_public_key_info();
        let key = signing_key(&config.private_key)?;
        let matches = spki
            .subject_public_key
            .as_bytes()
            .is_some_and(|bits| bits == key.public_key());
        if !matches {
            return Err(IdentityError::KeyMismatch {
                key: display(&config.private_key),
                certificate: display(&config.certificate),
                serial,
            });
        }
        Ok(Self {
            serial,
            subject: tbs.subject().to_string(),
            not_before: tbs.validity().not_before.to_system_time(),
            not_after: tbs.validity().not_after.to_system_time(),
            certificate,
            chain,
            key,
        })
    }

    /// The signature algorithm of CreateSession's `Authorization`.
    pub fn algorithm(&self) -> &'static str {
        self.key.algorithm()
    }
}

fn display(path: &Path) -> String {
    path.display().to_string()
}

fn malformed(variable: &'static str, path: &Path, why: &str) -> IdentityError {
    IdentityError::Malformed {
        variable,
        path: display(path),
        why: why.to_owned(),
    }
}

fn read(variable: &'static str, path: &Path) -> Result<Vec<u8>, IdentityError> {
    std::fs::read(path).map_err(|e| IdentityError::Unreadable {
        variable,
        path: display(path),
        error: e.to_string(),
    })
}

/// Every CERTIFICATE block of the file, DER, in order.
fn certificates(variable: &'static str, path: &Path) -> Result<Vec<Vec<u8>>, IdentityError> {
    let bytes = read(variable, path)?;
    CertificateDer::pem_slice_iter(&bytes)
        .map(|c| c.map(|c| c.to_vec()))
        .collect::<Result<Vec<_>, pem::Error>>()
        .map_err(|e| malformed(variable, path, &format!("is not PEM: {e}")))
}

fn parse(variable: &'static str, path: &Path, der: &[u8]) -> Result<Certificate, IdentityError> {
    Certificate::from_der(der).map_err(|e| {
        malformed(
            variable,
            path,
            &format!("holds a CERTIFICATE block that is not an X.509 certificate: {e}"),
        )
    })
}

/// The key of the file: PKCS#8, PKCS#1 (RSA) or SEC 1 (EC), unencrypted.
fn signing_key(path: &Path) -> Result<SigningKey, IdentityError> {
    const VARIABLE: &str = "ECR_REFRESH_ROLES_ANYWHERE_PRIVATE_KEY";
    let bytes = SecretSlice::from(read(VARIABLE, path)?);
    let unsupported = |why: &str| IdentityError::UnsupportedKey {
        path: display(path),
        why: why.to_owned(),
    };
    // Only the PEM labels are quoted, never the key's bytes.
    let text = bytes.expose_secret();
    if contains(text, b"-----BEGIN ENCRYPTED PRIVATE KEY-----")
        || contains(text, b"Proc-Type: 4,ENCRYPTED")
    {
        return Err(unsupported("holds an encrypted key"));
    }
    let der = match PrivateKeyDer::from_pem_slice(text) {
        Ok(der) => der,
        Err(pem::Error::NoItemsFound) => {
            return Err(unsupported(
                "holds no PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY block",
            ));
        }
        Err(_) => return Err(unsupported("is not PEM")),
    };
    let rsa = |key: RsaKeyPair| {
        if key.public_modulus_len() * 8 < 2048 {
            Err(unsupported("holds an RSA key shorter than 2048 bits"))
        } else {
            Ok(SigningKey::Rsa(key))
        }
    };
    let ec = |der: &[u8]| {
        if let Ok(key) = EcdsaKeyPair::from_private_key_der(&ECDSA_P256_SHA256_ASN1_SIGNING, der) {
            return Ok(SigningKey::EcP256(key));
        }
        use p384::pkcs8::DecodePrivateKey as _;
        let p384 = p384::SecretKey::from_sec1_der(der)
            .ok()
            .or_else(|| p384::SecretKey::from_pkcs8_der(der).ok());
        if let Some(secret) = p384 {
            let key = p384::ecdsa::SigningKey::from(&secret);
            let public = key.verifying_key().to_sec1_point(false).as_bytes().to_vec();
            return Ok(SigningKey::EcP384(key, public));
        }
        Err(unsupported(
            "holds an EC key on a curve other than P-256 and P-384",
        ))
    };
    // aws-lc-rs refuses an RSA key under 2048 bits as `TooSmall`: said as what to change.
    let refused = |e: aws_lc_rs::error::KeyRejected| {
        if e.description_() == "TooSmall" {
            unsupported("holds an RSA key shorter than 2048 bits")
        } else {
            unsupported(&format!("holds an RSA key aws-lc-rs refuses: {e}"))
        }
    };
    match &der {
        PrivateKeyDer::Pkcs1(key) => RsaKeyPair::from_der(key.secret_pkcs1_der())
            .map_err(refused)
            .and_then(rsa),
        PrivateKeyDer::Sec1(key) => ec(key.secret_sec1_der()),
        PrivateKeyDer::Pkcs8(key) => {
            let der = key.secret_pkcs8_der();
            match pkcs8_algorithm(der) {
                Some(Pkcs8Algorithm::Rsa) => {
                    RsaKeyPair::from_pkcs8(der).map_err(refused).and_then(rsa)
                }
                Some(Pkcs8Algorithm::Ec) => ec(der),
                Some(Pkcs8Algorithm::Other(oid)) => Err(unsupported(&format!(
                    "holds a PKCS#8 key that is neither RSA nor EC P-256 or P-384 (algorithm \
                     {oid}; Ed25519, DSA and others are not taken)"
                ))),
                None => Err(unsupported("holds a PRIVATE KEY block that is not PKCS#8")),
            }
        }
        _ => Err(unsupported(
            "holds a key of a kind Roles Anywhere does not take",
        )),
    }
}

/// The algorithm a PKCS#8 key names (its `privateKeyAlgorithm`), which says how to read it:
/// RSA is read as RSA only and EC as EC only, so a refusal names the right reason.
#[derive(Debug, PartialEq, Eq)]
enum Pkcs8Algorithm {
    Rsa,
    Ec,
    Other(String),
}

fn pkcs8_algorithm(der: &[u8]) -> Option<Pkcs8Algorithm> {
    use p384::pkcs8::{ObjectIdentifier, PrivateKeyInfoRef};
    // rsaEncryption (RFC 8017) and id-ecPublicKey (RFC 5480).
    const RSA: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.113549.1.1.1");
    const EC: ObjectIdentifier = ObjectIdentifier::new_unwrap("1.2.840.10045.2.1");
    let info = PrivateKeyInfoRef::try_from(der).ok()?;
    let oid = info.algorithm.oid;
    Some(if oid == RSA {
        Pkcs8Algorithm::Rsa
    } else if oid == EC {
        Pkcs8Algorithm::Ec
    } else {
        Pkcs8Algorithm::Other(oid.to_string())
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// A DER INTEGER's big-endian bytes (a serial number: positive) in decimal.
fn decimal(bytes: &[u8]) -> String {
    let mut number: Vec<u8> = bytes.iter().copied().skip_while(|b| *b == 0).collect();
    let mut digits = Vec::new();
    while !number.is_empty() {
        let mut remainder = 0u32;
        for byte in &mut number {
            let value = (remainder << 8) | u32::from(*byte);
            *byte = (value / 10) as u8;
            remainder = value % 10;
        }
        digits.push(b'0' + remainder as u8);
        let leading = number.iter().take_while(|b| **b == 0).count();
        number.drain(..leading);
    }
    if digits.is_empty() {
        return "0".into();
    }
    digits.reverse();
    String::from_utf8(digits).expect("ASCII digits")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn serial_numbers_are_written_in_decimal_as_go_s_big_int_writes_them() {
        assert_eq!(decimal(&[]), "0");
        assert_eq!(decimal(&[0]), "0");
        assert_eq!(decimal(&[0x01]), "1");
        assert_eq!(decimal(&[0x00, 0xff]), "255");
        assert_eq!(decimal(&[0x01, 0x00]), "256");
        // 2^71 - 1, past u64.
        assert_eq!(
            decimal(&[0x7f, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
            "2361183241434822606847"
        );
    }

    #[test]
    fn a_pkcs8_key_is_read_as_the_algorithm_it_names() {
        let der = |pem: &str| {
            PrivateKeyDer::from_pem_slice(pem.as_bytes())
                .expect("PEM")
                .secret_der()
                .to_vec()
        };
        let rsa =
            rcgen::KeyPair::generate_rsa_for(&rcgen::PKCS_RSA_SHA256, rcgen::RsaKeySize::_2048)
                .expect("an RSA key");
        assert_eq!(
            pkcs8_algorithm(&der(&rsa.serialize_pem())),
            Some(Pkcs8Algorithm::Rsa)
        );
        let p256 = aws_lc_rs::signature::EcdsaKeyPair::generate(&ECDSA_P256_SHA256_ASN1_SIGNING)
            .expect("a P-256 key");
        let p256 = p256.to_pkcs8v1().expect("PKCS#8");
        assert_eq!(pkcs8_algorithm(p256.as_ref()), Some(Pkcs8Algorithm::Ec));
        let ed25519 = aws_lc_rs::signature::Ed25519KeyPair::generate().expect("an Ed25519 key");
        let ed25519 = ed25519.to_pkcs8v1().expect("PKCS#8");
        assert_eq!(
            pkcs8_algorithm(ed25519.as_ref()),
            Some(Pkcs8Algorithm::Other("1.3.101.112".into()))
        );
        assert_eq!(pkcs8_algorithm(b"not DER"), None);
    }
}
