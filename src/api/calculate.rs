//! `POST S/calculate`: the cart/order calculation. A hot read path: one read transaction, no
//! writes (discount usage is read, never consumed).

use crate::cells::calculate::{self, CalcRequest, CalculateBody};
use crate::domain::checkout::check_address;
use crate::domain::pricing::calc::Calculation;
use crate::error::{ApiError, ApiResult, Check, Code};
use crate::handler;
use crate::http::reply::Rendered;
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    vec![
        Route::post(
            "/stores/{storeId}/calculate",
            Service::Cell,
            Access::Storefront,
            handler!(calculate),
            "Calculate a cart or order: subtotal, discount, shipping, tax, total, taxLines, appliedDiscountCodes, \
             warnings, lineItems",
        )
        .id("calculate")
        .body::<CalculateBody>(),
    ]
}

async fn calculate(cx: Ctx) -> ApiResult<Rendered<Calculation>> {
    let s = cx.scope()?;
    let body: CalculateBody = cx.json()?;
    let shopper = cx.is_shopper();
    if shopper {
        // Manual discounts are the merchant's; and nothing proves an anonymous caller is the
        // customer they name, whose customer-only discounts would then apply.
        let manual = body.order_discounts.len() + body.line_items.iter().filter(|l| l.discount.is_some()).count();
        if manual > 0 {
            return Err(ApiError::msg(Code::FORBIDDEN, "only store members may set manual discounts"));
        }
        if body.customer_id.is_some() {
            return Err(ApiError::msg(Code::FORBIDDEN, "customerId needs a signed-in store member"));
        }
    }
    if let Some(a) = &body.shipping_address {
        // The address type's rules, as every other body carrying one is held to them.
        let mut c = Check::new();
        check_address(&mut c, "shippingAddress", a);
        c.finish()?;
    }
    let priced = calculate::price(&s.cell, s.id, &CalcRequest::from_body(body, shopper), cx.node.clock.now_ms())?;
    // Sized for the usual answer (about 700 bytes a line), so the buffer is not grown and copied
    // a handful of times while it is written.
    Ok(Rendered::new(priced.calculation.to_json().map_err(ApiError::internal)?))
}
