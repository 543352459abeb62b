//! Carts: the lines a shopper collects before checkout. A cart stores no prices: it is priced
//! when it is read, so it always shows what the store charges now.

use std::collections::BTreeMap;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use uuid::Uuid;

use crate::domain::pricing::calc::{MAX_LINES, MAX_QUANTITY};
use crate::error::{ApiError, ApiResult, Check, Code};

/// Most keys in a line's attributes or properties.
pub const MAX_ATTRIBUTES: usize = 30;
/// Longest attribute name and value, in characters.
const MAX_ATTRIBUTE_CHARS: usize = 500;

/// Name → value pairs a shopper attaches to a line (engraving text, gift notes). Values are
/// stored as strings: numbers and booleans are kept in their JSON spelling.
pub type Attributes = BTreeMap<String, String>;

/// `store ‖ cart id → Cart`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cart {
    pub id: Uuid,
    pub lines: Vec<CartLine>,
    pub created_at: i64,
    pub updated_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CartLine {
    pub variant_id: Uuid,
    pub quantity: u32,
    pub custom_attributes: Attributes,
}

/// `POST S/carts/items`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddItem {
    /// The cart to add to; a new cart is created when absent.
    pub cart_id: Option<Uuid>,
    pub variant_id: Uuid,
    /// 1 to 100; added to the quantity already in the cart.
    #[schemars(range(min = 1, max = MAX_QUANTITY))]
    pub quantity: i64,
    /// An object of scalar values.
    #[serde(default)]
    #[schemars(schema_with = "attributes_schema")]
    pub custom_attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `PATCH S/carts/{cartId}/items`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateItem {
    pub variant_id: Uuid,
    /// 1 to 100: the line's new quantity.
    #[schemars(range(min = 1, max = MAX_QUANTITY))]
    pub quantity: i64,
    /// Replaces the line's attributes when given.
    #[serde(default)]
    #[schemars(schema_with = "attributes_schema")]
    pub custom_attributes: Option<serde_json::Map<String, serde_json::Value>>,
}

/// A line's attributes in the document, as [`check_attributes`] reads them: at most
/// [`MAX_ATTRIBUTES`] names of 1 to [`MAX_ATTRIBUTE_CHARS`] characters (trimmed), each a string,
/// number or boolean (`null` drops it), a string of at most as many characters.
pub fn attributes_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
    schemars::json_schema!({
        "type": ["object", "null"],
        "maxProperties": MAX_ATTRIBUTES,
        "propertyNames": {"maxLength": MAX_ATTRIBUTE_CHARS, "pattern": crate::domain::fields::NOT_BLANK},
        "additionalProperties": {"type": ["string", "number", "boolean", "null"], "maxLength": MAX_ATTRIBUTE_CHARS}
    })
}

/// A line quantity from a request: 1 to 100.
pub fn check_quantity(c: &mut Check, field: &str, quantity: i64) -> u32 {
    if !(1..=i64::from(MAX_QUANTITY)).contains(&quantity) {
        c.fail(field, format!("must be 1 to {MAX_QUANTITY}"));
        return 1;
    }
    quantity as u32
}

/// Attributes from a request object: scalar values only, at most 30 keys of bounded size.
pub fn check_attributes(c: &mut Check, field: &str, raw: Option<serde_json::Map<String, serde_json::Value>>) -> Attributes {
    let mut out = Attributes::new();
    let Some(raw) = raw else { return out };
    if raw.len() > MAX_ATTRIBUTES {
        c.fail(field, format!("at most {MAX_ATTRIBUTES} keys"));
        return out;
    }
    for (k, v) in raw {
        let value = match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            serde_json::Value::Bool(b) => b.to_string(),
            serde_json::Value::Null => continue,
            _ => {
                c.fail(&format!("{field}.{k}"), "must be a string, number or boolean");
                continue;
            }
        };
        let key = k.trim();
        if key.is_empty() || key.chars().count() > MAX_ATTRIBUTE_CHARS || value.chars().count() > MAX_ATTRIBUTE_CHARS {
            c.fail(&format!("{field}.{k}"), format!("names and values must be 1 to {MAX_ATTRIBUTE_CHARS} characters"));
            continue;
        }
        out.insert(key.to_string(), value);
    }
    out
}

impl Cart {
    pub fn new(id: Uuid, now: i64) -> Cart {
        Cart { id, lines: Vec::new(), created_at: now, updated_at: now }
    }

    /// Adds `quantity` of a variant: to its line when the cart has one (the sum may not pass 100),
    /// else as a new line. Attributes given replace the line's.
    pub fn add(&mut self, variant: Uuid, quantity: u32, attributes: Option<Attributes>) -> ApiResult<()> {
        if let Some(line) = self.lines.iter_mut().find(|l| l.variant_id == variant) {
            let total = line.quantity.saturating_add(quantity);
            if total > MAX_QUANTITY {
                return Err(ApiError::msg(
                    Code::BUSINESS_RULE,
                    format!("the cart already holds {} of this variant; a line holds at most {MAX_QUANTITY}", line.quantity),
                ));
            }
            line.quantity = total;
            if let Some(a) = attributes {
                line.custom_attributes = a;
            }
            return Ok(());
        }
        if self.lines.len() >= MAX_LINES {
            return Err(ApiError::msg(Code::BUSINESS_RULE, format!("a cart holds at most {MAX_LINES} lines")));
        }
        self.lines.push(CartLine { variant_id: variant, quantity, custom_attributes: attributes.unwrap_or_default() });
        Ok(())
    }

    /// Sets a line's quantity (and attributes when given); a variant not in the cart is a 404.
    pub fn set(&mut self, variant: Uuid, quantity: u32, attributes: Option<Attributes>) -> ApiResult<()> {
        let line = self.lines.iter_mut().find(|l| l.variant_id == variant).ok_or_else(not_in_cart)?;
        line.quantity = quantity;
        if let Some(a) = attributes {
            line.custom_attributes = a;
        }
        Ok(())
    }

    pub fn remove(&mut self, variant: Uuid) -> ApiResult<()> {
        let before = self.lines.len();
        self.lines.retain(|l| l.variant_id != variant);
        if self.lines.len() == before { Err(not_in_cart()) } else { Ok(()) }
    }
}

fn not_in_cart() -> ApiError {
    ApiError::msg(Code::NOT_FOUND, "the cart has no line of this variant")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(n: u128) -> Uuid {
        Uuid::from_u128(n)
    }

    #[test]
    fn adding_merges_lines_up_to_the_limit() {
        let mut cart = Cart::new(id(1), 0);
        cart.add(id(7), 60, None).unwrap();
        cart.add(id(7), 40, Some(Attributes::from([("gift".into(), "yes".into())]))).unwrap();
        assert_eq!(cart.lines.len(), 1);
        assert_eq!(cart.lines[0].quantity, 100);
        assert_eq!(cart.lines[0].custom_attributes["gift"], "yes");
        let e = cart.add(id(7), 1, None).unwrap_err();
        assert_eq!(e.code, Code::BUSINESS_RULE);
        assert_eq!(cart.lines[0].quantity, 100, "a refused add changes nothing");
    }

    #[test]
    fn set_and_remove_need_the_line() {
        let mut cart = Cart::new(id(1), 0);
        cart.add(id(7), 2, None).unwrap();
        cart.set(id(7), 5, None).unwrap();
        assert_eq!(cart.lines[0].quantity, 5);
        assert_eq!(cart.set(id(8), 1, None).unwrap_err().code, Code::NOT_FOUND);
        cart.remove(id(7)).unwrap();
        assert!(cart.lines.is_empty());
        assert_eq!(cart.remove(id(7)).unwrap_err().code, Code::NOT_FOUND);
    }

    #[test]
    fn attributes_take_scalars_only() {
        let raw: serde_json::Map<String, serde_json::Value> =
            serde_json::from_str(r#"{"note":"hi","size":42,"wrap":true,"skip":null}"#).unwrap();
        let mut c = Check::new();
        let a = check_attributes(&mut c, "customAttributes", Some(raw));
        assert!(c.finish().is_ok());
        assert_eq!(a.get("size").map(String::as_str), Some("42"));
        assert_eq!(a.get("wrap").map(String::as_str), Some("true"));
        assert!(!a.contains_key("skip"));
        let nested: serde_json::Map<String, serde_json::Value> = serde_json::from_str(r#"{"x":{"y":1}}"#).unwrap();
        let mut c = Check::new();
        check_attributes(&mut c, "customAttributes", Some(nested));
        let e = c.finish().unwrap_err();
        assert_eq!(e.fields[0].field, "customAttributes.x");
    }

    #[test]
    fn quantities_are_one_to_a_hundred() {
        for (q, ok) in [(0, false), (1, true), (100, true), (101, false), (-3, false)] {
            let mut c = Check::new();
            check_quantity(&mut c, "quantity", q);
            assert_eq!(c.finish().is_ok(), ok, "{q}");
        }
    }
}
