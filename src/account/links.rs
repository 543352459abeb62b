//! One-use link tokens (password resets, invitations) and the mail that carries them. A token is
//! 32 random bytes, URL-safe base64 in the link's fragment (never sent to a server by the
//! browser, never in access logs) and kept only as its SHA-256: a copy of the database opens no
//! account.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;

use crate::error::{ApiError, ApiResult};
use crate::mail::{Letter, Sender, Template};

/// A new link token: its text (for the link) and the digest that is stored.
pub struct LinkToken {
    pub text: String,
    pub digest: [u8; 32],
}

impl LinkToken {
    /// 32 fresh random bytes.
    pub fn fresh() -> LinkToken {
        let raw = crate::util::random_bytes::<32>();
        LinkToken { text: URL_SAFE_NO_PAD.encode(raw), digest: sha256(&raw) }
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

/// The stored digest of a presented token; anything that is not 32 bytes of URL-safe base64 is
/// the same 400 naming `token` as an unknown one.
pub fn digest_of(text: &str) -> ApiResult<[u8; 32]> {
    let raw = URL_SAFE_NO_PAD.decode(text.trim().trim_end_matches('=')).map_err(|_| invalid_token())?;
    if raw.len() != 32 {
        return Err(invalid_token());
    }
    Ok(sha256(&raw))
}

/// A token that is unknown, altered, spent or expired: one answer for all, so a guesser learns
/// nothing.
pub fn invalid_token() -> ApiError {
    ApiError::field("token", "is invalid, expired or already used; ask for a new link")
}

/// The link `<public URL><page>#token=<token>`.
pub fn link(public_url: &str, page: &str, token: &str) -> String {
    format!("{}{page}#token={token}", public_url.trim_end_matches('/'))
}

/// A letter from the platform, in English (accounts keep no language).
pub fn letter(to: &str, template: Template, values: serde_json::Value) -> Letter {
    Letter {
        to: to.to_string(),
        language: "en".into(),
        sender: Sender::Platform,
        template,
        values,
        message_id: String::new(),
        date_ms: 0,
    }
}

/// A mail's "on <date>": `2026-11-27 00:29 UTC`.
pub fn mail_time(ms: i64) -> String {
    let t = crate::domain::time::rfc3339(ms);
    match (t.get(..10), t.get(11..16)) {
        (Some(day), Some(time)) => format!("{day} {time} UTC"),
        _ => t,
    }
}

/// Checks a `--public-url`: an absolute http or https URL, kept without a trailing slash.
pub fn parse_public_url(s: &str) -> Result<String, String> {
    let url = s.trim().trim_end_matches('/');
    let rest = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !host.contains(char::is_whitespace) && !host.contains(['#', '?']) => {
            Ok(url.to_string())
        }
        _ => Err(format!("expected an http:// or https:// URL, got {s:?}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_is_found_by_its_digest_and_nothing_else() {
        let t = LinkToken::fresh();
        assert_eq!(t.text.len(), 43);
        assert_eq!(digest_of(&t.text).unwrap(), t.digest);
        let mut altered = t.text.clone().into_bytes();
        altered[5] = if altered[5] == b'A' { b'B' } else { b'A' };
        assert_ne!(digest_of(std::str::from_utf8(&altered).unwrap()).unwrap(), t.digest);
        assert_eq!(digest_of("short").unwrap_err().fields[0].field, "token");
        assert_eq!(digest_of("not base64 at all!!").unwrap_err().fields[0].field, "token");
    }

    #[test]
    fn public_urls_are_http_or_https() {
        assert_eq!(parse_public_url("https://shop.example/").unwrap(), "https://shop.example");
        assert_eq!(parse_public_url("http://127.0.0.1:8080").unwrap(), "http://127.0.0.1:8080");
        assert!(parse_public_url("ftp://shop.example").is_err());
        assert!(parse_public_url("https://").is_err());
        assert!(parse_public_url("shop.example").is_err());
        assert_eq!(link("https://a.example/", "/admin/x", "T"), "https://a.example/admin/x#token=T");
        assert_eq!(mail_time(0), "1970-01-01 00:00 UTC");
    }
}
