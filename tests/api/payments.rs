//! Payment intents: the offline test provider's tokens (succeed, decline, require action),
//! PromptPay and bank transfers pending until confirmed, client secrets required from shoppers,
//! the rules of `claim_intent` inside the order write, and the Stripe client against a real
//! Stripe-compatible server on loopback (`fake_stripe.rs`).

use std::sync::Arc;

use hyper::Method;
use serde_json::{Value, json};
use shopcell::cells::Cell;
use shopcell::cells::payments::{self, FinancialStatus, IntentStatus, NewIntent, PaymentMethodKind, claim_intent};
use shopcell::domain::money::{Currency, Money};
use shopcell::error::ApiResult;
use shopcell::storage::keys::Key;
use shopcell::storage::read;
use shopcell::storage::tables::PAYMENT_INTENTS;
use uuid::Uuid;

use crate::auth_support::spawn_app_with_flags;
use crate::fake_stripe::{FakeStripe, KEY};
use crate::support::*;

pub(crate) fn money(amount: i64, currency: &str) -> Money {
    Money { amount, currency: Currency::parse(currency).unwrap() }
}

/// A store with its owner and a live publishable key.
pub(crate) struct Shop {
    owner: User,
    pub(crate) store: Uuid,
    key: String,
}

impl Shop {
    pub(crate) async fn new(c: &HttpClient) -> Shop {
        let owner = create_user(c).await;
        let store = create_store(c, &owner).await;
        let key = c
            .post(&format!("/api/v1/stores/{store}/publishable-keys"), Some(&owner.token), json!({"environment": "live"}))
            .await
            .expect(201)
            .body["key"]
            .as_str()
            .unwrap()
            .to_string();
        Shop { owner, store: Uuid::parse_str(&store).unwrap(), key }
    }

    fn path(&self, id: Uuid, rest: &str) -> String {
        format!("/api/v1/stores/{}/payment-intents/{id}{rest}", self.store)
    }

    /// Confirms as a shopper (publishable key, no Bearer token).
    async fn shopper_confirm(&self, c: &HttpClient, id: Uuid, body: Value) -> Answer {
        let path = self.path(id, "/confirm");
        c.send(Method::POST, &path, None, &[("x-publishable-key", &self.key)], Some(body.to_string().into())).await
    }

    pub(crate) async fn member_confirm(&self, c: &HttpClient, id: Uuid, body: Value) -> Answer {
        c.post(&self.path(id, "/confirm"), Some(&self.owner.token), body).await
    }
}

pub(crate) fn new_intent(method: PaymentMethodKind, amount: Money) -> NewIntent {
    NewIntent {
        checkout_id: Uuid::now_v7(),
        amount,
        method,
        customer_email: Some("buyer@example.com".into()),
        metadata: json!({"cartId": "cart-1"}),
    }
}

async fn claim(
    cell: &Arc<Cell>,
    store: Uuid,
    id: Uuid,
    checkout: Uuid,
    amount: Money,
    order: Uuid,
) -> ApiResult<FinancialStatus> {
    let now = cell.clock.now_ms();
    cell.writer.write(Some(store), move |tx| claim_intent(tx, store, id, checkout, amount, order, now)).await
}

/// The stored intents of a store.
fn stored_count(cell: &Cell, store: Uuid) -> usize {
    let txn = cell.read().unwrap();
    let mut n = 0;
    read::scan(&txn, PAYMENT_INTENTS, Key::store(store).bytes(), false, 0, usize::MAX, |_, _| {
        n += 1;
        Ok(())
    })
    .unwrap();
    n
}

#[tokio::test]
async fn test_card_tokens_succeed_decline_or_require_authentication() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let cell = app.cell();

    let (intent, secret) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(2500, "USD")))
            .await
            .unwrap();
    assert_eq!((intent.provider.as_str(), intent.status, intent.version), ("test", IntentStatus::RequiresPaymentMethod, 1));
    assert!(secret.starts_with(&format!("{}_secret_", intent.provider_ref)) && secret.len() > intent.provider_ref.len() + 30);
    assert!(intent.provider_ref.starts_with("pi_test_"));
    assert_eq!(intent.metadata, json!({"cartId": "cart-1"}));
    assert_eq!(payments::payment_intent(&cell, shop.store, intent.id).unwrap(), intent);
    let raw =
        read::get_raw(&cell.read().unwrap(), PAYMENT_INTENTS, Key::store(shop.store).id(intent.id).bytes()).unwrap().unwrap();
    assert!(!raw.windows(secret.len()).any(|w| w == secret.as_bytes()), "only the secret's hash is stored");

    // A decline is an answer, not an error: the intent waits for another payment method.
    let declined = shop
        .shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_card_chargeDeclined", "clientSecret": secret}))
        .await
        .expect(200)
        .body;
    assert_eq!(
        declined,
        json!({
            "id": intent.id, "checkoutId": intent.checkout_id, "amount": {"amount": 2500, "currency": "USD"},
            "status": "requires_payment_method", "paymentMethod": "credit_card", "nextAction": null,
            "lastError": "card_declined", "orderId": null, "provider": "test",
            "createdAt": declined["createdAt"], "updatedAt": declined["updatedAt"],
        })
    );
    let stored = payments::payment_intent(&cell, shop.store, intent.id).unwrap();
    assert_eq!(
        (stored.status, stored.last_error.as_deref(), stored.version),
        (IntentStatus::RequiresPaymentMethod, Some("card_declined"), 2)
    );

    // 3-D Secure: the first confirmation asks for authentication, the second completes it.
    let body = json!({"paymentMethod": "pm_card_authenticationRequired", "clientSecret": secret});
    let challenged = shop.shopper_confirm(c, intent.id, body.clone()).await.expect(200).body;
    assert_eq!(
        (challenged["status"].as_str(), challenged["nextAction"].clone(), challenged["lastError"].clone()),
        (Some("requires_action"), json!({"type": "authenticate", "redirectUrl": null}), Value::Null)
    );
    let done = shop.shopper_confirm(c, intent.id, body.clone()).await.expect(200).body;
    assert_eq!((done["status"].as_str(), done["nextAction"].clone()), (Some("succeeded"), Value::Null));
    assert_eq!(payments::payment_intent(&cell, shop.store, intent.id).unwrap().status, IntentStatus::Succeeded);
    // A succeeded intent is not confirmed again.
    let again =
        shop.shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_card_visa", "clientSecret": secret})).await.expect(409);
    assert_eq!(again.code(), "CONFLICT");

    // tok_visa succeeds at once; pm_card_capture only authorizes.
    let (i2, s2) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(100, "USD")))
            .await
            .unwrap();
    let ok = shop.shopper_confirm(c, i2.id, json!({"paymentMethod": "tok_visa", "clientSecret": s2})).await.expect(200).body;
    assert_eq!(ok["status"], "succeeded");
    let (i3, _) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(100, "USD")))
            .await
            .unwrap();
    assert_eq!(
        shop.member_confirm(c, i3.id, json!({"paymentMethod": "pm_card_capture"})).await.expect(200).body["status"],
        "requires_capture"
    );

    // Card numbers, unknown tokens and a missing token are 400 naming paymentMethod; nothing changes.
    let (i4, s4) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(100, "USD")))
            .await
            .unwrap();
    for body in [
        json!({"paymentMethod": "4242 4242 4242 4242", "clientSecret": s4}),
        json!({"paymentMethod": "pm_card_unknown", "clientSecret": s4}),
        json!({"clientSecret": s4}),
    ] {
        let a = shop.shopper_confirm(c, i4.id, body.clone()).await.expect(400);
        assert_eq!(a.body["error"]["fields"][0]["field"], "paymentMethod", "{body}");
        assert!(!a.raw.windows(4).any(|w| w == b"4242"), "the card number is not echoed");
    }
    assert_eq!(payments::payment_intent(&cell, shop.store, i4.id).unwrap(), i4);
    assert_eq!(
        shop.shopper_confirm(c, i4.id, json!({"paymentMethod": "pm_card_visa", "extra": 1, "clientSecret": s4})).await.status,
        400
    );
}

#[tokio::test]
async fn shoppers_need_the_client_secret_and_learn_nothing_without_it() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let cell = app.cell();
    let (intent, secret) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(900, "USD")))
            .await
            .unwrap();
    let (_, other_secret) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(900, "USD")))
            .await
            .unwrap();

    let missing = shop.shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_card_visa"})).await.expect(400);
    assert_eq!(missing.body["error"]["fields"][0]["field"], "clientSecret");
    // A wrong secret, another intent's secret and an intent that does not exist answer alike.
    let unknown = shop
        .shopper_confirm(c, Uuid::now_v7(), json!({"paymentMethod": "pm_card_visa", "clientSecret": secret}))
        .await
        .expect(404);
    for wrong in [format!("{secret}x"), other_secret.clone(), String::new()] {
        let a =
            shop.shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_card_visa", "clientSecret": wrong})).await.expect(404);
        assert_eq!(a.body, unknown.body);
    }
    // Neither a key nor a token: 401.
    let path = shop.path(intent.id, "/confirm");
    let anonymous =
        c.send(Method::POST, &path, None, &[], Some(json!({"paymentMethod": "pm_card_visa"}).to_string().into())).await;
    assert_eq!(anonymous.status, 401);
    assert_eq!(payments::payment_intent(&cell, shop.store, intent.id).unwrap(), intent, "nothing changed");

    // Reading: shoppers with the secret in the query, members without it.
    let read = |q: String| {
        let path = format!("{}{q}", shop.path(intent.id, ""));
        let key = shop.key.clone();
        async move { c.send(Method::GET, &path, None, &[("x-publishable-key", &key)], None).await }
    };
    assert_eq!(read(format!("?clientSecret={secret}")).await.expect(200).body["status"], "requires_payment_method");
    assert_eq!(read(format!("?clientSecret={other_secret}")).await.expect(404).body, unknown.body);
    assert_eq!(read(String::new()).await.status, 400);
    let member = c.get(&shop.path(intent.id, ""), Some(&shop.owner.token)).await.expect(200).body;
    assert_eq!(member, serde_json::to_value(intent.view()).unwrap());

    // Members confirm without the secret; another store's member cannot reach the intent.
    let stranger = Shop::new(c).await;
    let foreign = format!("/api/v1/stores/{}/payment-intents/{}/confirm", shop.store, intent.id);
    c.post(&foreign, Some(&stranger.owner.token), json!({"paymentMethod": "pm_card_visa"})).await.expect(404);
    let other_store = stranger.member_confirm(c, intent.id, json!({"paymentMethod": "pm_card_visa"})).await.expect(404);
    assert_eq!(other_store.code(), "NOT_FOUND");
    assert_eq!(
        shop.member_confirm(c, intent.id, json!({"paymentMethod": "pm_card_visa"})).await.expect(200).body["status"],
        "succeeded"
    );
}

#[tokio::test]
async fn promptpay_and_bank_transfers_stay_pending_until_confirmed() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let cell = app.cell();

    let new = new_intent(PaymentMethodKind::Promptpay, money(12345, "THB"));
    let checkout = new.checkout_id;
    let (pp, secret) = payments::create_payment_intent(&cell, shop.store, new).await.unwrap();
    assert_eq!(pp.status, IntentStatus::RequiresAction);
    let view = c.get(&format!("{}?clientSecret={secret}", shop.path(pp.id, "")), None).await;
    assert_eq!(view.status, 401, "a shopper read needs the publishable key too");
    let v = serde_json::to_value(pp.view()).unwrap();
    let qr = v["nextAction"]["qrPayload"].as_str().unwrap();
    assert_eq!(v["nextAction"]["type"], "promptpay_qr");
    assert!(qr.starts_with("000201010212") && qr.contains("5303764") && qr.contains("5406123.45") && qr.contains("5802TH"));

    // An order may be created while the payer has not paid: PENDING.
    let order = Uuid::now_v7();
    assert_eq!(claim(&cell, shop.store, pp.id, checkout, money(12345, "THB"), order).await.unwrap(), FinancialStatus::Pending);
    // The payer pays: confirmation (no token needed) completes it, and the order stays linked.
    let paid = shop.shopper_confirm(c, pp.id, json!({"clientSecret": secret})).await.expect(200).body;
    assert_eq!((paid["status"].as_str(), paid["nextAction"].clone()), (Some("succeeded"), Value::Null));
    assert_eq!(paid["orderId"], json!(order));
    let stored = payments::payment_intent(&cell, shop.store, pp.id).unwrap();
    assert_eq!((stored.status, stored.order_id), (IntentStatus::Succeeded, Some(order)));

    // PromptPay is THB only; nothing is stored for a refused intent.
    let before = stored_count(&cell, shop.store);
    let e = payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::Promptpay, money(100, "USD")))
        .await
        .unwrap_err();
    assert_eq!(e.code.as_str(), "BUSINESS_RULE");
    assert_eq!(stored_count(&cell, shop.store), before);

    // Bank transfers carry a reference and take only their own token.
    let (bt, _) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::BankTransfer, money(5000, "USD")))
            .await
            .unwrap();
    let v = serde_json::to_value(bt.view()).unwrap();
    assert_eq!((v["status"].as_str(), v["nextAction"]["type"].as_str()), (Some("requires_action"), Some("bank_transfer")));
    assert!(v["nextAction"]["reference"].as_str().unwrap().starts_with("SC"));
    assert_eq!(
        shop.member_confirm(c, bt.id, json!({"paymentMethod": "pm_card_visa"})).await.expect(400).body["error"]["fields"][0]["field"],
        "paymentMethod"
    );
    let done = shop.member_confirm(c, bt.id, json!({"paymentMethod": "pm_bank_transfer"})).await.expect(200).body;
    assert_eq!(done["status"], "succeeded");
    assert_eq!(claim(&cell, shop.store, bt.id, bt.checkout_id, bt.amount, Uuid::now_v7()).await.unwrap(), FinancialStatus::Paid);
}

#[tokio::test]
async fn claiming_checks_checkout_amount_status_and_single_use() {
    let app = spawn_app().await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let cell = app.cell();
    let store = shop.store;
    let confirm = |id: Uuid, token: &'static str| {
        let cell = cell.clone();
        async move {
            let c = shopcell::cells::payments::Confirmation { payment_method: Some(token), client_secret: None, shopper: false };
            payments::confirm_payment_intent(&cell, store, id, c).await.unwrap()
        }
    };
    let make = |amount: i64| {
        let cell = cell.clone();
        async move {
            payments::create_payment_intent(&cell, store, new_intent(PaymentMethodKind::CreditCard, money(amount, "USD")))
                .await
                .unwrap()
                .0
        }
    };

    let paid = make(4200).await;
    confirm(paid.id, "pm_card_visa").await;
    let (co, amount) = (paid.checkout_id, paid.amount);
    let order = Uuid::now_v7();
    // Another checkout's intent, and one that does not exist: 400 naming paymentIntentId, alike.
    let wrong = claim(&cell, store, paid.id, Uuid::now_v7(), amount, order).await.unwrap_err();
    let missing = claim(&cell, store, Uuid::now_v7(), co, amount, order).await.unwrap_err();
    assert_eq!((wrong.code.as_str(), wrong.fields[0].field.as_str()), ("VALIDATION_FAILED", "paymentIntentId"));
    assert_eq!(wrong.message, missing.message);
    // The amount must be the checkout's total, in its currency.
    for other in [money(4201, "USD"), money(4200, "EUR")] {
        let e = claim(&cell, store, paid.id, co, other, order).await.unwrap_err();
        assert_eq!(
            (e.code.as_str(), e.message.as_str()),
            ("BUSINESS_RULE", "the payment amount differs from the checkout total")
        );
    }
    assert_eq!(payments::payment_intent(&cell, store, paid.id).unwrap().order_id, None, "refused claims write nothing");

    assert_eq!(claim(&cell, store, paid.id, co, amount, order).await.unwrap(), FinancialStatus::Paid);
    let stored = payments::payment_intent(&cell, store, paid.id).unwrap();
    assert_eq!((stored.order_id, stored.status), (Some(order), IntentStatus::Succeeded));
    // The same order again (a repeated job) is fine; another order is 409.
    assert_eq!(claim(&cell, store, paid.id, co, amount, order).await.unwrap(), FinancialStatus::Paid);
    let twice = claim(&cell, store, paid.id, co, amount, Uuid::now_v7()).await.unwrap_err();
    assert_eq!(twice.code.as_str(), "CONFLICT");
    assert_eq!(payments::payment_intent(&cell, store, paid.id).unwrap().order_id, Some(order));

    // Statuses that allow no order.
    let declined = make(100).await;
    confirm(declined.id, "pm_card_chargeDeclined").await;
    let e = claim(&cell, store, declined.id, declined.checkout_id, declined.amount, Uuid::now_v7()).await.unwrap_err();
    assert_eq!((e.code.as_str(), e.code.status()), ("PAYMENT_DECLINED", 422));
    assert!(e.message.contains("card_declined"), "{}", e.message);
    let unconfirmed = make(100).await;
    let e = claim(&cell, store, unconfirmed.id, unconfirmed.checkout_id, unconfirmed.amount, Uuid::now_v7()).await.unwrap_err();
    assert_eq!((e.code.as_str(), e.message.as_str()), ("BUSINESS_RULE", "the payment intent has not been confirmed"));
    let challenged = make(100).await;
    confirm(challenged.id, "pm_card_threeDSecureRequired").await;
    let e = claim(&cell, store, challenged.id, challenged.checkout_id, challenged.amount, Uuid::now_v7()).await.unwrap_err();
    assert!(e.message.contains("authentication"), "{}", e.message);
    for i in [&declined, &unconfirmed, &challenged] {
        assert_eq!(payments::payment_intent(&cell, store, i.id).unwrap().order_id, None);
    }
    // An authorization only: AUTHORIZED.
    let held = make(100).await;
    confirm(held.id, "pm_card_capture").await;
    assert_eq!(
        claim(&cell, store, held.id, held.checkout_id, held.amount, Uuid::now_v7()).await.unwrap(),
        FinancialStatus::Authorized
    );

    // A claim that fails inside a job writes nothing of that job.
    let other_order = Uuid::now_v7();
    let (id, co2, amt, now) = (held.id, held.checkout_id, held.amount, cell.clock.now_ms());
    let failed: ApiResult<()> = cell
        .writer
        .write(Some(store), move |tx| {
            claim_intent(tx, store, id, co2, amt, other_order, now)?;
            Ok(())
        })
        .await;
    assert_eq!(failed.unwrap_err().code.as_str(), "CONFLICT");
}

async fn stripe_app(fake: &FakeStripe, key: &str) -> TestApp {
    spawn_app_with_flags(&["--payment-provider", "stripe", "--stripe-api-base", &fake.url, "--stripe-secret-key", key]).await
}

#[tokio::test]
async fn the_stripe_client_creates_confirms_and_refreshes_against_a_local_server() {
    let fake = FakeStripe::start().await;
    let app = stripe_app(&fake, KEY).await;
    let c = &app.client;
    let shop = Shop::new(c).await;
    let cell = app.cell();

    let mut new = new_intent(PaymentMethodKind::CreditCard, money(1500, "JPY"));
    new.metadata = json!({"cartId": "cart 1&2", "items": 2});
    let (intent, secret) = payments::create_payment_intent(&cell, shop.store, new).await.unwrap();
    assert_eq!((intent.provider.as_str(), intent.provider_ref.as_str()), ("stripe", "pi_fake1"));
    assert_eq!((secret.as_str(), intent.status), ("pi_fake1_secret_fake1", IntentStatus::RequiresPaymentMethod));
    let seen = fake.seen();
    let create = &seen[0];
    assert_eq!((create.method.as_str(), create.path.as_str()), ("POST", "/v1/payment_intents"));
    assert_eq!(create.authorization.as_deref(), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(create.idempotency_key.as_deref(), Some(intent.id.to_string().as_str()));
    assert_eq!((create.field("amount"), create.field("currency")), (Some("1500"), Some("jpy")), "yen are sent as they are");
    assert_eq!(create.field("payment_method_types[]"), Some("card"));
    assert_eq!(create.field("receipt_email"), Some("buyer@example.com"));
    assert_eq!((create.field("metadata[cartId]"), create.field("metadata[items]")), (Some("cart 1&2"), Some("2")));
    assert_eq!(create.field("metadata[shopcell_payment_intent]"), Some(intent.id.to_string().as_str()));
    assert_eq!(create.field("metadata[shopcell_checkout]"), Some(intent.checkout_id.to_string().as_str()));

    // A shopper confirms through us with Stripe's client secret: a decline (402 at Stripe) is an answer.
    let declined = shop
        .shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_card_chargeDeclined", "clientSecret": secret}))
        .await
        .expect(200)
        .body;
    assert_eq!(
        (declined["status"].as_str(), declined["lastError"].as_str()),
        (Some("requires_payment_method"), Some("card_declined"))
    );
    let confirm = fake.seen().last().unwrap().clone();
    assert_eq!(
        (confirm.path.as_str(), confirm.field("payment_method")),
        ("/v1/payment_intents/pi_fake1/confirm", Some("pm_card_chargeDeclined"))
    );
    assert!(confirm.idempotency_key.as_deref().unwrap().starts_with(&intent.id.to_string()));
    // A payment method Stripe does not know: 400 naming paymentMethod, without Stripe's text.
    let unknown =
        shop.shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_nope", "clientSecret": secret})).await.expect(400);
    assert_eq!(unknown.body["error"]["fields"][0]["field"], "paymentMethod");
    assert!(!unknown.raw.windows(7).any(|w| w == b"No such"));
    let ok = shop
        .shopper_confirm(c, intent.id, json!({"paymentMethod": "pm_card_visa", "clientSecret": secret}))
        .await
        .expect(200)
        .body;
    assert_eq!((ok["status"].as_str(), ok["lastError"].clone()), (Some("succeeded"), Value::Null));
    let keys: Vec<String> =
        fake.seen().iter().filter(|s| s.path.ends_with("/confirm")).map(|s| s.idempotency_key.clone().unwrap()).collect();
    assert_eq!(keys.len(), 3);
    assert!(keys[0] != keys[1] && keys[1] != keys[2], "each attempt has its own key: {keys:?}");
    assert_eq!(
        claim(&cell, shop.store, intent.id, intent.checkout_id, intent.amount, Uuid::now_v7()).await.unwrap(),
        FinancialStatus::Paid
    );

    // PromptPay: Stripe shows the QR code after confirmation; the payer pays later, a refresh sees it.
    let (pp, pp_secret) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::Promptpay, money(9900, "THB")))
            .await
            .unwrap();
    assert_eq!(fake.seen().last().unwrap().field("payment_method_types[]"), Some("promptpay"));
    let shown = shop
        .shopper_confirm(c, pp.id, json!({"paymentMethod": "pm_promptpay", "clientSecret": pp_secret}))
        .await
        .expect(200)
        .body;
    assert_eq!(shown["status"], "requires_action");
    assert_eq!(shown["nextAction"], json!({"type": "promptpay_qr", "qrPayload": "00020101021229370016A000000677010111FAKE"}));
    let pending = payments::refresh_payment_intent(&cell, shop.store, pp.id).await.unwrap();
    assert_eq!(pending.version, 2, "an unchanged state is not written again");
    fake.set_status(&pp.provider_ref, "succeeded");
    let read = c.get(&shop.path(pp.id, ""), Some(&shop.owner.token)).await.expect(200).body;
    assert_eq!((read["status"].as_str(), read["nextAction"].clone()), (Some("succeeded"), Value::Null));
    let stored = payments::payment_intent(&cell, shop.store, pp.id).unwrap();
    assert_eq!((stored.status, stored.version), (IntentStatus::Succeeded, 3));
    assert_eq!(fake.seen().last().unwrap().path, format!("/v1/payment_intents/{}", pp.provider_ref));

    // Stripe refuses the amount: 422, and nothing is stored.
    let before = stored_count(&cell, shop.store);
    let e = payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(10, "USD")))
        .await
        .unwrap_err();
    assert_eq!(
        (e.code.as_str(), e.message.as_str()),
        ("BUSINESS_RULE", "the payment provider does not accept this amount (amount_too_small)")
    );
    assert_eq!(stored_count(&cell, shop.store), before);
}

#[tokio::test]
async fn stripe_failures_are_bad_gateway_without_the_key() {
    let fake = FakeStripe::start().await;
    let wrong_key = "sk_test_wrong_key_0000";
    let app = stripe_app(&fake, wrong_key).await;
    let shop = Shop::new(&app.client).await;
    let cell = app.cell();
    let e = payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(1000, "USD")))
        .await
        .unwrap_err();
    assert_eq!(e.code.as_str(), "BAD_GATEWAY");
    assert!(!e.message.contains("sk_") && !e.body().to_string().contains("sk_"), "{}", e.message);
    assert_eq!(fake.seen()[0].authorization.as_deref(), Some(format!("Bearer {wrong_key}").as_str()));
    assert_eq!(stored_count(&cell, shop.store), 0);

    // Nothing listening at the base URL: 502 as well.
    let port = free_port();
    let dead = spawn_app_with_flags(&[
        "--payment-provider",
        "stripe",
        "--stripe-api-base",
        &format!("http://127.0.0.1:{port}"),
        "--stripe-secret-key",
        KEY,
    ])
    .await;
    let shop = Shop::new(&dead.client).await;
    let e =
        payments::create_payment_intent(&dead.cell(), shop.store, new_intent(PaymentMethodKind::CreditCard, money(1000, "USD")))
            .await
            .unwrap_err();
    assert_eq!(e.code.as_str(), "BAD_GATEWAY");
}

#[test]
fn stripe_needs_its_secret_key() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().to_string_lossy().into_owned();
    let argv = ["shopcell", "serve", "--data", &data, "--payment-provider", "stripe", "--stripe-api-base", "http://127.0.0.1:9"];
    let shopcell::cli::Command::Serve(args) = <shopcell::cli::Cli as clap::Parser>::try_parse_from(argv).unwrap().command else {
        panic!("not a serve command")
    };
    let e = shopcell::run::build_serve(&args).err().expect("refused without a key").to_string();
    assert!(e.contains("--stripe-secret-key"), "{e}");
    let bad = <shopcell::cli::Cli as clap::Parser>::try_parse_from(["shopcell", "serve", "--payment-provider", "paypal"]);
    assert!(bad.is_err());
}

#[tokio::test]
async fn concurrent_confirmations_of_one_intent_succeed_once() {
    let app = spawn_app().await;
    let shop = Shop::new(&app.client).await;
    let cell = app.cell();
    let (intent, secret) =
        payments::create_payment_intent(&cell, shop.store, new_intent(PaymentMethodKind::CreditCard, money(700, "USD")))
            .await
            .unwrap();
    let mut set = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let (c, path, key) = (app.client.clone(), shop.path(intent.id, "/confirm"), shop.key.clone());
        let body = json!({"paymentMethod": "pm_card_visa", "clientSecret": secret}).to_string();
        set.spawn(async move { c.send(Method::POST, &path, None, &[("x-publishable-key", &key)], Some(body.into())).await });
    }
    let mut statuses = Vec::new();
    while let Some(a) = set.join_next().await {
        let a = a.unwrap();
        if a.status != 200 {
            assert_eq!(a.code(), "CONFLICT");
        }
        statuses.push(a.status.as_u16());
    }
    assert_eq!(statuses.iter().filter(|s| **s == 200).count(), 1, "{statuses:?}");
    let stored = payments::payment_intent(&cell, shop.store, intent.id).unwrap();
    assert_eq!((stored.status, stored.version), (IntentStatus::Succeeded, 2));
}
