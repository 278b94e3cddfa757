//! TLS for the test servers: a throwaway certificate authority and server certificate made by
//! `openssl`, and a Redis server that also listens with TLS.

use std::process::Command;

use super::{RedisServer, free_port};

/// A throwaway certificate authority and a certificate it signed for 127.0.0.1 and
/// localhost, made by `openssl` in a temporary directory.
pub struct Certificates {
    dir: tempfile::TempDir,
}

impl Certificates {
    /// Makes the CA and the server's certificate and key (runs `openssl`).
    #[expect(
        clippy::new_without_default,
        reason = "it runs openssl and writes files: not a default value"
    )]
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            let out = Command::new("openssl")
                .args(args)
                .current_dir(dir.path())
                .output()
                .expect("openssl must be installed: run the tests with `cargo xtask test`");
            assert!(
                out.status.success(),
                "openssl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        };
        let ec = [
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
        ];
        let mut ca = vec!["req", "-x509", "-days", "2", "-subj", "/CN=bloom test CA"];
        ca.extend(ec);
        ca.extend([
            "-keyout",
            "ca.key",
            "-out",
            "ca.crt",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign,cRLSign",
        ]);
        run(&ca);
        let mut csr = vec!["req", "-subj", "/CN=127.0.0.1"];
        csr.extend(ec);
        csr.extend(["-keyout", "server.key", "-out", "server.csr"]);
        run(&csr);
        std::fs::write(
            dir.path().join("server.ext"),
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n",
        )
        .unwrap();
        run(&[
            "x509",
            "-req",
            "-days",
            "2",
            "-in",
            "server.csr",
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-extfile",
            "server.ext",
        ]);
        Self { dir }
    }

    /// The CA's certificate (PEM).
    pub fn ca(&self) -> std::path::PathBuf {
        self.dir.path().join("ca.crt")
    }

    fn file(&self, name: &str) -> String {
        self.dir.path().join(name).display().to_string()
    }
}

/// A server that also listens with TLS (on the returned port; the plain port stays for the
/// test's own commands), its certificate signed by `certs`' CA.
pub fn tls_server(certs: &Certificates) -> (RedisServer, u16) {
    let tls_port = free_port(false);
    let server = RedisServer::start_with(&[
        "--tls-port",
        &tls_port.to_string(),
        "--tls-cert-file",
        &certs.file("server.crt"),
        "--tls-key-file",
        &certs.file("server.key"),
        "--tls-ca-cert-file",
        &certs.file("ca.crt"),
        "--tls-auth-clients",
        "no",
    ]);
    (server, tls_port)
}
