//! The global product-category taxonomy: the accepted file format, its validation, and the
//! read-only queries behind `GET /categories`, `/categories/tree`, `/categories/{id}` and
//! `/categories/{id}/attributes`.
//!
//! The taxonomy is the same for every store and changes only when an operator imports a new
//! file, so it is parsed once into an immutable [`Taxonomy`] that callers share (in an `Arc`).
//! Query parameters are checked by the HTTP layer; this module only evaluates them and never
//! panics on any input.
//!
//! # File format (version 1)
//!
//! One JSON object (UTF-8) with exactly two members:
//!
//! ```json
//! {"version":1,"categories":[
//! {"id":"aa","name":"Apparel & Accessories","parentId":null,"attributes":[
//!   {"key":"color","name":"Color","type":"list","defaultValue":null,"values":["Black","White"]}]},
//! {"id":"aa-1","name":"Shoes","parentId":"aa","attributes":[
//!   {"key":"shoe_size","name":"Shoe size","type":"list","defaultValue":null}]}
//! ]}
//! ```
//!
//! - `version` (number, required): must be [`FORMAT_VERSION`].
//! - `categories` (array, required, at least one entry), in any order (a child may come before
//!   its parent). Each entry:
//!   - `id` (string, required): 1 to 64 ASCII letters, digits, `-` or `_`; unique; case-sensitive.
//!   - `name` (string, required): 1 to 200 characters, no leading or trailing whitespace, never
//!     containing the path separator `" > "`; unique among siblings, ignoring case.
//!   - `parentId` (string or null, optional): the id of another category; absent or null for a
//!     root. Parent links may not form a cycle, and a category may sit at most at level
//!     [`MAX_LEVEL`] (roots are level 0).
//!   - `attributes` (array, optional, default empty): each `{key, name, type, defaultValue,
//!     values}` with
//!     - `key` (string, required): a lowercase ASCII letter followed by up to 63 lowercase
//!       letters, digits or `_`; unique within the category. A descendant may define the same
//!       key again, which overrides the ancestor's definition for the descendant's subtree.
//!     - `name` (string, required): 1 to 200 characters, not blank.
//!     - `type` (string, required): `text`, `number`, `boolean` or `list`.
//!     - `defaultValue` (optional, default null): null, or a value of the type: a string for
//!       `text`, a number for `number`, `true`/`false` for `boolean`, an array of distinct
//!       strings for `list`.
//!     - `values` (array of strings, optional): the allowed values, only for `text` (one of
//!       them) and `list` (any subset of them). Non-empty, distinct, not blank; a non-null
//!       default must use them.
//!
//! Unknown members anywhere are rejected, so a misspelt `parentId` cannot silently turn a
//! subtree into roots. Validation stops at the first problem, checked in this order: the
//! document's shape and version; every entry's shape; then entry by entry in file order its
//! id, name, attributes and the uniqueness of its id; then parents, cycles and depth, and
//! sibling names.
//!
//! The id scheme of the bundled starter file (two lowercase letters per vertical, then `-N` per
//! level, numbered in the order children were added) is a convention, not a rule of the format.
//! See `data-format/taxonomy.md`.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Default `limit` of the category list and tree.
pub const LIST_LIMIT_DEFAULT: usize = 50;
/// Largest accepted `limit` of the category list and tree.
pub const LIST_LIMIT_MAX: usize = 100;
/// Default `childrenDepth` of the category tree.
pub const TREE_DEPTH_DEFAULT: usize = 1;
/// Largest accepted `childrenDepth` of the category tree.
pub const TREE_DEPTH_MAX: usize = 5;
/// The file format version this module reads.
pub const FORMAT_VERSION: u32 = 1;
/// Deepest level a category may sit at (roots are level 0). It bounds path lengths and the
/// recursion of [`Taxonomy::tree`]; retail taxonomies stay well under it.
pub const MAX_LEVEL: usize = 15;
/// Separator between the names of [`Category::path`].
pub const PATH_SEPARATOR: &str = " > ";

const ID_MAX_LEN: usize = 64;
const NAME_MAX_CHARS: usize = 200;
const KEY_MAX_LEN: usize = 64;

/// The bundled starter taxonomy; `Taxonomy::starter` parses it and a unit test keeps it valid.
const STARTER_JSON: &str = include_str!("starter.json");

/// Why a taxonomy file was rejected. Every variant about one category names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaxonomyError {
    /// Not JSON, or not an object with `version` and `categories`; the message has the line
    /// and column.
    Syntax(String),
    /// `version` is not [`FORMAT_VERSION`].
    UnsupportedVersion(u32),
    /// `categories` is empty; importing it would wipe the taxonomy.
    Empty,
    /// An entry of `categories` has the wrong shape (missing, unknown or mistyped member).
    MalformedCategory {
        /// 0-based position in `categories`.
        index: usize,
        /// The entry's `id`, when it has a string one.
        id: Option<String>,
        /// What is wrong.
        message: String,
    },
    /// The id breaks the id rules.
    InvalidId {
        /// The offending id.
        id: String,
        /// Which rule.
        reason: &'static str,
    },
    /// The name breaks the name rules.
    InvalidName {
        /// The category.
        id: String,
        /// Which rule.
        reason: &'static str,
    },
    /// Two categories share an id.
    DuplicateId {
        /// The repeated id.
        id: String,
    },
    /// `parentId` names no category of the file.
    UnknownParent {
        /// The category.
        id: String,
        /// Its missing parent.
        parent_id: String,
    },
    /// Parent links loop.
    Cycle {
        /// The loop from child to parent, starting where it was found.
        ids: Vec<String>,
    },
    /// The category would sit deeper than [`MAX_LEVEL`].
    TooDeep {
        /// The first category past the limit.
        id: String,
    },
    /// Two children of the same parent (or two roots) share a name, ignoring case.
    DuplicateName {
        /// The later category in the file.
        id: String,
        /// The earlier one with the same name.
        other_id: String,
        /// The later category's name.
        name: String,
    },
    /// One category defines the same attribute key twice.
    DuplicateAttribute {
        /// The category.
        category_id: String,
        /// The repeated key.
        key: String,
    },
    /// An attribute breaks the attribute rules (key, name, type, values or default).
    InvalidAttribute {
        /// The category.
        category_id: String,
        /// The attribute's key as written.
        key: String,
        /// Which rule.
        reason: String,
    },
}

impl fmt::Display for TaxonomyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Syntax(message) => write!(f, "not a taxonomy document: {message}"),
            Self::UnsupportedVersion(found) => {
                write!(f, "unsupported taxonomy format version {found} (expected {FORMAT_VERSION})")
            }
            Self::Empty => f.write_str("the taxonomy has no categories"),
            Self::MalformedCategory { index, id, message } => match id {
                Some(id) => write!(f, "category {id:?} (entry {index}): {message}"),
                None => write!(f, "category entry {index}: {message}"),
            },
            Self::InvalidId { id, reason } => write!(f, "category {id:?}: invalid id: {reason}"),
            Self::InvalidName { id, reason } => {
                write!(f, "category {id:?}: invalid name: {reason}")
            }
            Self::DuplicateId { id } => write!(f, "category {id:?}: duplicate id"),
            Self::UnknownParent { id, parent_id } => {
                write!(f, "category {id:?}: unknown parent {parent_id:?}")
            }
            Self::Cycle { ids } => {
                write!(f, "categories form a parent cycle: ")?;
                for id in ids {
                    write!(f, "{id:?} -> ")?;
                }
                match ids.first() {
                    Some(first) => write!(f, "{first:?}"),
                    None => Ok(()),
                }
            }
            Self::TooDeep { id } => write!(f, "category {id:?}: deeper than the maximum level {MAX_LEVEL}"),
            Self::DuplicateName { id, other_id, name } => {
                write!(f, "category {id:?}: name {name:?} is already used by sibling {other_id:?}")
            }
            Self::DuplicateAttribute { category_id, key } => {
                write!(f, "category {category_id:?}: duplicate attribute key {key:?}")
            }
            Self::InvalidAttribute { category_id, key, reason } => {
                write!(f, "category {category_id:?}: attribute {key:?}: {reason}")
            }
        }
    }
}

impl std::error::Error for TaxonomyError {}

/// The value type of a category attribute.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum AttributeType {
    /// Free text, or one of `values` when they are given.
    Text,
    /// A JSON number.
    Number,
    /// `true` or `false`.
    Boolean,
    /// Several strings, each one of `values` when they are given.
    List,
}

impl AttributeType {
    fn parse(s: &str) -> Option<Self> {
        match s {
            "text" => Some(Self::Text),
            "number" => Some(Self::Number),
            "boolean" => Some(Self::Boolean),
            "list" => Some(Self::List),
            _ => None,
        }
    }
}

/// One category. Serializes to `{id, name, parentId, level, path, childrenCount}`; attributes
/// are served separately by [`Taxonomy::attributes`].
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Category {
    /// Stable id from the file.
    pub id: String,
    /// Display name.
    pub name: String,
    /// Parent's id; `None` for a root.
    pub parent_id: Option<String>,
    /// Depth: 0 for roots.
    pub level: usize,
    /// Names from the root down to this category, joined by [`PATH_SEPARATOR`].
    pub path: String,
    /// Number of direct children.
    pub children_count: usize,
    #[serde(skip)]
    parent: Option<usize>,
    /// Indexes of the direct children, sorted by name.
    #[serde(skip)]
    children: Vec<usize>,
    #[serde(skip)]
    attributes: Vec<AttributeDef>,
    /// Lowercased name, so a search does not lowercase every name again.
    #[serde(skip)]
    name_folded: String,
}

/// An attribute as defined on one category.
#[derive(Debug)]
struct AttributeDef {
    key: String,
    name: String,
    kind: AttributeType,
    default_value: Value,
    values: Option<Vec<String>>,
}

/// An attribute of a category as served, own or inherited.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct AttributeView<'a> {
    /// Stable key, e.g. `color`.
    pub key: &'a str,
    /// Display name.
    pub name: &'a str,
    /// Value type.
    #[serde(rename = "type")]
    pub kind: AttributeType,
    /// Default value, `null` when there is none.
    pub default_value: &'a Value,
    /// Allowed values; `null` when any value of the type is allowed.
    pub values: Option<&'a [String]>,
    /// The category whose definition this is.
    pub source_category_id: &'a str,
    /// Whether the definition comes from an ancestor rather than the category itself.
    pub inherited: bool,
}

/// A category with its subtree down to the requested depth. Serializes as the category's
/// fields plus `children`; a node at the depth limit has empty `children` while its
/// `childrenCount` still says how many exist.
#[derive(Debug, Serialize, schemars::JsonSchema)]
pub struct TreeNode<'a> {
    /// The category at this node.
    #[serde(flatten)]
    pub category: &'a Category,
    /// Its children, sorted by name.
    pub children: Vec<TreeNode<'a>>,
}

/// Which parent the matching categories must have (`parentId` of the API).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum ParentFilter {
    /// Any parent (`parentId` absent).
    #[default]
    Any,
    /// Roots only (`parentId=null`).
    Root,
    /// Direct children of this category; an unknown id matches nothing.
    Id(String),
}

/// Parameters of [`Taxonomy::list`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListQuery {
    /// 1-based page; 0 is read as 1.
    pub page: usize,
    /// Page size.
    pub limit: usize,
    /// Case-insensitive substring of the name; blank means no search.
    pub search: Option<String>,
    /// Only categories at this level.
    pub level: Option<usize>,
    /// Parent constraint.
    pub parent: ParentFilter,
}

impl Default for ListQuery {
    fn default() -> Self {
        Self { page: 1, limit: LIST_LIMIT_DEFAULT, search: None, level: None, parent: ParentFilter::Any }
    }
}

/// Parameters of [`Taxonomy::tree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TreeQuery {
    /// Levels of children under each top node: 0 none, 1 direct children only.
    pub children_depth: usize,
    /// 1-based page of top nodes; 0 is read as 1.
    pub page: usize,
    /// Top nodes per page.
    pub limit: usize,
    /// Case-insensitive substring of the name; blank means no search.
    pub search: Option<String>,
    /// Parent constraint on the top nodes. [`ParentFilter::Any`] means roots unless
    /// `search` is given, since a tree of every category at once would repeat subtrees.
    pub parent: ParentFilter,
}

impl Default for TreeQuery {
    fn default() -> Self {
        Self { children_depth: TREE_DEPTH_DEFAULT, page: 1, limit: LIST_LIMIT_DEFAULT, search: None, parent: ParentFilter::Any }
    }
}

/// The parsed, validated, immutable taxonomy with its lookup indexes.
#[derive(Debug)]
pub struct Taxonomy {
    categories: Vec<Category>,
    by_id: HashMap<String, usize>,
    /// Every index ordered by level, then by path (names compared segment by segment, ignoring
    /// case): the order of every query result.
    ordered: Vec<usize>,
}

// `expecting` words the "invalid type" messages that reach the operator.
#[derive(Deserialize)]
#[serde(expecting = "a taxonomy document object", deny_unknown_fields)]
struct RawFile {
    version: u32,
    // Kept as raw values so a shape error can name the category it is in.
    categories: Vec<Value>,
}

#[derive(Deserialize)]
#[serde(expecting = "a category object", rename_all = "camelCase", deny_unknown_fields)]
struct RawCategory {
    id: String,
    name: String,
    #[serde(default)]
    parent_id: Option<String>,
    #[serde(default)]
    attributes: Vec<RawAttribute>,
}

#[derive(Deserialize)]
#[serde(expecting = "an attribute object", rename_all = "camelCase", deny_unknown_fields)]
struct RawAttribute {
    key: String,
    name: String,
    // A string rather than `AttributeType` so an unknown type is reported with its category.
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    default_value: Value,
    #[serde(default)]
    values: Option<Vec<String>>,
}

impl Taxonomy {
    /// Parses and validates a taxonomy document in the format described in the module docs.
    ///
    /// # Errors
    ///
    /// The first problem found, as a [`TaxonomyError`] that names the offending category.
    pub fn from_json(json: &str) -> Result<Self, TaxonomyError> {
        let file: RawFile = serde_json::from_str(json).map_err(|e| TaxonomyError::Syntax(e.to_string()))?;
        if file.version != FORMAT_VERSION {
            return Err(TaxonomyError::UnsupportedVersion(file.version));
        }
        if file.categories.is_empty() {
            return Err(TaxonomyError::Empty);
        }
        let mut raws = Vec::with_capacity(file.categories.len());
        for (index, value) in file.categories.into_iter().enumerate() {
            let id = value.get("id").and_then(Value::as_str).map(str::to_owned);
            let raw = serde_json::from_value::<RawCategory>(value).map_err(|e| TaxonomyError::MalformedCategory {
                index,
                id,
                message: e.to_string(),
            })?;
            raws.push(raw);
        }
        Self::build(raws)
    }

    /// The bundled starter taxonomy. Parses on every call: call it once and share the result.
    ///
    /// # Panics
    ///
    /// If the file embedded at build time is invalid, which a unit test rules out.
    pub fn starter() -> Self {
        Self::from_json(STARTER_JSON).expect("the embedded starter taxonomy (src/domain/taxonomy/starter.json) must be valid")
    }

    /// Number of categories.
    pub fn len(&self) -> usize {
        self.categories.len()
    }

    /// Whether there are no categories; never true for a parsed file, which must have one.
    pub fn is_empty(&self) -> bool {
        self.categories.is_empty()
    }

    /// One category by id.
    pub fn get(&self, id: &str) -> Option<&Category> {
        self.by_id.get(id).map(|&i| &self.categories[i])
    }

    /// One page of the categories that match every filter, ordered by level then path, and
    /// the number of all matching categories.
    pub fn list(&self, query: &ListQuery) -> (Vec<&Category>, usize) {
        let search = fold_search(query.search.as_deref());
        let matches: Vec<&Category> = self
            .in_order()
            .filter(|c| query.level.is_none_or(|level| c.level == level))
            .filter(|c| parent_matches(c, &query.parent))
            .filter(|c| name_matches(c, search.as_deref()))
            .collect();
        let total = matches.len();
        (page_of(matches, query.page, query.limit), total)
    }

    /// One page of top nodes with their subtrees down to `children_depth`, and the number of
    /// all top nodes. Top nodes are the categories matching `parent` and `search`, ordered by
    /// level then path; with neither, the roots.
    pub fn tree(&self, query: &TreeQuery) -> (Vec<TreeNode<'_>>, usize) {
        let search = fold_search(query.search.as_deref());
        let parent = match (&query.parent, &search) {
            (ParentFilter::Any, None) => &ParentFilter::Root,
            (parent, _) => parent,
        };
        let tops: Vec<&Category> =
            self.in_order().filter(|c| parent_matches(c, parent)).filter(|c| name_matches(c, search.as_deref())).collect();
        let total = tops.len();
        let nodes = page_of(tops, query.page, query.limit).into_iter().map(|c| self.node(c, query.children_depth)).collect();
        (nodes, total)
    }

    /// The attributes of a category, or `None` for an unknown id.
    ///
    /// With `include_inherited`, every attribute of the category and its ancestors: the closest
    /// definition of a key wins, at the position where the key was first introduced (ancestors'
    /// keys first, from the root down, each category's in file order), so a subcategory that
    /// refines `size` does not move it. Without, only the category's own definitions.
    pub fn attributes(&self, id: &str, include_inherited: bool) -> Option<Vec<AttributeView<'_>>> {
        let &index = self.by_id.get(id)?;
        let target = &self.categories[index];
        if !include_inherited {
            return Some(target.attributes.iter().map(|a| attribute_view(a, target, false)).collect());
        }
        let mut chain = vec![target];
        while let Some(parent) = chain.last().and_then(|c| c.parent) {
            chain.push(&self.categories[parent]);
        }
        let mut views: Vec<AttributeView<'_>> = Vec::new();
        let mut positions: HashMap<&str, usize> = HashMap::new();
        for (distance, category) in chain.iter().enumerate().rev() {
            for attribute in &category.attributes {
                let view = attribute_view(attribute, category, distance > 0);
                match positions.get(attribute.key.as_str()) {
                    Some(&at) => views[at] = view,
                    None => {
                        positions.insert(&attribute.key, views.len());
                        views.push(view);
                    }
                }
            }
        }
        Some(views)
    }

    fn in_order(&self) -> impl Iterator<Item = &Category> {
        self.ordered.iter().map(|&i| &self.categories[i])
    }

    fn node<'a>(&'a self, category: &'a Category, depth: usize) -> TreeNode<'a> {
        // Recursion is bounded by MAX_LEVEL, whatever depth the caller asks for.
        let children = if depth == 0 {
            Vec::new()
        } else {
            category.children.iter().map(|&child| self.node(&self.categories[child], depth.saturating_sub(1))).collect()
        };
        TreeNode { category, children }
    }

    fn build(raws: Vec<RawCategory>) -> Result<Self, TaxonomyError> {
        let mut by_id = HashMap::with_capacity(raws.len());
        let mut categories = Vec::with_capacity(raws.len());
        for (index, raw) in raws.into_iter().enumerate() {
            check_id(&raw.id)?;
            check_name(&raw.name).map_err(|reason| TaxonomyError::InvalidName { id: raw.id.clone(), reason })?;
            let attributes = parse_attributes(&raw.id, raw.attributes)?;
            if by_id.insert(raw.id.clone(), index).is_some() {
                return Err(TaxonomyError::DuplicateId { id: raw.id });
            }
            categories.push(Category {
                name_folded: raw.name.to_lowercase(),
                id: raw.id,
                name: raw.name,
                parent_id: raw.parent_id,
                level: 0,
                path: String::new(),
                children_count: 0,
                parent: None,
                children: Vec::new(),
                attributes,
            });
        }

        for category in &mut categories {
            if let Some(parent_id) = &category.parent_id {
                match by_id.get(parent_id) {
                    Some(&parent) => category.parent = Some(parent),
                    None => {
                        return Err(TaxonomyError::UnknownParent { id: category.id.clone(), parent_id: parent_id.clone() });
                    }
                }
            }
        }

        let levels = compute_levels(&categories)?;
        for (category, level) in categories.iter_mut().zip(&levels) {
            category.level = *level;
        }
        check_sibling_names(&categories)?;

        // Parents before children, so each path extends a finished one.
        let mut by_level: Vec<usize> = (0..categories.len()).collect();
        by_level.sort_by_key(|&i| categories[i].level);
        for &i in &by_level {
            let path = match categories[i].parent {
                Some(p) => format!("{}{PATH_SEPARATOR}{}", categories[p].path, categories[i].name),
                None => categories[i].name.clone(),
            };
            categories[i].path = path;
        }

        let mut roots = Vec::new();
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); categories.len()];
        for (i, category) in categories.iter().enumerate() {
            match category.parent {
                Some(parent) => children[parent].push(i),
                None => roots.push(i),
            }
        }
        let by_name = |a: &usize, b: &usize| {
            let (a, b) = (&categories[*a], &categories[*b]);
            (&a.name_folded, &a.name, &a.id).cmp(&(&b.name_folded, &b.name, &b.id))
        };
        roots.sort_by(by_name);
        for list in &mut children {
            list.sort_by(by_name);
        }
        for (category, list) in categories.iter_mut().zip(children) {
            category.children_count = list.len();
            category.children = list;
        }

        // A pre-order walk with children by name yields path order; sorting that by level
        // (stably) gives the level-then-path order used by every query.
        let mut ordered = Vec::with_capacity(categories.len());
        let mut stack: Vec<usize> = roots.iter().rev().copied().collect();
        while let Some(i) = stack.pop() {
            ordered.push(i);
            stack.extend(categories[i].children.iter().rev());
        }
        ordered.sort_by_key(|&i| categories[i].level);

        Ok(Self { categories, by_id, ordered })
    }
}

fn attribute_view<'a>(attribute: &'a AttributeDef, source: &'a Category, inherited: bool) -> AttributeView<'a> {
    AttributeView {
        key: &attribute.key,
        name: &attribute.name,
        kind: attribute.kind,
        default_value: &attribute.default_value,
        values: attribute.values.as_deref(),
        source_category_id: &source.id,
        inherited,
    }
}

/// The lowercased search term, or `None` when there is nothing to search for.
fn fold_search(search: Option<&str>) -> Option<String> {
    search.map(str::trim).filter(|s| !s.is_empty()).map(str::to_lowercase)
}

fn name_matches(category: &Category, folded_search: Option<&str>) -> bool {
    folded_search.is_none_or(|s| category.name_folded.contains(s))
}

fn parent_matches(category: &Category, filter: &ParentFilter) -> bool {
    match filter {
        ParentFilter::Any => true,
        ParentFilter::Root => category.parent_id.is_none(),
        ParentFilter::Id(id) => category.parent_id.as_deref() == Some(id.as_str()),
    }
}

fn page_of<T>(items: Vec<T>, page: usize, limit: usize) -> Vec<T> {
    let offset = page.saturating_sub(1).saturating_mul(limit);
    items.into_iter().skip(offset).take(limit).collect()
}

pub mod files;
mod validate;

use validate::{check_id, check_name, check_sibling_names, compute_levels, parse_attributes};

#[cfg(test)]
mod tests;
