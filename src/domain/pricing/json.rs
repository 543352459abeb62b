//! The JSON of a [`Calculation`], written directly. Every `POST S/calculate` answers one, about
//! 6 KB for ten lines, and serde's generic path (every key escaped, one call per field) cost
//! more than the pricing itself. The bytes are exactly what the derived `Serialize` writes
//! (a property test holds them equal), so the derive stays the definition of the shape; the
//! warnings, rare and varied, are left to it.

use super::calc::{Calculation, DiscountApplication, LineResult, Source};
use super::discount::DiscountClass;
use super::tax::TaxLine;
use crate::domain::json_out::JsonOut as Out;

impl Calculation {
    /// The calculation as JSON, byte for byte as `serde_json::to_vec` writes it.
    pub fn to_json(&self) -> serde_json::Result<Vec<u8>> {
        let mut out = Out::with_capacity(self.line_items.len().saturating_mul(640).saturating_add(1024));
        out.money(b"{\"subtotal\":", &self.subtotal);
        out.money(b",\"discount\":", &self.discount);
        out.money(b",\"shipping\":", &self.shipping);
        out.money(b",\"tax\":", &self.tax);
        out.money(b",\"total\":", &self.total);
        out.raw(if self.taxes_included { b",\"taxesIncluded\":true" } else { b",\"taxesIncluded\":false" });
        out.list(b",\"taxLines\":[", &self.tax_lines, Out::tax_line)?;
        out.list(b",\"appliedDiscountCodes\":[", &self.applied_discount_codes, |o, c| o.string(c))?;
        out.list(b",\"discountApplications\":[", &self.discount_applications, Out::application)?;
        out.raw(b",\"warnings\":");
        serde_json::to_writer(&mut out.buf, &self.warnings)?;
        out.list(b",\"lineItems\":[", &self.line_items, |o, l| {
            o.line_item(l);
            Ok(())
        })?;
        out.raw(b"}");
        Ok(out.buf)
    }
}

impl Out {
    fn tax_line(&mut self, t: &TaxLine) -> serde_json::Result<()> {
        self.raw(b"{\"name\":");
        self.string(&t.name)?;
        self.raw(b",\"country\":");
        self.string(&t.country)?;
        self.raw(b",\"province\":");
        self.opt_string(t.province.as_deref())?;
        self.raw(b",\"rate\":");
        self.int(t.rate);
        self.money(b",\"amount\":", &t.amount);
        self.buf.push(b'}');
        Ok(())
    }

    fn application(&mut self, a: &DiscountApplication) -> serde_json::Result<()> {
        self.raw(match a.source {
            Source::Manual => b"{\"source\":\"manual\"",
            Source::Automatic => b"{\"source\":\"automatic\"",
            Source::Code => b"{\"source\":\"code\"",
        });
        match &a.discount_id {
            Some(id) => self.uuid(b",\"discountId\":", id),
            None => self.raw(b",\"discountId\":null"),
        }
        self.raw(b",\"code\":");
        self.opt_string(a.code.as_deref())?;
        self.raw(b",\"title\":");
        self.string(&a.title)?;
        self.raw(match a.class {
            DiscountClass::Product => b",\"class\":\"product\"",
            DiscountClass::Order => b",\"class\":\"order\"",
            DiscountClass::Shipping => b",\"class\":\"shipping\"",
        });
        self.money(b",\"amount\":", &a.amount);
        self.buf.push(b'}');
        Ok(())
    }

    fn line_item(&mut self, l: &LineResult) {
        self.uuid(b"{\"variantId\":", &l.variant_id);
        self.uuid(b",\"productId\":", &l.product_id);
        self.money(b",\"unitPrice\":", &l.unit_price);
        self.raw(b",\"quantity\":");
        self.int(l.quantity);
        self.money(b",\"lineDiscount\":", &l.line_discount);
        self.money(b",\"subtotal\":", &l.subtotal);
        self.money(b",\"productDiscount\":", &l.product_discount);
        self.money(b",\"orderDiscount\":", &l.order_discount);
        self.money(b",\"discount\":", &l.discount);
        self.money(b",\"tax\":", &l.tax);
        self.money(b",\"total\":", &l.total);
        self.buf.push(b'}');
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use uuid::Uuid;

    use crate::domain::money::{Currency, Money};
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
            tax_lines: vec![
                TaxLine { name: awkward.into(), country: "CA".into(), province: None, rate: 500, amount: m(4) },
                TaxLine { name: "PST".into(), country: "CA".into(), province: Some("BC".into()), rate: 700, amount: m(0) },
            ],
            applied_discount_codes: vec![awkward.into(), "PLAIN10".into()],
            discount_applications: [
                (Source::Code, Some(Uuid::from_u128(9)), Some(awkward), DiscountClass::Order),
                (Source::Automatic, Some(Uuid::from_u128(10)), None, DiscountClass::Product),
                (Source::Manual, None, None, DiscountClass::Shipping),
            ]
            .into_iter()
            .map(|(source, discount_id, code, class)| DiscountApplication {
                source,
                discount_id,
                code: code.map(str::to_string),
                title: awkward.into(),
                class,
                amount: m(2),
            })
            .collect(),
            warnings: vec![Warning::discount(WarningCode::DiscountNotCombinable, Some(awkward), awkward)],
            line_items: vec![line.clone(), line],
        };
        assert_eq!(String::from_utf8(c.to_json().unwrap()).unwrap(), serde_json::to_string(&c).unwrap());
    }
}
