//! `GET /categories…`: the global product taxonomy, answered by every host from memory.
//!
//! The taxonomy is loaded at start from `<data>/taxonomy.json` when that file exists (written by
//! `shopcell admin taxonomy import`), else the starter taxonomy built into the binary. A router
//! has no data directory and serves the starter.

use std::sync::Arc;

use crate::domain::taxonomy::{
    AttributeView, Category, LIST_LIMIT_DEFAULT, LIST_LIMIT_MAX, ListQuery, MAX_LEVEL, ParentFilter, TREE_DEPTH_DEFAULT,
    TREE_DEPTH_MAX, Taxonomy, TreeNode, TreeQuery,
};
use crate::error::{ApiError, ApiResult};
use crate::handler;
use crate::http::Page;
use crate::http::query::Query;
use crate::http::reply::{Borrowed, Rendered};
use crate::http::route::{Access, Param, QueryParams, Service, param};
use crate::node::context::{Ctx, Route};

const LIST_PARAMS: &[Param] = &[
    param("page", "integer", "1-based page, default 1").range(1, u32::MAX as i64),
    param("limit", "integer", "page size, 1..100, default 50").range(1, 100),
    param("search", "string", "case-insensitive part of the name"),
    param("level", "integer", "hierarchy level, 0 is the root level").range(0, MAX_LEVEL as i64),
    param("parentId", "string", "a category id, or null for root categories; absent means any"),
];

const TREE_PARAMS: &[Param] = &[
    param("childrenDepth", "integer", "levels of children under each node, 0..5, default 1").range(0, 5),
    param("page", "integer", "1-based page of top nodes, default 1").range(1, u32::MAX as i64),
    param("limit", "integer", "top nodes per page, 1..100, default 50").range(1, 100),
    param("search", "string", "case-insensitive part of the name of the top nodes"),
    param("parentId", "string", "top nodes are this category's children; null for roots (the default)"),
];

const ATTRIBUTE_PARAMS: &[Param] = &[param("includeInherited", "boolean", "add the attributes of ancestors, default true")];

pub fn routes() -> Vec<Route> {
    use Access::Public;
    use Service::Global;
    vec![
        Route::get("/categories", Global, Public, handler!(list), "Product categories, paginated"),
        Route::get("/categories/tree", Global, Public, handler!(tree), "Product categories with nested children")
            .id("getCategoryTree"),
        Route::get("/categories/{id}", Global, Public, handler!(get), "One product category"),
        Route::get("/categories/{id}/attributes", Global, Public, handler!(attributes), "A category's attributes with defaults"),
    ]
}

fn taxonomy(cx: &Ctx) -> Arc<Taxonomy> {
    cx.node.taxonomy.read().map(|t| t.clone()).unwrap_or_else(|_| crate::domain::taxonomy::files::starter())
}

fn parent(q: &Query) -> ParentFilter {
    match q.str("parentId") {
        None => ParentFilter::Any,
        Some("null") => ParentFilter::Root,
        Some(id) => ParentFilter::Id(id.to_string()),
    }
}

fn paging(q: &Query) -> ApiResult<(usize, usize)> {
    let page = q.int("page", 1, 1, i64::from(u32::MAX))? as usize;
    let limit = q.int("limit", LIST_LIMIT_DEFAULT as i64, 1, LIST_LIMIT_MAX as i64)? as usize;
    Ok((page, limit))
}

fn search(q: &Query) -> ApiResult<Option<String>> {
    match q.str("search") {
        Some(s) if s.chars().count() > 200 => Err(ApiError::field("search", "must be at most 200 characters")),
        s => Ok(s.map(str::to_string)),
    }
}

impl Borrowed for TreeNode<'_> {
    type Static = TreeNode<'static>;
}

impl Borrowed for AttributeView<'_> {
    type Static = AttributeView<'static>;
}

/// `GET /categories`' query.
pub struct CategoryList(ListQuery);

impl QueryParams for CategoryList {
    fn params() -> Vec<Param> {
        LIST_PARAMS.to_vec()
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        let (page, limit) = paging(q)?;
        let level = match q.str("level") {
            Some(_) => Some(q.int("level", 0, 0, MAX_LEVEL as i64)? as usize),
            None => None,
        };
        Ok(CategoryList(ListQuery { page, limit, search: search(q)?, level, parent: parent(q) }))
    }
}

/// `GET /categories/tree`' query.
pub struct CategoryTree(TreeQuery);

impl QueryParams for CategoryTree {
    fn params() -> Vec<Param> {
        TREE_PARAMS.to_vec()
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        let (page, limit) = paging(q)?;
        let children_depth = q.int("childrenDepth", TREE_DEPTH_DEFAULT as i64, 0, TREE_DEPTH_MAX as i64)? as usize;
        Ok(CategoryTree(TreeQuery { children_depth, page, limit, search: search(q)?, parent: parent(q) }))
    }
}

/// `GET /categories/{id}/attributes`' query.
pub struct AttributeQuery {
    include_inherited: bool,
}

impl QueryParams for AttributeQuery {
    fn params() -> Vec<Param> {
        ATTRIBUTE_PARAMS.to_vec()
    }
    fn parse(q: &Query) -> ApiResult<Self> {
        Ok(AttributeQuery { include_inherited: q.bool("includeInherited", true)? })
    }
}

async fn list(cx: Ctx, CategoryList(query): CategoryList) -> ApiResult<Rendered<Page<Category>>> {
    let t = taxonomy(&cx);
    let (data, total) = t.list(&query);
    Rendered::view(&Page::new(data, total as u64, query.page as u32, query.limit as u32))
}

async fn tree(cx: Ctx, CategoryTree(query): CategoryTree) -> ApiResult<Rendered<Page<TreeNode<'static>>>> {
    let t = taxonomy(&cx);
    let (data, total) = t.tree(&query);
    Rendered::view(&Page::new(data, total as u64, query.page as u32, query.limit as u32))
}

async fn get(cx: Ctx) -> ApiResult<Rendered<Category>> {
    let t = taxonomy(&cx);
    let c = t.get(cx.param("id")).ok_or_else(ApiError::not_found)?;
    Rendered::view(&c)
}

async fn attributes(cx: Ctx, q: AttributeQuery) -> ApiResult<Rendered<Vec<AttributeView<'static>>>> {
    let t = taxonomy(&cx);
    let data = t.attributes(cx.param("id"), q.include_inherited).ok_or_else(ApiError::not_found)?;
    Rendered::view(&data)
}
