//! The one mailer: every mail the platform sends is composed and delivered here.
//!
//! Composing and delivering are separate steps. [`Mailer::compose`] is pure: given the same
//! [`Letter`] (which carries its own Message-ID and date, read from the process clock by the
//! caller) it returns the same bytes. The durable job runner stores the [`Letter`] in a job row,
//! composes it when the job runs (never inside the write that sends it) and calls
//! [`Mailer::deliver`] until it succeeds, retrying on [`MailError::Retry`] and giving up on
//! [`MailError::Final`].
//!
//! Delivery goes to the SMTP server of `--smtp-url` (implicit TLS for `smtps://`, STARTTLS
//! required for `smtp://`, never plain text), or, without one, to `<data>/mail/<id>.eml` files.
//! See `docs/mail.md`.

mod compose;
mod eml;
pub mod job;
mod smtp;
mod templates;

#[cfg(test)]
mod tests;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use serde::{Deserialize, Serialize};

pub use templates::{DEFAULT_LANGUAGE, Template};

/// How the mailer sends: built by `cli::MailArgs::config`.
#[derive(Debug, Clone)]
pub struct MailConfig {
    /// `smtps://user:pass@host:465` or `smtp://user:pass@host:587`; `None` writes `.eml` files.
    pub smtp_url: Option<String>,
    /// The platform's sender, `Name <address>`; also the address store mail falls back to.
    pub mail_from: String,
    /// Domains whose addresses a store may send from directly (its `email_from`).
    pub sender_domains: Vec<String>,
    /// Where `.eml` files go without an SMTP server: `<data>/mail`.
    pub dir: PathBuf,
    /// PEM files of extra root certificates trusted for the SMTP server (beside the webpki roots).
    pub ca_files: Vec<PathBuf>,
    /// How long each step of an SMTP conversation may take; a whole delivery gets three times it.
    pub timeout: Duration,
    /// Connects to this address instead of the URL's host, while the certificate is still checked
    /// against the URL's host name. For tests (a server on 127.0.0.1 with a certificate for
    /// `mail.test`); `None` in production.
    pub connect_to: Option<SocketAddr>,
}

/// Sends mail. Cheap to clone: every clone shares the templates and the SMTP transport.
#[derive(Clone)]
pub struct Mailer(Arc<Inner>);

struct Inner {
    templates: templates::Templates,
    /// `--mail-from`, parsed.
    from: Mailbox,
    /// Lowercased, without a leading `@`.
    sender_domains: Vec<String>,
    /// Where messages go without an SMTP server.
    mailbox: Arc<eml::Mailbox>,
    smtp: Option<smtp::Smtp>,
}

/// One mail to compose. Kept in its job row as it is (bincode; the values as JSON text, which
/// bincode cannot carry as a tree): the fields are appended to, never reordered.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Letter {
    /// The recipient's address (`a@b.c` or `Name <a@b.c>`).
    pub to: String,
    /// The recipient's language (`en`, `en-GB`); unknown languages fall back to English.
    pub language: String,
    pub sender: Sender,
    pub template: Template,
    /// The template's values: a JSON object with the fields listed on [`Template`].
    #[serde(with = "json_text")]
    pub values: serde_json::Value,
    /// The stable identity of the mail, `<uuid@shopcell>`: the same for every delivery attempt.
    pub message_id: String,
    /// The `Date` header, Unix milliseconds from the process clock.
    pub date_ms: i64,
}

/// Who a mail comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Sender {
    /// The platform itself (sign-in mail): From `--mail-from`.
    Platform,
    /// A store. From `email_from` when its domain is one of `--mail-sender-domain`; otherwise
    /// From `--mail-from`'s address under the store's name, with `email_from` as Reply-To.
    /// A `reply_to` is always the Reply-To.
    Store { name: String, email_from: Option<String>, reply_to: Option<String> },
}

/// A composed message, ready to deliver and to store in a job row.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Composed {
    pub message_id: String,
    /// The envelope sender (SMTP `MAIL FROM`).
    pub from: String,
    /// The envelope recipients (SMTP `RCPT TO`).
    pub to: Vec<String>,
    /// The RFC 5322 message, CRLF line endings.
    pub bytes: Vec<u8>,
}

/// A JSON value kept as its text: the job codec (bincode) is not self-describing.
mod json_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &serde_json::Value, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&value.to_string())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<serde_json::Value, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}

/// Why a mail was not composed or delivered. The reason is short text without secrets, fit for a
/// job row and a log line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MailError {
    /// May succeed later (connection, TLS, timeout, a 4xx reply): deliver again.
    Retry(String),
    /// Will never succeed (a 5xx reply, an invalid address or letter): give up.
    Final(String),
}

impl std::fmt::Display for MailError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            MailError::Retry(reason) => write!(f, "mail not delivered yet: {reason}"),
            MailError::Final(reason) => write!(f, "mail not delivered: {reason}"),
        }
    }
}

impl std::error::Error for MailError {}

impl Mailer {
    /// Checks the configuration (the SMTP URL, `--mail-from`, the CA files) and loads the
    /// templates. The error names the flag at fault.
    pub fn new(config: MailConfig) -> Result<Mailer, String> {
        let templates = templates::Templates::load()?;
        let from: Mailbox = compose::one_line(&config.mail_from)
            .parse()
            .map_err(|e| format!("--mail-from {:?} is not a mailbox (Name <address>): {e}", config.mail_from))?;
        let sender_domains = config
            .sender_domains
            .iter()
            .map(|d| d.trim().trim_start_matches('@').to_ascii_lowercase())
            .filter(|d| !d.is_empty())
            .collect();
        let smtp = match &config.smtp_url {
            Some(url) => Some(smtp::Smtp::new(url, &config)?),
            None => None,
        };
        Ok(Mailer(Arc::new(Inner { templates, from, sender_domains, mailbox: eml::Mailbox::new(config.dir), smtp })))
    }

    /// A mailer writing `.eml` files under `dir` from the default sender: what a process built
    /// in code has until it is given the operator's ([`crate::cli::MailArgs`]).
    pub fn offline(dir: &std::path::Path) -> Result<Mailer, String> {
        Mailer::new(MailConfig {
            smtp_url: None,
            mail_from: "shopcell <no-reply@localhost>".into(),
            sender_domains: Vec::new(),
            dir: dir.to_path_buf(),
            ca_files: Vec::new(),
            timeout: Duration::from_secs(30),
            connect_to: None,
        })
    }

    /// Renders `letter` into a message. Deterministic: the same letter gives the same bytes.
    /// An invalid recipient, Message-ID or value is [`MailError::Final`].
    pub fn compose(&self, letter: &Letter) -> Result<Composed, MailError> {
        compose::compose(&self.0, letter)
    }

    /// Delivers a composed message: to the SMTP server, or as `<dir>/<message-id>.eml`, where a
    /// second delivery of the same Message-ID replaces the file.
    pub async fn deliver(&self, mail: &Composed) -> Result<(), MailError> {
        match &self.0.smtp {
            Some(smtp) => smtp.send(mail).await,
            None => self.0.mailbox.write(mail).await,
        }
    }
}
