//! The one list that mounts every area's routes.

pub mod auth;
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
pub mod gift_cards;
pub mod internal;
pub mod markets;
pub mod members;
pub mod orders;
pub mod payments;
pub mod products;
pub mod publishable_keys;
pub mod search;
pub mod selection;
pub mod shipping;
pub mod storefront;
pub mod stores;
pub mod subscriptions;
pub mod system;

use crate::node::context::Route;

/// Every served route.
pub fn routes() -> Vec<Route> {
    [
        system::routes(),
        auth::routes(),
        stores::routes(),
        products::routes(),
        search::routes(),
        selection::routes(),
        categories::routes(),
        collections::routes(),
        markets::routes(),
        catalogs::routes(),
        discounts::routes(),
        gift_cards::routes(),
        shipping::routes(),
        calculate::routes(),
        carts::routes(),
        checkouts::routes(),
        checkout_payment::routes(),
        orders::routes(),
        storefront::routes(),
        members::routes(),
        payments::routes(),
        publishable_keys::routes(),
        subscriptions::routes(),
        internal::routes(),
    ]
    .into_iter()
    .flatten()
    .collect()
}

/// Who is calling, for the session's device label: the User-Agent, shortened.
pub fn device(cx: &crate::node::context::Ctx) -> String {
    cx.header("user-agent").unwrap_or("unknown").chars().take(200).collect()
}
