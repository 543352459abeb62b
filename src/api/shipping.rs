//! `S/shipping-zones` (zones with their rates) and `S/tax-rates`: the configuration a
//! calculation prices shipping and tax from.

use crate::cells::stores;
use crate::cells::{shipping, taxes};
use crate::domain::pricing::shipping::{ShippingZone, ShippingZoneInput, ShippingZoneView};
use crate::domain::pricing::tax::{TaxRate, TaxRateInput, TaxRateView};
use crate::error::ApiResult;
use crate::handler;
use crate::http::Page;
use crate::http::list::ListOf;
use crate::http::reply::{Created, Json, NoContent};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let zones = "/stores/{storeId}/shipping-zones";
    let zone = "/stores/{storeId}/shipping-zones/{zoneId}";
    let rates = "/stores/{storeId}/tax-rates";
    let rate = "/stores/{storeId}/tax-rates/{taxRateId}";
    vec![
        Route::get(zones, Cell, Member, handler!(list_zones), "List shipping zones with their rates"),
        Route::post(zones, Cell, Member, handler!(create_zone), "Create a shipping zone: countries, provinces and rates")
            .errors(&[409])
            .body::<ShippingZoneInput>(),
        Route::get(zone, Cell, Member, handler!(get_zone), "One shipping zone"),
        Route::patch(
            zone,
            Cell,
            Member,
            handler!(update_zone),
            "Replace a shipping zone (rates keep the ids they are sent with)",
        )
        .errors(&[409])
        .body::<ShippingZoneInput>(),
        Route::delete(zone, Cell, Member, handler!(delete_zone), "Delete a shipping zone"),
        Route::get(rates, Cell, Member, handler!(list_rates), "List tax rates"),
        Route::post(rates, Cell, Member, handler!(create_rate), "Create a tax rate (basis points)")
            .errors(&[409])
            .body::<TaxRateInput>(),
        Route::patch(rate, Cell, Member, handler!(update_rate), "Replace a tax rate").errors(&[409]).body::<TaxRateInput>(),
        Route::delete(rate, Cell, Member, handler!(delete_rate), "Delete a tax rate"),
    ]
}

async fn list_zones(cx: Ctx, q: ListOf<ShippingZone>) -> ApiResult<Json<Page<ShippingZoneView>>> {
    let s = cx.scope()?;
    let currency = stores::store_settings(&s.cell, s.id)?.currency;
    let listed = s.cell.list::<ShippingZone>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|z| z.view(currency)))))
}

async fn create_zone(cx: Ctx) -> ApiResult<Created<ShippingZoneView>> {
    let s = cx.scope()?;
    let currency = stores::store_settings(&s.cell, s.id)?.currency;
    let z = shipping::create(&s.cell, s.id, cx.json()?).await?;
    Ok(Created(z.view(currency)))
}

async fn get_zone(cx: Ctx) -> ApiResult<Json<ShippingZoneView>> {
    let s = cx.scope()?;
    let z = s.cell.get::<ShippingZone>(s.id, cx.path_id("zoneId")?)?;
    Ok(Json(z.view(stores::store_settings(&s.cell, s.id)?.currency)))
}

async fn update_zone(cx: Ctx) -> ApiResult<Json<ShippingZoneView>> {
    let s = cx.scope()?;
    let id = cx.path_id("zoneId")?;
    let currency = stores::store_settings(&s.cell, s.id)?.currency;
    let z = shipping::update(&s.cell, s.id, id, cx.json()?).await?;
    Ok(Json(z.view(currency)))
}

async fn delete_zone(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    shipping::delete(&s.cell, s.id, cx.path_id("zoneId")?).await?;
    Ok(NoContent)
}

async fn list_rates(cx: Ctx, q: ListOf<TaxRate>) -> ApiResult<Json<Page<TaxRateView>>> {
    let s = cx.scope()?;
    let listed = s.cell.list::<TaxRate>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|r| r.view()))))
}

async fn create_rate(cx: Ctx) -> ApiResult<Created<TaxRateView>> {
    let s = cx.scope()?;
    let r = taxes::create(&s.cell, s.id, cx.json()?).await?;
    Ok(Created(r.view()))
}

async fn update_rate(cx: Ctx) -> ApiResult<Json<TaxRateView>> {
    let s = cx.scope()?;
    let id = cx.path_id("taxRateId")?;
    let r = taxes::update(&s.cell, s.id, id, cx.json()?).await?;
    Ok(Json(r.view()))
}

async fn delete_rate(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    taxes::delete(&s.cell, s.id, cx.path_id("taxRateId")?).await?;
    Ok(NoContent)
}
