//! The one list that mounts every area's routes.

pub mod auth;
pub mod internal;
pub mod products;
pub mod stores;
pub mod system;

use crate::http::route::Route;

/// Every served route.
pub fn routes() -> Vec<Route> {
    [system::routes(), auth::routes(), stores::routes(), products::routes(), internal::routes()].concat()
}

/// Who is calling, for the session's device label: the User-Agent, shortened.
pub fn device(cx: &crate::http::context::Ctx) -> String {
    cx.header("user-agent").unwrap_or("unknown").chars().take(200).collect()
}
