//! `S/discounts`: code and automatic discounts, their validation against a cart, code search,
//! eligible automatic discounts, comments, and the deprecated always-503 export.

use hyper::header::{HeaderName, HeaderValue};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::cells::calculate::{self, CalcRequest, CartContext, CodeResult, Eligible};
use crate::cells::carts;
use crate::cells::discount_comments::{self, CommentInput, CommentView, DiscountComment};
use crate::cells::discounts;
use crate::domain::fields;
use crate::domain::pricing::discount::{Discount, DiscountInput, DiscountView, MAX_CODES_PER_REQUEST};
use crate::error::{ApiError, ApiResult, Code};
use crate::handler;
use crate::http::list::ListOf;
use crate::http::query::{LIMIT_MAX, Query};
use crate::http::reply::{Created, Json, NoContent, Reply, ReplyDoc};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::http::{Page, Resp, error};
use crate::node::context::{Ctx, Route};

/// The code autocomplete's default page size (spec §8).
const SEARCH_LIMIT_DEFAULT: i64 = 10;

/// The export's deprecation lifecycle (RFC 9745 / RFC 8594): deprecated since 2026-01-01,
/// removed after 2027-06-30, replaced by bulk-jobs EXPORT with entity=discount.
const DEPRECATED_SINCE: &str = "@1767225600";
const SUNSET: &str = "Wed, 30 Jun 2027 00:00:00 GMT";

pub fn routes() -> Vec<Route> {
    use Access::Member;
    use Service::Cell;
    let p = "/stores/{storeId}/discounts";
    let one = "/stores/{storeId}/discounts/{discountId}";
    let comments = "/stores/{storeId}/discounts/{discountId}/comments";
    let comment = "/stores/{storeId}/discounts/{discountId}/comments/{commentId}";
    vec![
        Route::get(p, Cell, Member, handler!(list), "List discounts"),
        Route::post(p, Cell, Member, handler!(create), "Create a discount: a code discount with `code`, automatic without")
            .errors(&[409])
            .body::<DiscountInput>(),
        Route::get(one, Cell, Member, handler!(get), "One discount"),
        Route::patch(one, Cell, Member, handler!(update), "Replace a discount (the whole body; id and usage are kept)")
            .errors(&[409])
            .body::<DiscountInput>(),
        Route::delete(one, Cell, Member, handler!(delete), "Delete a discount with its usage counts and comments"),
        Route::post(
            "/stores/{storeId}/discounts/validate",
            Cell,
            Member,
            handler!(validate),
            "Validate a code against a cart: 200 {valid, discount, amount, reasons}, valid false when it does not apply",
        )
        .id("validateDiscountCode")
        .body::<ValidateBody>(),
        Route::post(
            "/stores/{storeId}/discounts/validate-many",
            Cell,
            Member,
            handler!(validate_many),
            "Validate up to 10 codes in sequence, respecting combination rules",
        )
        .id("validateDiscountCodes")
        .body::<ValidateManyBody>(),
        Route::get(
            "/stores/{storeId}/discounts/codes/search",
            Cell,
            Member,
            handler!(search_codes),
            "Search ACTIVE discount codes (draft-order autocomplete)",
        )
        .id("searchDiscountCodes"),
        Route::post(
            "/stores/{storeId}/discounts/automatic/eligible",
            Cell,
            Member,
            handler!(eligible),
            "The automatic discounts that apply to a cart, with their amounts",
        )
        .id("listEligibleAutomaticDiscounts")
        .body::<EligibleBody>(),
        // Answered by whichever host receives it, to anyone: the answer is the same for all.
        Route::get(
            "/stores/{storeId}/discounts/export",
            Service::Global,
            Access::Public,
            handler!(export),
            "DEPRECATED, not implemented: always 503; use POST bulk-jobs {operation: EXPORT, entity: discount}",
        )
        .id("exportDiscounts")
        .deprecated()
        .answers::<AlwaysUnavailable>(),
        Route::get(comments, Cell, Member, handler!(list_comments), "A discount's comments, oldest first by default"),
        Route::post(comments, Cell, Member, handler!(add_comment), "Comment on a discount").body::<CommentInput>(),
        Route::patch(comment, Cell, Member, handler!(update_comment), "Change a comment (its author, an owner or an admin)")
            .errors(&[403])
            .body::<CommentInput>(),
        Route::delete(comment, Cell, Member, handler!(delete_comment), "Delete a comment (its author, an owner or an admin)")
            .errors(&[403]),
    ]
}

/// `POST S/discounts/validate`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateBody {
    #[schemars(length(min = 1, max = 255), pattern(fields::NOT_BLANK))]
    pub code: String,
    pub cart: CartContext,
}

/// `POST S/discounts/validate-many`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ValidateManyBody {
    /// 1 to 10 codes, tried in this order.
    #[schemars(length(min = 1, max = MAX_CODES_PER_REQUEST), inner(length(min = 1, max = 255), pattern(fields::NOT_BLANK)))]
    pub codes: Vec<String>,
    pub cart: CartContext,
}

/// `POST S/discounts/automatic/eligible`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct EligibleBody {
    pub cart: CartContext,
}

async fn list(cx: Ctx, q: ListOf<Discount>) -> ApiResult<Json<Page<DiscountView>>> {
    let s = cx.scope()?;
    let now = cx.node.clock.now_ms();
    let listed = s.cell.list::<Discount>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|d| d.view(now)))))
}

async fn create(cx: Ctx) -> ApiResult<Created<DiscountView>> {
    let s = cx.scope()?;
    let d = discounts::create(&s.cell, s.id, cx.json()?).await?;
    Ok(Created(d.view(cx.node.clock.now_ms())))
}

async fn get(cx: Ctx) -> ApiResult<Json<DiscountView>> {
    let s = cx.scope()?;
    let d = s.cell.get::<Discount>(s.id, cx.path_id("discountId")?)?;
    Ok(Json(d.view(cx.node.clock.now_ms())))
}

async fn update(cx: Ctx) -> ApiResult<Json<DiscountView>> {
    let s = cx.scope()?;
    let id = cx.path_id("discountId")?;
    let d = discounts::update(&s.cell, s.id, id, cx.json()?).await?;
    Ok(Json(d.view(cx.node.clock.now_ms())))
}

async fn delete(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    discounts::delete(&s.cell, s.id, cx.path_id("discountId")?).await?;
    Ok(NoContent)
}

async fn validate(cx: Ctx) -> ApiResult<Json<CodeResult>> {
    let s = cx.scope()?;
    let body: ValidateBody = cx.json()?;
    let code = body.code.trim();
    if code.is_empty() || code.chars().count() > 255 {
        return Err(ApiError::field("code", "must be 1 to 255 characters"));
    }
    let now = cx.node.clock.now_ms();
    let priced = calculate::price(
        &s.cell,
        s.id,
        &CalcRequest::from_cart(carts::resolve_cart_context(&s.cell, s.id, body.cart)?, vec![code.to_string()])?,
        now,
    )?;
    Ok(Json(priced.code_result(0, now)))
}

/// The verdicts of `validate-many`, in the order of the codes, and the codes that applied together.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ValidateManyAnswer {
    results: Vec<CodeResult>,
    applied_codes: Vec<String>,
}

async fn validate_many(cx: Ctx) -> ApiResult<Json<ValidateManyAnswer>> {
    let s = cx.scope()?;
    let body: ValidateManyBody = cx.json()?;
    if body.codes.is_empty() || body.codes.len() > MAX_CODES_PER_REQUEST {
        return Err(ApiError::field("codes", format!("must hold 1 to {MAX_CODES_PER_REQUEST} codes")));
    }
    if let Some(i) = body.codes.iter().position(|c| c.trim().is_empty() || c.trim().chars().count() > 255) {
        return Err(ApiError::field(format!("codes[{i}]"), "must be 1 to 255 characters"));
    }
    let n = body.codes.len();
    let now = cx.node.clock.now_ms();
    let priced = calculate::price(
        &s.cell,
        s.id,
        &CalcRequest::from_cart(carts::resolve_cart_context(&s.cell, s.id, body.cart)?, body.codes)?,
        now,
    )?;
    let results = (0..n).map(|i| priced.code_result(i, now)).collect();
    Ok(Json(ValidateManyAnswer { results, applied_codes: priced.calculation.applied_discount_codes }))
}

/// The query of the code search.
pub struct CodeSearch {
    search: Option<String>,
    channel: Option<String>,
    page: u32,
    limit: u32,
}

impl QueryParams for CodeSearch {
    fn params() -> Vec<Param> {
        vec![
            param("search", "string", "text in the code or the title (any case); codes starting with it come first"),
            param("channel", "string", "only codes usable on this sales channel"),
            param("page", "integer", "1-based page, default 1").range(1, CODE_SEARCH_PAGES),
            param("limit", "integer", "1..250, default 10").range(1, 250),
        ]
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(CodeSearch {
            search: q.str("search").map(str::to_string),
            channel: q.str("channel").map(str::to_string),
            page: q.int("page", 1, 1, CODE_SEARCH_PAGES)? as u32,
            limit: q.int("limit", SEARCH_LIMIT_DEFAULT, 1, LIMIT_MAX.into())? as u32,
        })
    }
}

/// Deepest page of the code search: an autocomplete is read from its first pages.
const CODE_SEARCH_PAGES: i64 = 1000;

async fn search_codes(cx: Ctx, q: CodeSearch) -> ApiResult<Json<Page<DiscountView>>> {
    let s = cx.scope()?;
    let now = cx.node.clock.now_ms();
    let offset = (q.page as usize - 1) * q.limit as usize;
    let window = (offset, q.limit as usize);
    let (found, total) = discounts::search_codes(&s.cell, s.id, q.search.as_deref(), q.channel.as_deref(), window, now)?;
    Ok(Json(Page::new(found.iter().map(|d| d.view(now)).collect(), total, q.page, q.limit)))
}

/// `{discounts}`: the automatic discounts that apply, with their amounts.
#[derive(Serialize, JsonSchema)]
pub struct EligibleAnswer {
    discounts: Vec<Eligible>,
}

async fn eligible(cx: Ctx) -> ApiResult<Json<EligibleAnswer>> {
    let s = cx.scope()?;
    let body: EligibleBody = cx.json()?;
    let now = cx.node.clock.now_ms();
    let priced = calculate::price(
        &s.cell,
        s.id,
        &CalcRequest::from_cart(carts::resolve_cart_context(&s.cell, s.id, body.cart)?, Vec::new())?,
        now,
    )?;
    Ok(Json(EligibleAnswer { discounts: priced.eligible_automatic(now) }))
}

/// What the export answers: never a success, always the 503 error.
pub struct AlwaysUnavailable;

impl Reply for AlwaysUnavailable {
    fn into_resp(self) -> Resp {
        error(&ApiError::new(Code::UNAVAILABLE))
    }
    fn doc(_: &mut schemars::SchemaGenerator) -> Option<ReplyDoc> {
        Some(ReplyDoc {
            status: 503,
            content_type: Some("application/json"),
            schema: Some(schemars::json_schema!({"$ref": "#/components/schemas/Error"})),
            type_name: "Error".into(),
        })
    }
}

/// Always 503, with the headers of a deprecated operation pointing at its successor.
async fn export(cx: Ctx) -> ApiResult<Resp> {
    let e = ApiError::msg(
        Code::UNAVAILABLE,
        "discount export is not implemented and is deprecated; use POST bulk-jobs with operation EXPORT and entity discount",
    );
    let mut r = error(&e);
    // The id as given, checked or not: this answer refuses everyone alike.
    let store: String = cx.param("storeId").chars().filter(|c| c.is_ascii_alphanumeric() || *c == '-').collect();
    let link = format!("</api/v1/stores/{store}/bulk-jobs>; rel=\"successor-version\"");
    let headers = r.headers_mut();
    headers.insert(HeaderName::from_static("deprecation"), HeaderValue::from_static(DEPRECATED_SINCE));
    headers.insert(HeaderName::from_static("sunset"), HeaderValue::from_static(SUNSET));
    headers.insert(hyper::header::LINK, HeaderValue::from_str(&link).map_err(ApiError::internal)?);
    Ok(r)
}

async fn list_comments(cx: Ctx, mut q: ListOf<DiscountComment>) -> ApiResult<Json<Page<CommentView>>> {
    let s = cx.scope()?;
    let discount = cx.path_id("discountId")?;
    // A comment list of no discount is a 404, not an empty page.
    s.cell.get::<Discount>(s.id, discount)?;
    // A conversation reads oldest first unless asked otherwise.
    if cx.query.str("sortOrder").is_none() {
        q.query.desc = false;
    }
    q.query.scope = Some(discount);
    let listed = s.cell.list::<DiscountComment>(s.id, &q.query).await?;
    Ok(Json(q.page(listed.map(|c| c.view()))))
}

async fn add_comment(cx: Ctx) -> ApiResult<Created<CommentView>> {
    let s = cx.scope()?;
    let author = cx.user()?.user_id;
    let c = discount_comments::add(&s.cell, s.id, cx.path_id("discountId")?, author, cx.json()?).await?;
    Ok(Created(c.view()))
}

async fn update_comment(cx: Ctx) -> ApiResult<Json<CommentView>> {
    let s = cx.scope()?;
    let user = cx.user()?.user_id;
    let ids = (cx.path_id("discountId")?, cx.path_id("commentId")?);
    let c = discount_comments::update(&s.cell, s.id, ids, (user, s.role), cx.json()?).await?;
    Ok(Json(c.view()))
}

async fn delete_comment(cx: Ctx) -> ApiResult<NoContent> {
    let s = cx.scope()?;
    let user = cx.user()?.user_id;
    let ids = (cx.path_id("discountId")?, cx.path_id("commentId")?);
    discount_comments::delete(&s.cell, s.id, ids, (user, s.role)).await?;
    Ok(NoContent)
}
