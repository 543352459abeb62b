//! `S/storefront/*`: request-context operations of the storefront. Each reads the browser's real
//! `User-Agent`, `Referer` and `X-Forwarded-For` headers (as forwarded by the storefront host);
//! a missing one is a 400 naming the header.

use serde_json::json;

use crate::cells::storefront::{RequestContext, StorefrontEvent};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Check};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, created, json};

pub fn routes() -> Vec<Route> {
    use Access::Storefront;
    use Service::Cell;
    vec![
        Route::post(
            "/stores/{storeId}/storefront/sessions",
            Cell,
            Storefront,
            handler!(create_session),
            "Start a storefront session from the request context → {sessionToken} for guest checkout",
        ),
        Route::post(
            "/stores/{storeId}/storefront/events",
            Cell,
            Storefront,
            handler!(event),
            "Record a storefront event (page views, add-to-cart) from the request context → 202",
        )
        .body::<StorefrontEvent>(),
    ]
}

/// The request context, every header present and bounded.
fn context(cx: &Ctx) -> ApiResult<RequestContext> {
    let mut c = Check::new();
    let mut header = |name: &str| -> String {
        match cx.header(name).map(str::trim).filter(|v| !v.is_empty()) {
            Some(v) if v.len() <= 2048 => v.to_string(),
            Some(_) => {
                c.fail(name, "must be at most 2048 bytes");
                String::new()
            }
            None => {
                c.fail(name, "the header is required");
                String::new()
            }
        }
    };
    let user_agent = header("user-agent");
    let referer = header("referer");
    let forwarded = header("x-forwarded-for");
    c.finish()?;
    let client_address = forwarded.split(',').next().unwrap_or("").trim().to_string();
    if client_address.parse::<std::net::IpAddr>().is_err() {
        return Err(ApiError::field("x-forwarded-for", "must start with the client's IP address"));
    }
    Ok(RequestContext { user_agent, referer, client_address })
}

async fn create_session(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let ctx = context(&cx)?;
    let (token, session) = s.cell.create_storefront_session(s.id, ctx).await?;
    Ok(created(&json!({ "sessionToken": token, "expiresAt": rfc3339(session.expires_at) })))
}

async fn event(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    context(&cx)?;
    let body: StorefrontEvent = cx.json()?;
    body.validate()?;
    s.cell.record_storefront_event(s.id, body).await?;
    Ok(json(hyper::StatusCode::ACCEPTED, &json!({ "accepted": true })))
}
