//! Collections: MANUAL (the merchant picks the products) and SMART (rules pick them). The stored
//! record, request bodies, validation, rule evaluation and the JSON views.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use uuid::Uuid;

use crate::domain::fields::{self, check_line, check_text, double_option};
use crate::domain::money::Money;
use crate::domain::product::{HANDLE, MAX_AMOUNT, Product, valid_handle};
use crate::domain::time::{parse_rfc3339, rfc3339};
use crate::error::{ApiResult, Check};

/// Most rules of one smart collection (the limit of the major platforms).
pub const MAX_RULES: usize = 60;
/// Largest `position` accepted.
pub const MAX_POSITION: i64 = 1_000_000_000;

/// Declares a wire-named enum: `NAMES` in declaration order, `parse` (any case) and `name`.
macro_rules! wire_enum {
    ($(#[$m:meta])* $name:ident { $($variant:ident = $wire:literal),* $(,)? }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
        pub enum $name { $($variant),* }

        impl $name {
            /// The names on the wire, in declaration order.
            pub const NAMES: &'static [&'static str] = &[$($wire),*];

            /// Parses a wire name in any case.
            pub fn parse(s: &str) -> Option<Self> {
                const ALL: &[$name] = &[$($name::$variant),*];
                Self::NAMES.iter().position(|n| n.eq_ignore_ascii_case(s)).map(|i| ALL[i])
            }

            /// The wire name.
            pub fn name(self) -> &'static str {
                Self::NAMES[self as usize]
            }

            /// The document's schema of a request field read with [`Self::parse`]:
            /// `#[schemars(schema_with = "…::schema")]` beside a `String` field.
            #[allow(dead_code)]
            pub fn schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $crate::domain::fields::one_of(Self::NAMES, "read in any case")
            }

            /// [`Self::schema`] of an optional field.
            #[allow(dead_code)]
            pub fn optional_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
                $crate::domain::fields::or_null(Self::schema(g))
            }
        }

        impl $crate::domain::Enumerated for $name {
            const NAMES: &'static [&'static str] = &[$($wire),*];
            fn name(self) -> &'static str {
                Self::NAMES[self as usize]
            }
        }
    };
}
pub(crate) use wire_enum;

wire_enum!(
    /// Whether the merchant or the rules choose a collection's products.
    CollectionType { Manual = "MANUAL", Smart = "SMART" }
);

wire_enum!(
    /// Visibility of a collection; `scheduled` becomes `published` at `publishAt`.
    CollectionStatus { Published = "published", Draft = "draft", Scheduled = "scheduled" }
);

wire_enum!(
    /// The product attribute a rule looks at.
    RuleField { Title = "title", Type = "type", Vendor = "vendor", Tag = "tag", Price = "price" }
);

wire_enum!(
    /// How a rule compares the attribute with its value.
    Relation {
        Equals = "equals",
        NotEquals = "not_equals",
        Contains = "contains",
        NotContains = "not_contains",
        StartsWith = "starts_with",
        EndsWith = "ends_with",
        GreaterThan = "greater_than",
        LessThan = "less_than",
    }
);

wire_enum!(
    /// The order of a collection's products (`sortOrder` of the collection).
    ProductOrder {
        Manual = "manual",
        AlphaAsc = "alpha-asc",
        AlphaDesc = "alpha-desc",
        PriceAsc = "price-asc",
        PriceDesc = "price-desc",
        Created = "created",
        CreatedDesc = "created-desc",
    }
);

/// What a membership row's sort segment holds; recorded in the reverse row so a product change
/// can re-key its rows without loading the collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum SortKind {
    /// The manual position (i64), unaffected by product changes.
    Position = 0,
    /// The lower-cased title.
    Title = 1,
    /// The product price (lowest variant price, i64 minor units).
    Price = 2,
    /// The product's creation time (i64 ms).
    Created = 3,
}

impl SortKind {
    pub fn from_u8(v: u8) -> Option<SortKind> {
        match v {
            0 => Some(SortKind::Position),
            1 => Some(SortKind::Title),
            2 => Some(SortKind::Price),
            3 => Some(SortKind::Created),
            _ => None,
        }
    }
}

impl ProductOrder {
    /// What the membership rows are keyed by, and whether pages read them backwards.
    pub fn kind(self) -> (SortKind, bool) {
        match self {
            ProductOrder::Manual => (SortKind::Position, false),
            ProductOrder::AlphaAsc => (SortKind::Title, false),
            ProductOrder::AlphaDesc => (SortKind::Title, true),
            ProductOrder::PriceAsc => (SortKind::Price, false),
            ProductOrder::PriceDesc => (SortKind::Price, true),
            ProductOrder::Created => (SortKind::Created, false),
            ProductOrder::CreatedDesc => (SortKind::Created, true),
        }
    }
}

/// A rule's value: text for title/type/vendor/tag, minor units for price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum RuleValue {
    Text(String),
    Amount(i64),
}

/// One stored rule.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rule {
    pub field: RuleField,
    pub relation: Relation,
    pub value: RuleValue,
}

/// What product writes need of a smart collection: kept in its own row so that evaluating a
/// product never decodes whole collection records.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SmartRules {
    pub rules: Vec<Rule>,
    /// `true`: a product matching any rule belongs; `false`: it must match all of them.
    pub disjunctive: bool,
}

/// A stored collection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Collection {
    pub id: Uuid,
    pub title: String,
    pub handle: String,
    pub description: String,
    pub collection_type: CollectionType,
    pub rules: SmartRules,
    pub status: CollectionStatus,
    /// When a scheduled collection becomes published (only while `status` is scheduled).
    pub publish_at: Option<i64>,
    /// When it last became published.
    pub published_at: Option<i64>,
    pub parent_id: Option<Uuid>,
    /// The merchant's order of collections (`sortBy=position`).
    pub position: i64,
    /// The order of its products.
    pub sort_order: ProductOrder,
    pub product_count: u64,
    /// The manual position the next added product gets (appended at the end).
    pub next_position: i64,
    pub created_at: i64,
    pub updated_at: i64,
    pub deleted_at: Option<i64>,
}

impl Collection {
    /// A smart collection that is not deleted: its rules are maintained on product writes.
    pub fn is_live_smart(&self) -> bool {
        self.collection_type == CollectionType::Smart && self.deleted_at.is_none()
    }
}

/// A rule in a request: strings, so that an unknown field or relation is reported by name.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RuleInput {
    /// title, type, vendor, tag or price.
    pub field: String,
    /// equals, not_equals, contains, not_contains, starts_with, ends_with (text fields);
    /// equals, not_equals, greater_than, less_than (price).
    pub relation: String,
    /// Text, or for price an integer amount in minor units of the store currency.
    pub value: Value,
}

/// `POST S/collections`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateCollection {
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub title: String,
    /// Generated from the title when omitted.
    #[schemars(length(max = 255), pattern(HANDLE))]
    pub handle: Option<String>,
    #[serde(default)]
    #[schemars(length(max = 65535), pattern(fields::TEXT_OR_EMPTY))]
    pub description: String,
    /// MANUAL (default) or SMART.
    #[serde(default)]
    #[schemars(schema_with = "CollectionType::optional_schema")]
    pub collection_type: Option<String>,
    /// SMART only, at least one.
    #[serde(default)]
    pub rules: Vec<RuleInput>,
    /// SMART only: `true` = any rule, `false` (default) = all rules.
    #[serde(default)]
    pub disjunctive: bool,
    /// published, draft (default) or scheduled (needs `publishAt`).
    #[serde(default)]
    #[schemars(schema_with = "CollectionStatus::optional_schema")]
    pub status: Option<String>,
    /// RFC 3339, in the future; implies status scheduled.
    #[schemars(extend("format" = "date-time"))]
    pub publish_at: Option<String>,
    pub parent_id: Option<Uuid>,
    /// Default: after every existing collection.
    #[schemars(range(min = 0, max = MAX_POSITION))]
    pub position: Option<i64>,
    /// manual (default), alpha-asc, alpha-desc, price-asc, price-desc, created, created-desc.
    #[serde(default)]
    #[schemars(schema_with = "ProductOrder::optional_schema")]
    pub sort_order: Option<String>,
}

/// `PATCH S/collections/{id}`: every field optional; `null` clears `parentId` and `publishAt`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateCollection {
    #[schemars(length(min = 1, max = 255), pattern(fields::LINE))]
    pub title: Option<String>,
    #[schemars(length(max = 255), pattern(HANDLE))]
    pub handle: Option<String>,
    #[schemars(length(max = 65535), pattern(fields::TEXT_OR_EMPTY))]
    pub description: Option<String>,
    /// Cannot be changed; accepted only when equal to the current type.
    #[serde(default)]
    #[schemars(schema_with = "CollectionType::optional_schema")]
    pub collection_type: Option<String>,
    pub rules: Option<Vec<RuleInput>>,
    pub disjunctive: Option<bool>,
    #[serde(default)]
    #[schemars(schema_with = "CollectionStatus::optional_schema")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<String>", extend("format" = "date-time"))]
    pub publish_at: Option<Option<String>>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<Uuid>")]
    pub parent_id: Option<Option<Uuid>>,
    #[schemars(range(min = 0, max = MAX_POSITION))]
    pub position: Option<i64>,
    #[serde(default)]
    #[schemars(schema_with = "ProductOrder::optional_schema")]
    pub sort_order: Option<String>,
}

/// `{productIds}` of the add, remove and reorder operations.
#[derive(Debug, Default, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ProductIds {
    /// Each once; at most 1000 in an add or remove (a reorder lists every member).
    #[schemars(length(min = 1), extend("uniqueItems" = true))]
    pub product_ids: Vec<Uuid>,
}

/// Most ids in one add or remove request.
pub const MAX_PRODUCT_IDS: usize = 1000;

/// `POST S/collections/{id}/schedule`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Schedule {
    /// RFC 3339, in the future.
    #[schemars(extend("format" = "date-time"))]
    pub publish_at: String,
}

/// Checks a list of product ids: not empty, not too long, no id twice (each problem names
/// `productIds[i]`). `max` is `None` for the reorder, which lists every member.
pub fn check_product_ids(ids: &[Uuid], max: Option<usize>) -> ApiResult<()> {
    let mut c = Check::new();
    c.ensure(!ids.is_empty(), "productIds", "must not be empty");
    if let Some(max) = max {
        c.ensure(ids.len() <= max, "productIds", format!("at most {max} ids per request"));
    }
    let mut seen = std::collections::HashSet::with_capacity(ids.len());
    for (i, id) in ids.iter().enumerate() {
        if !seen.insert(*id) {
            c.fail(&format!("productIds[{i}]"), "appears more than once");
        }
    }
    c.finish()
}

fn parse_enum<T>(c: &mut Check, field: &str, raw: Option<&str>, parse: fn(&str) -> Option<T>, names: &[&str]) -> Option<T> {
    let raw = raw?;
    let v = parse(raw);
    if v.is_none() {
        c.fail(field, format!("must be one of: {}", names.join(", ")));
    }
    v
}

/// Validates rules, reporting each bad one as `rules[i].field`, `.relation` or `.value`.
fn parse_rules(c: &mut Check, input: &[RuleInput]) -> Vec<Rule> {
    c.ensure(!input.is_empty(), "rules", "a smart collection needs at least one rule");
    c.ensure(input.len() <= MAX_RULES, "rules", format!("at most {MAX_RULES} rules"));
    let mut rules = Vec::with_capacity(input.len());
    for (i, r) in input.iter().enumerate() {
        let at = |part: &str| format!("rules[{i}].{part}");
        let field = RuleField::parse(&r.field);
        if field.is_none() {
            c.fail(&at("field"), format!("unknown field {:?}; use one of: {}", r.field, RuleField::NAMES.join(", ")));
        }
        let relation = Relation::parse(&r.relation);
        if relation.is_none() {
            c.fail(&at("relation"), format!("unknown relation {:?}; use one of: {}", r.relation, Relation::NAMES.join(", ")));
        }
        let (Some(field), Some(relation)) = (field, relation) else { continue };
        let value = if field == RuleField::Price {
            if matches!(relation, Relation::Contains | Relation::NotContains | Relation::StartsWith | Relation::EndsWith) {
                c.fail(&at("relation"), "price takes equals, not_equals, greater_than or less_than");
                continue;
            }
            let amount = match &r.value {
                Value::Number(n) => n.as_i64(),
                Value::String(s) => s.trim().parse::<i64>().ok(),
                _ => None,
            };
            match amount {
                Some(a) if (0..=MAX_AMOUNT).contains(&a) => RuleValue::Amount(a),
                _ => {
                    c.fail(&at("value"), "must be a price in minor units (a whole number, e.g. 4500 for 45.00)");
                    continue;
                }
            }
        } else {
            if matches!(relation, Relation::GreaterThan | Relation::LessThan) {
                c.fail(&at("relation"), "greater_than and less_than apply to price only");
                continue;
            }
            match &r.value {
                Value::String(s) if !s.trim().is_empty() && s.trim().chars().count() <= 255 => {
                    RuleValue::Text(s.trim().to_string())
                }
                _ => {
                    c.fail(&at("value"), "must be a non-empty text of at most 255 characters");
                    continue;
                }
            }
        };
        rules.push(Rule { field, relation, value });
    }
    rules
}

fn check_position(c: &mut Check, position: Option<i64>) {
    if let Some(p) = position {
        c.ensure((0..=MAX_POSITION).contains(&p), "position", format!("must be between 0 and {MAX_POSITION}"));
    }
}

/// A future time for `publishAt`.
fn parse_publish_at(c: &mut Check, raw: &str, now: i64) -> Option<i64> {
    match parse_rfc3339(raw) {
        Some(t) if t > now => Some(t),
        Some(_) => {
            c.fail("publishAt", "must be in the future");
            None
        }
        None => {
            c.fail("publishAt", "must be an RFC 3339 date-time, e.g. 2030-01-31T09:00:00Z");
            None
        }
    }
}

/// Validates a create request and builds the record `id`, made at `now`. The handle is resolved (and `position`
/// defaulted) by the cell, which knows the store's other collections.
pub fn build(input: &CreateCollection, id: Uuid, now: i64) -> ApiResult<Collection> {
    let mut c = Check::new();
    check_line(&mut c, "title", &input.title, 255, true);
    check_text(&mut c, "description", &input.description, 65_535, false);
    if let Some(h) = &input.handle {
        c.ensure(valid_handle(h), "handle", "must be lower-case letters, digits and single dashes");
    }
    let ty = parse_enum(&mut c, "collectionType", input.collection_type.as_deref(), CollectionType::parse, CollectionType::NAMES)
        .unwrap_or(CollectionType::Manual);
    let rules = match ty {
        CollectionType::Smart => parse_rules(&mut c, &input.rules),
        CollectionType::Manual => {
            c.ensure(input.rules.is_empty(), "rules", "only smart collections have rules");
            c.ensure(!input.disjunctive, "disjunctive", "only smart collections have rules");
            Vec::new()
        }
    };
    let publish_at = input.publish_at.as_deref().and_then(|raw| parse_publish_at(&mut c, raw, now));
    let default_status = if input.publish_at.is_some() { CollectionStatus::Scheduled } else { CollectionStatus::Draft };
    let status = parse_enum(&mut c, "status", input.status.as_deref(), CollectionStatus::parse, CollectionStatus::NAMES)
        .unwrap_or(default_status);
    check_schedule(&mut c, status, input.publish_at.is_some());
    check_position(&mut c, input.position);
    let sort_order = parse_enum(&mut c, "sortOrder", input.sort_order.as_deref(), ProductOrder::parse, ProductOrder::NAMES)
        .unwrap_or(ProductOrder::Manual);
    c.finish()?;
    Ok(Collection {
        id,
        title: input.title.trim().to_string(),
        handle: String::new(),
        description: input.description.clone(),
        collection_type: ty,
        rules: SmartRules { rules, disjunctive: input.disjunctive },
        status,
        publish_at: if status == CollectionStatus::Scheduled { publish_at } else { None },
        published_at: (status == CollectionStatus::Published).then_some(now),
        parent_id: input.parent_id,
        position: input.position.unwrap_or(0),
        sort_order,
        product_count: 0,
        next_position: 0,
        created_at: now,
        updated_at: now,
        deleted_at: None,
    })
}

/// `scheduled` needs a `publishAt`, and only `scheduled` takes one.
fn check_schedule(c: &mut Check, status: CollectionStatus, has_publish_at: bool) {
    match status {
        CollectionStatus::Scheduled => c.ensure(has_publish_at, "publishAt", "is required for a scheduled collection"),
        _ => c.ensure(!has_publish_at, "publishAt", "is only for status scheduled (or use POST .../schedule)"),
    };
}

/// Validates an update and applies it to a copy of `current`. `parentId` and the handle are
/// checked by the cell against the store's other collections.
pub fn apply_update(u: &UpdateCollection, current: &Collection, now: i64) -> ApiResult<Collection> {
    let mut c = Check::new();
    let mut next = current.clone();
    if let Some(t) = &u.title {
        check_line(&mut c, "title", t, 255, true);
        next.title = t.trim().to_string();
    }
    if let Some(d) = &u.description {
        check_text(&mut c, "description", d, 65_535, false);
        next.description = d.clone();
    }
    if let Some(h) = &u.handle {
        c.ensure(valid_handle(h), "handle", "must be lower-case letters, digits and single dashes");
    }
    if let Some(t) = &u.collection_type {
        c.ensure(CollectionType::parse(t) == Some(current.collection_type), "collectionType", "cannot be changed after creation");
    }
    if current.collection_type == CollectionType::Smart {
        if let Some(rules) = &u.rules {
            next.rules.rules = parse_rules(&mut c, rules);
        }
        if let Some(d) = u.disjunctive {
            next.rules.disjunctive = d;
        }
    } else {
        c.ensure(u.rules.as_ref().is_none_or(Vec::is_empty), "rules", "only smart collections have rules");
        c.ensure(u.disjunctive != Some(true), "disjunctive", "only smart collections have rules");
    }
    // Status and schedule: a new publishAt alone schedules; leaving `scheduled` drops the date.
    let mut bad_at = false;
    let new_at = match &u.publish_at {
        Some(Some(raw)) => {
            let at = parse_publish_at(&mut c, raw, now);
            bad_at = at.is_none();
            Some(at)
        }
        Some(None) => Some(None),
        None => None,
    };
    let status = match u.status.as_deref() {
        Some(raw) => parse_enum(&mut c, "status", Some(raw), CollectionStatus::parse, CollectionStatus::NAMES),
        None if matches!(u.publish_at, Some(Some(_))) => Some(CollectionStatus::Scheduled),
        None => None,
    }
    .unwrap_or(current.status);
    let publish_at = match (status, new_at) {
        (CollectionStatus::Scheduled, Some(at)) => at,
        (CollectionStatus::Scheduled, None) => current.publish_at,
        _ => None,
    };
    if status == CollectionStatus::Scheduled {
        c.ensure(publish_at.is_some() || bad_at, "publishAt", "is required for a scheduled collection");
    } else {
        c.ensure(!matches!(u.publish_at, Some(Some(_))), "publishAt", "is only for status scheduled (or use POST .../schedule)");
    }
    if status == CollectionStatus::Published && current.status != CollectionStatus::Published {
        next.published_at = Some(now);
    }
    next.status = status;
    next.publish_at = publish_at;
    check_position(&mut c, u.position);
    if let Some(p) = u.position {
        next.position = p;
    }
    if let Some(raw) = &u.sort_order
        && let Some(o) = parse_enum(&mut c, "sortOrder", Some(raw), ProductOrder::parse, ProductOrder::NAMES)
    {
        next.sort_order = o;
    }
    if let Some(p) = u.parent_id {
        next.parent_id = p;
    }
    c.finish()?;
    next.updated_at = now;
    Ok(next)
}

/// Schedules publication at `raw` (RFC 3339, in the future).
pub fn schedule(current: &Collection, raw: &str, now: i64) -> ApiResult<Collection> {
    let mut c = Check::new();
    let at = parse_publish_at(&mut c, raw, now);
    c.finish()?;
    let mut next = current.clone();
    next.status = CollectionStatus::Scheduled;
    next.publish_at = at;
    next.updated_at = now;
    Ok(next)
}

fn text_matches(relation: Relation, subject: &str, value: &str) -> bool {
    let s = subject.to_lowercase();
    let v = value.to_lowercase();
    match relation {
        Relation::Equals => s == v,
        Relation::NotEquals => s != v,
        Relation::Contains => s.contains(&v),
        Relation::NotContains => !s.contains(&v),
        Relation::StartsWith => s.starts_with(&v),
        Relation::EndsWith => s.ends_with(&v),
        Relation::GreaterThan | Relation::LessThan => false,
    }
}

fn rule_matches(rule: &Rule, p: &Product) -> bool {
    match (&rule.value, rule.field) {
        (RuleValue::Text(v), RuleField::Title) => text_matches(rule.relation, &p.title, v),
        (RuleValue::Text(v), RuleField::Type) => text_matches(rule.relation, &p.product_type, v),
        (RuleValue::Text(v), RuleField::Vendor) => text_matches(rule.relation, &p.vendor, v),
        // A product has many tags: a positive relation holds when some tag satisfies it, a
        // negative one when no tag has the value (`not_equals sale` = not tagged sale).
        (RuleValue::Text(v), RuleField::Tag) => match rule.relation {
            Relation::NotEquals => !p.tags.iter().any(|t| text_matches(Relation::Equals, t, v)),
            Relation::NotContains => !p.tags.iter().any(|t| text_matches(Relation::Contains, t, v)),
            r => p.tags.iter().any(|t| text_matches(r, t, v)),
        },
        // Like the variant-price rules of the major platforms: some variant's price satisfies it.
        (RuleValue::Amount(v), RuleField::Price) => p.variants.iter().any(|var| match rule.relation {
            Relation::Equals => var.price == *v,
            Relation::NotEquals => var.price != *v,
            Relation::GreaterThan => var.price > *v,
            Relation::LessThan => var.price < *v,
            _ => false,
        }),
        _ => false,
    }
}

impl SmartRules {
    /// Whether `p` belongs: any rule (disjunctive) or every rule. No rules match nothing.
    pub fn matches(&self, p: &Product) -> bool {
        if self.rules.is_empty() {
            return false;
        }
        if self.disjunctive {
            self.rules.iter().any(|r| rule_matches(r, p))
        } else {
            self.rules.iter().all(|r| rule_matches(r, p))
        }
    }
}

/// A rule as the API shows it.
#[derive(Serialize, JsonSchema)]
pub struct RuleView {
    pub field: &'static str,
    pub relation: &'static str,
    pub value: Value,
}

/// A small product view embedded by `includeProducts`.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProductSummary<'a> {
    pub id: Uuid,
    pub title: &'a str,
    pub handle: &'a str,
    pub status: &'static str,
    pub price: Money,
}

impl<'a> ProductSummary<'a> {
    pub fn of(p: &'a Product) -> Self {
        ProductSummary {
            id: p.id,
            title: &p.title,
            handle: &p.handle,
            status: p.status.name(),
            price: Money { amount: p.price(), currency: p.currency },
        }
    }
}

/// A collection as the API shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CollectionView<'a> {
    pub id: Uuid,
    pub title: &'a str,
    pub handle: &'a str,
    pub description: &'a str,
    pub collection_type: &'static str,
    pub rules: Vec<RuleView>,
    pub disjunctive: bool,
    pub status: &'static str,
    pub publish_at: Option<String>,
    pub published_at: Option<String>,
    pub parent_id: Option<Uuid>,
    pub position: i64,
    pub sort_order: &'static str,
    pub product_count: u64,
    pub created_at: String,
    pub updated_at: String,
    pub deleted_at: Option<String>,
    /// The first products in the collection's order, with `includeProducts=true`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub products: Option<Vec<ProductSummary<'a>>>,
}

impl Collection {
    pub fn view<'a>(&'a self, products: Option<&'a [Product]>) -> CollectionView<'a> {
        CollectionView {
            id: self.id,
            title: &self.title,
            handle: &self.handle,
            description: &self.description,
            collection_type: self.collection_type.name(),
            rules: self
                .rules
                .rules
                .iter()
                .map(|r| RuleView {
                    field: r.field.name(),
                    relation: r.relation.name(),
                    value: match &r.value {
                        RuleValue::Text(t) => Value::String(t.clone()),
                        RuleValue::Amount(a) => Value::from(*a),
                    },
                })
                .collect(),
            disjunctive: self.rules.disjunctive,
            status: self.status.name(),
            publish_at: self.publish_at.map(rfc3339),
            published_at: self.published_at.map(rfc3339),
            parent_id: self.parent_id,
            position: self.position,
            sort_order: self.sort_order.name(),
            product_count: self.product_count,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
            deleted_at: self.deleted_at.map(rfc3339),
            products: products.map(|ps| ps.iter().map(ProductSummary::of).collect()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::money::Currency;
    use crate::domain::product::{Status, Variant};

    fn product(title: &str, tags: &[&str], prices: &[i64]) -> Product {
        let variant = |price: i64| Variant {
            id: Uuid::from_u128(price as u128),
            title: "Default".into(),
            sku: None,
            barcode: None,
            price,
            compare_at_price: None,
            weight_grams: None,
            option_values: Vec::new(),
            inventory_tracked: false,
            inventory_quantity: 0,
            created_at: 0,
            updated_at: 0,
        };
        Product {
            id: Uuid::from_u128(1),
            title: title.into(),
            description: String::new(),
            vendor: "Acme".into(),
            product_type: "Shirts".into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            handle: "h".into(),
            status: Status::Active,
            category_id: None,
            options: Vec::new(),
            variants: prices.iter().map(|p| variant(*p)).collect(),
            currency: Currency::parse("USD").unwrap(),
            created_at: 0,
            updated_at: 0,
        }
    }

    fn rule(field: RuleField, relation: Relation, value: RuleValue) -> Rule {
        Rule { field, relation, value }
    }

    fn text(s: &str) -> RuleValue {
        RuleValue::Text(s.into())
    }

    #[test]
    fn rules_match_like_the_major_platforms() {
        let p = product("Linen Shirt", &["Summer", "sale"], &[4000, 6000]);
        let yes = |r: Rule| SmartRules { rules: vec![r], disjunctive: false }.matches(&p);
        assert!(yes(rule(RuleField::Title, Relation::StartsWith, text("linen"))));
        assert!(yes(rule(RuleField::Title, Relation::EndsWith, text("SHIRT"))));
        assert!(!yes(rule(RuleField::Title, Relation::NotContains, text("shirt"))));
        assert!(yes(rule(RuleField::Type, Relation::Equals, text("shirts"))));
        assert!(yes(rule(RuleField::Vendor, Relation::NotEquals, text("Other"))));
        assert!(yes(rule(RuleField::Tag, Relation::Equals, text("summer"))));
        assert!(!yes(rule(RuleField::Tag, Relation::NotEquals, text("sale"))), "negative tag rules need no tag to match");
        assert!(yes(rule(RuleField::Tag, Relation::NotContains, text("winter"))));
        assert!(yes(rule(RuleField::Price, Relation::GreaterThan, RuleValue::Amount(5000))), "some variant is over");
        assert!(yes(rule(RuleField::Price, Relation::LessThan, RuleValue::Amount(5000))), "some variant is under");
        assert!(!yes(rule(RuleField::Price, Relation::Equals, RuleValue::Amount(5000))));
        let two =
            vec![rule(RuleField::Tag, Relation::Equals, text("winter")), rule(RuleField::Vendor, Relation::Equals, text("acme"))];
        assert!(!SmartRules { rules: two.clone(), disjunctive: false }.matches(&p));
        assert!(SmartRules { rules: two, disjunctive: true }.matches(&p));
        assert!(!SmartRules { rules: Vec::new(), disjunctive: true }.matches(&p), "no rules match nothing");
    }

    #[test]
    fn status_and_schedule_rules() {
        let now = 1_000_000;
        let base = CreateCollection { title: "T".into(), ..Default::default() };
        assert_eq!(build(&base, Uuid::nil(), now).unwrap().status, CollectionStatus::Draft);
        let at = crate::domain::time::rfc3339(now + 60_000);
        let scheduled = build(&CreateCollection { publish_at: Some(at.clone()), ..Default::default() }, Uuid::nil(), now);
        assert_eq!(scheduled.unwrap_err().fields[0].field, "title");
        let c =
            build(&CreateCollection { title: "T".into(), publish_at: Some(at), ..Default::default() }, Uuid::nil(), now).unwrap();
        assert_eq!((c.status, c.publish_at), (CollectionStatus::Scheduled, Some(now + 60_000)));
        // Leaving `scheduled` drops the date; `scheduled` without one is refused.
        let u = UpdateCollection { status: Some("draft".into()), ..Default::default() };
        let d = apply_update(&u, &c, now).unwrap();
        assert_eq!((d.status, d.publish_at), (CollectionStatus::Draft, None));
        let u = UpdateCollection { status: Some("scheduled".into()), ..Default::default() };
        assert_eq!(apply_update(&u, &d, now).unwrap_err().fields[0].field, "publishAt");
        let u = UpdateCollection { publish_at: Some(None), ..Default::default() };
        assert_eq!(apply_update(&u, &c, now).unwrap_err().fields[0].field, "publishAt");
        let u = UpdateCollection { status: Some("published".into()), ..Default::default() };
        let p = apply_update(&u, &c, now + 5).unwrap();
        assert_eq!((p.status, p.publish_at, p.published_at), (CollectionStatus::Published, None, Some(now + 5)));
    }
}
