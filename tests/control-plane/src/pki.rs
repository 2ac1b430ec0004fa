//! Keys and certificates for one run, made with the `openssl` command (no crate in the
//! tree makes certificates, and the tool is on every machine that builds Kubernetes).

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::process::run;

pub(crate) struct Pki {
    /// The CA that signed the serving certificate: what a client trusts.
    pub(crate) ca: PathBuf,
    pub(crate) serving_cert: PathBuf,
    pub(crate) serving_key: PathBuf,
    /// The service-account token signing key pair (ES256).
    pub(crate) sa_key: PathBuf,
    pub(crate) sa_pub: PathBuf,
}

/// Writes a CA, a serving certificate for 127.0.0.1 and localhost signed by it, and a
/// service-account signing key pair into `dir`.
pub(crate) fn generate(dir: &Path) -> Result<Pki, String> {
    let pki = Pki {
        ca: dir.join("ca.crt"),
        serving_cert: dir.join("apiserver.crt"),
        serving_key: dir.join("apiserver.key"),
        sa_key: dir.join("service-account.key"),
        sa_pub: dir.join("service-account.pub"),
    };
    let ca_key = dir.join("ca.key");
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    run(
        openssl(dir)
            .args(["req", "-x509", "-days", "7"])
            .args(ec)
            .arg("-keyout")
            .arg(&ca_key)
            .arg("-out")
            .arg(&pki.ca)
            .args(["-subj", "/CN=ecr-refresh-control-plane-ca"])
            .args(["-addext", "basicConstraints=critical,CA:TRUE"])
            .args(["-addext", "keyUsage=critical,keyCertSign,cRLSign"]),
        "the control plane's CA",
    )?;
    run(
        openssl(dir)
            .args(["req", "-x509", "-days", "7", "-CA"])
            .arg(&pki.ca)
            .arg("-CAkey")
            .arg(&ca_key)
            .args(ec)
            .arg("-keyout")
            .arg(&pki.serving_key)
            .arg("-out")
            .arg(&pki.serving_cert)
            .args(["-subj", "/CN=kube-apiserver"])
            .args(["-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"])
            .args(["-addext", "basicConstraints=critical,CA:FALSE"])
            .args(["-addext", "keyUsage=critical,digitalSignature"])
            .args(["-addext", "extendedKeyUsage=serverAuth"]),
        "kube-apiserver's serving certificate",
    )?;
    run(
        openssl(dir)
            .args([
                "genpkey",
                "-algorithm",
                "EC",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-out",
            ])
            .arg(&pki.sa_key),
        "the service-account signing key",
    )?;
    run(
        openssl(dir)
            .args(["pkey", "-pubout", "-in"])
            .arg(&pki.sa_key)
            .arg("-out")
            .arg(&pki.sa_pub),
        "the service-account public key",
    )?;
    Ok(pki)
}

fn openssl(dir: &Path) -> Command {
    let mut command = Command::new("openssl");
    // Run in the temporary directory, so that nothing (a .rnd, a serial file) lands elsewhere.
    command.current_dir(dir);
    command
}
