//! Tests of the mailer: composing (templates, sender rules, header hygiene) here, delivery in
//! `delivery.rs` against the SMTP server of `server.rs`.

mod delivery;
mod jobs;
mod server;

use std::time::Duration;

use mail_parser::MessageParser;
use serde_json::{Value, json};

use super::*;

const MESSAGE_ID: &str = "<0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b@shopcell>";
/// 2026-03-01T12:00:00Z.
const DATE_MS: i64 = 1_772_366_400_000;

fn config(dir: &std::path::Path) -> MailConfig {
    MailConfig {
        smtp_url: None,
        mail_from: "shopcell <no-reply@platform.example>".into(),
        sender_domains: vec!["shops.example".into()],
        dir: dir.join("mail"),
        ca_files: vec![],
        timeout: Duration::from_secs(5),
        connect_to: None,
    }
}

fn file_mailer() -> (Mailer, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    (Mailer::new(config(dir.path())).unwrap(), dir)
}

/// Values for each template, with a `<script>` in one text value and a `&` in a URL.
fn sample(template: Template) -> Value {
    match template {
        Template::OrderConfirmation => json!({
            "store_name": "Linen & Co <script>alert(1)</script>",
            "order_number": "#1042",
            "lines": [
                {"title": "Linen shirt", "quantity": 2, "amount": "$90.00"},
                {"title": "Wool socks", "quantity": 1, "amount": "$12.50"}
            ],
            "subtotal": "$102.50",
            "discount": "-$10.00",
            "shipping": "$5.00",
            "tax": null,
            "total": "$97.50",
            "shipping_address": ["Ada Lovelace", "12 Example Street", "Springfield 12345"],
            "storefront_url": "https://linen.example/?ref=mail&x=1"
        }),
        Template::PasswordReset => json!({"name": "Ada <script>", "reset_url": "https://app.example/reset?token=abc&u=1"}),
        Template::PasswordChanged => json!({
            "name": "Ada <script>",
            "changed_at": "1 March 2026, 12:00 UTC",
            "reset_url": "https://app.example/forgot?u=1&x=2"
        }),
        Template::Invitation => json!({
            "store_name": "Linen <script>",
            "inviter_name": "Grace Hopper",
            "role": "admin",
            "accept_url": "https://app.example/invitations/abc?x=1&y=2"
        }),
        Template::MemberAdded => {
            json!({"store_name": "Linen <script>", "role": "staff", "admin_url": "https://app.example/stores/1?x=1&y=2"})
        }
        Template::WebhookDisabled => json!({
            "store_name": "Linen <script>",
            "subscription_url": "https://hooks.example/in?a=1&b=2",
            "failing_since": "28 February 2026, 09:00 UTC",
            "reenable_url": "https://app.example/stores/1/webhooks/2?x=1&y=2"
        }),
        Template::ShippingConfirmation => json!({
            "store_name": "Linen & Co <script>alert(1)</script>",
            "order_number": "#1042",
            "lines": [{"title": "Linen shirt <b>", "quantity": 2}, {"title": "Wool socks", "quantity": 1}],
            "tracking": [
                {"number": "1Z999", "company": "UPS", "url": "https://www.ups.com/track?tracknum=1Z999&x=1"},
                {"number": "LOCAL-7", "company": null, "url": null}
            ],
            "shipping_address": ["Ada Lovelace", "12 Example Street", "Springfield 12345"],
            "storefront_url": "https://linen.example/?ref=mail&x=1"
        }),
        Template::TrackingUpdate => json!({
            "store_name": "Linen <script>",
            "order_number": "#1042",
            "shipment_status": "Out for delivery",
            "tracking": [{"number": "1Z999", "company": "UPS", "url": "https://www.ups.com/track?tracknum=1Z999&x=1"}],
            "storefront_url": "https://linen.example/?ref=mail&x=1"
        }),
    }
}

fn letter(template: Template, sender: Sender) -> Letter {
    Letter {
        to: "Ada Lovelace <ada@customer.example>".into(),
        language: "en".into(),
        sender,
        template,
        values: sample(template),
        message_id: MESSAGE_ID.into(),
        date_ms: DATE_MS,
    }
}

fn store(name: &str, email_from: Option<&str>, reply_to: Option<&str>) -> Sender {
    Sender::Store { name: name.into(), email_from: email_from.map(Into::into), reply_to: reply_to.map(Into::into) }
}

/// The header block of a message, one entry per header (continuation lines unfolded).
fn headers(bytes: &[u8]) -> Vec<String> {
    let text = String::from_utf8(bytes.to_vec()).unwrap();
    let head = text.split("\r\n\r\n").next().unwrap();
    let mut out: Vec<String> = Vec::new();
    for line in head.split("\r\n") {
        match (line.starts_with([' ', '\t']), out.last_mut()) {
            (true, Some(last)) => last.push_str(line),
            _ => out.push(line.to_string()),
        }
    }
    out
}

fn header_names(bytes: &[u8]) -> Vec<String> {
    headers(bytes).iter().map(|h| h.split(':').next().unwrap().to_ascii_lowercase()).collect()
}

/// (display name, address) of a parsed address header.
fn addr(a: Option<&mail_parser::Address>) -> (Option<String>, String) {
    let first = a.and_then(|a| a.first()).expect("an address");
    (first.name().map(str::to_string), first.address().unwrap_or_default().to_string())
}

#[test]
fn every_template_renders_both_parts_with_its_values_escaped_in_html() {
    let (mailer, _dir) = file_mailer();
    for template in Template::ALL {
        let composed = mailer.compose(&letter(template, Sender::Platform)).unwrap();
        let message = MessageParser::default().parse(&composed.bytes).unwrap();
        let text = message.body_text(0).unwrap().into_owned();
        let html = message.body_html(0).unwrap().into_owned();
        let values = sample(template);
        for (key, value) in values.as_object().unwrap() {
            let Some(value) = value.as_str() else { continue };
            assert!(text.contains(value), "{template:?}: text lacks {key}={value}:\n{text}");
            let escaped = value.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('/', "&#x2f;");
            assert!(html.contains(&escaped), "{template:?}: html lacks {key}={escaped}:\n{html}");
        }
        assert!(!html.contains("<script"), "{template:?}: unescaped script in html");
        assert!(message.subject().is_some_and(|s| !s.is_empty()), "{template:?}: no subject");
        // Links are links in the HTML part.
        for (key, value) in values.as_object().unwrap() {
            if key.ends_with("_url") && key != "subscription_url" {
                let escaped = value.as_str().unwrap().replace('&', "&amp;").replace('/', "&#x2f;");
                assert!(html.contains(&format!("href=\"{escaped}\"")), "{template:?}: no link to {key}:\n{html}");
            }
        }
    }
}

#[test]
fn order_confirmation_lists_lines_totals_and_address() {
    let (mailer, _dir) = file_mailer();
    let composed = mailer.compose(&letter(Template::OrderConfirmation, Sender::Platform)).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    let text = message.body_text(0).unwrap().into_owned();
    let html = message.body_html(0).unwrap().into_owned();
    for expected in
        ["- Linen shirt x 2: $90.00", "- Wool socks x 1: $12.50", "Discount: -$10.00", "Total: $97.50", "12 Example Street"]
    {
        assert!(text.contains(expected), "text lacks {expected:?}:\n{text}");
    }
    assert!(!text.contains("Tax:"), "a null tax is left out:\n{text}");
    assert!(html.contains("Wool socks &times; 1") && html.contains("Springfield 12345"), "{html}");
    assert_eq!(message.subject(), Some("Your order #1042 from Linen & Co <script>alert(1)</script>"));

    // Without the optional fields the mail still renders, without the link.
    let mut bare = letter(Template::OrderConfirmation, Sender::Platform);
    for key in ["storefront_url", "discount", "shipping", "tax"] {
        bare.values.as_object_mut().unwrap().remove(key);
    }
    let composed = mailer.compose(&bare).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    assert!(!message.body_text(0).unwrap().contains("Visit the store"));
}

#[test]
fn shipping_mails_list_what_shipped_and_link_each_tracking_number() {
    let (mailer, _dir) = file_mailer();
    let composed = mailer.compose(&letter(Template::ShippingConfirmation, Sender::Platform)).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    let text = message.body_text(0).unwrap().into_owned();
    let html = message.body_html(0).unwrap().into_owned();
    let lines: Vec<&str> = text.lines().collect();
    for expected in [
        "- Linen shirt <b> x 2",
        "- Wool socks x 1",
        "- UPS 1Z999: https://www.ups.com/track?tracknum=1Z999&x=1",
        "- LOCAL-7",
        "12 Example Street",
    ] {
        assert!(lines.contains(&expected), "text lacks the line {expected:?}:\n{text}");
    }
    assert!(html.contains("Linen shirt &lt;b&gt; &times; 2"), "{html}");
    assert!(html.contains("UPS <a href=\"https:&#x2f;&#x2f;www.ups.com&#x2f;track?tracknum=1Z999&amp;x=1\">1Z999</a>"), "{html}");
    assert!(html.contains("<br>LOCAL-7"), "a number without a link stays text:\n{html}");
    assert_eq!(message.subject(), Some("Your order #1042 from Linen & Co <script>alert(1)</script> is on its way"));

    let composed = mailer.compose(&letter(Template::TrackingUpdate, Sender::Platform)).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    let text = message.body_text(0).unwrap().into_owned();
    assert!(text.contains("Your order #1042 from Linen <script>: Out for delivery."), "{text}");
    assert!(text.lines().any(|l| l == "Tracking: UPS 1Z999: https://www.ups.com/track?tracknum=1Z999&x=1"), "{text}");
    assert_eq!(message.subject(), Some("Shipping update for your order #1042 from Linen <script>"));
}

#[test]
fn compose_is_deterministic_and_sets_the_given_identity_and_date() {
    let (mailer, _dir) = file_mailer();
    let l = letter(Template::PasswordReset, Sender::Platform);
    let a = mailer.compose(&l).unwrap();
    assert_eq!(a, mailer.compose(&l).unwrap());
    assert_eq!(a.message_id, MESSAGE_ID);
    assert_eq!(a.from, "no-reply@platform.example");
    assert_eq!(a.to, vec!["ada@customer.example".to_string()]);
    let message = MessageParser::default().parse(&a.bytes).unwrap();
    assert_eq!(message.message_id(), Some(&MESSAGE_ID[1..MESSAGE_ID.len() - 1]));
    assert_eq!(message.date().unwrap().to_timestamp() * 1000, DATE_MS);
    assert_eq!(addr(message.to()), (Some("Ada Lovelace".into()), "ada@customer.example".into()));
    assert!(headers(&a.bytes).contains(&"Auto-Submitted: auto-generated".to_string()));
    // A job row round trip keeps it whole.
    let stored = bincode::serde::encode_to_vec(&a, bincode::config::standard()).unwrap();
    let (back, _): (Composed, _) = bincode::serde::decode_from_slice(&stored, bincode::config::standard()).unwrap();
    assert_eq!(back, a);
}

#[test]
fn an_unknown_language_falls_back_to_english() {
    let (mailer, _dir) = file_mailer();
    let english = mailer.compose(&letter(Template::Invitation, Sender::Platform)).unwrap();
    for language in ["fr", "EN-gb", "", "xx-YY"] {
        let mut l = letter(Template::Invitation, Sender::Platform);
        l.language = language.into();
        assert_eq!(mailer.compose(&l).unwrap(), english, "{language:?}");
    }
}

#[test]
fn platform_mail_comes_from_mail_from() {
    let (mailer, _dir) = file_mailer();
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    assert_eq!(addr(message.from()), (Some("shopcell".into()), "no-reply@platform.example".into()));
    assert!(message.reply_to().is_none());
}

#[test]
fn store_mail_from_its_own_address_on_a_sender_domain() {
    let (mailer, _dir) = file_mailer();
    let sender = store("Linen & Co", Some("orders@Shops.Example"), None);
    let composed = mailer.compose(&letter(Template::OrderConfirmation, sender)).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    assert_eq!(addr(message.from()), (Some("Linen & Co".into()), "orders@Shops.Example".into()));
    assert!(message.reply_to().is_none());
    assert_eq!(composed.from, "orders@Shops.Example");
}

#[test]
fn store_mail_from_another_domain_goes_out_under_the_platform_address() {
    let (mailer, _dir) = file_mailer();
    let sender = store("Linen & Co", Some("owner@gmail.example"), None);
    let composed = mailer.compose(&letter(Template::OrderConfirmation, sender)).unwrap();
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    assert_eq!(addr(message.from()), (Some("Linen & Co".into()), "no-reply@platform.example".into()));
    assert_eq!(addr(message.reply_to()), (None, "owner@gmail.example".into()));
    assert_eq!(composed.from, "no-reply@platform.example", "the envelope is the platform's, for SPF");
}

#[test]
fn a_stores_reply_to_wins() {
    let (mailer, _dir) = file_mailer();
    for email_from in [Some("owner@gmail.example"), Some("orders@shops.example"), None] {
        let sender = store("Linen", email_from, Some("help@linen.example"));
        let composed = mailer.compose(&letter(Template::OrderConfirmation, sender)).unwrap();
        let message = MessageParser::default().parse(&composed.bytes).unwrap();
        assert_eq!(addr(message.reply_to()), (None, "help@linen.example".into()), "{email_from:?}");
    }
    // Unusable optional addresses are left out rather than failing the mail.
    let sender = store("Linen", Some("not an address"), Some("nor\r\nthis@x.example"));
    let composed = mailer.compose(&letter(Template::OrderConfirmation, sender)).unwrap();
    assert!(!header_names(&composed.bytes).contains(&"reply-to".to_string()));
}

#[test]
fn control_characters_never_inject_headers() {
    let (mailer, _dir) = file_mailer();
    let mut l = letter(Template::Invitation, store("Evil\r\nBcc: x@y.z", Some("a@gmail.example\r\nBcc: x@y.z"), None));
    l.values["store_name"] = json!("Evil\r\nBcc: x@y.z\r\n\r\nbody");
    l.values["inviter_name"] = json!("Mallory\nCc: x@y.z");
    let composed = mailer.compose(&l).unwrap();
    let names = header_names(&composed.bytes);
    assert!(!names.iter().any(|n| n == "bcc" || n == "cc"), "{names:?}");
    assert_eq!(composed.to, vec!["ada@customer.example".to_string()]);
    let message = MessageParser::default().parse(&composed.bytes).unwrap();
    assert_eq!(addr(message.from()).0.as_deref(), Some("Evil Bcc: x@y.z"));
    assert_eq!(message.subject(), Some("Mallory Cc: x@y.z invited you to Evil Bcc: x@y.z body"));
    assert!(message.reply_to().is_none(), "an address with a line break is dropped");

    // A recipient or Message-ID with a line break is refused outright.
    let mut l = letter(Template::PasswordReset, Sender::Platform);
    l.to = "ada@customer.example\r\nBcc: x@y.z".into();
    assert!(matches!(mailer.compose(&l), Err(MailError::Final(_))));
    let mut l = letter(Template::PasswordReset, Sender::Platform);
    l.message_id = "<a@b>\r\nBcc: x@y.z".into();
    assert!(matches!(mailer.compose(&l), Err(MailError::Final(_))));
}

/// A change that spoils a letter.
type Change = Box<dyn Fn(&mut Letter)>;

#[test]
fn invalid_letters_are_final() {
    let (mailer, _dir) = file_mailer();
    let cases: Vec<(&str, Change)> = vec![
        ("recipient", Box::new(|l| l.to = "not-an-address".into())),
        ("empty recipient", Box::new(|l| l.to = String::new())),
        ("message id", Box::new(|l| l.message_id = "no-brackets@shopcell".into())),
        ("message id without @", Box::new(|l| l.message_id = "<abc>".into())),
        ("missing value", Box::new(|l| l.values = json!({"name": "Ada"}))),
        ("values not an object", Box::new(|l| l.values = json!(["x"]))),
        ("javascript link", Box::new(|l| l.values["reset_url"] = json!("javascript:alert(1)"))),
        ("date", Box::new(|l| l.date_ms = -1)),
    ];
    for (what, change) in cases {
        let mut l = letter(Template::PasswordReset, Sender::Platform);
        change(&mut l);
        match mailer.compose(&l) {
            Err(MailError::Final(reason)) => assert!(!reason.is_empty()),
            other => panic!("{what}: {other:?}"),
        }
    }
}

#[test]
fn the_configuration_is_checked_and_errors_name_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let with = |url: &str| Mailer::new(MailConfig { smtp_url: Some(url.into()), ..config(dir.path()) }).err();
    for bad in ["http://user:secret@mail.example", "smtp://", "smtp://user:secret@:587", "mail.example:587", "smtp://h/path"] {
        let err = with(bad).unwrap_or_else(|| panic!("{bad} accepted"));
        assert!(err.contains("--smtp-url"), "{bad}: {err}");
        assert!(!err.contains("secret"), "{bad}: {err}");
    }
    assert!(with("smtps://u:p@mail.example").is_none());
    assert!(with("smtp://mail.example:2525").is_none());
    let err = Mailer::new(MailConfig { mail_from: "not a mailbox".into(), ..config(dir.path()) }).err().unwrap();
    assert!(err.contains("--mail-from"), "{err}");
    let missing = dir.path().join("missing.pem");
    let err =
        Mailer::new(MailConfig { smtp_url: Some("smtps://mail.example".into()), ca_files: vec![missing], ..config(dir.path()) })
            .err()
            .unwrap();
    assert!(err.contains("missing.pem"), "{err}");
}

#[test]
fn smtp_urls_parse_with_default_ports_and_decoded_credentials() {
    let url = smtp::parse_url("smtps://me%40x.example:p%3Ass@Mail.Example").unwrap();
    assert_eq!(
        url,
        smtp::SmtpUrl {
            implicit_tls: true,
            host: "mail.example".into(),
            port: 465,
            credentials: Some(("me@x.example".into(), "p:ss".into()))
        }
    );
    let url = smtp::parse_url("smtp://[::1]:2525/").unwrap();
    assert_eq!((url.implicit_tls, url.host.as_str(), url.port, url.credentials), (false, "::1", 2525, None));
    assert_eq!(smtp::parse_url("smtp://mail.example").unwrap().port, 587);
}

#[test]
fn eml_file_names_are_safe_and_distinct() {
    assert_eq!(eml::file_name(MESSAGE_ID), "0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b@shopcell.eml");
    assert_eq!(eml::file_name("<../../etc/passwd@x>"), "_2e._2f.._2fetc_2fpasswd@x.eml");
    assert_ne!(eml::file_name("<a+b@x>"), eml::file_name("<a_b@x>"));
    assert_eq!(eml::file_name(&format!("<{}@x>", "a".repeat(300))).len(), 64 + 4);
}

#[test]
fn mail_args_build_the_config() {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        mail: crate::cli::MailArgs,
    }
    let cli =
        Cli::try_parse_from(["x", "--mail-sender-domain", "a.example,b.example", "--mail-sender-domain", "c.example"]).unwrap();
    let config = cli.mail.config(std::path::Path::new("/data"), vec!["/ca.pem".into()]);
    assert_eq!(config.sender_domains, ["a.example", "b.example", "c.example"]);
    assert_eq!(config.dir, std::path::Path::new("/data/mail"));
    assert_eq!(config.ca_files, [std::path::PathBuf::from("/ca.pem")]);
    assert!(config.smtp_url.is_none() || std::env::var("SHOPCELL_SMTP_URL").is_ok());
    if std::env::var("SHOPCELL_MAIL_FROM").is_err() {
        assert_eq!(config.mail_from, "shopcell <no-reply@localhost>");
    }
    assert!(Mailer::new(crate::cli::MailArgs::default().config(std::path::Path::new("/data"), vec![])).is_ok());
}
