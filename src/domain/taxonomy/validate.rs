//! The checks a taxonomy file passes before it is served: ids, names, attributes, levels and
//! sibling names.

use super::*;

pub(super) fn check_id(id: &str) -> Result<(), TaxonomyError> {
    let reason = if id.is_empty() || id.len() > ID_MAX_LEN {
        "must be 1 to 64 characters"
    } else if !id.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_') {
        "may contain only ASCII letters, digits, '-' and '_'"
    } else {
        return Ok(());
    };
    Err(TaxonomyError::InvalidId { id: id.to_owned(), reason })
}

pub(super) fn check_name(name: &str) -> Result<(), &'static str> {
    if name.trim().is_empty() {
        Err("must not be blank")
    } else if name.chars().count() > NAME_MAX_CHARS {
        Err("must be at most 200 characters")
    } else if name.trim() != name {
        Err("must not start or end with whitespace")
    } else if name.contains(PATH_SEPARATOR) {
        Err("must not contain the path separator \" > \"")
    } else {
        Ok(())
    }
}

pub(super) fn parse_attributes(category_id: &str, raws: Vec<RawAttribute>) -> Result<Vec<AttributeDef>, TaxonomyError> {
    let mut seen = HashSet::new();
    let mut attributes = Vec::with_capacity(raws.len());
    for raw in raws {
        let kind = check_attribute(&raw).map_err(|reason| TaxonomyError::InvalidAttribute {
            category_id: category_id.to_owned(),
            key: raw.key.clone(),
            reason,
        })?;
        if !seen.insert(raw.key.clone()) {
            return Err(TaxonomyError::DuplicateAttribute { category_id: category_id.to_owned(), key: raw.key });
        }
        attributes.push(AttributeDef {
            key: raw.key,
            name: raw.name,
            kind,
            default_value: raw.default_value,
            values: raw.values,
        });
    }
    Ok(attributes)
}

/// Checks one attribute definition and returns its type, or the reason it is invalid.
pub(super) fn check_attribute(raw: &RawAttribute) -> Result<AttributeType, String> {
    let key_ok = raw.key.len() <= KEY_MAX_LEN
        && raw.key.bytes().next().is_some_and(|b| b.is_ascii_lowercase())
        && raw.key.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_');
    if !key_ok {
        return Err("the key must be a lowercase ASCII letter followed by up to 63 lowercase \
                    letters, digits or '_'"
            .to_owned());
    }
    if raw.name.trim().is_empty() || raw.name.chars().count() > NAME_MAX_CHARS {
        return Err("the name must be 1 to 200 characters and not blank".to_owned());
    }
    let kind = AttributeType::parse(&raw.kind)
        .ok_or_else(|| format!("unknown type {:?} (expected text, number, boolean or list)", raw.kind))?;
    if let Some(values) = &raw.values {
        if !matches!(kind, AttributeType::Text | AttributeType::List) {
            return Err("allowed values are only for text and list attributes".to_owned());
        }
        if values.is_empty() {
            return Err("allowed values must not be empty".to_owned());
        }
        if values.iter().any(|v| v.trim().is_empty()) {
            return Err("allowed values must not be blank".to_owned());
        }
        let mut distinct = HashSet::new();
        if let Some(repeated) = values.iter().find(|v| !distinct.insert(v.as_str())) {
            return Err(format!("allowed value {repeated:?} is repeated"));
        }
    }
    let allowed = |value: &str| raw.values.as_ref().is_none_or(|vs| vs.iter().any(|v| v == value));
    match (kind, &raw.default_value) {
        (_, Value::Null) | (AttributeType::Number, Value::Number(_)) | (AttributeType::Boolean, Value::Bool(_)) => {}
        (AttributeType::Text, Value::String(s)) if allowed(s) => {}
        (AttributeType::Text, Value::String(s)) => {
            return Err(format!("default value {s:?} is not one of the allowed values"));
        }
        (AttributeType::List, Value::Array(items)) => {
            let mut distinct = HashSet::new();
            for item in items {
                let Value::String(s) = item else {
                    return Err("a list default value must be an array of strings".to_owned());
                };
                if !allowed(s) {
                    return Err(format!("default value {s:?} is not one of the allowed values"));
                }
                if !distinct.insert(s.as_str()) {
                    return Err(format!("default value {s:?} is repeated"));
                }
            }
        }
        (kind, _) => {
            let expected = match kind {
                AttributeType::Text => "a string",
                AttributeType::Number => "a number",
                AttributeType::Boolean => "true or false",
                AttributeType::List => "an array of strings",
            };
            return Err(format!("the default value of a {} attribute must be {expected} or null", raw.kind));
        }
    }
    Ok(kind)
}

/// Levels of all categories, or the first cycle or too-deep category found in file order.
/// Walks are iterative so a long chain in a hostile file cannot overflow the stack.
pub(super) fn compute_levels(categories: &[Category]) -> Result<Vec<usize>, TaxonomyError> {
    let mut levels: Vec<Option<usize>> = vec![None; categories.len()];
    let mut on_walk = vec![false; categories.len()];
    for start in 0..categories.len() {
        // `chain` runs from `start` upwards to the first category whose level is unknown
        // and whose parent is known (or is a root).
        let mut chain: Vec<usize> = Vec::new();
        let mut current = start;
        let base = loop {
            if let Some(level) = levels[current] {
                break Some(level);
            }
            if on_walk[current] {
                let from = chain.iter().position(|&i| i == current).unwrap_or(0);
                return Err(TaxonomyError::Cycle { ids: chain[from..].iter().map(|&i| categories[i].id.clone()).collect() });
            }
            on_walk[current] = true;
            chain.push(current);
            match categories[current].parent {
                Some(parent) => current = parent,
                None => break None,
            }
        };
        let top_level = base.map_or(0, |l| l.saturating_add(1));
        for (level, &i) in (top_level..).zip(chain.iter().rev()) {
            if level > MAX_LEVEL {
                return Err(TaxonomyError::TooDeep { id: categories[i].id.clone() });
            }
            levels[i] = Some(level);
            on_walk[i] = false;
        }
    }
    Ok(levels.into_iter().map(|l| l.unwrap_or(0)).collect())
}

pub(super) fn check_sibling_names(categories: &[Category]) -> Result<(), TaxonomyError> {
    let mut seen: HashMap<(Option<usize>, &str), usize> = HashMap::new();
    for (i, category) in categories.iter().enumerate() {
        if let Some(&other) = seen.get(&(category.parent, category.name_folded.as_str())) {
            return Err(TaxonomyError::DuplicateName {
                id: category.id.clone(),
                other_id: categories[other].id.clone(),
                name: category.name.clone(),
            });
        }
        seen.insert((category.parent, &category.name_folded), i);
    }
    Ok(())
}
