//! A list's query string, read by the declaration of its record: the window (`page` and
//! `limit`, or `offset` and `limit`), `sortBy` (the record's sortable fields), `sortOrder`, its
//! filters, ranges and `search`. The parameters a
//! list documents are the ones this reads, so the reference cannot drift from the code.

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::Serialize;

use crate::domain::time::parse_rfc3339;
use crate::error::{ApiError, ApiResult};
use crate::http::query::{LIMIT_DEFAULT, LIMIT_MAX, Query};
use crate::http::route::{Param, QueryParams, param};
use crate::http::{OffsetPage, Page};
use crate::storage::list::{ListQuery, Listed};
use crate::storage::record::{FilterKind, Listable, SHOWN};

/// The query of a page-style list of `R` (`page`, `limit`).
pub struct ListOf<R> {
    pub query: ListQuery,
    pub page: u32,
    pub limit: u32,
    _of: PhantomData<fn() -> R>,
}

impl<R> ListOf<R> {
    /// The envelope of `API.md` around a page.
    pub fn page<V: Serialize>(&self, listed: Listed<V>) -> Page<V> {
        Page::new(listed.items, listed.total, self.page, self.limit)
    }
}

/// The query of an offset-style list of `R` (`offset`, `limit`).
pub struct OffsetListOf<R> {
    pub query: ListQuery,
    _of: PhantomData<fn() -> R>,
}

impl<R> OffsetListOf<R> {
    /// The offset envelope of `API.md` around a window.
    pub fn page<V: Serialize>(&self, listed: Listed<V>) -> OffsetPage<V> {
        OffsetPage::new(listed.items, listed.total, self.query.offset as u64, self.query.limit as u64)
    }
}

/// A page-style window over something that is not a record list (a collection's products):
/// `page` and `limit` alone.
pub struct PageWindow {
    pub page: u32,
    pub limit: u32,
}

impl PageWindow {
    /// How many items precede the page.
    pub fn offset(&self) -> usize {
        (self.page as usize - 1).saturating_mul(self.limit as usize)
    }

    /// The envelope of `API.md` around a page of `total`.
    pub fn page<V: Serialize>(&self, items: Vec<V>, total: u64) -> Page<V> {
        Page::new(items, total, self.page, self.limit)
    }
}

impl QueryParams for PageWindow {
    fn params() -> Vec<Param> {
        vec![
            param("page", "integer", "1-based page, default 1").range(1, u32::MAX as i64),
            param("limit", "integer", "page size, 1..250, default 20").range(1, 250),
        ]
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(PageWindow {
            page: q.int("page", 1, 1, i64::from(u32::MAX))? as u32,
            limit: q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as u32,
        })
    }
}

/// Largest `offset` an offset-style list takes: far beyond any real page, and a bound on a
/// walk's cost.
pub const MAX_OFFSET: i64 = 1_000_000;

impl<R: Listable> QueryParams for ListOf<R> {
    fn params() -> Vec<Param> {
        params_of::<R>(PageWindow::params())
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        let window = PageWindow::parse(q)?;
        let query = query_of::<R>(q, sort_of::<R>(q)?, desc(q)?, window.offset(), window.limit as usize)?;
        Ok(ListOf { query, page: window.page, limit: window.limit, _of: PhantomData })
    }
}

impl<R: Listable> QueryParams for OffsetListOf<R> {
    fn params() -> Vec<Param> {
        let window = vec![
            param("offset", "integer", "records skipped, default 0").range(0, MAX_OFFSET),
            param("limit", "integer", "page size, 1..250, default 20").range(1, 250),
        ];
        params_of::<R>(window)
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        let offset = q.int("offset", 0, 0, MAX_OFFSET)? as usize;
        let limit = q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as usize;
        Ok(OffsetListOf { query: query_of::<R>(q, sort_of::<R>(q)?, desc(q)?, offset, limit)?, _of: PhantomData })
    }
}

/// `sortBy`: one of the record's sortable fields, spelled as listed, else its default.
fn sort_of<R: Listable>(q: &Query) -> ApiResult<&'static str> {
    let list = &R::LIST;
    let Some(raw) = q.str("sortBy") else { return Ok(list.default_sort) };
    // Found without allocating: the names are listed only for the error.
    list.sorts.iter().find(|s| s.name == raw).map(|s| s.name).ok_or_else(|| {
        let names: Vec<&str> = list.sorts.iter().map(|s| s.name).collect();
        ApiError::field("sortBy", format!("must be one of: {}", names.join(", ")))
    })
}

/// `sortOrder`: `desc` unless `asc`.
fn desc(q: &Query) -> ApiResult<bool> {
    Ok(q.one_of("sortOrder", &["asc", "desc"])?.unwrap_or("desc") == "desc")
}

/// A list's parameters after its window: sort, filters, ranges, search.
fn params_of<R: Listable>(mut out: Vec<Param>) -> Vec<Param> {
    let list = &R::LIST;
    let sorts: Vec<String> = list
        .sorts
        .iter()
        .map(|s| if s.name == list.default_sort { format!("{} (default)", s.name) } else { s.name.to_string() })
        .collect();
    let names: Vec<&'static str> = list.sorts.iter().map(|s| s.name).collect();
    out.push(Param { doc: Cow::Owned(sorts.join(", ")), values: Cow::Owned(names), ..param("sortBy", "string", "") });
    out.push(param("sortOrder", "string", "asc or desc (default)").one_of(&["asc", "desc"]));
    for f in list.filters {
        let doc = match f.kind {
            FilterKind::Enum { values, any } | FilterKind::Timed { values, any, .. } => {
                let any = any.map(|a| format!("; {a} for every value")).unwrap_or_default();
                format!("{}: {} (comma-separated, any case{any})", f.doc, values.join(", "))
            }
            FilterKind::Reference { none: None } => format!("{} (comma-separated ids)", f.doc),
            FilterKind::Reference { none: Some(none) } => format!("{} (comma-separated ids; {none}: none)", f.doc),
            FilterKind::Hidden => format!("{} (true or false, default false)", f.doc),
            FilterKind::Code { .. } => format!("{} (comma-separated)", f.doc),
        };
        let listed = list_param(f.name, f.kind, doc);
        let alias = f.alias.map(|a| Param { name: a, doc: Cow::Owned(format!("the same as {}", f.name)), ..listed.clone() });
        out.push(listed);
        out.extend(alias);
    }
    for r in list.ranges {
        out.push(param(r.from, "string", "RFC 3339 date-time, inclusive lower bound").format("date-time"));
        out.push(param(r.to, "string", "RFC 3339 date-time, inclusive upper bound").format("date-time"));
    }
    if let Some(s) = &list.search {
        let search = param("search", "string", s.doc);
        out.push(match s.pattern {
            Some(p) => search.pattern(p),
            None => search,
        });
    }
    out
}

/// One filter's parameter as the document gives it: a comma-separated list (`style: form`,
/// `explode: false`) of the filter's values (any case: the description says so), of ids, or of
/// codes; a hidden-records switch is a boolean.
fn list_param(name: &'static str, kind: FilterKind, doc: String) -> Param {
    let base = Param { doc: Cow::Owned(doc), ..param(name, "array", "") };
    match kind {
        FilterKind::Enum { values, any } | FilterKind::Timed { values, any, .. } => {
            let mut all: Vec<&'static str> = values.to_vec();
            all.extend(any);
            Param { values: Cow::Owned(all), ..base }
        }
        FilterKind::Reference { none: None } => base.format("uuid"),
        FilterKind::Reference { none: Some(_) } => base,
        FilterKind::Code { pattern, .. } => base.pattern(pattern),
        FilterKind::Hidden => Param { kind: "boolean", ..base },
    }
}

/// The list asked for: the window and sort already read, the filters, ranges and search here.
fn query_of<R: Listable>(q: &Query, sort: &'static str, desc: bool, offset: usize, limit: usize) -> ApiResult<ListQuery> {
    let list = &R::LIST;
    let mut filters = Vec::new();
    for (i, f) in list.filters.iter().enumerate() {
        if let FilterKind::Hidden = f.kind {
            if !q.bool(f.name, false)? {
                filters.push((i, vec![SHOWN.as_bytes().to_vec()]));
            }
            continue;
        }
        let (name, raw) = match (q.str(f.name), f.alias.and_then(|a| q.str(a).map(|v| (a, v)))) {
            (Some(raw), _) => (f.name, raw),
            (None, Some((alias, raw))) => (alias, raw),
            (None, None) => continue,
        };
        if let Some(values) = filter_values(name, f.kind, raw)? {
            filters.push((i, values));
        }
    }
    let mut ranges = Vec::new();
    for (i, r) in list.ranges.iter().enumerate() {
        let (from, to) = (time(q, r.from)?, time(q, r.to)?);
        if from.is_some() || to.is_some() {
            ranges.push((i, from, to));
        }
    }
    let search = match (&list.search, q.str("search")) {
        (Some(s), Some(raw)) => {
            Some((s.normalise)(raw).ok_or_else(|| ApiError::field("search", s.invalid))?).filter(|t| !t.is_empty())
        }
        _ => None,
    };
    // A scoped list's parent comes from its path: the handler sets `scope`.
    Ok(ListQuery { scope: None, sort, desc, offset, limit, filters, ranges, search })
}

/// The values one filter parameter accepts; `None` when it asks for every value.
fn filter_values(name: &str, kind: FilterKind, raw: &str) -> ApiResult<Option<Vec<Vec<u8>>>> {
    let mut out = Vec::new();
    for part in raw.split(',').map(str::trim) {
        if part.is_empty() {
            return Err(ApiError::field(name, "has an empty value in its list"));
        }
        match kind {
            FilterKind::Enum { values, any } | FilterKind::Timed { values, any, .. } => {
                if any.is_some_and(|a| a.eq_ignore_ascii_case(part)) {
                    return Ok(None);
                }
                let v = values
                    .iter()
                    .find(|v| v.eq_ignore_ascii_case(part))
                    .ok_or_else(|| ApiError::field(name, format!("unknown value {part}; one of: {}", values.join(", "))))?;
                out.push(v.as_bytes().to_vec());
            }
            FilterKind::Reference { none } => {
                let id = match none {
                    Some(none) if none.eq_ignore_ascii_case(part) => uuid::Uuid::nil(),
                    Some(none) => {
                        uuid::Uuid::parse_str(part).map_err(|_| ApiError::field(name, format!("must be a UUID or {none}")))?
                    }
                    None => uuid::Uuid::parse_str(part).map_err(|_| ApiError::field(name, "must be a UUID"))?,
                };
                out.push(id.as_bytes().to_vec());
            }
            FilterKind::Hidden => {}
            FilterKind::Code { normalise, invalid, .. } => {
                out.push(normalise(part).ok_or_else(|| ApiError::field(name, invalid))?.into_bytes());
            }
        }
    }
    Ok(if out.is_empty() { None } else { Some(out) })
}

fn time(q: &Query, name: &str) -> ApiResult<Option<i64>> {
    q.str(name).map(|raw| parse_rfc3339(raw).ok_or_else(|| ApiError::field(name, "must be an RFC 3339 date-time"))).transpose()
}
