//! Field rules shared by every resource's validation.

use serde::Deserialize;

use crate::error::Check;

/// Checks a text of several lines (a description, a note): not empty when `required`, at most
/// `max` characters once trimmed, and no control characters but newline and tab.
pub fn check_text(c: &mut Check, field: &str, value: &str, max: usize, required: bool) {
    check(c, field, value, max, required, |ch| ch == '\n' || ch == '\t');
}

/// Checks a one-line text (a title, a name, a tag, a SKU): as [`check_text`], with no control
/// character at all: a newline in a title breaks every list, feed and CSV it lands in.
pub fn check_line(c: &mut Check, field: &str, value: &str, max: usize, required: bool) {
    check(c, field, value, max, required, |_| false);
}

fn check(c: &mut Check, field: &str, value: &str, max: usize, required: bool, allowed: fn(char) -> bool) {
    let trimmed = value.trim();
    if required && trimmed.is_empty() {
        c.fail(field, "must not be empty");
    } else if trimmed.chars().count() > max {
        c.fail(field, format!("must be at most {max} characters"));
    } else if value.chars().any(|ch| ch.is_control() && !allowed(ch)) {
        c.fail(field, "must not contain control characters");
    }
}

/// Distinguishes an absent field (no change) from `null` (clear it):
/// `#[serde(default, deserialize_with = "double_option")]` on an `Option<Option<T>>`.
pub fn double_option<'de, T: Deserialize<'de>, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(d).map(Some)
}

/// Whether `s` carries what looks like a card number: 12 or more digits in a row, spaces and
/// dashes between them ignored.
pub fn looks_like_card_number(s: &str) -> bool {
    let mut run = 0u32;
    for c in s.chars() {
        if c.is_ascii_digit() {
            run = run.saturating_add(1);
            if run >= 12 {
                return true;
            }
        } else if c != ' ' && c != '-' {
            run = 0;
        }
    }
    false
}

// The rules above, stated in the document beside the fields they guard (schemars attributes:
// `#[schemars(length(min = 1, max = 255), pattern(fields::LINE))]`), so that what the OpenAPI
// document allows is what the checks accept. Control characters are Unicode's Cc category, as
// `char::is_control` reads it: U+0000–U+001F and U+007F–U+009F.

/// A required one-line text ([`check_line`] with `required`): no control character, and
/// something besides white space (the check trims).
pub const LINE: &str = r"^[^\x00-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x1f\x7f-\x9f]*$";

/// An optional one-line text ([`check_line`] without `required`): no control character.
pub const LINE_OR_EMPTY: &str = r"^[^\x00-\x1f\x7f-\x9f]*$";

/// A required text of several lines ([`check_text`] with `required`): newline and tab the only
/// control characters, and something besides white space.
pub const TEXT: &str = r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*[^\s\x00-\x1f\x7f-\x9f][^\x00-\x08\x0b-\x1f\x7f-\x9f]*$";

/// An optional text of several lines ([`check_text`] without `required`).
pub const TEXT_OR_EMPTY: &str = r"^[^\x00-\x08\x0b-\x1f\x7f-\x9f]*$";

/// A two-letter country code in upper case, as `valid_country` checks it (the shape; markets
/// alone hold to the assigned codes, `market::COUNTRY_CODES`).
pub const COUNTRY: &str = "^[A-Z]{2}$";

/// A province or state code, as `shipping::valid_province` checks it: 1 to 10 letters or digits.
pub const PROVINCE: &str = "^[A-Za-z0-9]{1,10}$";

/// An email address as `checkout::check_email` and `account::model::valid_email` read one: text,
/// one `@`, a dotted domain, no white space. Stricter than either check (no `@` in the local
/// part, a dot inside the domain), so that what the document allows both accept.
pub const EMAIL: &str = r"^[^\s@\x00-\x1f\x7f-\x9f]{1,64}@[^\s@.\x00-\x1f\x7f-\x9f]+(\.[^\s@.\x00-\x1f\x7f-\x9f]+)+$";

/// A string schema of a fixed set of values, for fields read as strings and checked against a
/// list (`#[schemars(schema_with = "…")]` with a function calling this).
pub fn one_of(values: &[&str], description: &str) -> schemars::Schema {
    schemars::json_schema!({"type": "string", "enum": values, "description": description})
}

/// `schema`, also allowing `null`: the schema of an optional field read as an `Option` (serde
/// reads `null` as absent), for fields whose schema a function gives.
pub fn or_null(mut schema: schemars::Schema) -> schemars::Schema {
    if let Some(serde_json::Value::String(t)) = schema.get("type").cloned() {
        schema.insert("type".into(), serde_json::json!([t, "null"]));
    }
    if let Some(serde_json::Value::Array(values)) = schema.get_mut("enum") {
        values.push(serde_json::Value::Null);
    }
    schema
}

/// Something besides white space (checks that trim and refuse an empty result, with no rule on
/// control characters): unanchored, it matches where one such character is.
pub const NOT_BLANK: &str = r"\S";

/// [`COUNTRY`], or empty (an address not filled in).
pub const COUNTRY_OR_EMPTY: &str = "^([A-Z]{2})?$";

/// [`EMAIL`], or empty or white space alone (which removes an optional address).
pub const EMAIL_OR_EMPTY: &str =
    r"^\s*$|^[^\s@\x00-\x1f\x7f-\x9f]{1,64}@[^\s@.\x00-\x1f\x7f-\x9f]+(\.[^\s@.\x00-\x1f\x7f-\x9f]+)+$";
