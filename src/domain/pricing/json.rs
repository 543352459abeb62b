//! The JSON of a [`Calculation`], written directly. Every `POST S/calculate` answers one, about
//! 6 KB for ten lines, and serde's generic path (every key escaped, one call per field) cost
//! more than the pricing itself. The bytes are exactly what the derived `Serialize` writes
//! (a property test holds them equal), so the derive stays the definition of the shape; the
//! short, rare parts (tax lines, discount applications, warnings) are left to it.

use serde::Serialize;
use uuid::Uuid;

use super::calc::{Calculation, LineResult};
use crate::domain::money::Money;

impl Calculation {
    /// The calculation as JSON, byte for byte as `serde_json::to_vec` writes it.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(1024 + 640 * self.line_items.len());
        money(&mut out, b"{\"subtotal\":", &self.subtotal);
        money(&mut out, b",\"discount\":", &self.discount);
        money(&mut out, b",\"shipping\":", &self.shipping);
        money(&mut out, b",\"tax\":", &self.tax);
        money(&mut out, b",\"total\":", &self.total);
        out.extend_from_slice(if self.taxes_included { b",\"taxesIncluded\":true" } else { b",\"taxesIncluded\":false" });
        serde_field(&mut out, b",\"taxLines\":", &self.tax_lines)?;
        serde_field(&mut out, b",\"appliedDiscountCodes\":", &self.applied_discount_codes)?;
        serde_field(&mut out, b",\"discountApplications\":", &self.discount_applications)?;
        serde_field(&mut out, b",\"warnings\":", &self.warnings)?;
        out.extend_from_slice(b",\"lineItems\":[");
        for (i, line) in self.line_items.iter().enumerate() {
            if i > 0 {
                out.push(b',');
            }
            line_item(&mut out, line);
        }
        out.extend_from_slice(b"]}");
        Ok(out)
    }
}

fn line_item(out: &mut Vec<u8>, l: &LineResult) {
    uuid(out, b"{\"variantId\":", &l.variant_id);
    uuid(out, b",\"productId\":", &l.product_id);
    money(out, b",\"unitPrice\":", &l.unit_price);
    out.extend_from_slice(b",\"quantity\":");
    out.extend_from_slice(itoa::Buffer::new().format(l.quantity).as_bytes());
    money(out, b",\"lineDiscount\":", &l.line_discount);
    money(out, b",\"subtotal\":", &l.subtotal);
    money(out, b",\"productDiscount\":", &l.product_discount);
    money(out, b",\"orderDiscount\":", &l.order_discount);
    money(out, b",\"discount\":", &l.discount);
    money(out, b",\"tax\":", &l.tax);
    money(out, b",\"total\":", &l.total);
    out.push(b'}');
}

/// `key` (with its punctuation), then `{"amount":…,"currency":"…"}`. Currency codes are three
/// ASCII letters: nothing to escape.
fn money(out: &mut Vec<u8>, key: &[u8], m: &Money) {
    out.extend_from_slice(key);
    out.extend_from_slice(b"{\"amount\":");
    out.extend_from_slice(itoa::Buffer::new().format(m.amount).as_bytes());
    out.extend_from_slice(b",\"currency\":\"");
    out.extend_from_slice(m.currency.code().as_bytes());
    out.extend_from_slice(b"\"}");
}

/// `key`, then the id as a quoted hyphenated string.
fn uuid(out: &mut Vec<u8>, key: &[u8], id: &Uuid) {
    out.extend_from_slice(key);
    out.push(b'"');
    out.extend_from_slice(id.hyphenated().encode_lower(&mut Uuid::encode_buffer()).as_bytes());
    out.push(b'"');
}

fn serde_field<T: Serialize>(out: &mut Vec<u8>, key: &[u8], value: &T) -> serde_json::Result<()> {
    out.extend_from_slice(key);
    serde_json::to_writer(&mut *out, value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::money::Currency;
    use crate::domain::pricing::calc::{DiscountApplication, Source};
    use crate::domain::pricing::discount::DiscountClass;
    use crate::domain::pricing::tax::TaxLine;
    use crate::domain::pricing::{Warning, WarningCode};

    #[test]
    fn strings_that_need_escaping_come_out_as_serde_writes_them() {
        let usd = Currency::parse("USD").unwrap();
        let m = |amount| Money { amount, currency: usd };
        let awkward = "Quote \" back\\slash \u{1} tab\t é 😀";
        let line = LineResult {
            variant_id: Uuid::from_u128(1),
            product_id: Uuid::from_u128(u128::MAX),
            unit_price: m(-5),
            quantity: 100,
            line_discount: m(0),
            subtotal: m(i64::MAX),
            product_discount: m(i64::MIN),
            order_discount: m(7),
            discount: m(7),
            tax: m(0),
            total: m(1),
        };
        let c = Calculation {
            subtotal: m(1),
            discount: m(2),
            shipping: m(3),
            tax: m(4),
            total: m(5),
            taxes_included: true,
            tax_lines: vec![TaxLine { name: awkward.into(), country: "CA".into(), province: None, rate: 500, amount: m(4) }],
            applied_discount_codes: vec![awkward.into()],
            discount_applications: vec![DiscountApplication {
                source: Source::Code,
                discount_id: Some(Uuid::from_u128(9)),
                code: Some(awkward.into()),
                title: awkward.into(),
                class: DiscountClass::Order,
                amount: m(2),
            }],
            warnings: vec![Warning::discount(WarningCode::DiscountNotCombinable, Some(awkward), awkward)],
            line_items: vec![line.clone(), line],
        };
        assert_eq!(String::from_utf8(c.to_json().unwrap()).unwrap(), serde_json::to_string(&c).unwrap());
    }
}
