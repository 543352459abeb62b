//! An SMTP server for the tests: enough of the protocol for lettre (greeting, EHLO, STARTTLS,
//! implicit TLS, AUTH PLAIN and LOGIN, MAIL, RCPT, DATA, QUIT), with switches for the failures
//! the mailer must sort (no STARTTLS, another certificate name, 4xx and 5xx replies, a
//! connection dropped mid-message, a server that never speaks).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair, KeyUsagePurpose};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::TlsAcceptor;

/// A test certificate authority, written to a PEM file the mailer trusts.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    pub pem_file: PathBuf,
    _dir: tempfile::TempDir,
}

impl TestCa {
    pub fn new() -> TestCa {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(rcgen::DnType::CommonName, "shopcell test CA");
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let pem_file = dir.path().join("ca.pem");
        std::fs::write(&pem_file, issuer.pem()).unwrap();
        TestCa { issuer, pem_file, _dir: dir }
    }

    /// A TLS acceptor with a certificate for `name`, signed by this CA.
    fn acceptor(&self, name: &str) -> TlsAcceptor {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_string()]).unwrap().signed_by(&key, &self.issuer).unwrap();
        let chain = vec![cert.der().clone(), CertificateDer::from(self.issuer.der().to_vec())];
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .unwrap();
        TlsAcceptor::from(Arc::new(config))
    }
}

/// How the server behaves.
#[derive(Clone)]
pub struct Behaviour {
    /// TLS from the first byte (smtps) rather than plain text upgraded by STARTTLS.
    pub implicit_tls: bool,
    /// Whether EHLO offers STARTTLS on a plain-text connection.
    pub starttls: bool,
    /// The name on the server's certificate.
    pub cert_name: &'static str,
    /// Required credentials: AUTH is offered (after TLS) and checked.
    pub auth: Option<(&'static str, &'static str)>,
    /// The reply to RCPT TO (`250 …` when `None`).
    pub rcpt_reply: Option<&'static str>,
    /// Closes the connection after the first line of the message.
    pub drop_mid_data: bool,
    /// Accepts connections and never says a word.
    pub silent: bool,
}

impl Default for Behaviour {
    fn default() -> Self {
        Behaviour {
            implicit_tls: false,
            starttls: true,
            cert_name: "mail.test",
            auth: None,
            rcpt_reply: None,
            drop_mid_data: false,
            silent: false,
        }
    }
}

/// A message the server accepted.
#[derive(Debug, Clone)]
pub struct Received {
    pub from: String,
    pub to: Vec<String>,
    /// The message as sent, dot-stuffing undone, without the final `.` line.
    pub data: Vec<u8>,
    pub tls: bool,
    pub auth_user: Option<String>,
}

/// What the server saw: every command line (AUTH secrets left out) and every accepted message.
#[derive(Default, Debug)]
pub struct Log {
    pub commands: Vec<String>,
    pub messages: Vec<Received>,
}

pub struct TestServer {
    pub addr: SocketAddr,
    pub log: Arc<Mutex<Log>>,
}

impl TestServer {
    pub async fn start(ca: &TestCa, behaviour: Behaviour) -> TestServer {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let log = Arc::new(Mutex::new(Log::default()));
        let acceptor = ca.acceptor(behaviour.cert_name);
        let shared = log.clone();
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                let (behaviour, acceptor, log) = (behaviour.clone(), acceptor.clone(), shared.clone());
                tokio::spawn(async move { session(tcp, behaviour, acceptor, log).await });
            }
        });
        TestServer { addr, log }
    }

    pub fn messages(&self) -> Vec<Received> {
        self.log.lock().unwrap().messages.clone()
    }

    pub fn commands(&self) -> Vec<String> {
        self.log.lock().unwrap().commands.clone()
    }
}

async fn session(tcp: TcpStream, b: Behaviour, acceptor: TlsAcceptor, log: Arc<Mutex<Log>>) {
    if b.silent {
        let _keep = tcp;
        tokio::time::sleep(std::time::Duration::from_secs(30)).await;
        return;
    }
    if b.implicit_tls {
        if let Ok(tls) = acceptor.accept(tcp).await {
            converse(tls, true, true, &b, &log).await;
        }
        return;
    }
    if let Some(tcp) = converse(tcp, false, true, &b, &log).await
        && let Ok(tls) = acceptor.accept(tcp).await
    {
        converse(tls, true, false, &b, &log).await;
    }
}

/// One SMTP conversation on `stream`; returns the stream when the client asked for STARTTLS.
async fn converse<S: AsyncRead + AsyncWrite + Unpin>(
    stream: S,
    tls: bool,
    greet: bool,
    b: &Behaviour,
    log: &Mutex<Log>,
) -> Option<S> {
    let mut io = BufReader::new(stream);
    if greet && !reply(&mut io, "220 mail.test ESMTP test\r\n").await {
        return None;
    }
    let (mut from, mut to, mut auth_user) = (String::new(), Vec::new(), None);
    loop {
        let line = read_line(&mut io).await?;
        let upper = line.to_ascii_uppercase();
        let logged = if upper.starts_with("AUTH") { "AUTH".to_string() } else { line.clone() };
        log.lock().unwrap().commands.push(logged);
        let ok = if upper.starts_with("EHLO") || upper.starts_with("HELO") {
            let mut text = String::from("250-mail.test\r\n");
            if !tls && b.starttls {
                text.push_str("250-STARTTLS\r\n");
            }
            if tls && b.auth.is_some() {
                text.push_str("250-AUTH PLAIN LOGIN\r\n");
            }
            text.push_str("250 8BITMIME\r\n");
            reply(&mut io, &text).await
        } else if upper == "STARTTLS" && !tls && b.starttls {
            reply(&mut io, "220 2.0.0 ready to start TLS\r\n").await;
            return Some(io.into_inner());
        } else if upper.starts_with("AUTH PLAIN ") {
            let decoded = STANDARD.decode(line[11..].trim()).unwrap_or_default();
            let parts: Vec<String> = decoded.split(|b| *b == 0).map(|p| String::from_utf8_lossy(p).into_owned()).collect();
            let given = (parts.get(1).cloned().unwrap_or_default(), parts.get(2).cloned().unwrap_or_default());
            auth_reply(&mut io, b, given, &mut auth_user).await
        } else if upper == "AUTH LOGIN" {
            reply(&mut io, "334 VXNlcm5hbWU6\r\n").await;
            let user = decode_line(&mut io).await?;
            reply(&mut io, "334 UGFzc3dvcmQ6\r\n").await;
            let password = decode_line(&mut io).await?;
            auth_reply(&mut io, b, (user, password), &mut auth_user).await
        } else if upper.starts_with("MAIL FROM:") {
            if b.auth.is_some() && auth_user.is_none() {
                reply(&mut io, "530 5.7.0 authentication required\r\n").await
            } else {
                from = angle(&line);
                reply(&mut io, "250 2.1.0 ok\r\n").await
            }
        } else if upper.starts_with("RCPT TO:") {
            match b.rcpt_reply {
                Some(answer) => reply(&mut io, &format!("{answer}\r\n")).await,
                None => {
                    to.push(angle(&line));
                    reply(&mut io, "250 2.1.5 ok\r\n").await
                }
            }
        } else if upper == "DATA" {
            reply(&mut io, "354 end with <CRLF>.<CRLF>\r\n").await;
            let mut data = Vec::new();
            loop {
                let mut raw = Vec::new();
                if io.read_until(b'\n', &mut raw).await.ok()? == 0 {
                    return None;
                }
                if b.drop_mid_data {
                    return None;
                }
                if raw == b".\r\n" {
                    break;
                }
                let unstuffed = if raw.starts_with(b"..") { &raw[1..] } else { &raw[..] };
                data.extend_from_slice(unstuffed);
            }
            let message = Received { from: from.clone(), to: to.clone(), data, tls, auth_user: auth_user.clone() };
            log.lock().unwrap().messages.push(message);
            reply(&mut io, "250 2.0.0 queued\r\n").await
        } else if upper == "QUIT" {
            reply(&mut io, "221 2.0.0 bye\r\n").await;
            return None;
        } else if upper == "RSET" || upper == "NOOP" {
            reply(&mut io, "250 2.0.0 ok\r\n").await
        } else {
            reply(&mut io, "500 5.5.2 unknown command\r\n").await
        };
        if !ok {
            return None;
        }
    }
}

async fn reply<S: AsyncRead + AsyncWrite + Unpin>(io: &mut BufReader<S>, text: &str) -> bool {
    io.get_mut().write_all(text.as_bytes()).await.is_ok()
}

async fn auth_reply<S: AsyncRead + AsyncWrite + Unpin>(
    io: &mut BufReader<S>,
    b: &Behaviour,
    given: (String, String),
    auth_user: &mut Option<String>,
) -> bool {
    let expected = b.auth.map(|(u, p)| (u.to_string(), p.to_string()));
    let text = if expected.as_ref() == Some(&given) {
        *auth_user = Some(given.0);
        "235 2.7.0 authenticated\r\n"
    } else {
        "535 5.7.8 bad credentials\r\n"
    };
    reply(io, text).await
}

async fn read_line<S: AsyncRead + Unpin>(io: &mut BufReader<S>) -> Option<String> {
    let mut line = String::new();
    match io.read_line(&mut line).await {
        Ok(0) | Err(_) => None,
        Ok(_) => Some(line.trim_end_matches(['\r', '\n']).to_string()),
    }
}

async fn decode_line<S: AsyncRead + Unpin>(io: &mut BufReader<S>) -> Option<String> {
    let line = read_line(io).await?;
    Some(String::from_utf8_lossy(&STANDARD.decode(line.trim()).unwrap_or_default()).into_owned())
}

/// The address between `<` and `>` in a MAIL or RCPT command.
fn angle(line: &str) -> String {
    let start = line.find('<').map_or(0, |i| i + 1);
    let end = line[start..].find('>').map_or(line.len(), |i| start + i);
    line[start..end].to_string()
}
