//! Checkouts: a cart on its way to becoming an order — contact, addresses, the chosen shipping
//! rate, discount codes, gift cards and the tip. Like a cart, a checkout stores no computed
//! amounts: it is priced whenever it is read, and priced once more inside the order write.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::cart::{Attributes, attributes_schema, check_attributes, check_quantity};
use crate::domain::fields::{self, check_line, check_text, double_option};
use crate::domain::money::Currency;
use crate::domain::pricing::calc::MAX_LINES;
use crate::domain::pricing::shipping::Address;
use crate::error::{ApiResult, Check};

/// Largest tip, in minor units (the engine's amount bound).
pub const MAX_TIP: i64 = 1_000_000_000_000;
/// Most discount codes and gift cards on one checkout.
pub const MAX_CODES: usize = 10;
/// Longest note, in characters.
const MAX_NOTE_CHARS: usize = 5000;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CheckoutStatus {
    Open,
    Completed,
}

/// `store ‖ checkout id → Checkout`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkout {
    pub id: Uuid,
    pub status: CheckoutStatus,
    pub cart_id: Option<Uuid>,
    pub lines: Vec<CheckoutLine>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub accepts_email_marketing: bool,
    pub accepts_sms_marketing: bool,
    pub shipping_address: Option<Address>,
    pub billing_address: Option<Address>,
    pub shipping_method_id: Option<String>,
    pub note: Option<String>,
    /// In minor units of `currency`.
    pub tip: i64,
    /// The store's currency: prices, tip and payment are all in it.
    pub currency: Currency,
    pub customer_id: Option<Uuid>,
    /// sha256 of the guest's session token; `None` for a checkout a store member created.
    pub session_hash: Option<Vec<u8>>,
    /// In the order they were applied.
    pub discount_codes: Vec<String>,
    pub gift_cards: Vec<AppliedGiftCard>,
    /// What the shopper chose to pay with (`{type: "credit_card", brand: "visa"}`): display data only.
    pub payment_method: Attributes,
    pub order_id: Option<Uuid>,
    pub completed_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckoutLine {
    pub variant_id: Uuid,
    pub quantity: u32,
    pub properties: Attributes,
}

/// A gift card applied to a checkout, by id: the code itself is never stored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AppliedGiftCard {
    pub id: Uuid,
    pub last_characters: String,
}

/// One line of a checkout created from line items.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CheckoutLineInput {
    pub variant_id: Uuid,
    /// 1 to 100.
    pub quantity: i64,
    /// An object of scalar values.
    pub properties: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `POST S/checkouts`: from a cart (`cartId`) or from `lineItems`, not both.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateCheckout {
    pub cart_id: Option<Uuid>,
    #[schemars(length(min = 1, max = MAX_LINES))]
    pub line_items: Option<Vec<CheckoutLineInput>>,
    #[schemars(length(max = 254), pattern(fields::EMAIL))]
    pub email: Option<String>,
    /// Store members only.
    pub customer_id: Option<Uuid>,
    #[schemars(length(max = MAX_NOTE_CHARS), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<String>,
    /// The customer's display currency; the store's currency (no conversion is configured).
    #[schemars(with = "Option<Currency>")]
    pub presentment_currency: Option<String>,
    /// A storefront session's token (`POST S/storefront/sessions`) to bind the checkout to;
    /// a new token is issued when absent.
    pub session_token: Option<String>,
}

/// `PATCH S/checkouts/{checkoutId}`: absent fields stay, `null` clears.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateCheckout {
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(length(max = 254), pattern(fields::EMAIL))]
    pub email: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(pattern(PHONE))]
    pub phone: Option<Option<String>>,
    pub accepts_email_marketing: Option<bool>,
    pub accepts_sms_marketing: Option<bool>,
    #[serde(default, deserialize_with = "double_option")]
    pub shipping_address: Option<Option<Address>>,
    #[serde(default, deserialize_with = "double_option")]
    pub billing_address: Option<Option<Address>>,
    /// Exactly as returned by the shipping-rates operation.
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub shipping_method_id: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(length(max = MAX_NOTE_CHARS), pattern(fields::TEXT_OR_EMPTY))]
    pub note: Option<Option<String>>,
    /// ≥ 0, in minor units of the checkout's currency.
    #[schemars(range(min = 0, max = MAX_TIP))]
    pub tip_amount: Option<i64>,
    /// Required for a guest's checkout.
    pub session_token: Option<String>,
    /// Display data only: card numbers, security codes and the like are refused.
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(schema_with = "attributes_schema")]
    pub payment_method: Option<Option<serde_json::Map<String, serde_json::Value>>>,
}

/// Checks an address's fields under `at` (`shippingAddress`): a two-letter country, bounded texts,
/// coordinates on the globe.
pub fn check_address(c: &mut Check, at: &str, a: &Address) {
    // Checked under the fields' own names, put under `at` after: a valid address (the usual
    // case, on hot paths such as a calculation) allocates nothing here.
    let mut own = Check::new();
    let country = a.country.trim().as_bytes();
    own.ensure(country.len() == 2 && country.iter().all(u8::is_ascii_alphabetic), "country", "must be a two-letter country code");
    let texts = [
        ("firstName", &a.first_name),
        ("lastName", &a.last_name),
        ("company", &a.company),
        ("phone", &a.phone),
        ("address1", &a.address1),
        ("address2", &a.address2),
        ("city", &a.city),
        ("province", &a.province),
        ("postalCode", &a.postal_code),
    ];
    for (name, value) in texts {
        if let Some(v) = value {
            check_line(&mut own, name, v, 255, false);
        }
    }
    if let Some(lat) = a.latitude {
        own.ensure((-90.0..=90.0).contains(&lat), "latitude", "must be -90 to 90");
    }
    if let Some(lon) = a.longitude {
        own.ensure((-180.0..=180.0).contains(&lon), "longitude", "must be -180 to 180");
    }
    c.nest(at, own);
}

/// An address as stored: codes upper-cased, texts trimmed.
pub fn normalize_address(mut a: Address) -> Address {
    a.country = a.country.trim().to_ascii_uppercase();
    a.province = a.province.map(|p| p.trim().to_ascii_uppercase()).filter(|p| !p.is_empty());
    a
}

/// An email as stored: trimmed, at most 254 characters, one `@` with text on both sides.
pub fn check_email(c: &mut Check, field: &str, email: &str) -> String {
    let e = email.trim();
    let valid = e.len() <= 254
        && e.split_once('@').is_some_and(|(local, domain)| !local.is_empty() && domain.contains('.') && !domain.contains('@'))
        && !e.chars().any(char::is_whitespace);
    c.ensure(valid, field, "must be an email address");
    e.to_string()
}

/// [`check_phone`] in the document: 5 to 20 digits among spaces and `+ - ( ) .`.
const PHONE: &str = r"^\s*[ +().-]*([0-9][ +().-]*){5,20}\s*$";

fn check_phone(c: &mut Check, field: &str, phone: &str) -> String {
    let p = phone.trim();
    let digits = p.chars().filter(char::is_ascii_digit).count();
    let allowed = p.chars().all(|ch| ch.is_ascii_digit() || " +-().".contains(ch));
    c.ensure(allowed && (5..=20).contains(&digits), field, "must be a phone number (digits, spaces, + - ( ) .)");
    p.to_string()
}

/// Keys whose values would be cardholder data (PCI DSS): never accepted, whatever their value.
const SENSITIVE_KEYS: &[&str] =
    &["number", "cardnumber", "pan", "cvc", "cvv", "cvv2", "cvc2", "securitycode", "track", "track1", "track2", "pin"];

/// The payment method's display data: scalar values only, no cardholder data.
fn check_payment_method(c: &mut Check, raw: serde_json::Map<String, serde_json::Value>) -> Attributes {
    for (k, v) in &raw {
        let key: String = k.chars().filter(|ch| ch.is_ascii_alphanumeric()).collect::<String>().to_ascii_lowercase();
        if SENSITIVE_KEYS.contains(&key.as_str()) || v.as_str().is_some_and(crate::domain::fields::looks_like_card_number) {
            c.fail(
                &format!("paymentMethod.{k}"),
                "card data is never accepted here: pay through the payment session with a token",
            );
        }
    }
    check_attributes(c, "paymentMethod", Some(raw))
}

impl UpdateCheckout {
    /// Validates every field and applies the valid update to `co` (nothing on error).
    /// `shippingMethodId` is checked against the offered rates by the caller, who can price the cart.
    pub fn apply(self, co: &mut Checkout) -> ApiResult<()> {
        let mut c = Check::new();
        let mut next = co.clone();
        if let Some(email) = self.email {
            next.email = email.map(|e| check_email(&mut c, "email", &e));
        }
        if let Some(phone) = self.phone {
            next.phone = phone.map(|p| check_phone(&mut c, "phone", &p));
        }
        if let Some(v) = self.accepts_email_marketing {
            next.accepts_email_marketing = v;
        }
        if let Some(v) = self.accepts_sms_marketing {
            next.accepts_sms_marketing = v;
        }
        if let Some(a) = self.shipping_address {
            if let Some(a) = &a {
                check_address(&mut c, "shippingAddress", a);
            }
            next.shipping_address = a.map(normalize_address);
        }
        if let Some(a) = self.billing_address {
            if let Some(a) = &a {
                check_address(&mut c, "billingAddress", a);
            }
            next.billing_address = a.map(normalize_address);
        }
        if let Some(m) = self.shipping_method_id {
            if let Some(m) = &m {
                check_line(&mut c, "shippingMethodId", m, 255, true);
            }
            next.shipping_method_id = m.map(|m| m.trim().to_string());
        }
        if let Some(note) = self.note {
            if let Some(n) = &note {
                check_text(&mut c, "note", n, MAX_NOTE_CHARS, false);
            }
            next.note = note.map(|n| n.trim().to_string()).filter(|n| !n.is_empty());
        }
        if let Some(tip) = self.tip_amount {
            c.ensure((0..=MAX_TIP).contains(&tip), "tipAmount", format!("must be 0 to {MAX_TIP} minor units"));
            next.tip = tip;
        }
        if let Some(pm) = self.payment_method {
            next.payment_method = pm.map(|pm| check_payment_method(&mut c, pm)).unwrap_or_default();
        }
        c.finish()?;
        *co = next;
        Ok(())
    }
}

/// Validates the lines of a checkout created from line items.
pub fn check_lines(lines: Vec<CheckoutLineInput>) -> ApiResult<Vec<CheckoutLine>> {
    let mut c = Check::new();
    c.ensure(!lines.is_empty(), "lineItems", "must not be empty");
    c.ensure(lines.len() <= MAX_LINES, "lineItems", format!("at most {MAX_LINES} lines"));
    let mut out: Vec<CheckoutLine> = Vec::with_capacity(lines.len());
    for (i, l) in lines.into_iter().enumerate() {
        let quantity = check_quantity(&mut c, &format!("lineItems[{i}].quantity"), l.quantity);
        let properties = check_attributes(&mut c, &format!("lineItems[{i}].properties"), l.properties);
        if out.iter().any(|o| o.variant_id == l.variant_id) {
            c.fail(&format!("lineItems[{i}].variantId"), "is given twice: one line per variant");
        }
        out.push(CheckoutLine { variant_id: l.variant_id, quantity, properties });
    }
    c.finish()?;
    Ok(out)
}

/// Validates the create body's own fields: email, note, currency against the store's.
pub fn check_create(c: &mut Check, body: &CreateCheckout, store_currency: Currency) -> (Option<String>, Option<String>) {
    let email = body.email.as_deref().map(|e| check_email(c, "email", e));
    if let Some(n) = &body.note {
        check_text(c, "note", n, MAX_NOTE_CHARS, false);
    }
    if let Some(code) = &body.presentment_currency {
        match Currency::parse(code.trim()) {
            None => c.fail("presentmentCurrency", "must be an ISO 4217 currency code"),
            Some(cur) if cur != store_currency => c.fail(
                "presentmentCurrency",
                format!("this store sells in {}; no conversion to {} is configured", store_currency.code(), cur.code()),
            ),
            Some(_) => {}
        }
    }
    (email, body.note.as_deref().map(str::trim).filter(|n| !n.is_empty()).map(str::to_string))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn checkout() -> Checkout {
        Checkout {
            id: Uuid::nil(),
            status: CheckoutStatus::Open,
            cart_id: None,
            lines: Vec::new(),
            email: None,
            phone: None,
            accepts_email_marketing: false,
            accepts_sms_marketing: false,
            shipping_address: None,
            billing_address: None,
            shipping_method_id: None,
            note: None,
            tip: 0,
            currency: Currency::parse("USD").unwrap(),
            customer_id: None,
            session_hash: None,
            discount_codes: Vec::new(),
            gift_cards: Vec::new(),
            payment_method: Attributes::new(),
            order_id: None,
            completed_at: None,
            created_at: 0,
            updated_at: 0,
        }
    }

    fn update(json: &str) -> UpdateCheckout {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn sensitive_payment_data_is_refused_and_nothing_changes() {
        let mut co = checkout();
        for body in [
            r#"{"paymentMethod":{"type":"credit_card","number":"4000000000000002"},"tipAmount":5}"#,
            r#"{"paymentMethod":{"cvc":"123"}}"#,
            r#"{"paymentMethod":{"card":"4242424242424242"}}"#,
        ] {
            let e = update(body).apply(&mut co).unwrap_err();
            assert!(e.fields.iter().any(|f| f.field.starts_with("paymentMethod.")), "{body}: {e:?}");
            assert_eq!(co, checkout(), "nothing applied");
        }
        update(r#"{"paymentMethod":{"type":"credit_card","brand":"visa","last4":"4242"}}"#).apply(&mut co).unwrap();
        assert_eq!(co.payment_method["last4"], "4242");
    }

    #[test]
    fn update_validates_every_field() {
        let mut co = checkout();
        let e = update(r#"{"tipAmount":-1,"email":"nope","phone":"call me","shippingAddress":{"country":"USA"}}"#)
            .apply(&mut co)
            .unwrap_err();
        let fields: Vec<&str> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["email", "phone", "shippingAddress.country", "tipAmount"]);
        update(r#"{"tipAmount":250,"email":" a@b.co ","shippingAddress":{"country":"ca","province":"bc"},"note":"  "}"#)
            .apply(&mut co)
            .unwrap();
        assert_eq!((co.tip, co.email.as_deref(), co.note.as_deref()), (250, Some("a@b.co"), None));
        let a = co.shipping_address.as_ref().unwrap();
        assert_eq!((a.country.as_str(), a.province.as_deref()), ("CA", Some("BC")));
        update(r#"{"shippingAddress":null}"#).apply(&mut co).unwrap();
        assert!(co.shipping_address.is_none());
    }

    #[test]
    fn lines_need_distinct_variants_and_quantities_in_range() {
        let line = |v: u128, q: i64| CheckoutLineInput { variant_id: Uuid::from_u128(v), quantity: q, properties: None };
        let e = check_lines(vec![line(1, 1), line(1, 2), line(2, 0)]).unwrap_err();
        let fields: Vec<&str> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["lineItems[1].variantId", "lineItems[2].quantity"]);
        assert_eq!(check_lines(vec![line(1, 3)]).unwrap()[0].quantity, 3);
        assert!(check_lines(Vec::new()).is_err());
    }
}
