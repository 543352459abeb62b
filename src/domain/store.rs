//! Store settings: the store record a cell keeps, and its create/update rules.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::fields::{self, check_line};
use crate::domain::money::Currency;
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

pub const WEIGHT_UNITS: &[&str] = &["g", "kg", "lb", "oz"];

/// A postal address of the store, or of a location. The document states the rules both checks
/// hold it to; a location's are tighter on lengths (`stock::check_address`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StoreAddress {
    #[serde(default)]
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub address1: String,
    #[serde(default)]
    #[schemars(length(max = 255), pattern(fields::LINE_OR_EMPTY))]
    pub address2: String,
    #[serde(default)]
    #[schemars(pattern(fields::LINE_OR_EMPTY))]
    pub city: String,
    #[serde(default)]
    #[schemars(pattern(fields::LINE_OR_EMPTY))]
    pub province: String,
    /// Two upper-case letters, or empty.
    #[serde(default)]
    #[schemars(pattern(fields::COUNTRY_OR_EMPTY))]
    pub country: String,
    #[serde(default)]
    #[schemars(pattern(fields::LINE_OR_EMPTY))]
    pub postal_code: String,
    #[serde(default)]
    #[schemars(pattern(fields::LINE_OR_EMPTY))]
    pub phone: String,
}

/// The stored settings of a store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct StoreSettings {
    pub id: Uuid,
    pub name: String,
    pub currency: Currency,
    pub country: String,
    pub timezone: String,
    pub address: StoreAddress,
    pub taxes_included: bool,
    pub weight_unit: String,
    pub owner_id: Uuid,
    pub created_at: i64,
    pub updated_at: i64,
    /// Where the store's shop is (links in mail to shoppers).
    pub storefront_url: Option<String>,
    /// The address store mail comes from when its domain may be sent from (`--mail-sender-domain`);
    /// else it is the mail's `Reply-To`.
    pub email_from: Option<String>,
    /// Where replies to store mail go (wins over `email_from`).
    pub reply_to: Option<String>,
}

/// `POST /stores`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateStore {
    #[schemars(length(min = 1, max = 100), pattern(fields::LINE))]
    pub name: String,
    #[schemars(with = "Currency")]
    pub currency: String,
    #[schemars(pattern(fields::COUNTRY))]
    pub country: String,
    #[serde(default = "utc")]
    #[schemars(length(max = 64), pattern(TIMEZONE))]
    pub timezone: String,
}

fn utc() -> String {
    "UTC".to_string()
}

/// `PATCH S`: every field optional. The currency is fixed once products are priced in it.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateStore {
    #[schemars(length(min = 1, max = 100), pattern(fields::LINE))]
    pub name: Option<String>,
    #[schemars(length(max = 64), pattern(TIMEZONE))]
    pub timezone: Option<String>,
    pub address: Option<StoreAddress>,
    pub taxes_included: Option<bool>,
    #[serde(default)]
    #[schemars(schema_with = "weight_unit_schema")]
    pub weight_unit: Option<String>,
    /// The shop's address (http or https); `""` removes it.
    pub storefront_url: Option<String>,
    /// The address store mail comes from; `""` removes it.
    #[schemars(length(max = 254), pattern(fields::EMAIL_OR_EMPTY))]
    pub email_from: Option<String>,
    /// Where replies to store mail go; `""` removes it.
    #[schemars(length(max = 254), pattern(fields::EMAIL_OR_EMPTY))]
    pub reply_to: Option<String>,
}

fn weight_unit_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    fields::or_null(fields::one_of(WEIGHT_UNITS, "the unit weights are shown in"))
}

/// A URL a store shows shoppers: http(s), at most 2,048 characters, with a host.
fn check_url(c: &mut Check, field: &str, value: &str) -> Option<String> {
    let v = value.trim();
    if v.is_empty() {
        return None;
    }
    let ok = v.len() <= 2048
        && url::Url::parse(v)
            .is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.host_str().is_some_and(|h| !h.is_empty()));
    c.ensure(ok, field, "must be an http or https URL");
    Some(v.to_string())
}

/// An optional email address: `""` removes it.
fn check_optional_email(c: &mut Check, field: &str, value: &str) -> Option<String> {
    let v = value.trim();
    (!v.is_empty()).then(|| crate::domain::checkout::check_email(c, field, v))
}

fn valid_country(c: &str) -> bool {
    c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase())
}

/// The shape [`valid_timezone`] checks, for the document (with at most 64 characters).
const TIMEZONE: &str = "^(UTC|[A-Za-z0-9_+-]+(/[A-Za-z0-9_+-]+)+)$";

/// IANA zone names look like `Area/City` (or `UTC`); the set is open, so the shape is checked.
fn valid_timezone(tz: &str) -> bool {
    tz == "UTC"
        || (tz.len() <= 64
            && tz.contains('/')
            && tz.split('/').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_alphanumeric() || b"_-+".contains(&b))))
}

fn check_name(c: &mut Check, name: &str) {
    check_line(c, "name", name, 100, true);
}

/// Validates a create request and returns the currency.
pub fn validate_create(s: &CreateStore) -> ApiResult<Currency> {
    let mut c = Check::new();
    check_name(&mut c, &s.name);
    let currency = Currency::parse(&s.currency);
    c.ensure(currency.is_some(), "currency", "must be an ISO 4217 currency code");
    c.ensure(valid_country(&s.country), "country", "must be a two-letter country code in upper case");
    c.ensure(valid_timezone(&s.timezone), "timezone", "must be an IANA time zone such as Europe/Paris or UTC");
    c.finish()?;
    currency.ok_or_else(|| crate::error::ApiError::field("currency", "must be an ISO 4217 currency code"))
}

/// Validates an update and applies it to a copy.
pub fn apply_update(u: &UpdateStore, current: &StoreSettings, now: i64) -> ApiResult<StoreSettings> {
    let mut c = Check::new();
    let mut s = current.clone();
    if let Some(n) = &u.name {
        check_name(&mut c, n);
        s.name = n.trim().to_string();
    }
    if let Some(tz) = &u.timezone {
        c.ensure(valid_timezone(tz), "timezone", "must be an IANA time zone such as Europe/Paris or UTC");
        s.timezone = tz.clone();
    }
    if let Some(a) = &u.address {
        let lines = [
            ("address1", &a.address1),
            ("address2", &a.address2),
            ("city", &a.city),
            ("province", &a.province),
            ("postalCode", &a.postal_code),
            ("phone", &a.phone),
        ];
        for (name, value) in lines {
            check_line(&mut c, &format!("address.{name}"), value, 255, false);
        }
        c.ensure(a.country.is_empty() || valid_country(&a.country), "address.country", "must be a two-letter country code");
        s.address = a.clone();
    }
    if let Some(t) = u.taxes_included {
        s.taxes_included = t;
    }
    if let Some(w) = &u.weight_unit {
        c.ensure(WEIGHT_UNITS.contains(&w.as_str()), "weightUnit", "must be g, kg, lb or oz");
        s.weight_unit = w.clone();
    }
    if let Some(v) = &u.storefront_url {
        s.storefront_url = check_url(&mut c, "storefrontUrl", v);
    }
    if let Some(v) = &u.email_from {
        s.email_from = check_optional_email(&mut c, "emailFrom", v);
    }
    if let Some(v) = &u.reply_to {
        s.reply_to = check_optional_email(&mut c, "replyTo", v);
    }
    c.finish()?;
    s.updated_at = now;
    Ok(s)
}

/// The store settings as the API shows them.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StoreView {
    pub id: Uuid,
    pub name: String,
    /// ISO 4217.
    pub currency: String,
    pub country: String,
    pub timezone: String,
    pub address: StoreAddress,
    pub taxes_included: bool,
    /// `g`, `kg`, `lb` or `oz`.
    pub weight_unit: String,
    pub owner_id: Uuid,
    pub storefront_url: Option<String>,
    pub email_from: Option<String>,
    pub reply_to: Option<String>,
    pub created_at: String,
    pub updated_at: String,
}

impl StoreSettings {
    pub fn view(&self) -> StoreView {
        StoreView {
            id: self.id,
            name: self.name.clone(),
            currency: self.currency.code().to_string(),
            country: self.country.clone(),
            timezone: self.timezone.clone(),
            address: self.address.clone(),
            taxes_included: self.taxes_included,
            weight_unit: self.weight_unit.clone(),
            owner_id: self.owner_id,
            storefront_url: self.storefront_url.clone(),
            email_from: self.email_from.clone(),
            reply_to: self.reply_to.clone(),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}
