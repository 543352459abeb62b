//! `S/shipping-zones` (zones with their rates) and `S/tax-rates`: the configuration a
//! calculation prices shipping and tax from.

use crate::cells::{shipping, taxes};
use crate::domain::pricing::shipping::ShippingZoneInput;
use crate::domain::pricing::tax::TaxRateInput;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::Paging;
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{Page, Resp, created, no_content, ok};

const ZONE_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("sortBy", "string", "created_at (default), updated_at, name"),
    param("sortOrder", "string", "asc or desc (default)"),
];

const RATE_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("country", "string", "only the rates of this two-letter country"),
    param("sortBy", "string", "created_at (default), updated_at, country, name"),
    param("sortOrder", "string", "asc or desc (default)"),
];

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let zones = "/stores/{storeId}/shipping-zones";
    let zone = "/stores/{storeId}/shipping-zones/{zoneId}";
    let rates = "/stores/{storeId}/tax-rates";
    let rate = "/stores/{storeId}/tax-rates/{taxRateId}";
    vec![
        Route::get(zones, Cell, Member, handler!(list_zones), "List shipping zones with their rates").query(ZONE_PARAMS),
        Route::post(zones, Cell, Member, handler!(create_zone), "Create a shipping zone: countries, provinces and rates")
            .body::<ShippingZoneInput>(),
        Route::get(zone, Cell, Member, handler!(get_zone), "One shipping zone"),
        Route::patch(
            zone,
            Cell,
            Member,
            handler!(update_zone),
            "Replace a shipping zone (rates keep the ids they are sent with)",
        )
        .body::<ShippingZoneInput>(),
        Route::delete(zone, Cell, Member, handler!(delete_zone), "Delete a shipping zone"),
        Route::get(rates, Cell, Member, handler!(list_rates), "List tax rates").query(RATE_PARAMS),
        Route::post(rates, Cell, Member, handler!(create_rate), "Create a tax rate (basis points)").body::<TaxRateInput>(),
        Route::patch(rate, Cell, Member, handler!(update_rate), "Replace a tax rate").body::<TaxRateInput>(),
        Route::delete(rate, Cell, Member, handler!(delete_rate), "Delete a tax rate"),
    ]
}

async fn list_zones(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let paging = Paging::from_query(&cx.query, shipping::SORT_FIELDS, "created_at")?;
    let currency = s.cell.store_settings(s.id)?.currency;
    let (zones, total) = s.cell.list_shipping_zones(s.id, &paging)?;
    let data: Vec<_> = zones.iter().map(|z| z.view(currency)).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn create_zone(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: ShippingZoneInput = cx.json()?;
    let currency = s.cell.store_settings(s.id)?.currency;
    let z = s.cell.create_shipping_zone(s.id, body).await?;
    Ok(created(&z.view(currency)))
}

async fn get_zone(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let z = s.cell.shipping_zone(s.id, cx.path_id("zoneId")?)?;
    Ok(ok(&z.view(s.cell.store_settings(s.id)?.currency)))
}

async fn update_zone(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("zoneId")?;
    let body: ShippingZoneInput = cx.json()?;
    let currency = s.cell.store_settings(s.id)?.currency;
    let z = s.cell.update_shipping_zone(s.id, id, body).await?;
    Ok(ok(&z.view(currency)))
}

async fn delete_zone(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    s.cell.delete_shipping_zone(s.id, cx.path_id("zoneId")?).await?;
    Ok(no_content())
}

async fn list_rates(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let paging = Paging::from_query(&cx.query, taxes::SORT_FIELDS, "created_at")?;
    let country = cx.query.str("country");
    if let Some(c) = country
        && !(c.len() == 2 && c.bytes().all(|b| b.is_ascii_alphabetic()))
    {
        return Err(ApiError::field("country", "must be a two-letter country code"));
    }
    let (rates, total) = s.cell.list_tax_rates(s.id, country, &paging)?;
    let data: Vec<_> = rates.iter().map(|r| r.view()).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn create_rate(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: TaxRateInput = cx.json()?;
    let r = s.cell.create_tax_rate(s.id, body).await?;
    Ok(created(&r.view()))
}

async fn update_rate(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("taxRateId")?;
    let body: TaxRateInput = cx.json()?;
    let r = s.cell.update_tax_rate(s.id, id, body).await?;
    Ok(ok(&r.view()))
}

async fn delete_rate(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    s.cell.delete_tax_rate(s.id, cx.path_id("taxRateId")?).await?;
    Ok(no_content())
}
