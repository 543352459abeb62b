//! Store mail end to end: the store's mail settings, and the order confirmation written with the
//! order and delivered by the cell's job runner (here as an `.eml` file: no SMTP server is set;
//! SMTP itself is tested against an in-process server in `src/mail/tests`).

use std::path::Path;

use mail_parser::MessageParser;
use serde_json::json;

use crate::calculate::Shop;
use crate::events::a_day_of_trade;
use crate::support::*;

/// The `.eml` files under `<data>/mail`, once there are `n` (bounded wait for the job runner).
pub async fn mails(data: &Path, n: usize) -> Vec<Vec<u8>> {
    let written = || -> Vec<Vec<u8>> {
        let Ok(dir) = std::fs::read_dir(data.join("mail")) else { return Vec::new() };
        dir.flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "eml"))
            .map(|e| std::fs::read(e.path()).unwrap())
            .collect()
    };
    let found = eventually(|| std::future::ready(Some(written()).filter(|found| found.len() >= n))).await;
    let mut found = found.unwrap_or_else(|| panic!("{} of {n} mails written", written().len()));
    found.sort();
    found
}

fn addr(a: Option<&mail_parser::Address>) -> (Option<String>, String) {
    let first = a.and_then(|a| a.first()).expect("an address");
    (first.name().map(str::to_string), first.address().unwrap_or_default().to_string())
}

#[tokio::test]
async fn an_order_is_confirmed_by_mail_from_the_store() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());

    // The store's mail settings: validated, shown, removable with "".
    for (body, field) in [
        (json!({"storefrontUrl": "ftp://shop.example"}), "storefrontUrl"),
        (json!({"emailFrom": "not an address"}), "emailFrom"),
        (json!({"replyTo": "a@b"}), "replyTo"),
    ] {
        let a = c.patch(&shop.path(""), t, body).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], field);
    }
    let settings =
        json!({"storefrontUrl": "https://shop.example", "emailFrom": "hello@shop.example", "replyTo": "care@shop.example"});
    let s = c.patch(&shop.path(""), t, settings).await.expect(200).body;
    assert_eq!(
        (s["storefrontUrl"].as_str(), s["emailFrom"].as_str()),
        (Some("https://shop.example"), Some("hello@shop.example"))
    );
    let s = c.patch(&shop.path(""), t, json!({"replyTo": ""})).await.expect(200).body;
    assert!(s["replyTo"].is_null());

    let (_, order) = a_day_of_trade(c, &shop).await;
    let sent = mails(app.dir.path(), 1).await;
    assert_eq!(sent.len(), 1, "one mail per order");
    let m = MessageParser::default().parse(&sent[0]).unwrap();
    // shop.example is not a sender domain of this server: the platform's address under the
    // store's name, replies to the store's address.
    assert_eq!(addr(m.from()), (Some("Test Store".into()), "no-reply@localhost".into()));
    assert_eq!(addr(m.reply_to()).1, "hello@shop.example");
    assert_eq!(addr(m.to()).1, "buyer@example.com");
    let number = order["number"].as_u64().unwrap();
    assert!(m.subject().unwrap().contains(&number.to_string()), "{:?}", m.subject());
    let text = m.body_text(0).unwrap();
    assert!(text.contains("Big mug x 2"), "{text}");
    let total = order["total"]["amount"].as_i64().unwrap();
    assert!(text.contains(&format!("{}.{:02} USD", total / 100, total % 100)), "{text}");
    assert!(text.contains("1 Main St") && text.contains("https://shop.example"), "{text}");
    assert!(m.body_html(0).unwrap().contains("Big mug"));
    assert!(m.message_id().is_some_and(|id| id.ends_with("@shopcell")));
}
