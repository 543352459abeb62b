//! Tax rates by country and province, and the tax on an amount at the rates of a destination.
//!
//! Every rate whose country matches the destination, and whose province is absent or matches too,
//! applies; rates add up (a country rate and a province rate both apply, neither compounds on the
//! other). Each applicable rate is one jurisdiction and one tax line.
//!
//! Prices either exclude tax (tax is added: each rate's part of an amount is `round(amount × rate)`)
//! or include it (the store's `taxesIncluded`: the tax is extracted, `amount − round(amount × 10 000 /
//! (10 000 + Σrates))`, and split over the rates by largest remainder in proportion to their rates).

use std::sync::Arc;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use super::allocation::{BASIS, allocate, included_tax, percent_of};
use super::shipping::{Destination, valid_country, valid_province};
use crate::domain::fields;
use crate::domain::money::Money;
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

/// `POST S/tax-rates` and `PATCH S/tax-rates/{id}` (the whole rate).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct TaxRateInput {
    /// Two-letter country code in upper case.
    #[schemars(pattern(fields::COUNTRY))]
    pub country: String,
    /// A province or state code; the rate applies to the whole country when absent.
    #[schemars(pattern(fields::PROVINCE))]
    pub province: Option<String>,
    /// Basis points: 825 = 8.25 %.
    #[schemars(range(max = 10000))]
    pub rate: u32,
    #[schemars(length(min = 1, max = 255), pattern(fields::NOT_BLANK))]
    pub name: String,
    /// Whether shipping is taxed at this rate too.
    #[serde(default)]
    pub shipping: bool,
}

/// A stored tax rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaxRate {
    pub id: Uuid,
    pub country: String,
    pub province: Option<String>,
    pub rate: u32,
    pub name: String,
    pub shipping: bool,
    pub created_at: i64,
    pub updated_at: i64,
}

/// What a calculation needs to know about taxes: the store setting and its rates.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TaxSettings {
    /// The store's `taxesIncluded`: prices (and shipping rates) include tax.
    pub taxes_included: bool,
    /// Shared: callers keep a store's rates and hand every calculation the same list.
    pub rates: Arc<Vec<TaxRate>>,
}

/// The tax of one jurisdiction in a calculation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaxLine {
    pub name: String,
    pub country: String,
    pub province: Option<String>,
    /// Basis points.
    pub rate: u32,
    pub amount: Money,
}

impl TaxRateInput {
    pub fn validate(&self) -> ApiResult<()> {
        let mut c = Check::new();
        c.ensure(valid_country(&self.country), "country", "must be a two-letter country code in upper case");
        if let Some(p) = &self.province {
            c.ensure(valid_province(p), "province", "must be 1 to 10 letters or digits");
        }
        c.ensure(i64::from(self.rate) <= BASIS, "rate", "must be 0 to 10000 basis points");
        let name = self.name.trim();
        c.ensure(!name.is_empty() && name.chars().count() <= 255, "name", "must be 1 to 255 characters");
        c.finish()
    }
}

impl TaxRate {
    /// Validates `input` and builds the record (`id` and `created_at` kept on update).
    pub fn create(input: &TaxRateInput, id: Uuid, created_at: i64, now: i64) -> ApiResult<TaxRate> {
        input.validate()?;
        Ok(TaxRate {
            id,
            country: input.country.clone(),
            province: input.province.as_deref().map(|p| p.trim().to_ascii_uppercase()),
            rate: input.rate,
            name: input.name.trim().to_string(),
            shipping: input.shipping,
            created_at,
            updated_at: now,
        })
    }

    /// Whether the rate applies at `dest`.
    pub fn applies_to(&self, dest: &Destination) -> bool {
        self.country.eq_ignore_ascii_case(dest.country.trim())
            && match &self.province {
                None => true,
                Some(p) => dest.province.as_deref().is_some_and(|d| p.eq_ignore_ascii_case(d.trim())),
            }
    }

    /// The rate as the API shows it.
    pub fn view(&self) -> TaxRateView {
        TaxRateView {
            id: self.id,
            country: self.country.clone(),
            province: self.province.clone(),
            rate: self.rate,
            name: self.name.clone(),
            shipping: self.shipping,
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// A tax rate as the API shows it.
#[derive(Debug, Serialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct TaxRateView {
    pub id: Uuid,
    pub country: String,
    pub province: Option<String>,
    /// Basis points.
    pub rate: u32,
    pub name: String,
    pub shipping: bool,
    pub created_at: String,
    pub updated_at: String,
}

/// The rates that apply at `dest`, in a stable order: country-wide first, then by name and id.
pub fn applicable<'a>(rates: &'a [TaxRate], dest: &Destination) -> Vec<&'a TaxRate> {
    let mut out: Vec<&TaxRate> = rates.iter().filter(|r| r.applies_to(dest)).collect();
    out.sort_by(|a, b| a.province.is_some().cmp(&b.province.is_some()).then_with(|| a.name.cmp(&b.name)).then(a.id.cmp(&b.id)));
    out
}

/// The tax on `amount` at each of `rates` (basis points), one part per rate.
///
/// Exclusive: each part is `round(amount × rate / 10 000)`. Inclusive: the tax contained in
/// `amount` at the combined rate, split over the rates by largest remainder (weights = rates), so
/// the parts sum exactly to the contained tax.
pub fn tax_parts(amount: i64, rates: &[u32], included: bool) -> Vec<i64> {
    if included {
        let combined: i64 = rates.iter().map(|&r| i64::from(r)).sum();
        let weights: Vec<i64> = rates.iter().map(|&r| i64::from(r)).collect();
        allocate(included_tax(amount, combined), &weights)
    } else {
        rates.iter().map(|&r| percent_of(amount, i64::from(r))).collect()
    }
}
