//! The one list that mounts every area's routes.

pub mod auth;
pub mod backups;
pub mod calculate;
pub mod carts;
pub mod catalogs;
pub mod categories;
pub mod checkout_payment;
pub mod checkouts;
pub mod collections;
#[cfg(test)]
mod contract;
pub mod discounts;
pub mod fulfillment;
pub mod gift_cards;
pub mod internal;
pub mod markets;
pub mod members;
pub mod orders;
pub mod passwords;
pub mod payments;
pub mod portable;
pub mod products;
pub mod publishable_keys;
pub mod search;
pub mod selection;
pub mod shipping;
pub mod stock;
pub mod storefront;
pub mod stores;
pub mod subscriptions;
pub mod system;
pub mod webhooks;

use crate::node::context::Route;

/// Every served route, each area's under its tag.
pub fn routes() -> Vec<Route> {
    let areas = [
        ("System", system::routes()),
        ("Auth", auth::routes()),
        ("Auth", passwords::routes()),
        ("Stores", stores::routes()),
        ("Products", products::routes()),
        ("Search", search::routes()),
        ("Selection", selection::routes()),
        ("Categories", categories::routes()),
        ("Collections", collections::routes()),
        ("Markets", markets::routes()),
        ("Catalogs", catalogs::routes()),
        ("Discounts", discounts::routes()),
        ("Gift cards", gift_cards::routes()),
        ("Shipping and tax", shipping::routes()),
        ("Calculation", calculate::routes()),
        ("Carts", carts::routes()),
        ("Checkouts", checkouts::routes()),
        ("Checkouts", checkout_payment::routes()),
        ("Orders", orders::routes()),
        ("Orders", fulfillment::routes()),
        ("Stock", stock::routes()),
        ("Storefront", storefront::routes()),
        ("Members", members::routes()),
        ("Payments", payments::routes()),
        ("Publishable keys", publishable_keys::routes()),
        ("Subscriptions", subscriptions::routes()),
        ("Webhooks and events", webhooks::routes()),
        ("Internal", internal::routes()),
        ("Internal", backups::routes()),
        ("Internal", portable::routes()),
    ];
    areas.into_iter().flat_map(|(tag, rows)| rows.into_iter().map(move |r| Route { tag, ..r })).collect()
}

/// Who is calling, for the session's device label: the User-Agent, shortened.
pub fn device(cx: &crate::node::context::Ctx) -> String {
    cx.header("user-agent").unwrap_or("unknown").chars().take(200).collect()
}
