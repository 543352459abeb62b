//! What a handler answers, typed: the success status and the body's type are the handler's
//! return type, so the route row documents exactly what the handler sends (the compiler ties
//! them). Errors are the one error shape and need no declaration.

use std::marker::PhantomData;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{CONTENT_TYPE, HeaderValue, LOCATION};
use hyper::{Response, StatusCode};
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::Serialize;

use crate::error::{ApiError, ApiResult};
use crate::http::compress::{Answer, Coding, mark_coded};
use crate::http::{OffsetPage, Page, Resp, json, no_content, ok_raw};

/// How a success answer is documented.
pub struct ReplyDoc {
    pub status: u16,
    /// `None`: no body (204).
    pub content_type: Option<&'static str>,
    /// The body's schema, `None` when the body is not JSON or there is none.
    pub schema: Option<Schema>,
    /// The body type's name, as the route snapshot shows it.
    pub type_name: String,
}

/// A typed success answer.
pub trait Reply: Send + 'static {
    fn into_resp(self) -> Resp;
    /// `None` for an untyped [`Resp`]: its row must say what it answers with
    /// [`crate::http::route::Route::answers`].
    fn doc(g: &mut SchemaGenerator) -> Option<ReplyDoc>;
}

fn json_doc<T: JsonSchema>(g: &mut SchemaGenerator, status: u16) -> Option<ReplyDoc> {
    Some(ReplyDoc {
        status,
        content_type: Some("application/json"),
        schema: Some(g.subschema_for::<T>()),
        type_name: short_name(std::any::type_name::<T>()),
    })
}

/// A Rust type's name without module paths and lifetimes: `Page<ProductView>`, not
/// `shopcell::http::Page<shopcell::domain::product::ProductView<'_>>` (schema names drop the
/// parameters of generic types, which the snapshot must show).
fn short_name(full: &str) -> String {
    let named = without_paths(full);
    named.replace("<'_>", "").replace("<'_, ", "<").replace(", '_", "")
}

fn without_paths(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    // Where the path being read began in `out`: a `::` drops everything since.
    let mut path_start = 0;
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(path_start);
            continue;
        }
        out.push(c);
        if !(c.is_alphanumeric() || c == '_') {
            path_start = out.len();
        }
    }
    out
}

/// 200 with `T` as JSON.
pub struct Json<T>(pub T);

/// 201 with the created `T` as JSON.
pub struct Created<T>(pub T);

/// 202 with `T` as JSON: accepted, finished later.
pub struct Accepted<T>(pub T);

/// 204, no body.
pub struct NoContent;

/// JSON of `T` rendered beforehand (kept views, cached pages), with status `STATUS`: the bytes
/// are sent as they are, and documented as `T`.
pub struct Rendered<T, const STATUS: u16 = 200> {
    pub bytes: Bytes,
    /// The coding `bytes` are compressed in, if any (a kept answer, `search::cache`).
    coding: Option<Coding>,
    _of: PhantomData<fn() -> T>,
}

impl<T, const STATUS: u16> Rendered<T, STATUS> {
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        Rendered { bytes: bytes.into(), coding: None, _of: PhantomData }
    }

    /// A kept answer, compressed or not, sent as it is.
    pub fn answer(a: Answer) -> Self {
        Rendered { bytes: a.body, coding: a.coding, _of: PhantomData }
    }
}

impl<T: Serialize, const STATUS: u16> Rendered<T, STATUS> {
    /// `value` with the keys of every object in sorted order: the bytes of answers that were
    /// always assembled as a `serde_json::Value` (a view and fields added to it), kept as they were.
    pub fn sorted(value: &T) -> ApiResult<Self> {
        let tree = serde_json::to_value(value).map_err(ApiError::internal)?;
        serde_json::to_vec(&tree).map(Rendered::new).map_err(ApiError::internal)
    }
}

/// A view that borrows what it shows (the record it is a view of, held by the handler): answered
/// rendered while it lives, documented as `Static`, the same type at `'static`.
pub trait Borrowed: Serialize {
    type Static: JsonSchema + 'static;
}

impl<V: Borrowed> Borrowed for Vec<V> {
    type Static = Vec<V::Static>;
}

impl<T: Serialize + JsonSchema + 'static> Borrowed for &T {
    type Static = T;
}

impl<V: Borrowed> Borrowed for Page<V>
where
    V::Static: Serialize,
{
    type Static = Page<V::Static>;
}

impl<V: Borrowed> Borrowed for OffsetPage<V>
where
    V::Static: Serialize,
{
    type Static = OffsetPage<V::Static>;
}

impl<T: JsonSchema + 'static, const STATUS: u16> Rendered<T, STATUS> {
    /// `view` rendered now, documented as its `'static` self.
    pub fn view<V: Borrowed<Static = T>>(view: &V) -> ApiResult<Self> {
        serde_json::to_vec(view).map(Rendered::new).map_err(ApiError::internal)
    }
}

/// 302 to `Location`, no body.
pub struct Redirect(HeaderValue);

impl Redirect {
    /// A redirect to `url`; a URL that cannot be a header value is a server error.
    pub fn to(url: &str) -> ApiResult<Redirect> {
        HeaderValue::from_str(url).map(Redirect).map_err(ApiError::internal)
    }
}

/// The media type of a body that is not JSON.
pub trait Media: 'static {
    const CONTENT_TYPE: &'static str;
    /// The body's name in the route snapshot and the document.
    const NAME: &'static str;
}

/// 200 with a body of media type `M`, sent as it is.
pub struct Raw<M> {
    pub bytes: Bytes,
    _of: PhantomData<fn() -> M>,
}

impl<M> Raw<M> {
    pub fn new(bytes: impl Into<Bytes>) -> Self {
        Raw { bytes: bytes.into(), _of: PhantomData }
    }
}

/// A stylesheet.
pub struct Css;

impl Media for Css {
    const CONTENT_TYPE: &'static str = "text/css; charset=utf-8";
    const NAME: &'static str = "Css";
}

/// An HTML page of our own making: no script and nothing from elsewhere, so it is sent under
/// the strictest policy, `default-src 'self'`.
pub struct HtmlPage(pub Bytes);

impl Reply for HtmlPage {
    fn into_resp(self) -> Resp {
        let mut r = Response::new(Full::new(self.0));
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
        r.headers_mut().insert("content-security-policy", HeaderValue::from_static("default-src 'self'"));
        r
    }
    fn doc(_: &mut SchemaGenerator) -> Option<ReplyDoc> {
        Some(ReplyDoc { status: 200, content_type: Some("text/html"), schema: None, type_name: "HtmlPage".into() })
    }
}

/// Prometheus' text exposition format.
pub struct PrometheusText;

impl Media for PrometheusText {
    const CONTENT_TYPE: &'static str = "text/plain; version=0.0.4";
    const NAME: &'static str = "PrometheusText";
}

/// Bytes only the platform's own services read (a store move's rows).
pub struct OctetStream;

impl Media for OctetStream {
    const CONTENT_TYPE: &'static str = "application/octet-stream";
    const NAME: &'static str = "OctetStream";
}

impl<T: Serialize + JsonSchema + Send + 'static> Reply for Json<T> {
    fn into_resp(self) -> Resp {
        json(StatusCode::OK, &self.0)
    }
    fn doc(g: &mut SchemaGenerator) -> Option<ReplyDoc> {
        json_doc::<T>(g, 200)
    }
}

impl<T: Serialize + JsonSchema + Send + 'static> Reply for Created<T> {
    fn into_resp(self) -> Resp {
        json(StatusCode::CREATED, &self.0)
    }
    fn doc(g: &mut SchemaGenerator) -> Option<ReplyDoc> {
        json_doc::<T>(g, 201)
    }
}

impl<T: Serialize + JsonSchema + Send + 'static> Reply for Accepted<T> {
    fn into_resp(self) -> Resp {
        json(StatusCode::ACCEPTED, &self.0)
    }
    fn doc(g: &mut SchemaGenerator) -> Option<ReplyDoc> {
        json_doc::<T>(g, 202)
    }
}

impl Reply for NoContent {
    fn into_resp(self) -> Resp {
        no_content()
    }
    fn doc(_: &mut SchemaGenerator) -> Option<ReplyDoc> {
        Some(ReplyDoc { status: 204, content_type: None, schema: None, type_name: "()".into() })
    }
}

impl<T: JsonSchema + 'static, const STATUS: u16> Reply for Rendered<T, STATUS> {
    fn into_resp(self) -> Resp {
        let mut r = ok_raw(self.bytes);
        *r.status_mut() = StatusCode::from_u16(STATUS).unwrap_or(StatusCode::OK);
        if let Some(c) = self.coding {
            mark_coded(r.headers_mut(), c);
        }
        r
    }
    fn doc(g: &mut SchemaGenerator) -> Option<ReplyDoc> {
        json_doc::<T>(g, STATUS)
    }
}

impl Reply for Redirect {
    fn into_resp(self) -> Resp {
        let mut r = no_content();
        *r.status_mut() = StatusCode::FOUND;
        r.headers_mut().insert(LOCATION, self.0);
        r
    }
    fn doc(_: &mut SchemaGenerator) -> Option<ReplyDoc> {
        Some(ReplyDoc { status: 302, content_type: None, schema: None, type_name: "Redirect".into() })
    }
}

impl<M: Media> Reply for Raw<M> {
    fn into_resp(self) -> Resp {
        let mut r = Response::new(Full::new(self.bytes));
        r.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(M::CONTENT_TYPE));
        r
    }
    fn doc(_: &mut SchemaGenerator) -> Option<ReplyDoc> {
        Some(ReplyDoc { status: 200, content_type: Some(M::CONTENT_TYPE), schema: None, type_name: M::NAME.into() })
    }
}

impl Reply for Resp {
    fn into_resp(self) -> Resp {
        self
    }
    fn doc(_: &mut SchemaGenerator) -> Option<ReplyDoc> {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::short_name;

    #[test]
    fn type_names_lose_their_paths() {
        assert_eq!(short_name("shopcell::http::Page<shopcell::domain::market::MarketView>"), "Page<MarketView>");
        assert_eq!(short_name("alloc::vec::Vec<shopcell::a::B<'_>>"), "Vec<B>");
        assert_eq!(short_name("a::C<'_, a::D<'_>, '_>"), "C<D>");
        assert_eq!(short_name("core::option::Option<(u8, x::Y)>"), "Option<(u8, Y)>");
    }
}
