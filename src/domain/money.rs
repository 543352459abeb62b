//! Money: integer amounts in a currency's minor units. No float ever touches an amount.
//!
//! Rounding rule (the one point where it happens): when a computation yields a fraction of a
//! minor unit — a percentage, a proportional share — it is rounded half away from zero by
//! [`round_div`]. Every other operation is exact integer arithmetic.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// ISO 4217 codes with their minor-unit exponents (the number of decimals).
const CURRENCIES: &[(&str, u8)] = &[
    ("AED", 2),
    ("AFN", 2),
    ("ALL", 2),
    ("AMD", 2),
    ("ANG", 2),
    ("AOA", 2),
    ("ARS", 2),
    ("AUD", 2),
    ("AWG", 2),
    ("AZN", 2),
    ("BAM", 2),
    ("BBD", 2),
    ("BDT", 2),
    ("BGN", 2),
    ("BHD", 3),
    ("BIF", 0),
    ("BMD", 2),
    ("BND", 2),
    ("BOB", 2),
    ("BRL", 2),
    ("BSD", 2),
    ("BTN", 2),
    ("BWP", 2),
    ("BYN", 2),
    ("BZD", 2),
    ("CAD", 2),
    ("CDF", 2),
    ("CHF", 2),
    ("CLP", 0),
    ("CNY", 2),
    ("COP", 2),
    ("CRC", 2),
    ("CUP", 2),
    ("CVE", 2),
    ("CZK", 2),
    ("DJF", 0),
    ("DKK", 2),
    ("DOP", 2),
    ("DZD", 2),
    ("EGP", 2),
    ("ERN", 2),
    ("ETB", 2),
    ("EUR", 2),
    ("FJD", 2),
    ("FKP", 2),
    ("GBP", 2),
    ("GEL", 2),
    ("GHS", 2),
    ("GIP", 2),
    ("GMD", 2),
    ("GNF", 0),
    ("GTQ", 2),
    ("GYD", 2),
    ("HKD", 2),
    ("HNL", 2),
    ("HTG", 2),
    ("HUF", 2),
    ("IDR", 2),
    ("ILS", 2),
    ("INR", 2),
    ("IQD", 3),
    ("IRR", 2),
    ("ISK", 0),
    ("JMD", 2),
    ("JOD", 3),
    ("JPY", 0),
    ("KES", 2),
    ("KGS", 2),
    ("KHR", 2),
    ("KMF", 0),
    ("KPW", 2),
    ("KRW", 0),
    ("KWD", 3),
    ("KYD", 2),
    ("KZT", 2),
    ("LAK", 2),
    ("LBP", 2),
    ("LKR", 2),
    ("LRD", 2),
    ("LSL", 2),
    ("LYD", 3),
    ("MAD", 2),
    ("MDL", 2),
    ("MGA", 2),
    ("MKD", 2),
    ("MMK", 2),
    ("MNT", 2),
    ("MOP", 2),
    ("MRU", 2),
    ("MUR", 2),
    ("MVR", 2),
    ("MWK", 2),
    ("MXN", 2),
    ("MYR", 2),
    ("MZN", 2),
    ("NAD", 2),
    ("NGN", 2),
    ("NIO", 2),
    ("NOK", 2),
    ("NPR", 2),
    ("NZD", 2),
    ("OMR", 3),
    ("PAB", 2),
    ("PEN", 2),
    ("PGK", 2),
    ("PHP", 2),
    ("PKR", 2),
    ("PLN", 2),
    ("PYG", 0),
    ("QAR", 2),
    ("RON", 2),
    ("RSD", 2),
    ("RUB", 2),
    ("RWF", 0),
    ("SAR", 2),
    ("SBD", 2),
    ("SCR", 2),
    ("SDG", 2),
    ("SEK", 2),
    ("SGD", 2),
    ("SHP", 2),
    ("SLE", 2),
    ("SOS", 2),
    ("SRD", 2),
    ("SSP", 2),
    ("STN", 2),
    ("SYP", 2),
    ("SZL", 2),
    ("THB", 2),
    ("TJS", 2),
    ("TMT", 2),
    ("TND", 3),
    ("TOP", 2),
    ("TRY", 2),
    ("TTD", 2),
    ("TWD", 2),
    ("TZS", 2),
    ("UAH", 2),
    ("UGX", 0),
    ("USD", 2),
    ("UYU", 2),
    ("UZS", 2),
    ("VES", 2),
    ("VND", 0),
    ("VUV", 0),
    ("WST", 2),
    ("XAF", 0),
    ("XCD", 2),
    ("XOF", 0),
    ("XPF", 0),
    ("YER", 2),
    ("ZAR", 2),
    ("ZMW", 2),
    ("ZWL", 2),
];

/// Each code's exponent plus one, at its letters' index (0: not a currency): a decode, which
/// meets a currency in every amount of an order, looks one up by index instead of searching.
static EXPONENTS: [u8; 26 * 26 * 26] = {
    let mut table = [0u8; 26 * 26 * 26];
    let mut i = 0;
    while i < CURRENCIES.len() {
        let (code, exponent) = CURRENCIES[i];
        let b = code.as_bytes();
        if let Some(at) = letters_index([b[0], b[1], b[2]]) {
            table[at] = exponent.saturating_add(1);
        }
        i = i.saturating_add(1);
    }
    table
};

/// Where three upper-case ASCII letters are in [`EXPONENTS`]; `None` for anything else.
const fn letters_index(code: [u8; 3]) -> Option<usize> {
    let [a, b, c] = code;
    if !a.is_ascii_uppercase() || !b.is_ascii_uppercase() || !c.is_ascii_uppercase() {
        return None;
    }
    Some(letter(a).wrapping_mul(676).wrapping_add(letter(b).wrapping_mul(26)).wrapping_add(letter(c)))
}

/// An upper-case letter's place in the alphabet, from 0.
const fn letter(l: u8) -> usize {
    l.wrapping_sub(b'A') as usize
}

/// A known ISO 4217 currency: the code's three upper-case letters and its exponent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Currency {
    code: [u8; 3],
    exponent: u8,
}

impl Currency {
    /// Parses a code (any case); `None` for codes that are not ISO 4217. Allocation-free: it runs
    /// on every record decode.
    pub fn parse(code: &str) -> Option<Currency> {
        let &[a, b, c] = code.as_bytes() else { return None };
        let upper = [a.to_ascii_uppercase(), b.to_ascii_uppercase(), c.to_ascii_uppercase()];
        let known = EXPONENTS.get(letters_index(upper)?).copied().unwrap_or(0);
        known.checked_sub(1).map(|exponent| Currency { code: upper, exponent })
    }

    pub fn code(&self) -> &str {
        std::str::from_utf8(&self.code).unwrap_or("XXX")
    }

    /// Decimals of the minor unit: JPY 0, USD 2, BHD 3.
    pub fn exponent(&self) -> u8 {
        self.exponent
    }

    /// A display string, e.g. `12.50 USD` or `1200 JPY`.
    pub fn format(&self, amount: i64) -> String {
        let exp = u32::from(self.exponent());
        if exp == 0 {
            return format!("{amount} {}", self.code());
        }
        let unit = 10u64.pow(exp);
        let sign = if amount < 0 { "-" } else { "" };
        let abs = amount.unsigned_abs();
        let (whole, cents) = (abs.checked_div(unit).unwrap_or(0), abs.checked_rem(unit).unwrap_or(0));
        format!("{sign}{whole}.{cents:0width$} {}", self.code(), width = exp as usize)
    }
}

impl<'de> Deserialize<'de> for Currency {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Code;
        impl serde::de::Visitor<'_> for Code {
            type Value = Currency;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("an ISO 4217 currency code")
            }
            fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<Currency, E> {
                Currency::parse(s).ok_or_else(|| E::custom(format!("unknown currency code {s:?}")))
            }
        }
        d.deserialize_str(Code)
    }
}

/// The code as a string (bincode and JSON alike), written without an allocation: every money
/// amount of every answer carries one.
impl Serialize for Currency {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.code())
    }
}

impl JsonSchema for Currency {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "Currency".into()
    }
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        // The codes this service knows, as it writes them (it reads any case).
        let codes: Vec<&str> = CURRENCIES.iter().map(|(c, _)| *c).collect();
        schemars::json_schema!({"type": "string", "enum": codes, "description": "ISO 4217 code"})
    }
}

/// An amount in minor units of a currency: `{amount, currency}` on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct Money {
    pub amount: i64,
    pub currency: Currency,
}

/// `numerator / denominator` rounded half away from zero: the one rounding rule. A result
/// beyond `i64` saturates (callers bound their amounts far below); a zero or negative
/// denominator, which no caller passes, answers 0.
pub fn round_div(numerator: i128, denominator: i128) -> i64 {
    debug_assert!(denominator > 0);
    let (Some(q), Some(r)) = (numerator.checked_div(denominator), numerator.checked_rem(denominator)) else { return 0 };
    // |r| < denominator, so twice it is compared without overflow as r against what is left.
    let adjust =
        if r.unsigned_abs() >= denominator.unsigned_abs().saturating_sub(r.unsigned_abs()) { numerator.signum() } else { 0 };
    let rounded = q.saturating_add(adjust);
    i64::try_from(rounded).unwrap_or(if rounded < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_div_rounds_half_away_from_zero_and_saturates() {
        assert_eq!([round_div(5, 10), round_div(4, 10), round_div(15, 10), round_div(14, 10)], [1, 0, 2, 1]);
        assert_eq!([round_div(-5, 10), round_div(-4, 10), round_div(-15, 10)], [-1, 0, -2]);
        assert_eq!(round_div(i128::MAX, 1), i64::MAX);
        assert_eq!(round_div(i128::MIN, 1), i64::MIN);
        assert_eq!(round_div(i128::MAX, i128::MAX), 1);
        assert_eq!(round_div(i128::MAX - 1, i128::MAX), 1);
        assert_eq!(round_div(i128::from(i64::MAX) * 3, 2), i64::MAX);
    }

    #[test]
    fn amounts_at_the_limits_format_without_wrapping() {
        let usd = Currency::parse("USD").unwrap();
        assert_eq!(usd.format(i64::MIN), "-92233720368547758.08 USD");
        assert_eq!(usd.format(i64::MAX), "92233720368547758.07 USD");
    }

    #[test]
    fn every_listed_code_parses_to_its_exponent_and_no_other_does() {
        for (code, exponent) in CURRENCIES {
            assert_eq!(Currency::parse(code).map(|c| (c.code().to_string(), c.exponent())), Some((code.to_string(), *exponent)));
        }
        let letters = || (b'A'..=b'Z').map(char::from);
        let known = letters()
            .flat_map(|a| letters().flat_map(move |b| letters().map(move |c| format!("{a}{b}{c}"))))
            .filter(|code| Currency::parse(code).is_some())
            .count();
        assert_eq!(known, CURRENCIES.len());
        for odd in ["US", "USDD", "U$D", "US ", "", "ÜSD"] {
            assert!(Currency::parse(odd).is_none(), "{odd:?}");
        }
    }

    #[test]
    fn exponents_and_formatting() {
        assert_eq!(Currency::parse("jpy").unwrap().exponent(), 0);
        assert_eq!(Currency::parse("USD").unwrap().format(1250), "12.50 USD");
        assert_eq!(Currency::parse("BHD").unwrap().format(-5), "-0.005 BHD");
        assert_eq!(Currency::parse("JPY").unwrap().format(1200), "1200 JPY");
        assert!(Currency::parse("XYZ").is_none());
    }

    #[test]
    fn rounding_is_half_away_from_zero() {
        assert_eq!(round_div(5, 2), 3);
        assert_eq!(round_div(-5, 2), -3);
        assert_eq!(round_div(4, 3), 1);
        assert_eq!(round_div(1, 3), 0);
    }
}
