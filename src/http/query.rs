//! Typed query-string parameters with the spec's defaults and maxima. Every rejection names the
//! parameter; values are never clamped (`limit=10000` is a 400, not a silent 250).

use uuid::Uuid;

use crate::error::{ApiError, ApiResult};

/// The decoded query string.
#[derive(Debug, Default, Clone)]
pub struct Query(Vec<(String, String)>);

/// The spec's list maximum.
pub const LIMIT_MAX: u32 = 250;
pub const LIMIT_DEFAULT: u32 = 20;

impl Query {
    pub fn parse(raw: Option<&str>) -> Self {
        Query(raw.map(|q| form_urlencoded::parse(q.as_bytes()).into_owned().collect()).unwrap_or_default())
    }

    /// The value of `name`; an empty value counts as absent.
    pub fn str(&self, name: &str) -> Option<&str> {
        self.raw(name).filter(|v| !v.is_empty())
    }

    /// The value of `name` as sent, empty or not.
    pub fn raw(&self, name: &str) -> Option<&str> {
        self.0.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn required(&self, name: &str) -> ApiResult<&str> {
        self.str(name).ok_or_else(|| ApiError::field(name, "is required"))
    }

    /// An integer in `min..=max`, `default` when absent.
    pub fn int(&self, name: &str, default: i64, min: i64, max: i64) -> ApiResult<i64> {
        let Some(raw) = self.str(name) else { return Ok(default) };
        let v: i64 = raw.parse().map_err(|_| ApiError::field(name, "must be a whole number"))?;
        if v < min || v > max {
            return Err(ApiError::field(name, format!("must be between {min} and {max}")));
        }
        Ok(v)
    }

    pub fn bool(&self, name: &str, default: bool) -> ApiResult<bool> {
        match self.str(name) {
            None => Ok(default),
            Some("true") => Ok(true),
            Some("false") => Ok(false),
            Some(_) => Err(ApiError::field(name, "must be true or false")),
        }
    }

    /// One of `allowed`, spelled exactly as the document's enum lists it (`sortOrder=ASC` is
    /// refused: a client generated from the document never sends it, and accepting what the
    /// document refuses makes it untrue); `None` when absent.
    pub fn one_of(&self, name: &str, allowed: &[&'static str]) -> ApiResult<Option<&'static str>> {
        self.pick(name, allowed, |a, raw| a == raw)
    }

    /// One of `allowed` without regard to case: for the parameters the route table says take
    /// any case (a product's `status`, as the product list's filter takes it).
    pub fn one_of_any_case(&self, name: &str, allowed: &[&'static str]) -> ApiResult<Option<&'static str>> {
        self.pick(name, allowed, |a, raw| a.eq_ignore_ascii_case(raw))
    }

    fn pick(&self, name: &str, allowed: &[&'static str], eq: fn(&str, &str) -> bool) -> ApiResult<Option<&'static str>> {
        let Some(raw) = self.str(name) else { return Ok(None) };
        allowed
            .iter()
            .find(|a| eq(a, raw))
            .copied()
            .map(Some)
            .ok_or_else(|| ApiError::field(name, format!("must be one of: {}", allowed.join(", "))))
    }

    pub fn uuid(&self, name: &str) -> ApiResult<Option<Uuid>> {
        self.str(name).map(|v| Uuid::parse_str(v).map_err(|_| ApiError::field(name, "must be a UUID"))).transpose()
    }
}

/// `page`/`limit`/`sortBy`/`sortOrder` of a store-scoped list.
#[derive(Debug, Clone, Copy)]
pub struct Paging {
    pub page: u32,
    pub limit: u32,
    pub sort_by: &'static str,
    pub desc: bool,
}

impl Paging {
    /// Reads paging with the list's sortable fields and default sort (sortOrder defaults to desc).
    pub fn from_query(q: &Query, sort_fields: &[&'static str], default_sort: &'static str) -> ApiResult<Paging> {
        let page = q.int("page", 1, 1, i64::from(u32::MAX))? as u32;
        let limit = q.int("limit", LIMIT_DEFAULT.into(), 1, LIMIT_MAX.into())? as u32;
        let sort_by = q.one_of("sortBy", sort_fields)?.unwrap_or(default_sort);
        let desc = q.one_of("sortOrder", &["asc", "desc"])?.unwrap_or("desc") == "desc";
        Ok(Paging { page, limit, sort_by, desc })
    }

    /// How many records precede this page.
    pub fn offset(&self) -> usize {
        (self.page as usize - 1).saturating_mul(self.limit as usize)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paging_defaults_and_limits() {
        let p = Paging::from_query(&Query::parse(None), &["created_at"], "created_at").unwrap();
        assert_eq!((p.page, p.limit, p.sort_by, p.desc), (1, 20, "created_at", true));
        for bad in ["limit=0", "limit=251", "page=0", "page=-1", "limit=x", "sortBy=nope", "sortOrder=up"] {
            let e = Paging::from_query(&Query::parse(Some(bad)), &["created_at"], "created_at").unwrap_err();
            assert_eq!(e.code.as_str(), "VALIDATION_FAILED", "{bad}");
            assert_eq!(e.fields.len(), 1, "{bad}");
        }
        let p = Paging::from_query(&Query::parse(Some("page=3&limit=250&sortOrder=asc")), &["x"], "x").unwrap();
        assert_eq!((p.page, p.limit, p.desc, p.offset()), (3, 250, false, 500));
        for other_case in ["sortOrder=ASC", "sortOrder=Desc", "sortBy=X"] {
            let e = Paging::from_query(&Query::parse(Some(other_case)), &["x"], "x").unwrap_err();
            assert_eq!(e.fields[0].field, other_case.split('=').next().unwrap(), "{other_case}");
        }
    }
}
