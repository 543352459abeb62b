//! `S/discounts`: code and automatic discounts, their validation against a cart, code search,
//! eligible automatic discounts, comments, and the deprecated always-503 export.

use hyper::header::{HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use crate::cells::calculate::{CalcRequest, CartContext};
use crate::cells::discounts::{CommentInput, DiscountFilter, SORT_FIELDS};
use crate::domain::pricing::discount::{DiscountInput, DiscountStatus, MAX_CODES_PER_REQUEST, ValueType};
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::{LIMIT_MAX, Paging};
use crate::http::route::{Access, Param, Route, Service, param};
use crate::http::{Page, Resp, created, error, no_content, ok};

const LIST_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("status", "string", "ACTIVE, SCHEDULED, EXPIRED or DISABLED (any case)"),
    param("type", "string", "value type: percentage, fixedAmount, freeShipping, buyXGetY (alias: valueType)"),
    param("method", "string", "code or automatic"),
    param("search", "string", "text in the code or the title (any case)"),
    param("sortBy", "string", "created_at (default), updated_at, title, code"),
    param("sortOrder", "string", "asc or desc (default)"),
];

const SEARCH_PARAMS: &[Param] = &[
    param("search", "string", "text in the code or the title (any case); codes starting with it come first"),
    param("limit", "integer", "1..250, default 10"),
    param("channel", "string", "only codes usable on this sales channel"),
];

const COMMENT_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("sortBy", "string", "created_at (default)"),
    param("sortOrder", "string", "asc or desc (default)"),
];

/// The code autocomplete's default page size (spec §8).
const SEARCH_LIMIT_DEFAULT: i64 = 10;

/// The export's deprecation lifecycle (RFC 9745 / RFC 8594): deprecated since 2026-01-01,
/// removed after 2027-06-30, replaced by bulk-jobs EXPORT with entity=discount.
const DEPRECATED_SINCE: &str = "@1767225600";
const SUNSET: &str = "Wed, 30 Jun 2027 00:00:00 GMT";

const VALUE_TYPES: &[&str] = &["percentage", "fixedAmount", "freeShipping", "buyXGetY"];

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/discounts";
    let one = "/stores/{storeId}/discounts/{discountId}";
    let comments = "/stores/{storeId}/discounts/{discountId}/comments";
    let comment = "/stores/{storeId}/discounts/{discountId}/comments/{commentId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List discounts").query(LIST_PARAMS),
        Route::post(p, Cell, Member, handler!(create), "Create a discount: a code discount with `code`, automatic without")
            .body::<DiscountInput>(),
        Route::get(one, Cell, Member, handler!(get), "One discount"),
        Route::patch(one, Cell, Member, handler!(update), "Replace a discount (the whole body; id and usage are kept)")
            .body::<DiscountInput>(),
        Route::delete(one, Cell, Member, handler!(delete), "Delete a discount with its usage counts and comments"),
        Route::post(
            "/stores/{storeId}/discounts/validate",
            Cell,
            Member,
            handler!(validate),
            "Validate a code against a cart: 200 {valid, discount, amount, reasons}, valid false when it does not apply",
        )
        .body::<ValidateBody>(),
        Route::post(
            "/stores/{storeId}/discounts/validate-many",
            Cell,
            Member,
            handler!(validate_many),
            "Validate up to 10 codes in sequence, respecting combination rules",
        )
        .body::<ValidateManyBody>(),
        Route::get(
            "/stores/{storeId}/discounts/codes/search",
            Cell,
            Member,
            handler!(search_codes),
            "Search ACTIVE discount codes (draft-order autocomplete)",
        )
        .query(SEARCH_PARAMS),
        Route::post(
            "/stores/{storeId}/discounts/automatic/eligible",
            Cell,
            Member,
            handler!(eligible),
            "The automatic discounts that apply to a cart, with their amounts",
        )
        .body::<EligibleBody>(),
        Route::get(
            "/stores/{storeId}/discounts/export",
            Cell,
            Member,
            handler!(export),
            "DEPRECATED, not implemented: always 503; use POST bulk-jobs {operation: EXPORT, entity: discount}",
        ),
        Route::get(comments, Cell, Member, handler!(list_comments), "A discount's comments, oldest first by default")
            .query(COMMENT_PARAMS),
        Route::post(comments, Cell, Member, handler!(add_comment), "Comment on a discount").body::<CommentInput>(),
        Route::patch(comment, Cell, Member, handler!(update_comment), "Change a comment (its author, an owner or an admin)")
            .body::<CommentInput>(),
        Route::delete(comment, Cell, Member, handler!(delete_comment), "Delete a comment (its author, an owner or an admin)"),
    ]
}

/// `POST S/discounts/validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateBody {
    pub code: String,
    pub cart: CartContext,
}

/// `POST S/discounts/validate-many`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateManyBody {
    /// 1 to 10 codes, tried in this order.
    pub codes: Vec<String>,
    pub cart: CartContext,
}

/// `POST S/discounts/automatic/eligible`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EligibleBody {
    pub cart: CartContext,
}

fn filter(cx: &Ctx) -> ApiResult<DiscountFilter> {
    let q = &cx.query;
    let status = q.one_of("status", &["ACTIVE", "SCHEDULED", "EXPIRED", "DISABLED"])?.map(|s| match s {
        "ACTIVE" => DiscountStatus::Active,
        "SCHEDULED" => DiscountStatus::Scheduled,
        "EXPIRED" => DiscountStatus::Expired,
        _ => DiscountStatus::Disabled,
    });
    let type_param = if q.str("type").is_some() { "type" } else { "valueType" };
    let value_type = q.one_of(type_param, VALUE_TYPES)?.map(|t| match t {
        "percentage" => ValueType::Percentage,
        "fixedAmount" => ValueType::FixedAmount,
        "freeShipping" => ValueType::FreeShipping,
        _ => ValueType::BuyXGetY,
    });
    let code = q.one_of("method", &["code", "automatic"])?.map(|m| m == "code");
    let search = q.str("search").map(|s| s.trim().to_lowercase()).filter(|s| !s.is_empty());
    Ok(DiscountFilter { status, value_type, code, search })
}

async fn list(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let paging = Paging::from_query(&cx.query, SORT_FIELDS, "created_at")?;
    let now = cx.node.clock.now_ms();
    let (discounts, total) = s.cell.list_discounts(s.id, &filter(&cx)?, &paging, now)?;
    let data: Vec<_> = discounts.iter().map(|d| d.view(now)).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn create(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: DiscountInput = cx.json()?;
    let d = s.cell.create_discount(s.id, body).await?;
    Ok(created(&d.view(cx.node.clock.now_ms())))
}

async fn get(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let d = s.cell.discount(s.id, cx.path_id("discountId")?)?;
    Ok(ok(&d.view(cx.node.clock.now_ms())))
}

async fn update(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let id = cx.path_id("discountId")?;
    let body: DiscountInput = cx.json()?;
    let d = s.cell.update_discount(s.id, id, body).await?;
    Ok(ok(&d.view(cx.node.clock.now_ms())))
}

async fn delete(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    s.cell.delete_discount(s.id, cx.path_id("discountId")?).await?;
    Ok(no_content())
}

async fn validate(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: ValidateBody = cx.json()?;
    let code = body.code.trim();
    if code.is_empty() || code.len() > 255 {
        return Err(ApiError::field("code", "must be 1 to 255 characters"));
    }
    let now = cx.node.clock.now_ms();
    let priced = s.cell.price(
        s.id,
        &CalcRequest::from_cart(s.cell.resolve_cart_context(s.id, body.cart)?, vec![code.to_string()])?,
        now,
    )?;
    Ok(ok(&priced.code_result(0, now)))
}

async fn validate_many(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: ValidateManyBody = cx.json()?;
    if body.codes.is_empty() || body.codes.len() > MAX_CODES_PER_REQUEST {
        return Err(ApiError::field("codes", format!("must hold 1 to {MAX_CODES_PER_REQUEST} codes")));
    }
    if let Some(i) = body.codes.iter().position(|c| c.trim().is_empty() || c.trim().len() > 255) {
        return Err(ApiError::field(format!("codes[{i}]"), "must be 1 to 255 characters"));
    }
    let n = body.codes.len();
    let now = cx.node.clock.now_ms();
    let priced = s.cell.price(s.id, &CalcRequest::from_cart(s.cell.resolve_cart_context(s.id, body.cart)?, body.codes)?, now)?;
    let results: Vec<_> = (0..n).map(|i| priced.code_result(i, now)).collect();
    Ok(ok(&json!({"results": results, "appliedCodes": priced.calculation.applied_discount_codes})))
}

async fn search_codes(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let limit = cx.query.int("limit", SEARCH_LIMIT_DEFAULT, 1, LIMIT_MAX.into())? as usize;
    let now = cx.node.clock.now_ms();
    let found = s.cell.search_codes(s.id, cx.query.str("search"), cx.query.str("channel"), limit, now)?;
    let data: Vec<_> = found.iter().map(|d| d.view(now)).collect();
    Ok(ok(&json!({"data": data})))
}

async fn eligible(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let body: EligibleBody = cx.json()?;
    let now = cx.node.clock.now_ms();
    let priced = s.cell.price(s.id, &CalcRequest::from_cart(s.cell.resolve_cart_context(s.id, body.cart)?, Vec::new())?, now)?;
    Ok(ok(&json!({"discounts": priced.eligible_automatic(now)})))
}

/// Always 503, with the headers of a deprecated operation pointing at its successor.
async fn export(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let e = ApiError::msg(
        Code::UNAVAILABLE,
        "discount export is not implemented and is deprecated; use POST bulk-jobs with operation EXPORT and entity discount",
    );
    let mut r = error(&e);
    let link = format!("</api/v1/stores/{}/bulk-jobs>; rel=\"successor-version\"", s.id);
    let headers = r.headers_mut();
    headers.insert(HeaderName::from_static("deprecation"), HeaderValue::from_static(DEPRECATED_SINCE));
    headers.insert(HeaderName::from_static("sunset"), HeaderValue::from_static(SUNSET));
    headers.insert(hyper::header::LINK, HeaderValue::from_str(&link).map_err(ApiError::internal)?);
    Ok(r)
}

async fn list_comments(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let mut paging = Paging::from_query(&cx.query, &["created_at"], "created_at")?;
    // A conversation reads oldest first unless asked otherwise.
    if cx.query.str("sortOrder").is_none() {
        paging.desc = false;
    }
    let (comments, total) = s.cell.list_discount_comments(s.id, cx.path_id("discountId")?, &paging)?;
    let data: Vec<_> = comments.iter().map(|c| c.view()).collect();
    Ok(ok(&Page::new(data, total, paging.page, paging.limit)))
}

async fn add_comment(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let author = cx.user()?.user_id;
    let body: CommentInput = cx.json()?;
    let c = s.cell.add_discount_comment(s.id, cx.path_id("discountId")?, author, body).await?;
    Ok(created(&c.view()))
}

async fn update_comment(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let user = cx.user()?.user_id;
    let body: CommentInput = cx.json()?;
    let (discount, comment) = (cx.path_id("discountId")?, cx.path_id("commentId")?);
    let c = s.cell.update_discount_comment(s.id, discount, comment, user, s.role, body).await?;
    Ok(ok(&c.view()))
}

async fn delete_comment(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let user = cx.user()?.user_id;
    let (discount, comment) = (cx.path_id("discountId")?, cx.path_id("commentId")?);
    s.cell.delete_discount_comment(s.id, discount, comment, user, s.role).await?;
    Ok(no_content())
}
