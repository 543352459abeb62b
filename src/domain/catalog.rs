//! Catalogs: which products a market sells and at what price adjustment.
//!
//! A catalog's `selection` fixes what its product entries mean: for SPECIFIC they are the
//! products it includes (none at first); for ALL they are the products it excludes from every
//! product of the store. The effective product set is derived from the two.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::collection::wire_enum;
use crate::domain::fields::{LINE, check_line, double_option};
use crate::domain::money::{Money, round_div};
use crate::domain::product::MAX_AMOUNT;
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

wire_enum!(
    /// Whether a catalog starts from every product (ALL) or from none (SPECIFIC).
    Selection { All = "ALL", Specific = "SPECIFIC" }
);

wire_enum!(
    /// A catalog's state.
    CatalogStatus { Active = "active", Inactive = "inactive", Draft = "draft" }
);

wire_enum!(
    /// How `priceAdjustment.value` is read.
    AdjustmentType { Percentage = "percentage", Fixed = "fixed" }
);

/// Percentage adjustments are in basis points: -10000 (free) up to +100000 (+1000 %).
pub const MIN_BASIS_POINTS: i64 = -10_000;
pub const MAX_BASIS_POINTS: i64 = 100_000;

/// A price change applied to every product of the catalog.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PriceAdjustment {
    pub kind: AdjustmentType,
    /// Basis points (percentage: -1000 = 10 % off) or minor units of the store currency (fixed:
    /// -500 = 5.00 off).
    pub value: i64,
}

impl PriceAdjustment {
    /// The adjusted price of `amount`, never below zero; percentages round half away from zero.
    pub fn apply(&self, amount: i64) -> i64 {
        let adjusted = match self.kind {
            AdjustmentType::Percentage => {
                amount.saturating_add(round_div(i128::from(amount).saturating_mul(i128::from(self.value)), 10_000))
            }
            AdjustmentType::Fixed => amount.saturating_add(self.value),
        };
        adjusted.max(0)
    }
}

/// A stored catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Catalog {
    pub id: Uuid,
    pub name: String,
    pub market_id: Uuid,
    pub selection: Selection,
    pub status: CatalogStatus,
    pub price_adjustment: Option<PriceAdjustment>,
    /// The size of the effective product set, kept in step by every product and entry write.
    pub products: u64,
    pub created_at: i64,
    pub updated_at: i64,
}

/// `priceAdjustment` in requests.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
#[schemars(extend("oneOf" = [
    {"properties": {"type": {"enum": ["percentage"]}, "value": {"minimum": MIN_BASIS_POINTS, "maximum": MAX_BASIS_POINTS}}},
    {"properties": {"type": {"enum": ["fixed"]}, "value": {"minimum": -MAX_AMOUNT, "maximum": MAX_AMOUNT}}}
]))]
pub struct PriceAdjustmentInput {
    /// percentage or fixed.
    #[serde(rename = "type")]
    #[schemars(schema_with = "AdjustmentType::schema")]
    pub kind: String,
    /// percentage: basis points (-1000 = 10 % off); fixed: minor units of the store currency.
    pub value: i64,
}

/// `POST S/catalogs`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateCatalog {
    #[schemars(length(min = 1, max = 255), pattern(LINE))]
    pub name: String,
    /// A market of the store.
    pub market_id: Uuid,
    /// ALL or SPECIFIC (default).
    #[serde(default)]
    #[schemars(schema_with = "Selection::optional_schema")]
    pub selection: Option<String>,
    /// active, inactive or draft (default).
    #[serde(default)]
    #[schemars(schema_with = "CatalogStatus::optional_schema")]
    pub status: Option<String>,
    pub price_adjustment: Option<PriceAdjustmentInput>,
}

/// `PATCH S/catalogs/{catalogId}`; `priceAdjustment: null` removes the adjustment. Changing
/// `selection` starts the entries afresh (ALL: every product; SPECIFIC: none).
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateCatalog {
    #[schemars(length(min = 1, max = 255), pattern(LINE))]
    pub name: Option<String>,
    pub market_id: Option<Uuid>,
    #[serde(default)]
    #[schemars(schema_with = "Selection::optional_schema")]
    pub selection: Option<String>,
    #[serde(default)]
    #[schemars(schema_with = "CatalogStatus::optional_schema")]
    pub status: Option<String>,
    #[serde(default, deserialize_with = "double_option")]
    #[schemars(with = "Option<PriceAdjustmentInput>")]
    pub price_adjustment: Option<Option<PriceAdjustmentInput>>,
}

fn parse_adjustment(c: &mut Check, a: &PriceAdjustmentInput) -> Option<PriceAdjustment> {
    let Some(kind) = AdjustmentType::parse(&a.kind) else {
        c.fail("priceAdjustment.type", "must be percentage or fixed");
        return None;
    };
    let ok = match kind {
        AdjustmentType::Percentage => (MIN_BASIS_POINTS..=MAX_BASIS_POINTS).contains(&a.value),
        AdjustmentType::Fixed => a.value.unsigned_abs() <= MAX_AMOUNT.unsigned_abs(),
    };
    if !ok {
        let msg = match kind {
            AdjustmentType::Percentage => {
                format!("must be between {MIN_BASIS_POINTS} and {MAX_BASIS_POINTS} basis points (-1000 = 10 % off)")
            }
            AdjustmentType::Fixed => format!("must be at most {MAX_AMOUNT} minor units either way"),
        };
        c.fail("priceAdjustment.value", msg);
        return None;
    }
    Some(PriceAdjustment { kind, value: a.value })
}

fn parse_status(c: &mut Check, raw: &str) -> Option<CatalogStatus> {
    let s = CatalogStatus::parse(raw);
    c.ensure(s.is_some(), "status", "must be active, inactive or draft");
    s
}

fn parse_selection(c: &mut Check, raw: &str) -> Option<Selection> {
    let s = Selection::parse(raw);
    c.ensure(s.is_some(), "selection", "must be ALL or SPECIFIC");
    s
}

/// Validates a create request into the catalog `id`, made at `now`; the market's existence is checked by the cell.
pub fn build(input: &CreateCatalog, id: Uuid, now: i64) -> ApiResult<Catalog> {
    let mut c = Check::new();
    check_line(&mut c, "name", &input.name, 255, true);
    let selection = input.selection.as_deref().and_then(|s| parse_selection(&mut c, s)).unwrap_or(Selection::Specific);
    let status = input.status.as_deref().and_then(|s| parse_status(&mut c, s)).unwrap_or(CatalogStatus::Draft);
    let price_adjustment = input.price_adjustment.as_ref().and_then(|a| parse_adjustment(&mut c, a));
    c.finish()?;
    Ok(Catalog {
        id,
        name: input.name.trim().to_string(),
        market_id: input.market_id,
        selection,
        status,
        price_adjustment,
        products: 0,
        created_at: now,
        updated_at: now,
    })
}

/// Validates an update and applies it to a copy of `current` (entries are the cell's business).
pub fn apply_update(u: &UpdateCatalog, current: &Catalog, now: i64) -> ApiResult<Catalog> {
    let mut c = Check::new();
    let mut next = current.clone();
    if let Some(n) = &u.name {
        check_line(&mut c, "name", n, 255, true);
        next.name = n.trim().to_string();
    }
    if let Some(m) = u.market_id {
        next.market_id = m;
    }
    if let Some(s) = u.selection.as_deref().and_then(|s| parse_selection(&mut c, s)) {
        next.selection = s;
    }
    if let Some(s) = u.status.as_deref().and_then(|s| parse_status(&mut c, s)) {
        next.status = s;
    }
    match &u.price_adjustment {
        Some(Some(a)) => next.price_adjustment = parse_adjustment(&mut c, a),
        Some(None) => next.price_adjustment = None,
        None => {}
    }
    c.finish()?;
    next.updated_at = now;
    Ok(next)
}

/// `priceAdjustment` as the API shows it.
#[derive(Serialize, JsonSchema)]
pub struct AdjustmentView {
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub value: i64,
}

/// A catalog as the API shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CatalogView {
    pub id: Uuid,
    pub name: String,
    pub market_id: Uuid,
    pub selection: &'static str,
    pub status: &'static str,
    pub price_adjustment: Option<AdjustmentView>,
    /// The number of products in the effective set.
    pub products: u64,
    pub created_at: String,
    pub updated_at: String,
}

impl Catalog {
    pub fn view(&self) -> CatalogView {
        CatalogView {
            id: self.id,
            name: self.name.clone(),
            market_id: self.market_id,
            selection: self.selection.name(),
            status: self.status.name(),
            price_adjustment: self.price_adjustment.map(|a| AdjustmentView { kind: a.kind.name(), value: a.value }),
            products: self.products,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }

    /// A product's price in this catalog.
    pub fn price_of(&self, price: Money) -> Money {
        match &self.price_adjustment {
            Some(a) => Money { amount: a.apply(price.amount), currency: price.currency },
            None => price,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adjustments() {
        let pct = PriceAdjustment { kind: AdjustmentType::Percentage, value: -1000 };
        assert_eq!(pct.apply(4500), 4050);
        assert_eq!(pct.apply(5), 4, "-0.5 rounds away from zero, to -1");
        let fixed = PriceAdjustment { kind: AdjustmentType::Fixed, value: -500 };
        assert_eq!(fixed.apply(4500), 4000);
        assert_eq!(fixed.apply(300), 0, "never below zero");
        let up = PriceAdjustment { kind: AdjustmentType::Percentage, value: 2500 };
        assert_eq!(up.apply(1000), 1250);
    }

    #[test]
    fn bad_adjustments_name_the_field() {
        let input = CreateCatalog {
            name: "EU".into(),
            market_id: Uuid::from_u128(1),
            selection: Some("some".into()),
            status: Some("live".into()),
            price_adjustment: Some(PriceAdjustmentInput { kind: "percentage".into(), value: -20_000 }),
        };
        let e = build(&input, Uuid::nil(), 1).unwrap_err();
        let fields: Vec<_> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["selection", "status", "priceAdjustment.value"]);
    }
}
