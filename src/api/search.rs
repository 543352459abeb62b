//! `GET S/products/search`: product search on the cell's tantivy index.
//!
//! Paging: `page`/`limit` for the first 10,000 hits, and the opaque `cursor` of `nextCursor`
//! for any depth (search-after on the sort key and the product id; see `search::query`). A
//! cursor only fits the query, `searchBy`, `search` and `sort` it came from.
//!
//! Storefront route: shoppers (publishable key) search ACTIVE products only. Answers are kept in
//! the cell's answer cache (`search::cache`) under everything that shapes them, and served from it
//! while neither the store's rows nor the index have changed.

use bytes::Bytes;
use schemars::JsonSchema;
use serde::Serialize;

use crate::cells::product_search;
use crate::domain::product::{ProductView, Status};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::envelope_body;
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX, Query};
use crate::http::reply::Rendered;
use crate::http::route::{Access, Param, QueryParams, Service, param, required};
use crate::node::context::{Ctx, Route};
use crate::search::MAX_OFFSET;
use crate::search::query::{Cursor, SearchBy, SearchRequest, Sort, fingerprint};

/// Longest accepted `q` or `search`, in characters.
pub const TERM_MAX_CHARS: usize = 200;

/// The query parameters it reads.
fn query_params() -> Vec<Param> {
    vec![
        required("q", "string", "what to look for"),
        param("searchBy", "string", "all (default), title, sku, variantTitle or barcode").one_of(SearchBy::NAMES),
        param("search", "string", "a second term that results must also match (same searchBy)"),
        param("sort", "string", "relevance (default), price_asc, price_desc, title_asc, title_desc, created_desc")
            .one_of(Sort::NAMES),
        param("page", "integer", "1-based page, default 1 (page × limit at most 10000; use cursor beyond)")
            .range(1, u32::MAX as i64),
        param("limit", "integer", "page size, 1..250, default 20").range(1, 250),
        param("cursor", "string", "nextCursor of the previous page; replaces page"),
    ]
}

pub fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/stores/{storeId}/products/search",
            Service::Cell,
            Access::Storefront,
            handler!(search),
            "Search products (shoppers: ACTIVE ones only)",
        )
        .id("searchProducts"),
    ]
}

/// A page of search results: the list envelope and the cursor of the next page. Answers are
/// written from the products' rendered views ([`envelope_body`]); this is their shape.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(rename = "SearchPage_of_{T}")]
pub struct SearchPage<T> {
    pub data: Vec<T>,
    pub total: u64,
    pub page: u32,
    pub limit: u32,
    pub total_pages: u64,
    /// The `cursor` of the next page; `null` on the last.
    pub next_cursor: Option<String>,
}

/// A search term parameter: trimmed, bounded.
pub fn term<'a>(q: &'a Query, name: &str) -> ApiResult<Option<&'a str>> {
    match q.str(name).map(str::trim) {
        Some(t) if t.chars().count() > TERM_MAX_CHARS => {
            Err(ApiError::field(name, format!("must be at most {TERM_MAX_CHARS} characters")))
        }
        Some("") | None => Ok(None),
        Some(t) => Ok(Some(t)),
    }
}

/// A search's query, checked. The terms themselves stay in the request's query
/// ([`SearchQuery::terms`]): copying them out would cost an allocation per search.
pub struct SearchQuery {
    by_name: &'static str,
    by: SearchBy,
    sort_name: &'static str,
    sort: Sort,
    limit: usize,
    page: u32,
    fingerprint: u32,
    after: Option<Cursor>,
}

impl SearchQuery {
    /// `q` and the second term `search`.
    fn terms(q: &Query) -> ApiResult<(&str, Option<&str>)> {
        Ok((first_term(q)?, term(q, "search")?))
    }
}

fn first_term(q: &Query) -> ApiResult<&str> {
    term(q, "q")?.ok_or_else(|| ApiError::field("q", "is required"))
}

impl QueryParams for SearchQuery {
    fn params() -> Vec<Param> {
        query_params()
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        // Checked in the order the parameters have always been, so the first error is the same.
        let first = first_term(q)?;
        let by_name = q.one_of("searchBy", SearchBy::NAMES)?.unwrap_or("all");
        let by = SearchBy::parse(by_name).ok_or_else(|| ApiError::field("searchBy", "is not supported"))?;
        let sort_name = q.one_of("sort", Sort::NAMES)?.unwrap_or("relevance");
        let sort = Sort::parse(sort_name).ok_or_else(|| ApiError::field("sort", "is not supported"))?;
        let second = term(q, "search")?;
        let limit = q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as usize;
        let fp = fingerprint(&[by_name, first, second.unwrap_or(""), sort_name]);
        let after = q.str("cursor").map(|c| Cursor::decode(c, sort, fp)).transpose()?;
        let page = match &after {
            Some(c) => c.page,
            None => {
                let page = q.int("page", 1, 1, i64::from(u32::MAX))? as u32;
                if (page as usize).saturating_mul(limit) > MAX_OFFSET {
                    return Err(ApiError::field(
                        "page",
                        format!("page × limit must be at most {MAX_OFFSET}; page on with cursor"),
                    ));
                }
                page
            }
        };
        Ok(SearchQuery { by_name, by, sort_name, sort, limit, page, fingerprint: fp, after })
    }
}

async fn search(cx: Ctx, sq: SearchQuery) -> ApiResult<Rendered<SearchPage<ProductView<'static>>>> {
    let s = cx.scope()?;
    let (q, second) = SearchQuery::terms(&cx.query)?;
    let SearchQuery { by_name, by, sort_name, sort, limit, page, fingerprint: fp, after } = sq;
    let shopper = cx.is_shopper();
    // Everything the answer depends on besides the index and the rows (the cache's tag).
    // (A decoded cursor is URL-safe base64, so `|` cannot occur in it; `q` carries its length.)
    let key = format!(
        "{}|{}|{by_name}|{sort_name}|{page}|{limit}|{}|{}|{q}{}",
        s.id,
        u8::from(shopper),
        cx.query.str("cursor").unwrap_or(""),
        q.len(),
        second.unwrap_or(""),
    );
    let tag = product_search::search_tag(&s.cell, s.id);
    let coding = cx.accepted_coding();
    if let Some(kept) = s.cell.search.answers.get(&key, tag, coding) {
        return Ok(Rendered::answer(kept));
    }
    let mut terms = vec![(q.to_string(), by)];
    if let Some(t) = second {
        terms.push((t.to_string(), by));
    }
    let req = SearchRequest {
        store: s.id,
        terms,
        status: shopper.then_some(Status::Active),
        product_type: None,
        allowed: None,
        sort,
        offset: (page as usize - 1) * limit,
        limit,
        after,
    };
    let (views, hits) = product_search::search_product_views(&s.cell, &req, fp)?;
    let next_cursor = hits.next.map(|c| c.encode());
    let body = Bytes::from(envelope_body(
        &views,
        &[
            ("total", hits.total.into()),
            ("page", page.into()),
            ("limit", limit.into()),
            ("totalPages", hits.total.div_ceil(limit as u64).into()),
            ("nextCursor", next_cursor.into()),
        ],
    ));
    Ok(Rendered::answer(s.cell.search.answers.put(key, tag, body, coding)))
}
