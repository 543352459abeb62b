//! `/stores` (the directory, on the account service) and `S` (settings, in the store's cell).

use schemars::JsonSchema;
use serde::Serialize;
use uuid::Uuid;

use crate::account::model::StoreEntry;
use crate::api::auth::account;
use crate::cells::stores;
use crate::domain::role::Role;
use crate::domain::store::{CreateStore, StoreAddress, StoreSettings, StoreView, UpdateStore, validate_create};
use crate::domain::time::rfc3339;
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::reply::{Json, NoContent, Rendered};
use crate::http::route::{Access, Service};
use crate::node::Node;
use crate::node::context::{Ctx, Route};

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::*;
    vec![
        Route::get("/stores", Account, Member, handler!(list), "The caller's stores, with their role"),
        Route::post("/stores", Account, Member, handler!(create), "Create a store; the caller becomes its owner")
            .errors(&[422])
            .body::<CreateStore>(),
        Route::get("/stores/{storeId}", Cell, Member, handler!(get), "Store settings"),
        Route::patch("/stores/{storeId}", Cell, Admin, handler!(update), "Change store settings").body::<UpdateStore>(),
        Route::delete(
            "/stores/{storeId}",
            Cell,
            Admin,
            handler!(close),
            "Close the store (owner only): gone at once for everyone, its data kept for the grace period",
        )
        .errors(&[409])
        .id("closeStore"),
    ]
}

/// One of the caller's stores, as `GET /stores` lists it. Fields in key order, as the answer
/// has always listed them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MyStore {
    pub created_at: String,
    pub id: Uuid,
    pub name: String,
    /// `owner`, `admin` or `staff`.
    pub role: &'static str,
}

/// The created store: its settings and the caller's role, `owner`.
#[derive(Serialize, JsonSchema)]
pub struct CreatedStore {
    #[serde(flatten)]
    pub store: StoreView,
    pub role: &'static str,
}

async fn close(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    if s.role != Some(Role::Owner) {
        return Err(ApiError::msg(Code::FORBIDDEN, "only the store's owner can close it"));
    }
    crate::node::closing::close_store(&cx.node, &s.cell, s.id, cx.user()?.user_id).await?;
    Ok(NoContent)
}

async fn list(cx: Ctx) -> ApiResult<Json<Vec<MyStore>>> {
    let user = cx.user()?.user_id;
    let stores = account(&cx)?.stores_of(user)?;
    let data = stores
        .iter()
        .map(|(e, role)| MyStore { created_at: rfc3339(e.created_at), id: e.id, name: e.name.clone(), role: role.name() })
        .collect();
    Ok(Json(data))
}

async fn create(cx: Ctx) -> ApiResult<Rendered<CreatedStore, 201>> {
    let owner = cx.user()?.user_id;
    let body: CreateStore = cx.json()?;
    let settings = open_store(&cx.node, owner, body).await?;
    Rendered::sorted(&CreatedStore { store: settings.view(), role: "owner" })
}

/// Creates a store owned by `owner`, held to their plan, in the cell the directory picks: its
/// settings in the cell, then its directory entry. `serve --demo` creates its store here too.
pub async fn open_store(node: &Node, owner: Uuid, body: CreateStore) -> ApiResult<StoreSettings> {
    let currency = validate_create(&body)?;
    let account = node.account.as_deref().ok_or_else(ApiError::not_found)?;
    account.ensure_store_allowed(owner)?;
    let now = node.clock.now_ms();
    let settings = StoreSettings {
        id: node.clock.new_id(),
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
        storefront_url: None,
        email_from: None,
        reply_to: None,
    };
    let cell = account.pick_cell(&node.cell_names())?;
    node.cell_link(&cell)?.create_store(settings.clone()).await?;
    let entry = StoreEntry { id: settings.id, name: settings.name.clone(), owner_id: owner, cell, created_at: now };
    account.add_store(entry).await?;
    Ok(settings)
}

async fn get(cx: Ctx) -> ApiResult<Json<StoreView>> {
    let s = cx.scope()?;
    let settings = stores::store_settings(&s.cell, s.id)?;
    Ok(Json(settings.view()))
}

async fn update(cx: Ctx) -> ApiResult<Json<StoreView>> {
    let s = cx.scope()?;
    let body: UpdateStore = cx.json()?;
    let renamed = body.name.is_some();
    let settings = stores::update_store(&s.cell, s.id, body).await?;
    if renamed {
        cx.node.directory.rename_store(s.id, settings.name.clone()).await?;
    }
    Ok(Json(settings.view()))
}
