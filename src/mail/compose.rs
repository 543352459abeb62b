//! Composing: the sender rules, header hygiene and the MIME message (text and HTML
//! alternatives). Pure: everything comes from the letter and the configuration.

use std::time::{Duration, UNIX_EPOCH};

use lettre::Address;
use lettre::message::header::{Header, HeaderName, HeaderValue};
use lettre::message::{Mailbox, MultiPart, SinglePart};

use super::{Composed, Inner, Letter, MailError, Sender};

/// The longest Message-ID accepted: it also names the `.eml` file.
const MAX_MESSAGE_ID: usize = 200;

pub(super) fn compose(inner: &Inner, letter: &Letter) -> Result<Composed, MailError> {
    check_message_id(&letter.message_id)?;
    let to = recipient(&letter.to)?;
    let date = u64::try_from(letter.date_ms)
        .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
        .map_err(|_| MailError::Final("the date is before 1970".into()))?;
    check_values(&letter.values)?;
    let rendered = inner.templates.render(&letter.language, letter.template, &letter.values).map_err(MailError::Final)?;
    let (from, reply_to) = sender(inner, &letter.sender);

    let text = body_text(&rendered.text);
    let html = body_text(&rendered.html);
    let mut builder = lettre::Message::builder()
        .from(from)
        .to(to)
        .subject(one_line(&rendered.subject))
        .date(date)
        .message_id(Some(letter.message_id.clone()))
        .header(AutoSubmitted);
    if let Some(reply_to) = reply_to {
        builder = builder.reply_to(reply_to);
    }
    let body = MultiPart::alternative()
        .boundary(boundary(&text, &html))
        .singlepart(SinglePart::plain(text))
        .singlepart(SinglePart::html(html));
    let message = builder.multipart(body).map_err(|e| MailError::Final(format!("cannot build the message: {e}")))?;
    let envelope = message.envelope();
    let from = envelope.from().map(|a| a.to_string()).unwrap_or_default();
    let to = envelope.to().iter().map(|a| a.to_string()).collect();
    Ok(Composed { message_id: letter.message_id.clone(), from, to, bytes: message.formatted() })
}

/// `Auto-Submitted: auto-generated` (RFC 3834): vacation responders and other robots do not
/// answer the platform's mail.
#[derive(Clone)]
struct AutoSubmitted;

impl Header for AutoSubmitted {
    fn name() -> HeaderName {
        HeaderName::new_from_ascii_str("Auto-Submitted")
    }

    fn parse(_: &str) -> Result<Self, Box<dyn std::error::Error + Send + Sync>> {
        Ok(AutoSubmitted)
    }

    fn display(&self) -> HeaderValue {
        HeaderValue::new(Self::name(), "auto-generated".into())
    }
}

/// Header text on one line: control characters and line breaks become spaces, runs of
/// whitespace one space. What makes a value safe to put in a header: no CR or LF survives.
pub(super) fn one_line(s: &str) -> String {
    s.split(|c: char| c.is_control() || c.is_whitespace()).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ")
}

/// A body: line breaks normalised (lettre writes them as CRLF), other control characters but
/// tabs dropped.
fn body_text(s: &str) -> String {
    s.replace("\r\n", "\n").replace('\r', "\n").chars().filter(|c| !c.is_control() || *c == '\n' || *c == '\t').collect()
}

/// The multipart boundary, derived from the two bodies: the same letter gives the same bytes,
/// and no value can contain it (it would have to contain a hash of itself).
fn boundary(text: &str, html: &str) -> String {
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    ctx.update(text.as_bytes());
    ctx.update(&[0]);
    ctx.update(html.as_bytes());
    let digest = ctx.finish();
    let hex: String = digest.as_ref()[..16].iter().map(|b| format!("{b:02x}")).collect();
    format!("shopcell-{hex}")
}

/// `<local@domain>`: printable ASCII, no spaces or angle brackets inside, one `@`.
fn check_message_id(id: &str) -> Result<(), MailError> {
    let inner = id.strip_prefix('<').and_then(|s| s.strip_suffix('>')).unwrap_or_default();
    let ok = id.len() <= MAX_MESSAGE_ID
        && inner.split('@').count() == 2
        && inner.split('@').all(|part| !part.is_empty())
        && inner.bytes().all(|b| b.is_ascii_graphic() && b != b'<' && b != b'>');
    if ok { Ok(()) } else { Err(MailError::Final("the Message-ID is not of the form <id@domain>".into())) }
}

fn recipient(to: &str) -> Result<Mailbox, MailError> {
    if to.chars().any(char::is_control) {
        return Err(MailError::Final("the recipient address holds control characters".into()));
    }
    let mailbox: Mailbox = to.trim().parse().map_err(|_| MailError::Final("the recipient address is not valid".into()))?;
    // A display name from the caller is kept, on one line.
    Ok(Mailbox::new(mailbox.name.as_deref().map(one_line).filter(|n| !n.is_empty()), mailbox.email))
}

/// The values are an object; every `…_url` field is an http(s) URL, so no template links to
/// `javascript:` or a `data:` page.
fn check_values(values: &serde_json::Value) -> Result<(), MailError> {
    let object = values.as_object().ok_or_else(|| MailError::Final("the template values are not an object".into()))?;
    for (key, value) in object {
        if !key.ends_with("_url") || value.is_null() {
            continue;
        }
        let url = value.as_str().unwrap_or_default();
        let lower = url.to_ascii_lowercase();
        let web = lower.starts_with("https://") || lower.starts_with("http://");
        if !web || url.chars().any(|c| c.is_control() || c.is_whitespace()) {
            return Err(MailError::Final(format!("the value {key} is not an http(s) URL")));
        }
    }
    Ok(())
}

/// An optional address given by a store: unusable ones are left out rather than failing the
/// mail, since the store's mail is still worth sending from the platform's address.
fn address(s: Option<&str>) -> Option<Address> {
    let s = s?.trim();
    if s.chars().any(char::is_control) {
        return None;
    }
    s.parse().ok()
}

/// From and Reply-To under the sender rules (see [`Sender`]). A store may only use its own
/// address as From on a domain the operator listed (whose SPF and DKIM the platform's server
/// satisfies); anywhere else its mail would fail those checks, so it goes out under the
/// platform's address with the store's name, and replies still reach the store.
fn sender(inner: &Inner, sender: &Sender) -> (Mailbox, Option<Mailbox>) {
    match sender {
        Sender::Platform => (inner.from.clone(), None),
        Sender::Store { name, email_from, reply_to } => {
            let name = Some(one_line(name)).filter(|n| !n.is_empty());
            let email_from = address(email_from.as_deref());
            let reply_to = address(reply_to.as_deref());
            match email_from {
                Some(own) if inner.sender_domains.iter().any(|d| own.domain().eq_ignore_ascii_case(d)) => {
                    (Mailbox::new(name, own), reply_to.map(|a| Mailbox::new(None, a)))
                }
                other => {
                    let platform = Mailbox::new(name.or_else(|| inner.from.name.clone()), inner.from.email.clone());
                    (platform, reply_to.or(other).map(|a| Mailbox::new(None, a)))
                }
            }
        }
    }
}
