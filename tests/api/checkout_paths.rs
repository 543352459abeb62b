//! The singular `S/checkout/…` paths (the spec's spelling) serve every checkout operation the
//! plural ones do.

use serde_json::json;

use crate::calculate::{Shop, amount};
use crate::checkout::{address, us_shipping};
use crate::support::*;

/// Every checkout operation answers the same under both spellings of its path (`checkouts`, and
/// the spec's `checkout`), as a member calls them.
#[tokio::test]
async fn both_spellings_serve_every_checkout_operation() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let t = Some(shop.owner.token.as_str());
    us_shipping(c, &shop).await;
    let (product, shirt) = shop.product(c, "Shirt", 5000, 200).await;
    let variant = c.get(&shop.path(&format!("/products/{product}/variants/{shirt}")), t).await.expect(200).body;
    assert_eq!((variant["id"].as_str(), amount(&variant, "/price")), (Some(shirt.as_str()), 5000));
    shop.discount(c, json!({"title": "Ten", "code": "TEN", "valueType": "percentage", "value": 1000})).await;
    for base in ["checkouts", "checkout"] {
        let card = c.post(&shop.path("/gift-cards"), t, json!({"initialValue": {"amount": 1000, "currency": "USD"}})).await;
        let card = card.expect(201).body;
        let co = c.post(&shop.path(&format!("/{base}")), t, json!({"lineItems": [{"variantId": shirt, "quantity": 1}]})).await;
        let id = co.expect(201).body["id"].as_str().unwrap().to_string();
        let one = shop.path(&format!("/{base}/{id}"));
        assert_eq!(c.get(&one, t).await.expect(200).body["id"], id.as_str(), "{base}");
        let patched = c.patch(&one, t, json!({"email": "m@example.com", "shippingAddress": address()})).await.expect(200).body;
        assert_eq!(patched["email"], "m@example.com", "{base}");
        let rates = c.post(&format!("{one}/shipping-rates"), t, json!({"shippingAddress": address()})).await.expect(200).body;
        assert_eq!(rates[0]["name"], "Ground", "{base}: {rates}");
        let coded = c.post(&format!("{one}/discount-codes"), t, json!({"code": "TEN"})).await.expect(200).body;
        assert_eq!(amount(&coded, "/discount"), 500, "{base}");
        let uncoded = c.delete(&format!("{one}/discount-codes/TEN"), t).await.expect(200).body;
        assert_eq!(amount(&uncoded, "/discount"), 0, "{base}");
        let code = card["code"].as_str().unwrap();
        let found = c.post(&format!("{one}/gift-cards/lookup"), t, json!({"code": code})).await.expect(200).body;
        assert_eq!(amount(&found, "/balance"), 1000, "{base}");
        let paid = c.post(&format!("{one}/discount-codes"), t, json!({"code": code})).await.expect(200).body;
        assert_eq!(amount(&paid, "/giftCardTotal"), 1000, "{base}");
        let card_id = card["id"].as_str().unwrap();
        let unpaid = c.delete(&format!("{one}/gift-cards/{card_id}"), t).await.expect(200).body;
        assert_eq!(amount(&unpaid, "/giftCardTotal"), 0, "{base}");
    }
}
