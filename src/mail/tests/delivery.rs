//! Delivery: over SMTP to the test server (STARTTLS, implicit TLS, and every failure sorted into
//! retry or give up), and to `.eml` files.

use std::time::Duration;

use mail_parser::MessageParser;

use super::server::{Behaviour, TestCa, TestServer};
use super::*;

/// A mailer that sends to `server` as `mail.test`, trusting `ca`.
fn smtp_mailer(ca: &TestCa, server: &TestServer, scheme: &str, timeout: Duration) -> Mailer {
    let dir = tempfile::tempdir().unwrap();
    Mailer::new(MailConfig {
        smtp_url: Some(format!("{scheme}://shop%40cell:pa%3Ass@mail.test")),
        ca_files: vec![ca.pem_file.clone()],
        timeout,
        connect_to: Some(server.addr),
        ..config(dir.path())
    })
    .unwrap()
}

async fn deliver_with(behaviour: Behaviour, scheme: &str) -> (Result<(), MailError>, TestServer, Composed) {
    let ca = TestCa::new();
    let server = TestServer::start(&ca, behaviour).await;
    let mailer = smtp_mailer(&ca, &server, scheme, Duration::from_secs(5));
    let sender = store("Linen & Co", Some("owner@gmail.example"), None);
    let composed = mailer.compose(&letter(Template::OrderConfirmation, sender)).unwrap();
    let result = mailer.deliver(&composed).await;
    (result, server, composed)
}

fn auth() -> Behaviour {
    Behaviour { auth: Some(("shop@cell", "pa:ss")), ..Behaviour::default() }
}

#[tokio::test]
async fn starttls_delivers_the_exact_message() {
    let (result, server, composed) = deliver_with(auth(), "smtp").await;
    result.unwrap();
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    let received = &messages[0];
    assert!(received.tls, "the message went over TLS");
    assert_eq!(received.auth_user.as_deref(), Some("shop@cell"));
    assert_eq!(received.from, "no-reply@platform.example");
    assert_eq!(received.to, ["ada@customer.example"]);
    // lettre ends DATA with CRLF . CRLF after the message, which ends in CRLF itself.
    assert_eq!(received.data.strip_suffix(b"\r\n"), Some(&composed.bytes[..]), "the server received the composed bytes");
    let commands = server.commands();
    let starttls = commands.iter().position(|c| c == "STARTTLS").expect("STARTTLS used");
    let auth = commands.iter().position(|c| c == "AUTH").expect("AUTH used");
    assert!(starttls < auth, "credentials only after TLS: {commands:?}");

    let message = MessageParser::default().parse(&received.data).unwrap();
    assert_eq!(addr(message.from()), (Some("Linen & Co".into()), "no-reply@platform.example".into()));
    assert_eq!(addr(message.to()), (Some("Ada Lovelace".into()), "ada@customer.example".into()));
    assert_eq!(addr(message.reply_to()), (None, "owner@gmail.example".into()));
    assert_eq!(message.subject(), Some("Your order #1042 from Linen & Co <script>alert(1)</script>"));
    assert_eq!(message.message_id(), Some(&MESSAGE_ID[1..MESSAGE_ID.len() - 1]));
    assert_eq!(message.date().unwrap().to_timestamp() * 1000, DATE_MS);
    let text = message.body_text(0).unwrap();
    let html = message.body_html(0).unwrap();
    assert!(text.contains("https://linen.example/?ref=mail&x=1"), "{text}");
    assert!(html.contains("href=\"https:&#x2f;&#x2f;linen.example&#x2f;?ref=mail&amp;x=1\""), "{html}");
}

#[tokio::test]
async fn implicit_tls_delivers() {
    let behaviour = Behaviour { implicit_tls: true, starttls: false, ..auth() };
    let (result, server, _) = deliver_with(behaviour, "smtps").await;
    result.unwrap();
    let messages = server.messages();
    assert_eq!(messages.len(), 1);
    assert!(messages[0].tls);
    assert!(!server.commands().contains(&"STARTTLS".to_string()));
}

#[tokio::test]
async fn a_server_without_starttls_gets_nothing() {
    let (result, server, _) = deliver_with(Behaviour { starttls: false, ..auth() }, "smtp").await;
    assert!(matches!(result, Err(MailError::Retry(_))), "{result:?}");
    assert!(server.messages().is_empty());
    let commands = server.commands();
    assert!(!commands.iter().any(|c| c.starts_with("MAIL") || c == "DATA" || c == "AUTH"), "{commands:?}");
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused() {
    for (scheme, implicit_tls) in [("smtp", false), ("smtps", true)] {
        let behaviour = Behaviour { cert_name: "other.test", implicit_tls, ..auth() };
        let (result, server, _) = deliver_with(behaviour, scheme).await;
        match &result {
            Err(MailError::Retry(reason)) => assert!(reason.contains("certificate"), "{reason}"),
            other => panic!("{scheme}: {other:?}"),
        }
        assert!(server.messages().is_empty());
        assert!(!server.commands().iter().any(|c| c == "AUTH" || c.starts_with("MAIL")), "{scheme}");
    }
}

#[tokio::test]
async fn an_untrusted_certificate_is_refused() {
    let ca = TestCa::new();
    let other_ca = TestCa::new();
    let server = TestServer::start(&ca, auth()).await;
    let mailer = smtp_mailer(&other_ca, &server, "smtp", Duration::from_secs(5));
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    assert!(matches!(mailer.deliver(&composed).await, Err(MailError::Retry(_))));
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_4xx_reply_is_retried_and_a_5xx_reply_is_final() {
    let (result, server, _) = deliver_with(Behaviour { rcpt_reply: Some("451 4.3.0 try again later"), ..auth() }, "smtp").await;
    match result {
        Err(MailError::Retry(reason)) => assert_eq!(reason, "the mail server deferred the message: 451 4.3.0 try again later"),
        other => panic!("{other:?}"),
    }
    assert!(server.messages().is_empty());

    let (result, server, _) = deliver_with(Behaviour { rcpt_reply: Some("550 5.1.1 no such user"), ..auth() }, "smtp").await;
    match result {
        Err(MailError::Final(reason)) => assert_eq!(reason, "the mail server refused the message: 550 5.1.1 no such user"),
        other => panic!("{other:?}"),
    }
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_connection_dropped_mid_message_is_retried() {
    let (result, server, _) = deliver_with(Behaviour { drop_mid_data: true, ..auth() }, "smtp").await;
    assert!(matches!(result, Err(MailError::Retry(_))), "{result:?}");
    assert!(server.commands().contains(&"DATA".to_string()));
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn a_silent_server_times_out_and_is_retried() {
    let ca = TestCa::new();
    let server = TestServer::start(&ca, Behaviour { silent: true, ..Behaviour::default() }).await;
    let mailer = smtp_mailer(&ca, &server, "smtp", Duration::from_millis(300));
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    let started = std::time::Instant::now();
    assert!(matches!(mailer.deliver(&composed).await, Err(MailError::Retry(_))));
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn nothing_listening_is_retried() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let dir = tempfile::tempdir().unwrap();
    let mailer =
        Mailer::new(MailConfig { smtp_url: Some("smtp://mail.test".into()), connect_to: Some(addr), ..config(dir.path()) })
            .unwrap();
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    assert!(matches!(mailer.deliver(&composed).await, Err(MailError::Retry(_))));
}

#[tokio::test]
async fn wrong_credentials_are_refused_by_the_server() {
    let ca = TestCa::new();
    let server = TestServer::start(&ca, Behaviour { auth: Some(("someone", "else")), ..Behaviour::default() }).await;
    let mailer = smtp_mailer(&ca, &server, "smtp", Duration::from_secs(5));
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    assert!(mailer.deliver(&composed).await.is_err());
    assert!(server.messages().is_empty());
}

#[tokio::test]
async fn without_smtp_mail_is_a_private_eml_file_replaced_on_redelivery() {
    let (mailer, dir) = file_mailer();
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    mailer.deliver(&composed).await.unwrap();
    mailer.deliver(&composed).await.unwrap();
    let mail_dir = dir.path().join("mail");
    let files: Vec<_> = std::fs::read_dir(&mail_dir).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(files, ["0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b@shopcell.eml"]);
    let path = mail_dir.join(&files[0]);
    assert_eq!(std::fs::read(&path).unwrap(), composed.bytes);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&mail_dir).unwrap().permissions().mode() & 0o777, 0o700);
    }

    // Another Message-ID is another file.
    let mut other = letter(Template::PasswordReset, Sender::Platform);
    other.message_id = "<another@shopcell>".into();
    mailer.deliver(&mailer.compose(&other).unwrap()).await.unwrap();
    assert_eq!(std::fs::read_dir(&mail_dir).unwrap().count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_deliveries_at_once_each_land_whole_in_their_own_file() {
    let (mailer, dir) = file_mailer();
    let mut composed = Vec::new();
    for i in 0..200 {
        let mut l = letter(Template::PasswordReset, Sender::Platform);
        l.message_id = format!("<m{i}@shopcell>");
        l.to = format!("shopper{i}@example.com");
        composed.push(mailer.compose(&l).unwrap());
    }
    let sends: Vec<_> = composed
        .iter()
        .cloned()
        .map(|c| {
            let mailer = mailer.clone();
            tokio::spawn(async move { mailer.deliver(&c).await })
        })
        .collect();
    for sent in sends {
        sent.await.unwrap().unwrap();
    }
    let mail_dir = dir.path().join("mail");
    let mut names: Vec<String> =
        std::fs::read_dir(&mail_dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    names.sort();
    let mut expected: Vec<String> = (0..200).map(|i| format!("m{i}@shopcell.eml")).collect();
    expected.sort();
    // No file left aside, none missing.
    assert_eq!(names, expected);
    for (i, c) in composed.iter().enumerate() {
        assert_eq!(std::fs::read(mail_dir.join(format!("m{i}@shopcell.eml"))).unwrap(), c.bytes, "message {i}");
    }
}

#[cfg(unix)]
#[tokio::test]
async fn a_mail_directory_that_cannot_be_made_fails_each_delivery_for_a_retry() {
    let dir = tempfile::tempdir().unwrap();
    // A file where the directory should be.
    let blocked = dir.path().join("mail");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let mailer = Mailer::offline(&blocked).unwrap();
    let composed = mailer.compose(&letter(Template::PasswordReset, Sender::Platform)).unwrap();
    let (a, b) = tokio::join!(mailer.deliver(&composed), mailer.deliver(&composed));
    for r in [a, b] {
        assert!(matches!(&r, Err(MailError::Retry(reason)) if reason.starts_with("cannot write the mail file")), "{r:?}");
    }
    assert_eq!(std::fs::read(&blocked).unwrap(), b"not a directory");
    // Once the way is clear the same message is delivered.
    std::fs::remove_file(&blocked).unwrap();
    mailer.deliver(&composed).await.unwrap();
    assert_eq!(std::fs::read(blocked.join("0190a3b4-5c6d-7e8f-9a0b-1c2d3e4f5a6b@shopcell.eml")).unwrap(), composed.bytes);
}
