//! Markets: a named group of countries sold to in one currency. A country belongs to at most
//! one market of a store, so "which market is this buyer in" always has one answer.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::fields::{LINE, check_line, or_null};
use crate::domain::money::Currency;
use crate::domain::time::rfc3339;
use crate::error::{ApiResult, Check};

/// Every ISO 3166-1 alpha-2 code officially assigned.
const COUNTRIES: &str = "AD AE AF AG AI AL AM AO AQ AR AS AT AU AW AX AZ BA BB BD BE BF BG BH BI BJ BL BM BN BO BQ BR BS BT BV \
BW BY BZ CA CC CD CF CG CH CI CK CL CM CN CO CR CU CV CW CX CY CZ DE DJ DK DM DO DZ EC EE EG EH ER ES ET FI FJ FK FM FO FR GA \
GB GD GE GF GG GH GI GL GM GN GP GQ GR GS GT GU GW GY HK HM HN HR HT HU ID IE IL IM IN IO IQ IR IS IT JE JM JO JP KE KG KH KI \
KM KN KP KR KW KY KZ LA LB LC LI LK LR LS LT LU LV LY MA MC MD ME MF MG MH MK ML MM MN MO MP MQ MR MS MT MU MV MW MX MY MZ NA \
NC NE NF NG NI NL NO NP NR NU NZ OM PA PE PF PG PH PK PL PM PN PR PS PT PW PY QA RE RO RS RU RW SA SB SC SD SE SG SH SI SJ SK \
SL SM SN SO SR SS ST SV SX SY SZ TC TD TF TG TH TJ TK TL TM TN TO TR TT TV TW TZ UA UG UM US UY UZ VA VC VE VG VI VN VU WF WS \
YE YT ZA ZM ZW";

/// Most countries in one market.
pub const MAX_COUNTRIES: usize = 250;

/// Whether `code` (upper case) is an assigned ISO 3166-1 alpha-2 code.
pub fn is_country(code: &str) -> bool {
    code.len() == 2 && COUNTRIES.split(' ').any(|c| c == code)
}

/// A market's country list in the document, as `parse_countries` checks it: 1 to
/// [`MAX_COUNTRIES`] assigned codes (read in any case, stated in upper case), none twice.
fn countries_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    let codes: Vec<&str> = COUNTRIES.split(' ').collect();
    schemars::json_schema!({
        "type": "array", "minItems": 1, "maxItems": MAX_COUNTRIES, "uniqueItems": true,
        "items": {"type": "string", "enum": codes}
    })
}

fn optional_countries_schema(g: &mut schemars::SchemaGenerator) -> schemars::Schema {
    or_null(countries_schema(g))
}

/// A stored market.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Market {
    pub id: Uuid,
    pub name: String,
    /// ISO 3166-1 alpha-2, upper case, in the order given.
    pub countries: Vec<String>,
    pub currency: Currency,
    pub created_at: i64,
    pub updated_at: i64,
}

/// `POST S/markets`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateMarket {
    #[schemars(length(min = 1, max = 255), pattern(LINE))]
    pub name: String,
    /// ISO 3166-1 alpha-2 codes (any case), each in no other market of the store.
    #[schemars(schema_with = "countries_schema")]
    pub countries: Vec<String>,
    /// ISO 4217; the store currency when omitted.
    pub currency: Option<Currency>,
}

/// `PATCH S/markets/{marketId}`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateMarket {
    #[schemars(length(min = 1, max = 255), pattern(LINE))]
    pub name: Option<String>,
    /// Replaces the whole list.
    #[serde(default)]
    #[schemars(schema_with = "optional_countries_schema")]
    pub countries: Option<Vec<String>>,
    pub currency: Option<Currency>,
}

/// Normalises and checks a country list: known codes, none twice, at least one.
fn parse_countries(c: &mut Check, input: &[String]) -> Vec<String> {
    c.ensure(!input.is_empty(), "countries", "must name at least one country");
    c.ensure(input.len() <= MAX_COUNTRIES, "countries", format!("at most {MAX_COUNTRIES} countries"));
    let mut out: Vec<String> = Vec::with_capacity(input.len());
    for (i, raw) in input.iter().enumerate() {
        let code = raw.trim().to_ascii_uppercase();
        if !is_country(&code) {
            c.fail(&format!("countries[{i}]"), format!("{raw:?} is not an ISO 3166-1 alpha-2 country code"));
        } else if out.contains(&code) {
            c.fail(&format!("countries[{i}]"), format!("{code} is listed twice"));
        } else {
            out.push(code);
        }
    }
    out
}

/// Validates a create request into the market `id`, made at `now`; uniqueness across the store's markets is checked by the cell.
pub fn build(input: &CreateMarket, store_currency: Currency, id: Uuid, now: i64) -> ApiResult<Market> {
    let mut c = Check::new();
    check_line(&mut c, "name", &input.name, 255, true);
    let countries = parse_countries(&mut c, &input.countries);
    c.finish()?;
    Ok(Market {
        id,
        name: input.name.trim().to_string(),
        countries,
        currency: input.currency.unwrap_or(store_currency),
        created_at: now,
        updated_at: now,
    })
}

/// Validates an update and applies it to a copy of `current`.
pub fn apply_update(u: &UpdateMarket, current: &Market, now: i64) -> ApiResult<Market> {
    let mut c = Check::new();
    let mut next = current.clone();
    if let Some(n) = &u.name {
        check_line(&mut c, "name", n, 255, true);
        next.name = n.trim().to_string();
    }
    if let Some(list) = &u.countries {
        next.countries = parse_countries(&mut c, list);
    }
    if let Some(cur) = u.currency {
        next.currency = cur;
    }
    c.finish()?;
    next.updated_at = now;
    Ok(next)
}

/// A market as the API shows it.
#[derive(Serialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MarketView {
    pub id: Uuid,
    pub name: String,
    /// ISO 3166-1 alpha-2, upper case.
    pub countries: Vec<String>,
    /// ISO 4217.
    pub currency: String,
    pub created_at: String,
    pub updated_at: String,
}

impl Market {
    pub fn view(&self) -> MarketView {
        MarketView {
            id: self.id,
            name: self.name.clone(),
            countries: self.countries.clone(),
            currency: self.currency.code().to_string(),
            created_at: rfc3339(self.created_at),
            updated_at: rfc3339(self.updated_at),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn country_codes() {
        assert_eq!(COUNTRIES.split(' ').count(), 249);
        assert!(is_country("DE") && is_country("US") && is_country("AX"));
        assert!(!is_country("XX") && !is_country("de") && !is_country("D"));
    }

    #[test]
    fn countries_are_normalised_and_checked() {
        let usd = Currency::parse("USD").unwrap();
        let m = build(
            &CreateMarket { name: "EU".into(), countries: vec!["de".into(), " fr ".into()], currency: None },
            usd,
            Uuid::nil(),
            1,
        )
        .unwrap();
        assert_eq!(m.countries, ["DE", "FR"]);
        assert_eq!(m.currency, usd);
        let e = build(
            &CreateMarket { name: " ".into(), countries: vec!["DE".into(), "de".into(), "ZZ".into()], currency: None },
            usd,
            Uuid::nil(),
            1,
        )
        .unwrap_err();
        let fields: Vec<_> = e.fields.iter().map(|f| f.field.as_str()).collect();
        assert_eq!(fields, ["name", "countries[1]", "countries[2]"]);
    }
}
