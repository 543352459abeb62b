//! Shipping zones and their rates, and the rates offered at a destination.
//!
//! A zone covers countries, each whole or limited to some provinces. A rate is flat, by cart weight
//! (grams) or by cart subtotal, within `[min, max)` (`max` absent: no upper bound), and may be free
//! when the subtotal reaches `freeAbove`. The subtotal is the calculation's `subtotal`: after
//! line-level discounts, before discount codes. When zones overlap, the most specific wins: zones
//! naming the destination's province are used if any match, whole-country zones otherwise.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::fields;
use crate::domain::money::Currency;
use crate::domain::product::{MAX_AMOUNT, slugify};
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

/// The `provider` of rates a store defines itself (as opposed to carrier-calculated ones).
pub const PROVIDER: &str = "manual";
/// Most rates in one zone.
pub const MAX_RATES_PER_ZONE: usize = 50;

/// Where an order ships to: the part of the checkout Address that prices depend on.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct Destination {
    /// Two-letter country code.
    pub country: String,
    #[serde(default)]
    pub province: Option<String>,
}

/// The spec's checkout Address. Only `country` and `province` affect prices; the rest is kept for
/// the checkout and the order. Coordinates are display data from an address picker, never money.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Address {
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub first_name: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub last_name: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub company: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub phone: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub address1: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub address2: Option<String>,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub city: Option<String>,
    /// A province or state code (`BC`, `NY`).
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub province: Option<String>,
    /// Two-letter country code, any case.
    #[schemars(pattern(r"^\s*[A-Za-z]{2}\s*$"))]
    pub country: String,
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub postal_code: Option<String>,
    #[schemars(range(min = -90, max = 90))]
    pub latitude: Option<f64>,
    #[schemars(range(min = -180, max = 180))]
    pub longitude: Option<f64>,
}

impl Address {
    /// Where the address ships to, normalized: upper-case codes, an empty province as none.
    pub fn destination(&self) -> Destination {
        let province = self.province.as_deref().map(str::trim).filter(|p| !p.is_empty()).map(str::to_ascii_uppercase);
        Destination { country: self.country.trim().to_ascii_uppercase(), province }
    }
}

/// A country of a zone; every province when `provinces` is empty.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneCountry {
    pub code: String,
    #[serde(default)]
    pub provinces: Vec<String>,
}

/// How a rate decides whether it is offered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub enum RateCondition {
    /// Always offered.
    #[default]
    Flat,
    /// Offered when the cart weight in grams is within `[min, max)`.
    Weight,
    /// Offered when the subtotal in minor units is within `[min, max)`.
    Price,
}

/// Delivery days, e.g. 3 to 5.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeliveryDays {
    pub min_days: u32,
    pub max_days: u32,
}

/// A rate in a zone body. `id` keeps an existing rate's id on update.
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ZoneRateInput {
    pub id: Option<Uuid>,
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// A short machine name; made from the name when absent.
    pub code: Option<String>,
    #[serde(default)]
    pub condition: RateCondition,
    /// Lower bound (grams or minor units), inclusive.
    #[serde(default)]
    pub min: i64,
    /// Upper bound, exclusive; none when absent.
    pub max: Option<i64>,
    /// Minor units of the store currency.
    pub price: i64,
    /// Free when the subtotal is at least this.
    pub free_above: Option<i64>,
    pub estimated_delivery: DeliveryDays,
}

/// `POST S/shipping-zones` and `PATCH S/shipping-zones/{id}` (the whole zone).
#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ShippingZoneInput {
    pub name: String,
    pub countries: Vec<ZoneCountry>,
    #[serde(default)]
    pub rates: Vec<ZoneRateInput>,
}

/// A stored rate.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ZoneRate {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub code: String,
    pub condition: RateCondition,
    pub min: i64,
    pub max: Option<i64>,
    pub price: i64,
    pub free_above: Option<i64>,
    pub delivery: DeliveryDays,
}

/// A stored zone with its rates.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShippingZone {
    pub id: Uuid,
    pub name: String,
    pub countries: Vec<ZoneCountry>,
    pub rates: Vec<ZoneRate>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// An amount with its display string: `{amount, currency, formatted}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Price {
    pub amount: i64,
    pub currency: Currency,
    pub formatted: String,
}

impl Price {
    pub fn new(amount: i64, currency: Currency) -> Price {
        Price { amount, currency, formatted: currency.format(amount) }
    }
}

/// `{minDays, maxDays, formatted}`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EstimatedDelivery {
    pub min_days: u32,
    pub max_days: u32,
    pub formatted: String,
}

/// The spec's Shipping rate: what a checkout offers and what `shippingMethodId` names.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShippingRate {
    /// The zone rate's id: stable for as long as the rate exists.
    pub id: String,
    pub name: String,
    pub description: String,
    pub code: String,
    pub price: Price,
    pub estimated_delivery: EstimatedDelivery,
    pub provider: String,
}

/// Two upper-case letters.
pub fn valid_country(c: &str) -> bool {
    c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase())
}

/// A province or state code: 1 to 10 letters or digits.
pub fn valid_province(p: &str) -> bool {
    let p = p.trim();
    !p.is_empty() && p.len() <= 10 && p.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `3-5 days`, `2 days`, `1 day`.
pub fn format_days(d: DeliveryDays) -> String {
    match (d.min_days, d.max_days) {
        (1, 1) => "1 day".to_string(),
        (a, b) if a == b => format!("{a} days"),
        (a, b) => format!("{a}-{b} days"),
    }
}

fn check_rate(c: &mut Check, at: &str, r: &ZoneRateInput) {
    let name = r.name.trim();
    c.ensure(!name.is_empty() && name.chars().count() <= 255, &format!("{at}.name"), "must be 1 to 255 characters");
    c.ensure(r.description.chars().count() <= 1000, &format!("{at}.description"), "must be at most 1000 characters");
    if let Some(code) = &r.code {
        let ok = !code.is_empty() && code.len() <= 64 && code.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
        c.ensure(ok, &format!("{at}.code"), "must be 1 to 64 letters, digits, '-' or '_'");
    }
    let in_range = |v: i64| (0..=MAX_AMOUNT).contains(&v);
    c.ensure(in_range(r.price), &format!("{at}.price"), format!("must be 0 to {MAX_AMOUNT} minor units"));
    c.ensure(in_range(r.min), &format!("{at}.min"), format!("must be 0 to {MAX_AMOUNT}"));
    if let Some(max) = r.max {
        c.ensure(in_range(max) && max > r.min, &format!("{at}.max"), "must be greater than min");
    }
    if r.condition == RateCondition::Flat {
        c.ensure(r.min == 0 && r.max.is_none(), &format!("{at}.condition"), "a flat rate has no min or max");
    }
    if let Some(f) = r.free_above {
        c.ensure(in_range(f), &format!("{at}.freeAbove"), format!("must be 0 to {MAX_AMOUNT} minor units"));
    }
    let d = r.estimated_delivery;
    c.ensure(
        d.max_days <= 365 && d.min_days <= d.max_days,
        &format!("{at}.estimatedDelivery"),
        "needs minDays <= maxDays <= 365",
    );
}

impl ShippingZoneInput {
    pub fn validate(&self) -> ApiResult<()> {
        let mut c = Check::new();
        let name = self.name.trim();
        c.ensure(!name.is_empty() && name.chars().count() <= 255, "name", "must be 1 to 255 characters");
        c.ensure(!self.countries.is_empty() && self.countries.len() <= 250, "countries", "must list 1 to 250 countries");
        for (i, zc) in self.countries.iter().enumerate() {
            c.ensure(valid_country(&zc.code), &format!("countries[{i}].code"), "must be a two-letter country code in upper case");
            if self.countries[..i].iter().any(|x| x.code == zc.code) {
                c.fail(&format!("countries[{i}].code"), "is listed twice");
            }
            for (j, p) in zc.provinces.iter().enumerate() {
                c.ensure(valid_province(p), &format!("countries[{i}].provinces[{j}]"), "must be 1 to 10 letters or digits");
            }
        }
        c.ensure(self.rates.len() <= MAX_RATES_PER_ZONE, "rates", format!("at most {MAX_RATES_PER_ZONE} rates"));
        for (i, r) in self.rates.iter().enumerate() {
            check_rate(&mut c, &format!("rates[{i}]"), r);
            if r.id.is_some() && self.rates[..i].iter().any(|x| x.id == r.id) {
                c.fail(&format!("rates[{i}].id"), "is used twice");
            }
        }
        c.finish()
    }
}

impl ShippingZone {
    /// Validates `input` and builds the zone. A rate keeps its id when `input` names one that
    /// `current` (the zone before an update) has, so ids already offered to checkouts stay valid;
    /// other rates get new ids from `new_id`.
    pub fn create(
        input: &ShippingZoneInput,
        id: Uuid,
        current: Option<&ShippingZone>,
        now: i64,
        mut new_id: impl FnMut() -> Uuid,
    ) -> ApiResult<ShippingZone> {
        input.validate()?;
        let known = |rid: &Uuid| current.is_some_and(|z| z.rates.iter().any(|r| r.id == *rid));
        let rates = input
            .rates
            .iter()
            .map(|r| ZoneRate {
                id: r.id.filter(known).unwrap_or_else(&mut new_id),
                name: r.name.trim().to_string(),
                description: r.description.trim().to_string(),
                code: r.code.clone().unwrap_or_else(|| slugify(&r.name)),
                condition: r.condition,
                min: r.min,
                max: r.max,
                price: r.price,
                free_above: r.free_above,
                delivery: r.estimated_delivery,
            })
            .collect();
        let countries = input
            .countries
            .iter()
            .map(|zc| ZoneCountry {
                code: zc.code.clone(),
                provinces: zc.provinces.iter().map(|p| p.trim().to_ascii_uppercase()).collect(),
            })
            .collect();
        Ok(ShippingZone {
            id,
            name: input.name.trim().to_string(),
            countries,
            rates,
            created_at: current.map_or(now, |z| z.created_at),
            updated_at: now,
        })
    }

    /// How specifically the zone covers `dest`: 2 by province, 1 by whole country, 0 not at all.
    pub fn coverage(&self, dest: &Destination) -> u8 {
        let province = dest.province.as_deref().map(str::trim).unwrap_or("");
        self.countries
            .iter()
            .filter(|zc| zc.code.eq_ignore_ascii_case(dest.country.trim()))
            .map(|zc| {
                if zc.provinces.is_empty() {
                    1
                } else if zc.provinces.iter().any(|p| p.eq_ignore_ascii_case(province)) {
                    2
                } else {
                    0
                }
            })
            .max()
            .unwrap_or(0)
    }

    /// The zone as the API shows it, amounts in `currency` (the store's).
    pub fn view(&self, currency: Currency) -> ShippingZoneView {
        ShippingZoneView {
            id: self.id,
            name: self.name.clone(),
            countries: self.countries.clone(),
            rates: self
                .rates
                .iter()
                .map(|r| ZoneRateView {
                    id: r.id,
                    name: r.name.clone(),
                    description: r.description.clone(),
                    code: r.code.clone(),
                    condition: r.condition,
                    min: r.min,
                    max: r.max,
                    price: Price::new(r.price, currency),
                    free_above: r.free_above.map(|f| Price::new(f, currency)),
                    estimated_delivery: r.estimate(),
                })
                .collect(),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

/// A zone as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ShippingZoneView {
    pub id: Uuid,
    pub name: String,
    pub countries: Vec<ZoneCountry>,
    pub rates: Vec<ZoneRateView>,
    pub created_at: String,
    pub updated_at: String,
}

/// A zone's rate as the API shows it.
#[derive(Debug, Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ZoneRateView {
    pub id: Uuid,
    pub name: String,
    pub description: String,
    pub code: String,
    pub condition: RateCondition,
    pub min: i64,
    pub max: Option<i64>,
    pub price: Price,
    pub free_above: Option<Price>,
    pub estimated_delivery: EstimatedDelivery,
}

impl ZoneRate {
    /// Whether the rate is offered for a cart of `weight_grams` and `subtotal`.
    pub fn offered(&self, weight_grams: u64, subtotal: i64) -> bool {
        let measure = match self.condition {
            RateCondition::Flat => return true,
            RateCondition::Weight => i128::from(weight_grams),
            RateCondition::Price => i128::from(subtotal),
        };
        measure >= i128::from(self.min) && self.max.is_none_or(|max| measure < i128::from(max))
    }

    /// The delivery estimate with its display string.
    pub fn estimate(&self) -> EstimatedDelivery {
        EstimatedDelivery {
            min_days: self.delivery.min_days,
            max_days: self.delivery.max_days,
            formatted: format_days(self.delivery),
        }
    }

    /// The price for a cart of `subtotal`: zero from `freeAbove` on.
    pub fn price_for(&self, subtotal: i64) -> i64 {
        if self.free_above.is_some_and(|f| subtotal >= f) { 0 } else { self.price }
    }
}

/// The rates offered at `dest` for a cart of `weight_grams` and `subtotal`, cheapest first (then by
/// name and id). Ids are the zone-rate UUIDs, so the same rate keeps the same id between calls.
pub fn rates_for(
    zones: &[ShippingZone],
    dest: &Destination,
    weight_grams: u64,
    subtotal: i64,
    currency: Currency,
) -> Vec<ShippingRate> {
    let mut offered: Vec<_> = offered(zones, dest, weight_grams, subtotal).collect();
    offered.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.name.cmp(&b.1.name)).then(a.1.id.cmp(&b.1.id)));
    offered.into_iter().map(|(price, r)| r.offer(price, currency)).collect()
}

/// The rate of [`rates_for`] whose id is `id` (any case), without building the others: a
/// calculation prices the one chosen rate.
pub fn rate_for(
    zones: &[ShippingZone],
    dest: &Destination,
    weight_grams: u64,
    subtotal: i64,
    currency: Currency,
    id: &str,
) -> Option<ShippingRate> {
    let mut buf = Uuid::encode_buffer();
    offered(zones, dest, weight_grams, subtotal)
        .find(|(_, r)| r.id.hyphenated().encode_lower(&mut buf).eq_ignore_ascii_case(id))
        .map(|(price, r)| r.offer(price, currency))
}

/// The zone rates offered at `dest`, with their prices for the cart, in no particular order: those
/// of the zones that cover the destination most closely (none when no zone covers it).
fn offered<'a>(
    zones: &'a [ShippingZone],
    dest: &'a Destination,
    weight_grams: u64,
    subtotal: i64,
) -> impl Iterator<Item = (i64, &'a ZoneRate)> + 'a {
    let best = zones.iter().map(|z| z.coverage(dest)).max().unwrap_or(0);
    zones
        .iter()
        .filter(move |z| best > 0 && z.coverage(dest) == best)
        .flat_map(|z| z.rates.iter())
        .filter(move |r| r.offered(weight_grams, subtotal))
        .map(move |r| (r.price_for(subtotal), r))
}

impl ZoneRate {
    /// The rate as a checkout offers it, at `price`.
    fn offer(&self, price: i64, currency: Currency) -> ShippingRate {
        ShippingRate {
            id: self.id.to_string(),
            name: self.name.clone(),
            description: self.description.clone(),
            code: self.code.clone(),
            price: Price::new(price, currency),
            estimated_delivery: self.estimate(),
            provider: PROVIDER.to_string(),
        }
    }
}
