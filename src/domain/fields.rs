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
