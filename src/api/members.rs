//! `S/members`: a store's members and roles. The rows are cell routes (the store host forwards
//! `S/*` to the store's cell), but the data is the directory's: the cell reads and writes it
//! through the account service — in process under `serve`, over the internal routes below when
//! the cell runs on its own. The directory re-checks the acting member's role on every change.

use serde::Serialize;
use uuid::Uuid;

use crate::account::directory::Acting;
use crate::account::members::{AddMember, ChangeRole, Transferred, assignable_role};
use crate::account::membership::MemberView;
use crate::api::auth::account;
use crate::cells::stores;
use crate::domain::role::Role;
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::Page;
use crate::http::parse::parse_json;
use crate::http::query::{Paging, Query};
use crate::http::reply::{Created, Json, NoContent};
use crate::http::route::{Access, Param, QueryParams, Service, param, required};
use crate::node::context::{Ctx, Route};

/// The member list's sortable fields; `added_at` is the default.
const SORT_FIELDS: &[&str] = &["added_at", "email"];

pub fn routes() -> Vec<Route> {
    use Access::*;
    use Service::*;
    let one = "/stores/{storeId}/members/{userId}";
    let store = "/internal/v1/stores/{storeId}/members";
    let member = "/internal/v1/stores/{storeId}/members/{userId}";
    vec![
        Route::get("/stores/{storeId}/members", Cell, Member, handler!(list), "The store's members with their roles"),
        Route::post(
            "/stores/{storeId}/members",
            Cell,
            Admin,
            handler!(add),
            "Add a user as admin or staff; an email without an account is invited by mail",
        )
        .errors(&[409])
        .id("addMember")
        .body::<AddMember>(),
        Route::patch(one, Cell, Admin, handler!(change), "Change a member's role (admin or staff)")
            .errors(&[422])
            .body::<ChangeRole>(),
        Route::delete(one, Cell, Admin, handler!(remove), "Remove a member (never the owner)").errors(&[422]).id("removeMember"),
        Route::post(
            "/stores/{storeId}/members/{userId}/transfer-ownership",
            Cell,
            Admin,
            handler!(transfer),
            "Make a member the owner; the current owner becomes an admin (owner only)",
        )
        .errors(&[422])
        .id("transferOwnership"),
        Route::get(store, Account, Internal, handler!(internal_list), "A store's members"),
        Route::post(store, Account, Internal, handler!(internal_add), "Add a member on behalf of `actor`"),
        Route::patch(member, Account, Internal, handler!(internal_change), "Change a role on behalf of `actor`"),
        Route::delete(member, Account, Internal, handler!(internal_remove), "Remove a member on behalf of `?actor`"),
        Route::post(
            "/internal/v1/stores/{storeId}/members/{userId}/transfer-ownership",
            Account,
            Internal,
            handler!(internal_transfer),
            "Transfer ownership on behalf of `actor`",
        ),
    ]
}

/// One page of an in-memory list (members and keys of a store are few).
pub fn page_of<T: Serialize>(items: Vec<T>, paging: &Paging) -> Page<T> {
    let total = items.len() as u64;
    let data = items.into_iter().skip(paging.offset()).take(paging.limit as usize).collect();
    Page::new(data, total, paging.page, paging.limit)
}

/// The parameters of an in-memory list's paging; `sort_doc` names its sortable fields.
/// The paging parameters of a list sorted by one of `sorts` (as `Paging::from_query` reads them).
pub fn paging_params(sort_doc: &'static str, sorts: &'static [&'static str]) -> Vec<Param> {
    vec![
        param("page", "integer", "1-based page, default 1").range(1, u32::MAX as i64),
        param("limit", "integer", "page size, 1..250, default 20").range(1, 250),
        param("sortBy", "string", sort_doc).one_of(sorts),
        param("sortOrder", "string", "asc or desc (default)").one_of(&["asc", "desc"]),
    ]
}

/// The member list's query: paging, sorted by `added_at` or `email`.
pub struct MemberList(Paging);

impl QueryParams for MemberList {
    fn params() -> Vec<Param> {
        paging_params("added_at (default) or email", SORT_FIELDS)
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Paging::from_query(q, SORT_FIELDS, "added_at").map(MemberList)
    }
}

/// `?actor=`: the member an internal removal is made on behalf of (a DELETE has no body).
pub struct ActorQuery {
    pub actor: Uuid,
}

impl QueryParams for ActorQuery {
    fn params() -> Vec<Param> {
        vec![required("actor", "string", "the acting member's user id")]
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        let actor = q.uuid("actor")?.ok_or_else(|| ApiError::field("actor", "is required"))?;
        Ok(ActorQuery { actor })
    }
}

async fn list(cx: Ctx, MemberList(paging): MemberList) -> ApiResult<Json<Page<MemberView>>> {
    let s = cx.scope()?;
    let mut members = cx.node.directory.members(s.id).await?;
    if paging.sort_by == "email" {
        members.sort_by(|a, b| a.email.cmp(&b.email));
    }
    if paging.desc {
        members.reverse();
    }
    Ok(Json(page_of(members, &paging)))
}

/// Field checks the cell can make itself, so callers get the named fields in every deployment
/// (field lists do not survive an internal hop).
fn check_add(body: &AddMember) -> ApiResult<()> {
    if body.email.trim().is_empty() {
        return Err(ApiError::field("email", "is required"));
    }
    assignable_role(&body.role).map(|_| ())
}

async fn add(cx: Ctx) -> ApiResult<Created<MemberView>> {
    let s = cx.scope()?;
    let body: AddMember = cx.json()?;
    check_add(&body)?;
    let m = cx.node.directory.add_member(s.id, cx.user()?.user_id, body).await?;
    Ok(Created(m))
}

async fn change(cx: Ctx) -> ApiResult<Json<MemberView>> {
    let s = cx.scope()?;
    let user = cx.path_id("userId")?;
    let body: ChangeRole = cx.json()?;
    assignable_role(&body.role)?;
    let m = cx.node.directory.change_role(s.id, cx.user()?.user_id, user, body).await?;
    Ok(Json(m))
}

async fn remove(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    let user = cx.path_id("userId")?;
    cx.node.directory.remove_member(s.id, cx.user()?.user_id, user).await?;
    Ok(NoContent)
}

async fn transfer(cx: Ctx) -> ApiResult<Json<Transferred>> {
    let s = cx.scope()?;
    let user = cx.path_id("userId")?;
    if s.role != Some(Role::Owner) {
        return Err(ApiError::msg(Code::FORBIDDEN, "only the owner can transfer ownership"));
    }
    let t = cx.node.directory.transfer_ownership(s.id, cx.user()?.user_id, user).await?;
    // The cell's copy of the owner (shown by `GET S`) follows the directory. The transfer is
    // done once the directory has it — the directory decides who may do what — so a failure
    // here (the store frozen for the last step of a move) is logged, not answered: a retry by
    // the caller, no longer the owner, could not repeat it.
    if let Err(e) = stores::set_store_owner(&s.cell, s.id, user).await {
        tracing::warn!(store = %s.id, error = %e, "the cell's copy of the store owner is stale");
    }
    Ok(Json(t))
}

// ---- the directory side: internal routes for cells in their own process ---------------------

async fn internal_list(cx: Ctx) -> ApiResult<Json<Vec<MemberView>>> {
    Ok(Json(account(&cx)?.members(cx.path_id("storeId")?)?))
}

async fn internal_add(cx: Ctx) -> ApiResult<Created<MemberView>> {
    let a: Acting<AddMember> = parse_json(&cx.body)?;
    Ok(Created(account(&cx)?.add_member(cx.path_id("storeId")?, a.actor, a.body).await?))
}

async fn internal_change(cx: Ctx) -> ApiResult<Json<MemberView>> {
    let a: Acting<ChangeRole> = parse_json(&cx.body)?;
    Ok(Json(account(&cx)?.change_role(cx.path_id("storeId")?, a.actor, cx.path_id("userId")?, a.body).await?))
}

async fn internal_remove(cx: Ctx, q: ActorQuery) -> ApiResult<NoContent> {
    account(&cx)?.remove_member(cx.path_id("storeId")?, q.actor, cx.path_id("userId")?).await?;
    Ok(NoContent)
}

async fn internal_transfer(cx: Ctx) -> ApiResult<Json<Transferred>> {
    let a: Acting<()> = parse_json(&cx.body)?;
    Ok(Json(account(&cx)?.transfer_ownership(cx.path_id("storeId")?, a.actor, cx.path_id("userId")?).await?))
}
