//! The mails a shopper gets about a shipment: the shipping confirmation when units are
//! fulfilled and the tracking update when a tracking entry changes. Each is a mail job written
//! in the fulfillment's own write, so it is sent exactly when the change exists.

use serde_json::{Value, json};

use crate::cells::order_mail::{address_lines, line_title, sender};
use crate::domain::fulfillment::{Fulfillment, ShipmentStatus, Tracking};
use crate::domain::order::Order;
use crate::domain::store::StoreSettings;
use crate::mail::{DEFAULT_LANGUAGE, Letter, Template};

/// A shipment status as a shopper reads it.
fn readable(s: ShipmentStatus) -> &'static str {
    match s {
        ShipmentStatus::Confirmed => "Confirmed",
        ShipmentStatus::InTransit => "In transit",
        ShipmentStatus::OutForDelivery => "Out for delivery",
        ShipmentStatus::Delivered => "Delivered",
        ShipmentStatus::Failure => "Delivery failed",
    }
}

fn tracking_values(tracking: &[Tracking]) -> Vec<Value> {
    tracking.iter().map(|t| json!({"number": t.number, "company": t.company, "url": t.url})).collect()
}

fn letter(to: String, settings: &StoreSettings, template: Template, values: Value) -> Letter {
    Letter {
        to,
        language: DEFAULT_LANGUAGE.to_string(),
        sender: sender(settings),
        template,
        values,
        message_id: String::new(),
        date_ms: 0,
    }
}

/// The shipping confirmation of `fulfillment`, when the order has an email to go to.
pub fn shipping_confirmation(settings: &StoreSettings, order: &Order, fulfillment: &Fulfillment) -> Option<Letter> {
    let to = order.email.clone()?;
    let lines: Vec<Value> = fulfillment
        .lines
        .iter()
        .map(|f| {
            let title = order.line_items.iter().find(|l| l.id == f.line_item_id).map(line_title).unwrap_or_default();
            json!({"title": title, "quantity": f.quantity})
        })
        .collect();
    let values = json!({
        "store_name": settings.name,
        "order_number": order.number,
        "lines": lines,
        "tracking": tracking_values(&fulfillment.tracking),
        "shipping_address": order.shipping_address.as_ref().map(address_lines).unwrap_or_default(),
        "storefront_url": settings.storefront_url,
    });
    Some(letter(to, settings, Template::ShippingConfirmation, values))
}

/// The tracking update of `fulfillment` (the entry `changed` was just edited), when the order
/// has an email to go to.
pub fn tracking_update(settings: &StoreSettings, order: &Order, fulfillment: &Fulfillment, changed: &Tracking) -> Option<Letter> {
    let to = order.email.clone()?;
    let values = json!({
        "store_name": settings.name,
        "order_number": order.number,
        "shipment_status": readable(fulfillment.shipment_status),
        "tracking": tracking_values(std::slice::from_ref(changed)),
        "storefront_url": settings.storefront_url,
    });
    Some(letter(to, settings, Template::TrackingUpdate, values))
}
