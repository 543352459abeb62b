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
const STARTER_JSON: &str = include_str!("../../data/taxonomy/starter.json");

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
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
#[derive(Debug, Serialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize)]
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
#[derive(Debug, Serialize)]
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
        Self::from_json(STARTER_JSON).expect("the embedded data/taxonomy/starter.json must be a valid taxonomy")
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
            category.children.iter().map(|&child| self.node(&self.categories[child], depth - 1)).collect()
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

fn check_id(id: &str) -> Result<(), TaxonomyError> {
    let reason = if id.is_empty() || id.len() > ID_MAX_LEN {
        "must be 1 to 64 characters"
    } else if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        "may contain only ASCII letters, digits, '-' and '_'"
    } else {
        return Ok(());
    };
    Err(TaxonomyError::InvalidId { id: id.to_owned(), reason })
}

fn check_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        Err("must not be blank")
    } else if name.chars().count() > NAME_MAX_CHARS {
        Err("must be at most 200 characters")
    } else if name.trim() != name {
        Err("must not start or end with whitespace")
    } else if name.contains(PATH_SEPARATOR) {
        Err("must not contain the path separator \" > \"")
    } else {
        Ok(())
    }
}

fn parse_attributes(category_id: &str, raws: Vec<RawAttribute>) -> Result<Vec<AttributeDef>, TaxonomyError> {
    let mut seen = HashSet::new();
    let mut attributes = Vec::with_capacity(raws.len());
    for raw in raws {
        let kind = check_attribute(&raw).map_err(|reason| TaxonomyError::InvalidAttribute {
            category_id: category_id.to_owned(),
            key: raw.key.clone(),
            reason,
        })?;
        if !seen.insert(raw.key.clone()) {
            return Err(TaxonomyError::DuplicateAttribute { category_id: category_id.to_owned(), key: raw.key });
        }
        attributes.push(AttributeDef {
            key: raw.key,
            name: raw.name,
            kind,
            default_value: raw.default_value,
            values: raw.values,
        });
    }
    Ok(attributes)
}

/// Checks one attribute definition and returns its type, or the reason it is invalid.
fn check_attribute(raw: &RawAttribute) -> Result<AttributeType, String> {
    let key_ok = raw.key.len() <= KEY_MAX_LEN
        && raw.key.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && raw.key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !key_ok {
        return Err("the key must be a lowercase ASCII letter followed by up to 63 lowercase \
                    letters, digits or '_'"
            .to_owned());
    }
    if raw.name.trim().is_empty() || raw.name.chars().count() > NAME_MAX_CHARS {
        return Err("the name must be 1 to 200 characters and not blank".to_owned());
    }
    let kind = AttributeType::parse(&raw.kind)
        .ok_or_else(|| format!("unknown type {:?} (expected text, number, boolean or list)", raw.kind))?;
    if let Some(values) = &raw.values {
        if !matches!(kind, AttributeType::Text | AttributeType::List) {
            return Err("allowed values are only for text and list attributes".to_owned());
        }
        if values.is_empty() {
            return Err("allowed values must not be empty".to_owned());
        }
        if values.iter().any(|v| v.trim().is_empty()) {
            return Err("allowed values must not be blank".to_owned());
        }
        let mut distinct = HashSet::new();
        if let Some(repeated) = values.iter().find(|v| !distinct.insert(v.as_str())) {
            return Err(format!("allowed value {repeated:?} is repeated"));
        }
    }
    let allowed = |value: &str| raw.values.as_ref().is_none_or(|vs| vs.iter().any(|v| v == value));
    match (kind, &raw.default_value) {
        (_, Value::Null) | (AttributeType::Number, Value::Number(_)) | (AttributeType::Boolean, Value::Bool(_)) => {}
        (AttributeType::Text, Value::String(s)) if allowed(s) => {}
        (AttributeType::Text, Value::String(s)) => {
            return Err(format!("default value {s:?} is not one of the allowed values"));
        }
        (AttributeType::List, Value::Array(items)) => {
            let mut distinct = HashSet::new();
            for item in items {
                let Value::String(s) = item else {
                    return Err("a list default value must be an array of strings".to_owned());
                };
                if !allowed(s) {
                    return Err(format!("default value {s:?} is not one of the allowed values"));
                }
                if !distinct.insert(s.as_str()) {
                    return Err(format!("default value {s:?} is repeated"));
                }
            }
        }
        (kind, _) => {
            let expected = match kind {
                AttributeType::Text => "a string",
                AttributeType::Number => "a number",
                AttributeType::Boolean => "true or false",
                AttributeType::List => "an array of strings",
            };
            return Err(format!("the default value of a {} attribute must be {expected} or null", raw.kind));
        }
    }
    Ok(kind)
}

/// Levels of all categories, or the first cycle or too-deep category found in file order.
/// Walks are iterative so a long chain in a hostile file cannot overflow the stack.
fn compute_levels(categories: &[Category]) -> Result<Vec<usize>, TaxonomyError> {
    let mut levels: Vec<Option<usize>> = vec![None; categories.len()];
    let mut on_walk = vec![false; categories.len()];
    for start in 0..categories.len() {
        // `chain` runs from `start` upwards to the first category whose level is unknown
        // and whose parent is known (or is a root).
        let mut chain: Vec<usize> = Vec::new();
        let mut current = start;
        let base = loop {
            if let Some(level) = levels[current] {
                break Some(level);
            }
            if on_walk[current] {
                let from = chain.iter().position(|&i| i == current).unwrap_or(0);
                return Err(TaxonomyError::Cycle { ids: chain[from..].iter().map(|&i| categories[i].id.clone()).collect() });
            }
            on_walk[current] = true;
            chain.push(current);
            match categories[current].parent {
                Some(parent) => current = parent,
                None => break None,
            }
        };
        let top_level = base.map_or(0, |l| l + 1);
        for (level, &i) in (top_level..).zip(chain.iter().rev()) {
            if level > MAX_LEVEL {
                return Err(TaxonomyError::TooDeep { id: categories[i].id.clone() });
            }
            levels[i] = Some(level);
            on_walk[i] = false;
        }
    }
    Ok(levels.into_iter().map(|l| l.unwrap_or(0)).collect())
}

fn check_sibling_names(categories: &[Category]) -> Result<(), TaxonomyError> {
    let mut seen: HashMap<(Option<usize>, &str), usize> = HashMap::new();
    for (i, category) in categories.iter().enumerate() {
        if let Some(&other) = seen.get(&(category.parent, category.name_folded.as_str())) {
            return Err(TaxonomyError::DuplicateName {
                id: category.id.clone(),
                other_id: categories[other].id.clone(),
                name: category.name.clone(),
            });
        }
        seen.insert((category.parent, &category.name_folded), i);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A small taxonomy, deliberately listed out of order (children before parents) and
    /// with names whose order differs from the file order.
    fn fixture() -> Taxonomy {
        let doc = json!({"version": 1, "categories": [
            {"id": "aa-2", "name": "Shoes", "parentId": "aa", "attributes": [
                {"key": "shoe_size", "name": "Shoe size", "type": "list", "defaultValue": null},
                {"key": "material", "name": "Material", "type": "list",
                 "defaultValue": ["Leather"], "values": ["Leather", "Canvas"]}]},
            {"id": "aa", "name": "Apparel & Accessories", "attributes": [
                {"key": "color", "name": "Color", "type": "list", "defaultValue": null,
                 "values": ["Black", "White"]},
                {"key": "material", "name": "Material", "type": "list", "defaultValue": null},
                {"key": "target_gender", "name": "Target gender", "type": "text",
                 "defaultValue": "Unisex", "values": ["Female", "Male", "Unisex"]}]},
            {"id": "aa-1", "name": "Clothing", "parentId": "aa"},
            {"id": "aa-2-1", "name": "Sneakers", "parentId": "aa-2", "attributes": [
                {"key": "closure_type", "name": "Closure type", "type": "text"}]},
            {"id": "aa-2-2", "name": "Boots", "parentId": "aa-2", "attributes": [
                {"key": "waterproof", "name": "Waterproof", "type": "boolean",
                 "defaultValue": false}]},
            {"id": "aa-2-2-1", "name": "Rain Boots", "parentId": "aa-2-2", "attributes": [
                {"key": "waterproof", "name": "Waterproof", "type": "boolean",
                 "defaultValue": true}]},
            {"id": "el", "name": "Electronics", "parentId": null, "attributes": [
                {"key": "warranty_months", "name": "Warranty (months)", "type": "number",
                 "defaultValue": 12}]},
            {"id": "el-1", "name": "Audio", "parentId": "el"},
            {"id": "el-1-1", "name": "Wireless Headphones", "parentId": "el-1"},
            {"id": "bt", "name": "Baby & Toddler"}
        ]});
        Taxonomy::from_json(&doc.to_string()).expect("fixture is valid")
    }

    fn ids<'a>(categories: impl IntoIterator<Item = &'a Category>) -> Vec<&'a str> {
        categories.into_iter().map(|c| c.id.as_str()).collect()
    }

    fn node_ids<'a>(nodes: &[TreeNode<'a>]) -> Vec<&'a str> {
        nodes.iter().map(|n| n.category.id.as_str()).collect()
    }

    fn parse_categories(categories: Value) -> Result<Taxonomy, TaxonomyError> {
        Taxonomy::from_json(&json!({"version": 1, "categories": categories}).to_string())
    }

    fn parse_attribute(attribute: Value) -> Result<Taxonomy, TaxonomyError> {
        parse_categories(json!([{"id": "x", "name": "X", "attributes": [attribute]}]))
    }

    #[test]
    fn starter_parses_with_a_full_catalogue_of_categories() {
        let taxonomy = Taxonomy::starter();
        assert!(taxonomy.len() >= 400, "only {} categories", taxonomy.len());
        let (roots, root_count) =
            taxonomy.list(&ListQuery { parent: ParentFilter::Root, limit: LIST_LIMIT_MAX, ..ListQuery::default() });
        assert!(root_count >= 15, "only {root_count} roots");
        assert!(roots.iter().all(|c| c.level == 0 && c.parent_id.is_none()));
        let (all, total) = taxonomy.list(&ListQuery { limit: usize::MAX, ..ListQuery::default() });
        assert_eq!(total, taxonomy.len());
        assert!(all.iter().any(|c| c.level >= 3));
        // The starter follows the documented id convention: parent id, '-', ordinal.
        for category in &all {
            if let Some(parent) = &category.parent_id {
                let ordinal = category.id.strip_prefix(&format!("{parent}-"));
                assert!(
                    ordinal.is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0)),
                    "{} does not extend its parent id {parent}",
                    category.id
                );
            }
        }
        let apparel = taxonomy.get("aa").expect("apparel root");
        assert_eq!(apparel.name, "Apparel & Accessories");
        let keys: Vec<&str> = taxonomy.attributes("aa", true).expect("known id").iter().map(|a| a.key).collect();
        assert!(keys.contains(&"color") && keys.contains(&"size"));
    }

    #[test]
    fn levels_paths_and_children_are_computed() {
        let taxonomy = fixture();
        let rain = taxonomy.get("aa-2-2-1").expect("rain boots");
        assert_eq!(rain.level, 3);
        assert_eq!(rain.path, "Apparel & Accessories > Shoes > Boots > Rain Boots");
        assert_eq!(rain.parent_id.as_deref(), Some("aa-2-2"));
        let root = taxonomy.get("aa").expect("root");
        assert_eq!((root.level, root.parent_id.as_deref()), (0, None));
        assert_eq!(root.path, "Apparel & Accessories");
        assert_eq!(root.children_count, 2);
        let shoes = taxonomy.get("aa-2").expect("shoes");
        assert_eq!(shoes.level, 1);
        assert_eq!(shoes.children_count, 2);
        assert_eq!(taxonomy.get("bt").map(|c| c.children_count), Some(0));
        assert!(taxonomy.get("nope").is_none());
        assert_eq!(taxonomy.len(), 10);
        assert!(!taxonomy.is_empty());
    }

    #[test]
    fn list_orders_by_level_then_path() {
        let taxonomy = fixture();
        let (page, total) = taxonomy.list(&ListQuery::default());
        assert_eq!(total, 10);
        assert_eq!(
            ids(page),
            [
                "aa", "bt", "el", // level 0, by name
                "aa-1", "aa-2", "el-1", // level 1, by path
                "aa-2-2", "aa-2-1", "el-1-1", // "… > Shoes > Boots" before "… > Shoes > Sneakers"
                "aa-2-2-1",
            ]
        );
    }

    #[test]
    fn list_search_is_a_case_insensitive_substring_of_the_name() {
        let taxonomy = fixture();
        let search = |s: &str| taxonomy.list(&ListQuery { search: Some(s.to_owned()), ..ListQuery::default() });
        let (page, total) = search("BOOTS");
        assert_eq!((ids(page), total), (vec!["aa-2-2", "aa-2-2-1"], 2));
        let (page, total) = search("less head");
        assert_eq!((ids(page), total), (vec!["el-1-1"], 1));
        assert_eq!(search("tablets").1, 0);
        // A blank search is no search.
        assert_eq!(search("  ").1, 10);
    }

    #[test]
    fn list_filters_by_level_and_parent() {
        let taxonomy = fixture();
        let list = |level: Option<usize>, parent: ParentFilter| {
            let (page, total) = taxonomy.list(&ListQuery { level, parent, ..ListQuery::default() });
            (ids(page), total)
        };
        assert_eq!(list(Some(0), ParentFilter::Any), (vec!["aa", "bt", "el"], 3));
        assert_eq!(list(None, ParentFilter::Root), (vec!["aa", "bt", "el"], 3));
        assert_eq!(list(Some(2), ParentFilter::Any).1, 3);
        assert_eq!(list(Some(7), ParentFilter::Any).1, 0);
        assert_eq!(list(None, ParentFilter::Id("aa-2".to_owned())), (vec!["aa-2-2", "aa-2-1"], 2));
        assert_eq!(list(None, ParentFilter::Id("missing".to_owned())).1, 0);
        assert_eq!(list(Some(1), ParentFilter::Root).1, 0);
        assert_eq!(list(None, ParentFilter::Any).1, 10);
    }

    #[test]
    fn list_pagination_keeps_the_total() {
        let taxonomy = fixture();
        let page = |page: usize, limit: usize| {
            let (items, total) = taxonomy.list(&ListQuery { page, limit, ..ListQuery::default() });
            (ids(items), total)
        };
        assert_eq!(page(1, 4), (vec!["aa", "bt", "el", "aa-1"], 10));
        assert_eq!(page(3, 4), (vec!["el-1-1", "aa-2-2-1"], 10));
        assert_eq!(page(4, 4), (vec![], 10));
        assert_eq!(page(0, 2), page(1, 2));
        assert_eq!(page(1, 0), (vec![], 10));
        assert_eq!(page(usize::MAX, usize::MAX), (vec![], 10));
    }

    #[test]
    fn tree_nests_children_down_to_the_requested_depth() {
        let taxonomy = fixture();
        let tree = |children_depth: usize| taxonomy.tree(&TreeQuery { children_depth, ..TreeQuery::default() });
        let (roots, total) = tree(1);
        assert_eq!((node_ids(&roots), total), (vec!["aa", "bt", "el"], 3));
        assert_eq!(node_ids(&roots[0].children), ["aa-1", "aa-2"]);
        assert!(roots[0].children.iter().all(|n| n.children.is_empty()));
        assert_eq!(roots[0].children[1].category.children_count, 2);

        let (roots, _) = tree(3);
        let shoes = &roots[0].children[1];
        assert_eq!(node_ids(&shoes.children), ["aa-2-2", "aa-2-1"]);
        assert_eq!(node_ids(&shoes.children[0].children), ["aa-2-2-1"]);
        let audio = &roots[2].children[0];
        assert_eq!(node_ids(&audio.children), ["el-1-1"]);

        let (roots, _) = tree(0);
        assert!(roots.iter().all(|n| n.children.is_empty()));
    }

    #[test]
    fn tree_top_nodes_follow_parent_search_and_pagination() {
        let taxonomy = fixture();
        let tree = |query: TreeQuery| {
            let (nodes, total) = taxonomy.tree(&query);
            (node_ids(&nodes), total)
        };
        assert_eq!(
            tree(TreeQuery { parent: ParentFilter::Id("aa".to_owned()), ..TreeQuery::default() }),
            (vec!["aa-1", "aa-2"], 2)
        );
        // With a search and no parent, matches at every level are top nodes.
        let (nodes, total) = taxonomy.tree(&TreeQuery { search: Some("boots".to_owned()), ..TreeQuery::default() });
        assert_eq!((node_ids(&nodes), total), (vec!["aa-2-2", "aa-2-2-1"], 2));
        assert_eq!(node_ids(&nodes[0].children), ["aa-2-2-1"]);
        assert_eq!(
            tree(TreeQuery { search: Some("boots".to_owned()), parent: ParentFilter::Root, ..TreeQuery::default() }),
            (vec![], 0)
        );
        assert_eq!(tree(TreeQuery { page: 2, limit: 2, ..TreeQuery::default() }), (vec!["el"], 3));
    }

    #[test]
    fn attributes_inherit_with_the_closest_definition_winning() {
        let taxonomy = fixture();
        let shoes = taxonomy.attributes("aa-2", true).expect("known id");
        let summary: Vec<(&str, &str, bool)> = shoes.iter().map(|a| (a.key, a.source_category_id, a.inherited)).collect();
        assert_eq!(
            summary,
            [
                ("color", "aa", true),
                ("material", "aa-2", false), // overridden, keeps the root's position
                ("target_gender", "aa", true),
                ("shoe_size", "aa-2", false),
            ]
        );
        assert_eq!(shoes[1].default_value, &json!(["Leather"]));
        assert_eq!(shoes[1].values, Some(&["Leather".to_owned(), "Canvas".to_owned()][..]));
        assert_eq!(shoes[2].default_value, &json!("Unisex"));

        let rain = taxonomy.attributes("aa-2-2-1", true).expect("known id");
        let waterproof = rain.iter().find(|a| a.key == "waterproof").expect("inherited key");
        assert_eq!((waterproof.source_category_id, waterproof.inherited), ("aa-2-2-1", false));
        assert_eq!(waterproof.default_value, &json!(true));
        assert_eq!(rain.len(), 5);

        let own = taxonomy.attributes("aa-2", false).expect("known id");
        let keys: Vec<&str> = own.iter().map(|a| a.key).collect();
        assert_eq!(keys, ["shoe_size", "material"]);
        assert!(own.iter().all(|a| !a.inherited && a.source_category_id == "aa-2"));

        assert_eq!(taxonomy.attributes("el-1", false), Some(vec![]));
        let audio = taxonomy.attributes("el-1-1", true).expect("known id");
        assert_eq!(audio.len(), 1);
        assert_eq!(audio[0].default_value, &json!(12));
        assert!(taxonomy.attributes("missing", true).is_none());
    }

    #[test]
    fn output_serializes_in_camel_case_without_internals() {
        let taxonomy = fixture();
        let category = serde_json::to_value(taxonomy.get("aa-2").expect("shoes")).expect("json");
        assert_eq!(
            category,
            json!({"id": "aa-2", "name": "Shoes", "parentId": "aa", "level": 1,
                   "path": "Apparel & Accessories > Shoes", "childrenCount": 2})
        );
        let (nodes, _) = taxonomy.tree(&TreeQuery { parent: ParentFilter::Id("aa-2-2".to_owned()), ..TreeQuery::default() });
        assert_eq!(
            serde_json::to_value(&nodes).expect("json"),
            json!([{"id": "aa-2-2-1", "name": "Rain Boots", "parentId": "aa-2-2", "level": 3,
                    "path": "Apparel & Accessories > Shoes > Boots > Rain Boots",
                    "childrenCount": 0, "children": []}])
        );
        let attributes = taxonomy.attributes("aa-2-1", true).expect("known id");
        assert_eq!(
            serde_json::to_value(&attributes[4]).expect("json"),
            json!({"key": "closure_type", "name": "Closure type", "type": "text",
                   "defaultValue": null, "values": null, "sourceCategoryId": "aa-2-1",
                   "inherited": false})
        );
    }

    #[test]
    fn rejects_documents_of_the_wrong_shape() {
        assert!(matches!(Taxonomy::from_json("[1, 2"), Err(TaxonomyError::Syntax(_))));
        assert!(matches!(Taxonomy::from_json(r#"{"version": 1, "categories": [], "extra": 1}"#), Err(TaxonomyError::Syntax(_))));
        assert_eq!(Taxonomy::from_json(r#"{"version": 2, "categories": []}"#).err(), Some(TaxonomyError::UnsupportedVersion(2)));
        assert_eq!(parse_categories(json!([])).err(), Some(TaxonomyError::Empty));
        let error = parse_categories(json!([
            {"id": "a", "name": "A"},
            {"id": "b", "name": "B", "parent": "a"}
        ]))
        .expect_err("unknown member");
        assert!(matches!(
            &error,
            TaxonomyError::MalformedCategory { index: 1, id: Some(id), .. } if id == "b"
        ));
        assert!(error.to_string().starts_with("category \"b\" (entry 1): unknown field"));
        assert!(matches!(
            parse_categories(json!([{"name": "No id"}])),
            Err(TaxonomyError::MalformedCategory { index: 0, id: None, .. })
        ));
    }

    #[test]
    fn rejects_bad_ids_and_names() {
        for id in ["", "a b", "a/b", "ü", &"x".repeat(65)] {
            assert!(
                matches!(
                    parse_categories(json!([{"id": id, "name": "A"}])),
                    Err(TaxonomyError::InvalidId { id: found, .. }) if found == id
                ),
                "{id:?} was accepted"
            );
        }
        for name in ["", "  ", " Padded", "Shoes > Boots", &"n".repeat(201)] {
            assert!(
                matches!(
                    parse_categories(json!([{"id": "a", "name": name}])),
                    Err(TaxonomyError::InvalidName { id, .. }) if id == "a"
                ),
                "{name:?} was accepted"
            );
        }
        assert!(parse_categories(json!([{"id": "A_1-b", "name": "Ünïcode & Co"}])).is_ok());
    }

    #[test]
    fn rejects_duplicate_ids_and_unknown_parents() {
        let error = parse_categories(json!([
            {"id": "a", "name": "A"},
            {"id": "a", "name": "B"}
        ]))
        .expect_err("duplicate");
        assert_eq!(error, TaxonomyError::DuplicateId { id: "a".to_owned() });
        assert_eq!(error.to_string(), "category \"a\": duplicate id");

        let error = parse_categories(json!([{"id": "a", "name": "A", "parentId": "zz"}])).expect_err("unknown parent");
        assert_eq!(error, TaxonomyError::UnknownParent { id: "a".to_owned(), parent_id: "zz".to_owned() });
        assert_eq!(error.to_string(), "category \"a\": unknown parent \"zz\"");
    }

    #[test]
    fn rejects_cycles() {
        let error = parse_categories(json!([
            {"id": "root", "name": "Root"},
            {"id": "a", "name": "A", "parentId": "c"},
            {"id": "b", "name": "B", "parentId": "a"},
            {"id": "c", "name": "C", "parentId": "b"}
        ]))
        .expect_err("cycle");
        assert_eq!(error, TaxonomyError::Cycle { ids: vec!["a".to_owned(), "c".to_owned(), "b".to_owned()] });
        assert_eq!(error.to_string(), "categories form a parent cycle: \"a\" -> \"c\" -> \"b\" -> \"a\"");
        assert_eq!(
            parse_categories(json!([{"id": "s", "name": "S", "parentId": "s"}])).err(),
            Some(TaxonomyError::Cycle { ids: vec!["s".to_owned()] })
        );
        // A chain that leads into a cycle reports the cycle only.
        assert_eq!(
            parse_categories(json!([
                {"id": "leaf", "name": "Leaf", "parentId": "x"},
                {"id": "x", "name": "X", "parentId": "y"},
                {"id": "y", "name": "Y", "parentId": "x"}
            ]))
            .err(),
            Some(TaxonomyError::Cycle { ids: vec!["x".to_owned(), "y".to_owned()] })
        );
    }

    #[test]
    fn rejects_too_deep_chains() {
        let chain = |len: usize| {
            let categories: Vec<Value> = (0..len)
                .map(|i| {
                    let parent = i.checked_sub(1).map(|p| format!("c{p}"));
                    json!({"id": format!("c{i}"), "name": format!("Level {i}"), "parentId": parent})
                })
                .collect();
            parse_categories(Value::Array(categories))
        };
        let deepest = chain(MAX_LEVEL + 1).expect("MAX_LEVEL is allowed");
        assert_eq!(deepest.get(&format!("c{MAX_LEVEL}")).map(|c| c.level), Some(MAX_LEVEL));
        assert_eq!(chain(MAX_LEVEL + 2).err(), Some(TaxonomyError::TooDeep { id: format!("c{}", MAX_LEVEL + 1) }));
    }

    #[test]
    fn rejects_sibling_names_that_differ_only_in_case() {
        let error = parse_categories(json!([
            {"id": "a", "name": "A"},
            {"id": "a-1", "name": "Boots", "parentId": "a"},
            {"id": "b", "name": "B"},
            {"id": "b-1", "name": "Boots", "parentId": "b"},
            {"id": "a-2", "name": "BOOTS", "parentId": "a"}
        ]))
        .expect_err("duplicate sibling name");
        assert_eq!(
            error,
            TaxonomyError::DuplicateName { id: "a-2".to_owned(), other_id: "a-1".to_owned(), name: "BOOTS".to_owned() }
        );
        assert!(matches!(
            parse_categories(json!([{"id": "a", "name": "A"}, {"id": "b", "name": "a"}])),
            Err(TaxonomyError::DuplicateName { .. })
        ));
    }

    #[test]
    fn rejects_duplicate_attribute_keys_within_one_category() {
        let error = parse_categories(json!([{"id": "a", "name": "A", "attributes": [
            {"key": "color", "name": "Color", "type": "text"},
            {"key": "color", "name": "Colour", "type": "list"}
        ]}]))
        .expect_err("duplicate key");
        assert_eq!(error, TaxonomyError::DuplicateAttribute { category_id: "a".to_owned(), key: "color".to_owned() });
        assert_eq!(error.to_string(), "category \"a\": duplicate attribute key \"color\"");
    }

    #[test]
    fn rejects_attributes_whose_type_default_or_values_do_not_fit() {
        let invalid = [
            json!({"key": "Color", "name": "Color", "type": "text"}),
            json!({"key": "2nd", "name": "Second", "type": "text"}),
            json!({"key": "color", "name": " ", "type": "text"}),
            json!({"key": "color", "name": "Color", "type": "colour"}),
            json!({"key": "weight", "name": "Weight", "type": "number", "defaultValue": "12"}),
            json!({"key": "weight", "name": "Weight", "type": "number", "values": ["1"]}),
            json!({"key": "flag", "name": "Flag", "type": "boolean", "defaultValue": 0}),
            json!({"key": "flag", "name": "Flag", "type": "boolean", "values": ["yes"]}),
            json!({"key": "tone", "name": "Tone", "type": "text", "defaultValue": ["a"]}),
            json!({"key": "tone", "name": "Tone", "type": "text", "defaultValue": "Teal",
                   "values": ["Red", "Blue"]}),
            json!({"key": "tone", "name": "Tone", "type": "text", "values": []}),
            json!({"key": "tone", "name": "Tone", "type": "text", "values": ["Red", "Red"]}),
            json!({"key": "tone", "name": "Tone", "type": "text", "values": ["Red", ""]}),
            json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": "a"}),
            json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": [1]}),
            json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": ["a", "a"]}),
            json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": ["c"],
                   "values": ["a", "b"]}),
        ];
        for attribute in invalid {
            let key = attribute["key"].as_str().unwrap_or_default().to_owned();
            match parse_attribute(attribute.clone()) {
                Err(TaxonomyError::InvalidAttribute { category_id, key: found, reason }) => {
                    assert_eq!((category_id.as_str(), found), ("x", key));
                    assert!(!reason.is_empty());
                }
                other => panic!("{attribute} gave {other:?}"),
            }
        }
        let error = parse_attribute(json!({"key": "weight", "name": "Weight",
                                           "type": "number", "defaultValue": true}))
        .expect_err("bad default");
        assert_eq!(
            error.to_string(),
            "category \"x\": attribute \"weight\": the default value of a number attribute \
             must be a number or null"
        );
        // A mistyped member is a shape error that still names the category.
        assert!(matches!(
            parse_attribute(json!({"key": "k", "name": "K", "type": "text", "values": [1]})),
            Err(TaxonomyError::MalformedCategory { id: Some(id), .. }) if id == "x"
        ));
    }

    #[test]
    fn accepts_every_type_with_fitting_defaults() {
        let valid = [
            json!({"key": "a", "name": "A", "type": "text", "defaultValue": "Red",
                   "values": ["Red", "Blue"]}),
            json!({"key": "b", "name": "B", "type": "text", "defaultValue": "anything"}),
            json!({"key": "c_2", "name": "C", "type": "number", "defaultValue": 12.5}),
            json!({"key": "d", "name": "D", "type": "boolean", "defaultValue": false}),
            json!({"key": "e", "name": "E", "type": "list", "defaultValue": ["b", "a"],
                   "values": ["a", "b", "c"]}),
            json!({"key": "f", "name": "F", "type": "list", "defaultValue": []}),
            json!({"key": "g", "name": "G", "type": "list", "defaultValue": null}),
            json!({"key": "h", "name": "H", "type": "number"}),
        ];
        for attribute in valid {
            let taxonomy = parse_attribute(attribute.clone()).unwrap_or_else(|e| panic!("{attribute} rejected: {e}"));
            let views = taxonomy.attributes("x", false).expect("known id");
            let expected_default = attribute.get("defaultValue").unwrap_or(&Value::Null);
            assert_eq!(views[0].default_value, expected_default);
        }
    }
}
