//! `GET S/products/search`: product search on the cell's tantivy index.
//!
//! Paging: `page`/`limit` for the first 10,000 hits, and the opaque `cursor` of `nextCursor`
//! for any depth (search-after on the sort key and the product id; see `search::query`). A
//! cursor only fits the query, `searchBy`, `search` and `sort` it came from.
//!
//! Storefront route: shoppers (publishable key) search ACTIVE products only. Answers are kept in
//! the cell's answer cache (`search::cache`) under everything that shapes them, and served from it
//! while neither the store's rows nor the index have changed.

use crate::domain::product::Status;
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::context::Ctx;
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX};
use crate::http::route::{Access, Param, Route, Service, param, required};
use crate::http::{Resp, envelope_body, ok_raw};
use crate::search::MAX_OFFSET;
use crate::search::query::{Cursor, SearchBy, SearchRequest, Sort, fingerprint};

/// Longest accepted `q` or `search`, in characters.
pub const TERM_MAX_CHARS: usize = 200;

const PARAMS: &[Param] = &[
    required("q", "string", "what to look for"),
    param("searchBy", "string", "all (default), title, sku, variantTitle or barcode"),
    param("search", "string", "a second term that results must also match (same searchBy)"),
    param("sort", "string", "relevance (default), price_asc, price_desc, title_asc, title_desc, created_desc"),
    param("page", "integer", "1-based page, default 1 (page × limit at most 10000; use cursor beyond)"),
    param("limit", "integer", "page size, 1..250, default 20"),
    param("cursor", "string", "nextCursor of the previous page; replaces page"),
];

pub fn routes() -> Vec<Route> {
    vec![
        Route::get(
            "/stores/{storeId}/products/search",
            Service::Cell,
            Access::Storefront,
            handler!(search),
            "Search products (shoppers: ACTIVE ones only)",
        )
        .query(PARAMS),
    ]
}

/// A search term parameter: trimmed, bounded.
pub fn term<'a>(cx: &'a Ctx, name: &str) -> ApiResult<Option<&'a str>> {
    match cx.query.str(name).map(str::trim) {
        Some(t) if t.chars().count() > TERM_MAX_CHARS => {
            Err(ApiError::field(name, format!("must be at most {TERM_MAX_CHARS} characters")))
        }
        Some("") | None => Ok(None),
        Some(t) => Ok(Some(t)),
    }
}

async fn search(cx: Ctx) -> ApiResult<Resp> {
    let s = cx.scope()?;
    let q = term(&cx, "q")?.ok_or_else(|| ApiError::field("q", "is required"))?;
    let by_name = cx.query.one_of("searchBy", SearchBy::NAMES)?.unwrap_or("all");
    let by = SearchBy::parse(by_name).ok_or_else(|| ApiError::field("searchBy", "is not supported"))?;
    let sort_name = cx.query.one_of("sort", Sort::NAMES)?.unwrap_or("relevance");
    let sort = Sort::parse(sort_name).ok_or_else(|| ApiError::field("sort", "is not supported"))?;
    let second = term(&cx, "search")?;
    let limit = cx.query.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as usize;
    let fp = fingerprint(&[by_name, q, second.unwrap_or(""), sort_name]);
    let after = cx.query.str("cursor").map(|c| Cursor::decode(c, sort, fp)).transpose()?;
    let page = match &after {
        Some(c) => c.page,
        None => {
            let page = cx.query.int("page", 1, 1, i64::from(u32::MAX))? as u32;
            if (page as usize).saturating_mul(limit) > MAX_OFFSET {
                return Err(ApiError::field("page", format!("page × limit must be at most {MAX_OFFSET}; page on with cursor")));
            }
            page
        }
    };
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
    let tag = s.cell.search_tag(s.id);
    if let Some(body) = s.cell.search.answers.get(&key, tag) {
        return Ok(ok_raw(body));
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
    let (views, hits) = s.cell.search_product_views(&req, fp)?;
    let next_cursor = hits.next.map(|c| c.encode());
    let body = bytes::Bytes::from(envelope_body(
        &views,
        &[
            ("total", hits.total.into()),
            ("page", page.into()),
            ("limit", limit.into()),
            ("totalPages", hits.total.div_ceil(limit as u64).into()),
            ("nextCursor", next_cursor.into()),
        ],
    ));
    s.cell.search.answers.put(key, tag, body.clone());
    Ok(ok_raw(body))
}
