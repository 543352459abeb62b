//! The order confirmation a shopper is mailed when a checkout becomes an order: written as a mail
//! job in the order's own write, so it is sent exactly when the order exists.

use serde_json::{Value, json};

use crate::domain::money::Money;
use crate::domain::order::{Order, OrderLine};
use crate::domain::pricing::shipping::Address;
use crate::domain::store::StoreSettings;
use crate::mail::{DEFAULT_LANGUAGE, Letter, Sender, Template};

/// The store as the sender of its mail.
pub fn sender(settings: &StoreSettings) -> Sender {
    Sender::Store { name: settings.name.clone(), email_from: settings.email_from.clone(), reply_to: settings.reply_to.clone() }
}

/// The confirmation of `order`, when it has an email to go to.
pub fn confirmation(settings: &StoreSettings, order: &Order) -> Option<Letter> {
    let to = order.email.clone()?;
    let money = |m: &Money| m.currency.format(m.amount);
    let shown = |m: &Money| (m.amount != 0).then(|| money(m));
    let lines: Vec<Value> = order
        .line_items
        .iter()
        .map(|l| json!({"title": line_title(l), "quantity": l.quantity, "amount": money(&l.total)}))
        .collect();
    let values = json!({
        "store_name": settings.name,
        "order_number": order.number,
        "lines": lines,
        "subtotal": money(&order.subtotal),
        "discount": shown(&order.discount),
        "shipping": order.shipping_line.as_ref().map(|_| money(&order.shipping)),
        "tax": shown(&order.tax),
        "total": money(&order.total),
        "shipping_address": order.shipping_address.as_ref().map(address_lines).unwrap_or_default(),
        "storefront_url": settings.storefront_url,
    });
    Some(Letter {
        to,
        language: DEFAULT_LANGUAGE.to_string(),
        sender: sender(settings),
        template: Template::OrderConfirmation,
        values,
        message_id: String::new(),
        date_ms: 0,
    })
}

/// A line's title as a shopper reads it: the variant's title after the product's, unless it
/// is the default one.
pub fn line_title(l: &OrderLine) -> String {
    match l.variant_title.trim() {
        "" | "Default" | "Default Title" => l.title.clone(),
        v => format!("{} ({v})", l.title),
    }
}

/// An address as the lines of a label.
pub fn address_lines(a: &Address) -> Vec<String> {
    let join = |parts: &[&Option<String>]| {
        parts.iter().filter_map(|p| p.as_deref()).filter(|p| !p.is_empty()).collect::<Vec<_>>().join(" ")
    };
    [
        join(&[&a.first_name, &a.last_name]),
        join(&[&a.company]),
        join(&[&a.address1]),
        join(&[&a.address2]),
        join(&[&a.postal_code, &a.city, &a.province]),
        a.country.clone(),
    ]
    .into_iter()
    .filter(|l| !l.is_empty())
    .collect()
}
