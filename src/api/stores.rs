//! `/stores` (the directory, on the account service) and `S` (settings, in the store's cell).

use crate::account::model::StoreEntry;
use crate::api::auth::account;
use crate::domain::store::{CreateStore, StoreAddress, StoreSettings, UpdateStore, validate_create};
use crate::domain::time::rfc3339;
use crate::error::ApiResult;
use crate::handler;
use crate::http::context::Ctx;
use crate::http::route::{Access, Route, Service};
use crate::http::{Resp, created, ok};

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::*;
    vec![
        Route::get("/stores", Account, Member, handler!(list), "The caller's stores, with their role"),
        Route::post("/stores", Account, Member, handler!(create), "Create a store; the caller becomes its owner")
            .body::<CreateStore>(),
        Route::get("/stores/{storeId}", Cell, Member, handler!(get), "Store settings"),
        Route::patch("/stores/{storeId}", Cell, Admin, handler!(update), "Change store settings").body::<UpdateStore>(),
    ]
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let user = cx.user()?.user_id;
    let stores = account(&cx)?.stores_of(user)?;
    let data: Vec<_> = stores
        .iter()
        .map(|(e, role)| serde_json::json!({"id": e.id, "name": e.name, "role": role.name(), "createdAt": rfc3339(e.created_at)}))
        .collect();
    Ok(ok(&data))
}

async fn create(cx: Ctx) -> ApiResult<Resp> {
    let owner = cx.user()?.user_id;
    let body: CreateStore = cx.json()?;
    let currency = validate_create(&body)?;
    let account = account(&cx)?;
    account.ensure_store_allowed(owner)?;
    let now = cx.node.clock.now_ms();
    let settings = StoreSettings {
        id: cx.node.clock.new_id(),
        name: body.name.trim().to_string(),
        currency,
        country: body.country,
        timezone: body.timezone,
        address: StoreAddress::default(),
        taxes_included: false,
        weight_unit: "kg".into(),
        owner_id: owner,
        created_at: now,
        updated_at: now,
    };
    let cell = account.pick_cell(&cx.node.cell_names())?;
    cx.node.cell_link(&cell)?.create_store(settings.clone()).await?;
    let entry = StoreEntry { id: settings.id, name: settings.name.clone(), owner_id: owner, cell, created_at: now };
    account.add_store(entry).await?;
    let mut view = serde_json::to_value(settings.view()).map_err(crate::error::ApiError::internal)?;
    view["role"] = "owner".into();
    Ok(created(&view))
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let settings = s.cell.store_settings(s.id)?;
    Ok(ok(&settings.view()))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: UpdateStore = cx.json()?;
    let renamed = body.name.is_some();
    let settings = s.cell.update_store(s.id, body).await?;
    if renamed {
        cx.node.rename_store(s.id, settings.name.clone()).await?;
    }
    Ok(ok(&settings.view()))
}
