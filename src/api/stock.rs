//! `S/locations`, `S/inventory-levels` and `S/inventory-history`: where the stock is, how much
//! of each variant each location holds, and every change with its reason.

use crate::cells::stock::history::{InventoryChange, InventoryChangeView};
use crate::cells::stock::levels::{self, Level, LevelView};
use crate::cells::stock::{self, locations, variant_page};
use crate::domain::stock::{Adjust, CreateLocation, Location, LocationView, SetLevel, UpdateLocation};
use crate::error::ApiResult;
use crate::handler;
use crate::http::Page;
use crate::http::list::ListOf;
use crate::http::reply::{Created, Json, Rendered};
use crate::http::route::{Access, Service};
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/locations";
    let one = "/stores/{storeId}/locations/{locationId}";
    let levels = "/stores/{storeId}/inventory-levels";
    vec![
        Route::get(
            p,
            Cell,
            Member,
            handler!(list),
            "List locations (sortBy priority, name or created_at; `sortOrder=asc` puts lower priorities first)",
        ),
        Route::post(p, Cell, Member, handler!(create), "Create a location (at most 1,000; names unique without regard to case)")
            .errors(&[409, 422])
            .body::<CreateLocation>(),
        Route::get(one, Cell, Member, handler!(get), "One location"),
        Route::patch(
            one,
            Cell,
            Member,
            handler!(update),
            "Change a location: `default: true` makes it the default; one with unfinished work stays active",
        )
        .errors(&[409, 422])
        .body::<UpdateLocation>(),
        Route::get(
            levels,
            Cell,
            Member,
            handler!(list_levels),
            "Inventory levels: for a variant, one per active location (zeros included) by priority",
        ),
        Route::post(
            "/stores/{storeId}/inventory-levels/adjust",
            Cell,
            Member,
            handler!(adjust),
            "Move a variant's available units at a location by a delta, with a reason",
        )
        .id("adjustInventoryLevel")
        .errors(&[422])
        .body::<Adjust>(),
        Route::post(
            "/stores/{storeId}/inventory-levels/set",
            Cell,
            Member,
            handler!(set),
            "Set a variant's available units at a location (409 when compareQuantity is stale)",
        )
        .id("setInventoryLevel")
        .errors(&[409, 422])
        .body::<SetLevel>(),
        Route::get(
            "/stores/{storeId}/inventory-history",
            Cell,
            Member,
            handler!(history),
            "Every change of a level, newest first: time, actor, reason, deltas and results, reference",
        ),
    ]
}

async fn list(cx: Ctx, q: ListOf<Location>) -> ApiResult<Json<Page<LocationView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(s.cell.list::<Location>(s.id, &q.query).await?.map(|l| l.view()))))
}

async fn create(cx: Ctx) -> ApiResult<Created<LocationView>> {
    let s = cx.scope()?;
    Ok(Created(locations::create(&s.cell, s.id, cx.json()?).await?.view()))
}

async fn get(cx: Ctx) -> ApiResult<Json<LocationView>> {
    let s = cx.scope()?;
    Ok(Json(s.cell.get::<Location>(s.id, cx.path_id("locationId")?)?.view()))
}

async fn update(cx: Ctx) -> ApiResult<Json<LocationView>> {
    let s = cx.scope()?;
    Ok(Json(locations::update(&s.cell, s.id, cx.path_id("locationId")?, cx.json()?).await?.view()))
}

async fn list_levels(cx: Ctx, q: ListOf<Level>) -> ApiResult<Rendered<Page<LevelView>>> {
    let s = cx.scope()?;
    Ok(Rendered::new(match variant_page::variant_of(&q.query) {
        Some(variant) => variant_page::page(&s.cell, s.id, variant, &q.query, q.page, q.limit)?,
        None => q
            .page(levels::list(&s.cell, s.id, &q.query).await?)
            .to_json_with(LevelView::JSON_BYTES, |out, l: &LevelView| l.write_json(out)),
    }))
}

async fn adjust(cx: Ctx) -> ApiResult<Json<LevelView>> {
    let s = cx.scope()?;
    Ok(Json(stock::adjust(&s.cell, s.id, cx.json()?, cx.actor()).await?))
}

async fn set(cx: Ctx) -> ApiResult<Json<LevelView>> {
    let s = cx.scope()?;
    Ok(Json(stock::set(&s.cell, s.id, cx.json()?, cx.actor()).await?))
}

async fn history(cx: Ctx, q: ListOf<InventoryChange>) -> ApiResult<Json<Page<InventoryChangeView>>> {
    let s = cx.scope()?;
    Ok(Json(q.page(s.cell.list::<InventoryChange>(s.id, &q.query).await?.map(|c| c.view()))))
}
