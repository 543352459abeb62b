//! Delivery over SMTP: `--smtp-url` parsed into a lettre transport, and lettre's errors sorted
//! into retry or give up.
//!
//! TLS is never optional: `smtps://` speaks TLS from the first byte, `smtp://` requires STARTTLS
//! (a server that does not offer it gets nothing, not even the envelope). Certificates are
//! checked against the URL's host name with the webpki roots and the configured CA files.

use std::time::Duration;

use lettre::address::Envelope;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::client::{Certificate, Tls, TlsParameters};
use lettre::{Address, AsyncSmtpTransport, AsyncTransport, Tokio1Executor};

use super::{Composed, MailConfig, MailError};

/// How many step timeouts a whole delivery may take: a server that answers each step just in
/// time still cannot hold a delivery for long.
const DELIVERY_STEPS: u32 = 3;

/// The SMTP transport of `--smtp-url`. One connection per delivery: mail is sent now and then,
/// so a pool would mostly hold idle connections the server closes anyway.
pub(super) struct Smtp {
    transport: AsyncSmtpTransport<Tokio1Executor>,
    deadline: Duration,
}

/// `--smtp-url`, parsed.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct SmtpUrl {
    pub implicit_tls: bool,
    /// The host name (or address) the certificate must be valid for.
    pub host: String,
    pub port: u16,
    pub credentials: Option<(String, String)>,
}

impl Smtp {
    pub(super) fn new(url: &str, config: &MailConfig) -> Result<Smtp, String> {
        let parsed = parse_url(url)?;
        let mut tls = TlsParameters::builder(parsed.host.clone());
        for path in &config.ca_files {
            let pem = std::fs::read(path).map_err(|e| format!("CA file {}: {e}", path.display()))?;
            if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                return Err(format!("CA file {}: no PEM certificate in it", path.display()));
            }
            let cert = Certificate::from_pem(&pem).map_err(|e| format!("CA file {}: {e}", path.display()))?;
            tls = tls.add_root_certificate(cert);
        }
        let tls = tls.build_rustls().map_err(|e| format!("--smtp-url: TLS setup: {e}"))?;
        let tls = if parsed.implicit_tls { Tls::Wrapper(tls) } else { Tls::Required(tls) };
        let (server, port) = match config.connect_to {
            Some(addr) => (addr.ip().to_string(), addr.port()),
            None => (parsed.host.clone(), parsed.port),
        };
        // "Dangerous" only in that this builder starts without TLS; TLS is set on the next line.
        let mut builder =
            AsyncSmtpTransport::<Tokio1Executor>::builder_dangerous(server).port(port).tls(tls).timeout(Some(config.timeout));
        if let Some((user, password)) = parsed.credentials {
            builder = builder.credentials(Credentials::new(user, password));
        }
        Ok(Smtp { transport: builder.build(), deadline: config.timeout * DELIVERY_STEPS })
    }

    pub(super) async fn send(&self, mail: &Composed) -> Result<(), MailError> {
        let bad = |_| MailError::Final("the envelope holds an invalid address".into());
        let from: Address = mail.from.parse().map_err(bad)?;
        let to = mail.to.iter().map(|a| a.parse::<Address>()).collect::<Result<Vec<_>, _>>().map_err(bad)?;
        let envelope = Envelope::new(Some(from), to).map_err(|_| MailError::Final("the envelope has no recipient".into()))?;
        match tokio::time::timeout(self.deadline, self.transport.send_raw(&envelope, &mail.bytes)).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(classify(&e)),
            Err(_) => Err(MailError::Retry("the mail server did not finish in time".into())),
        }
    }
}

/// 5xx replies are final; everything else (4xx, connection, TLS, timeouts, a connection closed
/// mid-message, a server without STARTTLS) may pass later.
fn classify(e: &lettre::transport::smtp::Error) -> MailError {
    // lettre nests its errors ("Connection error: Connection error: invalid peer certificate…"):
    // the innermost one says what happened, the reply code says how the server answered.
    let mut inner: &dyn std::error::Error = e;
    while let Some(source) = inner.source() {
        inner = source;
    }
    let detail = match e.status() {
        Some(code) => short(&format!("{code} {inner}")),
        None => short(&inner.to_string()),
    };
    if e.is_permanent() {
        MailError::Final(format!("the mail server refused the message: {detail}"))
    } else if e.is_transient() {
        MailError::Retry(format!("the mail server deferred the message: {detail}"))
    } else if e.is_timeout() {
        MailError::Retry("the mail server did not answer in time".into())
    } else if e.is_tls() {
        MailError::Retry(format!("TLS with the mail server failed: {detail}"))
    } else {
        MailError::Retry(format!("could not deliver to the mail server: {detail}"))
    }
}

/// Error text for a job row: one line, at most 200 characters.
fn short(s: &str) -> String {
    let line = super::compose::one_line(s);
    match line.char_indices().nth(200) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line,
    }
}

/// Parses `smtps://user:pass@host:465` or `smtp://user:pass@host:587`. The error names the flag
/// and never shows the password.
pub(super) fn parse_url(raw: &str) -> Result<SmtpUrl, String> {
    let url = url::Url::parse(raw).map_err(|e| format!("--smtp-url {}: {e}", redact(raw)))?;
    let fail = |why: &str| format!("--smtp-url {}: {why}", redact(raw));
    let (implicit_tls, default_port) = match url.scheme() {
        "smtps" => (true, 465),
        "smtp" => (false, 587),
        _ => return Err(fail("use smtps://HOST:465 (implicit TLS) or smtp://HOST:587 (STARTTLS)")),
    };
    let host = match url.host() {
        Some(url::Host::Domain(d)) if !d.is_empty() => d.to_ascii_lowercase(),
        Some(url::Host::Ipv4(ip)) => ip.to_string(),
        Some(url::Host::Ipv6(ip)) => ip.to_string(),
        _ => return Err(fail("missing host")),
    };
    if !matches!(url.path(), "" | "/") || url.query().is_some() || url.fragment().is_some() {
        return Err(fail("only a user, password, host and port are read; remove the path and query"));
    }
    let decode = |s: &str| percent_encoding::percent_decode_str(s).decode_utf8().map(|s| s.into_owned());
    let credentials = match (url.username(), url.password()) {
        ("", None) => None,
        (user, password) => {
            let user = decode(user).map_err(|_| fail("the user is not UTF-8"))?;
            let password = decode(password.unwrap_or_default()).map_err(|_| fail("the password is not UTF-8"))?;
            Some((user, password))
        }
    };
    Ok(SmtpUrl { implicit_tls, host, port: url.port().unwrap_or(default_port), credentials })
}

/// The URL without its credentials, for error messages.
fn redact(raw: &str) -> String {
    match (raw.split_once("://"), raw.rfind('@')) {
        (Some((scheme, _)), Some(at)) => format!("{scheme}://***@{}", &raw[at + 1..]),
        _ => raw.to_string(),
    }
}
