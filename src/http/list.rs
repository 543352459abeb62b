//! A list's query string, read by the declaration of its record: `page`, `limit`, `sortBy` (the
//! record's sortable fields), `sortOrder`, its filters, ranges and `search`. The parameters a
//! list documents are the ones this reads, so the reference cannot drift from the code.

use std::borrow::Cow;
use std::marker::PhantomData;

use serde::Serialize;

use crate::domain::time::parse_rfc3339;
use crate::error::{ApiError, ApiResult};
use crate::http::Page;
use crate::http::query::{Paging, Query};
use crate::http::route::{Param, QueryParams, param};
use crate::storage::list::{ListQuery, Listed};
use crate::storage::record::{FilterKind, Record};

/// The query of a page-style list of `R`.
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

fn sort_names<R: Record>() -> Vec<&'static str> {
    R::LIST.sorts.iter().map(|s| s.name).collect()
}

impl<R: Record> QueryParams for ListOf<R> {
    fn params() -> Vec<Param> {
        let list = &R::LIST;
        let sorts: Vec<String> = list
            .sorts
            .iter()
            .map(|s| if s.name == list.default_sort { format!("{} (default)", s.name) } else { s.name.to_string() })
            .collect();
        let mut out = vec![
            param("page", "integer", "1-based page, default 1"),
            param("limit", "integer", "page size, 1..250, default 20"),
            Param { doc: Cow::Owned(sorts.join(", ")), ..param("sortBy", "string", "") },
            param("sortOrder", "string", "asc or desc (default)"),
        ];
        for f in list.filters {
            let doc = match f.kind {
                FilterKind::Enum { values, any } => {
                    let any = any.map(|a| format!("; {a} for every value")).unwrap_or_default();
                    format!("{}: {} (comma-separated, any case{any})", f.doc, values.join(", "))
                }
                FilterKind::Reference => format!("{} (comma-separated ids)", f.doc),
                FilterKind::Code { .. } => format!("{} (comma-separated)", f.doc),
                FilterKind::Timed { values, .. } => format!("{}: {} (comma-separated, any case)", f.doc, values.join(", ")),
            };
            out.push(Param { doc: Cow::Owned(doc.clone()), ..param(f.name, "string", "") });
            if let Some(alias) = f.alias {
                out.push(Param { doc: Cow::Owned(format!("the same as {}", f.name)), ..param(alias, "string", "") });
            }
        }
        for r in list.ranges {
            out.push(param(r.from, "string", "RFC 3339 date-time, inclusive lower bound"));
            out.push(param(r.to, "string", "RFC 3339 date-time, inclusive upper bound"));
        }
        if let Some(s) = &list.search {
            out.push(param("search", "string", s.doc));
        }
        out
    }

    fn parse(q: &Query) -> ApiResult<Self> {
        let list = &R::LIST;
        let paging = Paging::from_query(q, &sort_names::<R>(), list.default_sort)?;
        let mut filters = Vec::new();
        for (i, f) in list.filters.iter().enumerate() {
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
        let search =
            list.search.as_ref().and_then(|_| q.str("search")).map(|t| t.trim().to_lowercase()).filter(|t| !t.is_empty());
        Ok(ListOf {
            query: ListQuery {
                // A scoped list's parent comes from its path: the handler sets it.
                scope: None,
                sort: paging.sort_by,
                desc: paging.desc,
                offset: paging.offset(),
                limit: paging.limit as usize,
                filters,
                ranges,
                search,
            },
            page: paging.page,
            limit: paging.limit,
            _of: PhantomData,
        })
    }
}

/// The values one filter parameter accepts; `None` when it asks for every value.
fn filter_values(name: &str, kind: FilterKind, raw: &str) -> ApiResult<Option<Vec<Vec<u8>>>> {
    let mut out = Vec::new();
    for part in raw.split(',').map(str::trim).filter(|p| !p.is_empty()) {
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
            FilterKind::Reference => {
                let id = uuid::Uuid::parse_str(part).map_err(|_| ApiError::field(name, "must be a UUID"))?;
                out.push(id.as_bytes().to_vec());
            }
            FilterKind::Code { normalise, invalid } => {
                out.push(normalise(part).ok_or_else(|| ApiError::field(name, invalid))?.into_bytes());
            }
        }
    }
    Ok(if out.is_empty() { None } else { Some(out) })
}

fn time(q: &Query, name: &str) -> ApiResult<Option<i64>> {
    q.str(name).map(|raw| parse_rfc3339(raw).ok_or_else(|| ApiError::field(name, "must be an RFC 3339 date-time"))).transpose()
}
