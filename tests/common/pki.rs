//! A private PKI for the Roles Anywhere tests, made with rcgen: a root CA (the trust anchor's),
//! intermediates, and end-entity certificates with RSA 2048 or P-256 keys, written in the
//! forms cert-manager writes (`tls.crt` with the chain after the certificate; `tls.key` as
//! PKCS#1 `RSA PRIVATE KEY` or SEC 1 `EC PRIVATE KEY`) or as PKCS#8 `PRIVATE KEY`.

use aws_lc_rs::encoding::AsDer as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, IsCa, Issuer, KeyPair,
    KeyUsagePurpose, PKCS_ECDSA_P256_SHA256, PKCS_ECDSA_P384_SHA384, PKCS_RSA_SHA256, RsaKeySize,
    SerialNumber,
};

/// The key type of a certificate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Key {
    Rsa2048,
    P256,
    P384,
}

impl Key {
    fn generate(self) -> KeyPair {
        match self {
            Key::Rsa2048 => KeyPair::generate_rsa_for(&PKCS_RSA_SHA256, RsaKeySize::_2048),
            Key::P256 => KeyPair::generate_for(&PKCS_ECDSA_P256_SHA256),
            Key::P384 => KeyPair::generate_for(&PKCS_ECDSA_P384_SHA384),
        }
        .expect("generating a key")
    }
}

/// A certificate authority: a root, or an intermediate under one.
pub(crate) struct Ca {
    pub pem: String,
    pub der: Vec<u8>,
    issuer: Issuer<'static, KeyPair>,
}

/// An end-entity certificate and its key.
pub(crate) struct Leaf {
    pub pem: String,
    pub der: Vec<u8>,
    /// The serial number, big-endian.
    pub serial: Vec<u8>,
    key: KeyPair,
    kind: Key,
}

fn name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::OrganizationName, "ecr-refresh tests");
    name.push(DnType::CommonName, common_name);
    name
}

fn ca_params(common_name: &str) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = name(common_name);
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    params
}

impl Ca {
    /// A self-signed root with a P-256 key.
    pub(crate) fn root(common_name: &str) -> Ca {
        let key = Key::P256.generate();
        let params = ca_params(common_name);
        let cert = params.self_signed(&key).expect("a self-signed CA");
        Ca {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        }
    }

    /// An intermediate CA signed by this one.
    pub(crate) fn intermediate(&self, common_name: &str) -> Ca {
        let key = Key::P256.generate();
        let params = ca_params(common_name);
        let cert = params
            .signed_by(&key, &self.issuer)
            .expect("an intermediate CA");
        Ca {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            issuer: Issuer::new(params, key),
        }
    }

    /// An end-entity certificate for `common_name`, valid from 2020 to 2100, or only in 2021
    /// when `expired`.
    pub(crate) fn leaf(&self, kind: Key, common_name: &str, expired: bool) -> Leaf {
        let (from, to) = if expired {
            ((2021, 1, 1), (2021, 12, 31))
        } else {
            ((2020, 1, 1), (2100, 1, 1))
        };
        self.leaf_valid(kind, common_name, from, to)
    }

    /// An end-entity certificate valid only from 2099 to 2100: not yet valid.
    pub(crate) fn future_leaf(&self, kind: Key, common_name: &str) -> Leaf {
        self.leaf_valid(kind, common_name, (2099, 1, 1), (2100, 1, 1))
    }

    fn leaf_valid(
        &self,
        kind: Key,
        common_name: &str,
        (from_y, from_m, from_d): (i32, u8, u8),
        (to_y, to_m, to_d): (i32, u8, u8),
    ) -> Leaf {
        let key = kind.generate();
        let mut params = CertificateParams::default();
        params.distinguished_name = name(common_name);
        params.is_ca = IsCa::ExplicitNoCa;
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        // A serial past 64 bits: `Credential=` must carry it in decimal, whole.
        let serial: Vec<u8> = std::iter::once(0x5a)
            .chain((0..15).map(|_| fastrand::u8(..)))
            .collect();
        params.serial_number = Some(SerialNumber::from_slice(&serial));
        params.not_before = rcgen::date_time_ymd(from_y, from_m, from_d);
        params.not_after = rcgen::date_time_ymd(to_y, to_m, to_d);
        let cert = params.signed_by(&key, &self.issuer).expect("a leaf");
        Leaf {
            pem: cert.pem(),
            der: cert.der().to_vec(),
            serial,
            key,
            kind,
        }
    }
}

impl Leaf {
    /// The key as PKCS#8 `PRIVATE KEY`.
    pub(crate) fn pkcs8_pem(&self) -> String {
        self.key.serialize_pem()
    }

    /// The key as cert-manager writes it by default: PKCS#1 `RSA PRIVATE KEY` for RSA, SEC 1
    /// `EC PRIVATE KEY` for EC.
    pub(crate) fn traditional_pem(&self) -> String {
        let pkcs8 = self.key.serialize_der();
        match self.kind {
            Key::Rsa2048 => pem("RSA PRIVATE KEY", pkcs8_payload(&pkcs8)),
            Key::P256 | Key::P384 => {
                let algorithm = if self.kind == Key::P256 {
                    &aws_lc_rs::signature::ECDSA_P256_SHA256_ASN1_SIGNING
                } else {
                    &aws_lc_rs::signature::ECDSA_P384_SHA384_ASN1_SIGNING
                };
                let key = aws_lc_rs::signature::EcdsaKeyPair::from_pkcs8(algorithm, &pkcs8)
                    .expect("rcgen's EC key");
                let sec1 = key.private_key().as_der().expect("a SEC 1 encoding");
                pem("EC PRIVATE KEY", sec1.as_ref())
            }
        }
    }

    /// The serial number in decimal, as `Credential=` names it.
    pub(crate) fn serial_decimal(&self) -> String {
        fake_cluster::roles_anywhere::decimal(&self.serial)
    }
}

/// A PEM block.
pub(crate) fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine as _;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = body
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).expect("base64 is ASCII"))
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}

/// The `privateKey` OCTET STRING of a PKCS#8 PrivateKeyInfo (RFC 5208): for RSA, the PKCS#1
/// RSAPrivateKey.
fn pkcs8_payload(der: &[u8]) -> &[u8] {
    // SEQUENCE { INTEGER version, SEQUENCE algorithm, OCTET STRING privateKey, ... }
    let (_, info, _) = tlv(der);
    let (_, _, rest) = tlv(info);
    let (_, _, rest) = tlv(rest);
    let (tag, key, _) = tlv(rest);
    assert_eq!(tag, 0x04, "privateKey is an OCTET STRING");
    key
}

/// One DER element: its tag, its content, and what follows it.
fn tlv(der: &[u8]) -> (u8, &[u8], &[u8]) {
    let tag = der[0];
    let (len, header) = match der[1] {
        short if short < 0x80 => (usize::from(short), 2),
        long => {
            let n = usize::from(long & 0x7f);
            let len = der[2..2 + n]
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            (len, 2 + n)
        }
    };
    (tag, &der[header..header + len], &der[header + len..])
}

/// A throwaway 1024-bit RSA key, as `openssl genrsa 1024` writes it (PKCS#8): rcgen makes no
/// key this short. It signs nothing.
pub(crate) const RSA_1024_PKCS8: &str = "-----BEGIN PRIVATE KEY-----\nMIICdQIBADANBgkqhkiG9w0BAQEFAASCAl8wggJbAgEAAoGBALAcxBtwX4l/zt8H\nNLHhZRVph8/K4iFani9OKjbS4E4l2CfCiM0GY8sGvA36bMS79kT1DOmFZ6eFG+xc\nKrU46pECc9rYg0mcyC7/Vw5HOAZV3sjJlylIlRqPb3odBsG8fXp1xKGnuuJQhvSw\nqfvQDh9MDw+PqmqMIk2fiwVyU043AgMBAAECgYA+UF9fahqT12JGbhFKI3uV4PpK\nHvp2XM795AVx0pnFbQSXxPCMwwcKbn6Z35Me5XcVHTQNaMOtdZ7UuiPubY4pXHa0\n9+buPDy5ptkCBMU7JhQldYxRFEt0Kj/wIv78iCQ88NY1FYEZtB+OGeNWvQDb/rI3\nxn0srVgtH/YatdiysQJBAOPjvq0V0K0PJ/7vChhQujbZbdH0H0PlpwN44iUqNCnu\n06gTJQdQGYjUyrsZpT/IhdyClMxmK1/rzhjVs5RhSz8CQQDF1gI93XUxLXyOpVJF\nA2fFsf/hyq/W0gt03fWyNenoQtdHLwrav7uNUKic7p8XOc8X+reKJcwiFH2akPKS\nmxcJAkB1yC+0paHE0CCL0mAVUSPtVVM9QD8oiHlZghDfxIBRa+5Y4AwzS2LnJZPi\nP874uFr3LUZanjOsz+MlUs4N0nthAkB7GivS6xadPzyeVmjW4MOV1KjwivrXpWPT\nmLnl5n5iNBVZCgCrFVtTF7mTzTfZb/NZbH0AzXw0SKPPphoK985hAkBT0qKCK4kJ\nCIk7MbGcABlgsqh85sGnAUiHNFXqNNnc1hL+s3MYyfs1e+EKgDLRQZ6AmjcgLsMS\nvGyHXu6RXIDF\n-----END PRIVATE KEY-----\n";

/// The same key as `openssl rsa -traditional` writes it (PKCS#1).
pub(crate) const RSA_1024_PKCS1: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIICWwIBAAKBgQCwHMQbcF+Jf87fBzSx4WUVaYfPyuIhWp4vTio20uBOJdgnwojN\nBmPLBrwN+mzEu/ZE9QzphWenhRvsXCq1OOqRAnPa2INJnMgu/1cORzgGVd7IyZcp\nSJUaj296HQbBvH16dcShp7riUIb0sKn70A4fTA8Pj6pqjCJNn4sFclNONwIDAQAB\nAoGAPlBfX2oak9diRm4RSiN7leD6Sh76dlzO/eQFcdKZxW0El8TwjMMHCm5+md+T\nHuV3FR00DWjDrXWe1Loj7m2OKVx2tPfm7jw8uabZAgTFOyYUJXWMURRLdCo/8CL+\n/IgkPPDWNRWBGbQfjhnjVr0A2/6yN8Z9LK1YLR/2GrXYsrECQQDj476tFdCtDyf+\n7woYULo22W3R9B9D5acDeOIlKjQp7tOoEyUHUBmI1Mq7GaU/yIXcgpTMZitf684Y\n1bOUYUs/AkEAxdYCPd11MS18jqVSRQNnxbH/4cqv1tILdN31sjXp6ELXRy8K2r+7\njVConO6fFznPF/q3iiXMIhR9mpDykpsXCQJAdcgvtKWhxNAgi9JgFVEj7VVTPUA/\nKIh5WYIQ38SAUWvuWOAMM0ti5yWT4j/O+Lha9y1GWp4zrM/jJVLODdJ7YQJAexor\n0usWnT88nlZo1uDDldSo8Ir616Vj05i55eZ+YjQVWQoAqxVbUxe5k8032W/zWWx9\nAM18NEijz6YaCvfOYQJAU9KigiuJCQiJOzGxnAAZYLKofObBpwFIhzRV6jTZ3NYS\n/rNzGMn7NXvhCoAy0UGegJo3IC7DErxsh17ukVyAxQ==\n-----END RSA PRIVATE KEY-----\n";
