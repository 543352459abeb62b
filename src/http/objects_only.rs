//! Structs read from JSON objects only. serde's derived structs also accept an array of their
//! fields in order (`[1, "USD"]` reads as `{"amount": 1, "currency": "USD"}`), which no client
//! means and the OpenAPI document does not allow: a PATCH body `[null, null]` was a valid empty
//! update and `"address": []` blanked an address. [`Objects`] wraps a deserializer so that every
//! struct, at any depth, must come as an object; everything else passes through unchanged and
//! without a copy (the wrappers are generic and hold nothing but what they wrap).
//!
//! The same wrapper reads an integer field from a number written with a zero fraction (`2.0`):
//! JSON Schema, and so the document, counts it as the integer 2, while serde's integers refuse
//! any number written with a fraction. A fraction that is not zero is refused as before; fields
//! that take any JSON value keep the number as it was written.

use std::fmt;

use serde::de::{self, DeserializeSeed, Deserializer, EnumAccess, MapAccess, SeqAccess, VariantAccess, Visitor};

/// A deserializer whose structs, and those of every value inside it, are read from objects only.
pub struct Objects<D>(pub D);

/// Wraps what a deserializer hands on (visitors, sequences, maps, enums, seeds) so that the
/// values read through it are [`Objects`] too.
pub struct Wrap<T>(T);

/// A struct's visitor: a JSON array in its place is refused.
pub struct Struct<V>(V);

/// An integer field's visitor: a number with a zero fraction is read as the integer it equals.
pub struct Integral<V>(V);

/// The refusal, in JSON's words: "invalid type: array, expected an object".
fn array_refused<E: de::Error>() -> E {
    E::invalid_type(de::Unexpected::Other("array"), &"an object")
}

macro_rules! pass_visitor {
    ($($method:ident),* $(,)?) => { $(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Wrap(visitor))
        }
    )* };
}

macro_rules! integral_visitor {
    ($($method:ident),* $(,)?) => { $(
        fn $method<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, D::Error> {
            self.0.$method(Integral(Wrap(visitor)))
        }
    )* };
}

impl<'de, D: Deserializer<'de>> Deserializer<'de> for Objects<D> {
    type Error = D::Error;

    integral_visitor!(
        deserialize_i8,
        deserialize_i16,
        deserialize_i32,
        deserialize_i64,
        deserialize_i128,
        deserialize_u8,
        deserialize_u16,
        deserialize_u32,
        deserialize_u64,
        deserialize_u128,
    );

    pass_visitor!(
        deserialize_any,
        deserialize_bool,
        deserialize_f32,
        deserialize_f64,
        deserialize_char,
        deserialize_str,
        deserialize_string,
        deserialize_bytes,
        deserialize_byte_buf,
        deserialize_option,
        deserialize_unit,
        deserialize_seq,
        deserialize_map,
        deserialize_identifier,
        deserialize_ignored_any,
    );

    fn deserialize_unit_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_unit_struct(name, Wrap(visitor))
    }

    fn deserialize_newtype_struct<V: Visitor<'de>>(self, name: &'static str, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_newtype_struct(name, Wrap(visitor))
    }

    fn deserialize_tuple<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple(len, Wrap(visitor))
    }

    fn deserialize_tuple_struct<V: Visitor<'de>>(self, name: &'static str, len: usize, visitor: V) -> Result<V::Value, D::Error> {
        self.0.deserialize_tuple_struct(name, len, Wrap(visitor))
    }

    fn deserialize_struct<V: Visitor<'de>>(
        self,
        name: &'static str,
        fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_struct(name, fields, Struct(visitor))
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        name: &'static str,
        variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, D::Error> {
        self.0.deserialize_enum(name, variants, Wrap(visitor))
    }

    fn is_human_readable(&self) -> bool {
        self.0.is_human_readable()
    }
}

macro_rules! pass_value {
    ($($method:ident: $ty:ty),* $(,)?) => { $(
        fn $method<E: de::Error>(self, v: $ty) -> Result<Self::Value, E> {
            self.0.$method(v)
        }
    )* };
}

impl<'de, V: Visitor<'de>> Visitor<'de> for Wrap<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    pass_value!(
        visit_bool: bool,
        visit_i8: i8,
        visit_i16: i16,
        visit_i32: i32,
        visit_i64: i64,
        visit_i128: i128,
        visit_u8: u8,
        visit_u16: u16,
        visit_u32: u32,
        visit_u64: u64,
        visit_u128: u128,
        visit_f32: f32,
        visit_f64: f64,
        visit_char: char,
        visit_str: &str,
        visit_borrowed_str: &'de str,
        visit_string: String,
        visit_bytes: &[u8],
        visit_borrowed_bytes: &'de [u8],
        visit_byte_buf: Vec<u8>,
    );

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_none()
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        self.0.visit_unit()
    }

    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_some(Objects(d))
    }

    fn visit_newtype_struct<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        self.0.visit_newtype_struct(Objects(d))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
        self.0.visit_seq(Wrap(seq))
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }

    fn visit_enum<A: EnumAccess<'de>>(self, data: A) -> Result<Self::Value, A::Error> {
        self.0.visit_enum(Wrap(data))
    }
}

/// JSON gives an integer field its number as `i64`, `u64` or `f64`; any other value is refused
/// by the default methods in the field's own words (`expecting`).
impl<'de, V: Visitor<'de>> Visitor<'de> for Integral<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    pass_value!(visit_i64: i64, visit_u64: u64, visit_i128: i128, visit_u128: u128);

    fn visit_f64<E: de::Error>(self, v: f64) -> Result<Self::Value, E> {
        // 2^63 and 2^64 are exact in f64: a whole number below them converts without loss.
        const I64_END: f64 = 9_223_372_036_854_775_808.0;
        const U64_END: f64 = 18_446_744_073_709_551_616.0;
        match v {
            _ if v.fract() != 0.0 => self.0.visit_f64(v),
            _ if (-I64_END..I64_END).contains(&v) => self.0.visit_i64(v as i64),
            _ if (0.0..U64_END).contains(&v) => self.0.visit_u64(v as u64),
            _ => self.0.visit_f64(v),
        }
    }
}

/// A derived struct's visitor reads only maps and sequences; every other JSON value gets
/// serde's own refusal from the default methods.
impl<'de, V: Visitor<'de>> Visitor<'de> for Struct<V> {
    type Value = V::Value;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        self.0.expecting(f)
    }

    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
        self.0.visit_map(Wrap(map))
    }

    fn visit_seq<A: SeqAccess<'de>>(self, _: A) -> Result<Self::Value, A::Error> {
        Err(array_refused())
    }
}

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Wrap<S> {
    type Value = S::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<S::Value, D::Error> {
        self.0.deserialize(Objects(d))
    }
}

impl<'de, A: SeqAccess<'de>> SeqAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_element_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<Option<T::Value>, A::Error> {
        self.0.next_element_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(&mut self, seed: K) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(seed)
    }

    fn next_value_seed<T: DeserializeSeed<'de>>(&mut self, seed: T) -> Result<T::Value, A::Error> {
        self.0.next_value_seed(Wrap(seed))
    }

    fn size_hint(&self) -> Option<usize> {
        self.0.size_hint()
    }
}

impl<'de, A: EnumAccess<'de>> EnumAccess<'de> for Wrap<A> {
    type Error = A::Error;
    type Variant = Wrap<A::Variant>;

    fn variant_seed<V: DeserializeSeed<'de>>(self, seed: V) -> Result<(V::Value, Self::Variant), A::Error> {
        let (value, variant) = self.0.variant_seed(seed)?;
        Ok((value, Wrap(variant)))
    }
}

impl<'de, A: VariantAccess<'de>> VariantAccess<'de> for Wrap<A> {
    type Error = A::Error;

    fn unit_variant(self) -> Result<(), A::Error> {
        self.0.unit_variant()
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, seed: T) -> Result<T::Value, A::Error> {
        self.0.newtype_variant_seed(Wrap(seed))
    }

    fn tuple_variant<V: Visitor<'de>>(self, len: usize, visitor: V) -> Result<V::Value, A::Error> {
        self.0.tuple_variant(len, Wrap(visitor))
    }

    fn struct_variant<V: Visitor<'de>>(self, fields: &'static [&'static str], visitor: V) -> Result<V::Value, A::Error> {
        self.0.struct_variant(fields, Struct(visitor))
    }
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;

    use super::Objects;

    #[derive(Deserialize, Debug, PartialEq)]
    struct Money {
        amount: i64,
        currency: String,
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Line {
        price: Option<Money>,
        prices: Vec<Money>,
        tags: Vec<String>,
        extra: Option<serde_json::Value>,
    }

    fn read<T: for<'de> Deserialize<'de>>(json: &str) -> Result<T, String> {
        let mut de = serde_json::Deserializer::from_str(json);
        let value = T::deserialize(Objects(&mut de)).map_err(|e| e.to_string())?;
        de.end().map_err(|e| e.to_string())?;
        Ok(value)
    }

    #[test]
    fn objects_arrays_and_values_read_as_before() {
        let line: Line = read(
            r#"{"price": {"amount": 1, "currency": "USD"}, "prices": [{"amount": 2, "currency": "EUR"}],
                "tags": ["a"], "extra": [1, {"k": [2]}]}"#,
        )
        .unwrap();
        assert_eq!(line.price, Some(Money { amount: 1, currency: "USD".into() }));
        assert_eq!(line.prices, vec![Money { amount: 2, currency: "EUR".into() }]);
        assert_eq!(line.tags, vec!["a".to_string()]);
        assert_eq!(line.extra, Some(serde_json::json!([1, {"k": [2]}])));
    }

    #[test]
    fn a_struct_given_as_an_array_is_refused_at_any_depth() {
        let top = read::<Money>(r#"[1, "USD"]"#).unwrap_err();
        assert!(top.starts_with("invalid type: array, expected an object"), "{top}");
        let nested = read::<Line>(r#"{"price": [1, "USD"], "prices": [], "tags": [], "extra": null}"#).unwrap_err();
        assert!(nested.starts_with("invalid type: array, expected an object"), "{nested}");
        let in_list = read::<Line>(r#"{"price": null, "prices": [[1, "USD"]], "tags": [], "extra": null}"#).unwrap_err();
        assert!(in_list.starts_with("invalid type: array, expected an object"), "{in_list}");
    }

    #[derive(Deserialize, Debug, PartialEq)]
    struct Counts {
        quantity: u8,
        delta: i64,
        at: Option<u64>,
        ratio: f64,
        extra: serde_json::Value,
    }

    #[test]
    fn an_integer_written_with_a_zero_fraction_is_that_integer_and_any_other_fraction_is_refused() {
        let counts: Counts = read(r#"{"quantity": 2.0, "delta": -7.0, "at": 1e3, "ratio": 3.0, "extra": 2.0}"#).unwrap();
        assert_eq!((counts.quantity, counts.delta, counts.at, counts.ratio), (2, -7, Some(1000), 3.0));
        assert!(counts.extra.is_f64(), "a field of any value keeps the number as written: {:?}", counts.extra);
        let prices: Money = read(r#"{"amount": 1999.0, "currency": "USD"}"#).unwrap();
        assert_eq!(prices.amount, 1999);
        for (json, said) in [
            (r#"{"amount": 19.99, "currency": "USD"}"#, "invalid type: floating point `19.99`, expected i64"),
            (r#"{"amount": 1e19, "currency": "USD"}"#, "invalid value: integer `10000000000000000000`, expected i64"),
            (r#"{"amount": 1e300, "currency": "USD"}"#, "invalid type: floating point"),
            (r#"{"amount": "2", "currency": "USD"}"#, "invalid type: string \"2\", expected i64"),
        ] {
            let e = read::<Money>(json).unwrap_err();
            assert!(e.starts_with(said), "{json}: {e}");
        }
        let e = read::<Counts>(r#"{"quantity": 256.0, "delta": 0, "at": null, "ratio": 0, "extra": 0}"#).unwrap_err();
        assert!(e.starts_with("invalid value: integer `256`, expected u8"), "{e}");
        let e = read::<Counts>(r#"{"quantity": 1, "delta": 0, "at": -1.0, "ratio": 0, "extra": 0}"#).unwrap_err();
        assert!(e.starts_with("invalid value: integer `-1`, expected u64"), "{e}");
    }
}
