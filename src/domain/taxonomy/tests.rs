use super::*;
use serde_json::json;

/// A small taxonomy, deliberately listed out of order (children before parents) and
/// with names whose order differs from the file order.
fn fixture() -> Taxonomy {
    let doc = json!({"version": 1, "categories": [
        {"id": "aa-2", "name": "Shoes", "parentId": "aa", "attributes": [
            {"key": "shoe_size", "name": "Shoe size", "type": "list", "defaultValue": null},
            {"key": "material", "name": "Material", "type": "list",
             "defaultValue": ["Leather"], "values": ["Leather", "Canvas"]}]},
        {"id": "aa", "name": "Apparel & Accessories", "attributes": [
            {"key": "color", "name": "Color", "type": "list", "defaultValue": null,
             "values": ["Black", "White"]},
            {"key": "material", "name": "Material", "type": "list", "defaultValue": null},
            {"key": "target_gender", "name": "Target gender", "type": "text",
             "defaultValue": "Unisex", "values": ["Female", "Male", "Unisex"]}]},
        {"id": "aa-1", "name": "Clothing", "parentId": "aa"},
        {"id": "aa-2-1", "name": "Sneakers", "parentId": "aa-2", "attributes": [
            {"key": "closure_type", "name": "Closure type", "type": "text"}]},
        {"id": "aa-2-2", "name": "Boots", "parentId": "aa-2", "attributes": [
            {"key": "waterproof", "name": "Waterproof", "type": "boolean",
             "defaultValue": false}]},
        {"id": "aa-2-2-1", "name": "Rain Boots", "parentId": "aa-2-2", "attributes": [
            {"key": "waterproof", "name": "Waterproof", "type": "boolean",
             "defaultValue": true}]},
        {"id": "el", "name": "Electronics", "parentId": null, "attributes": [
            {"key": "warranty_months", "name": "Warranty (months)", "type": "number",
             "defaultValue": 12}]},
        {"id": "el-1", "name": "Audio", "parentId": "el"},
        {"id": "el-1-1", "name": "Wireless Headphones", "parentId": "el-1"},
        {"id": "bt", "name": "Baby & Toddler"}
    ]});
    Taxonomy::from_json(&doc.to_string()).expect("fixture is valid")
}

fn ids<'a>(categories: impl IntoIterator<Item = &'a Category>) -> Vec<&'a str> {
    categories.into_iter().map(|c| c.id.as_str()).collect()
}

fn node_ids<'a>(nodes: &[TreeNode<'a>]) -> Vec<&'a str> {
    nodes.iter().map(|n| n.category.id.as_str()).collect()
}

fn parse_categories(categories: Value) -> Result<Taxonomy, TaxonomyError> {
    Taxonomy::from_json(&json!({"version": 1, "categories": categories}).to_string())
}

fn parse_attribute(attribute: Value) -> Result<Taxonomy, TaxonomyError> {
    parse_categories(json!([{"id": "x", "name": "X", "attributes": [attribute]}]))
}

#[test]
fn starter_parses_with_a_full_catalogue_of_categories() {
    let taxonomy = Taxonomy::starter();
    assert!(taxonomy.len() >= 400, "only {} categories", taxonomy.len());
    let (roots, root_count) =
        taxonomy.list(&ListQuery { parent: ParentFilter::Root, limit: LIST_LIMIT_MAX, ..ListQuery::default() });
    assert!(root_count >= 15, "only {root_count} roots");
    assert!(roots.iter().all(|c| c.level == 0 && c.parent_id.is_none()));
    let (all, total) = taxonomy.list(&ListQuery { limit: usize::MAX, ..ListQuery::default() });
    assert_eq!(total, taxonomy.len());
    assert!(all.iter().any(|c| c.level >= 3));
    // The starter follows the documented id convention: parent id, '-', ordinal.
    for category in &all {
        if let Some(parent) = &category.parent_id {
            let ordinal = category.id.strip_prefix(&format!("{parent}-"));
            assert!(
                ordinal.is_some_and(|n| n.parse::<u32>().is_ok_and(|n| n > 0)),
                "{} does not extend its parent id {parent}",
                category.id
            );
        }
    }
    let apparel = taxonomy.get("aa").expect("apparel root");
    assert_eq!(apparel.name, "Apparel & Accessories");
    let keys: Vec<&str> = taxonomy.attributes("aa", true).expect("known id").iter().map(|a| a.key).collect();
    assert!(keys.contains(&"color") && keys.contains(&"size"));
}

#[test]
fn levels_paths_and_children_are_computed() {
    let taxonomy = fixture();
    let rain = taxonomy.get("aa-2-2-1").expect("rain boots");
    assert_eq!(rain.level, 3);
    assert_eq!(rain.path, "Apparel & Accessories > Shoes > Boots > Rain Boots");
    assert_eq!(rain.parent_id.as_deref(), Some("aa-2-2"));
    let root = taxonomy.get("aa").expect("root");
    assert_eq!((root.level, root.parent_id.as_deref()), (0, None));
    assert_eq!(root.path, "Apparel & Accessories");
    assert_eq!(root.children_count, 2);
    let shoes = taxonomy.get("aa-2").expect("shoes");
    assert_eq!(shoes.level, 1);
    assert_eq!(shoes.children_count, 2);
    assert_eq!(taxonomy.get("bt").map(|c| c.children_count), Some(0));
    assert!(taxonomy.get("nope").is_none());
    assert_eq!(taxonomy.len(), 10);
    assert!(!taxonomy.is_empty());
}

#[test]
fn list_orders_by_level_then_path() {
    let taxonomy = fixture();
    let (page, total) = taxonomy.list(&ListQuery::default());
    assert_eq!(total, 10);
    assert_eq!(
        ids(page),
        [
            "aa", "bt", "el", // level 0, by name
            "aa-1", "aa-2", "el-1", // level 1, by path
            "aa-2-2", "aa-2-1", "el-1-1", // "… > Shoes > Boots" before "… > Shoes > Sneakers"
            "aa-2-2-1",
        ]
    );
}

#[test]
fn list_search_is_a_case_insensitive_substring_of_the_name() {
    let taxonomy = fixture();
    let search = |s: &str| taxonomy.list(&ListQuery { search: Some(s.to_owned()), ..ListQuery::default() });
    let (page, total) = search("BOOTS");
    assert_eq!((ids(page), total), (vec!["aa-2-2", "aa-2-2-1"], 2));
    let (page, total) = search("less head");
    assert_eq!((ids(page), total), (vec!["el-1-1"], 1));
    assert_eq!(search("tablets").1, 0);
    // A blank search is no search.
    assert_eq!(search("  ").1, 10);
}

#[test]
fn list_filters_by_level_and_parent() {
    let taxonomy = fixture();
    let list = |level: Option<usize>, parent: ParentFilter| {
        let (page, total) = taxonomy.list(&ListQuery { level, parent, ..ListQuery::default() });
        (ids(page), total)
    };
    assert_eq!(list(Some(0), ParentFilter::Any), (vec!["aa", "bt", "el"], 3));
    assert_eq!(list(None, ParentFilter::Root), (vec!["aa", "bt", "el"], 3));
    assert_eq!(list(Some(2), ParentFilter::Any).1, 3);
    assert_eq!(list(Some(7), ParentFilter::Any).1, 0);
    assert_eq!(list(None, ParentFilter::Id("aa-2".to_owned())), (vec!["aa-2-2", "aa-2-1"], 2));
    assert_eq!(list(None, ParentFilter::Id("missing".to_owned())).1, 0);
    assert_eq!(list(Some(1), ParentFilter::Root).1, 0);
    assert_eq!(list(None, ParentFilter::Any).1, 10);
}

#[test]
fn list_pagination_keeps_the_total() {
    let taxonomy = fixture();
    let page = |page: usize, limit: usize| {
        let (items, total) = taxonomy.list(&ListQuery { page, limit, ..ListQuery::default() });
        (ids(items), total)
    };
    assert_eq!(page(1, 4), (vec!["aa", "bt", "el", "aa-1"], 10));
    assert_eq!(page(3, 4), (vec!["el-1-1", "aa-2-2-1"], 10));
    assert_eq!(page(4, 4), (vec![], 10));
    assert_eq!(page(0, 2), page(1, 2));
    assert_eq!(page(1, 0), (vec![], 10));
    assert_eq!(page(usize::MAX, usize::MAX), (vec![], 10));
}

#[test]
fn tree_nests_children_down_to_the_requested_depth() {
    let taxonomy = fixture();
    let tree = |children_depth: usize| taxonomy.tree(&TreeQuery { children_depth, ..TreeQuery::default() });
    let (roots, total) = tree(1);
    assert_eq!((node_ids(&roots), total), (vec!["aa", "bt", "el"], 3));
    assert_eq!(node_ids(&roots[0].children), ["aa-1", "aa-2"]);
    assert!(roots[0].children.iter().all(|n| n.children.is_empty()));
    assert_eq!(roots[0].children[1].category.children_count, 2);

    let (roots, _) = tree(3);
    let shoes = &roots[0].children[1];
    assert_eq!(node_ids(&shoes.children), ["aa-2-2", "aa-2-1"]);
    assert_eq!(node_ids(&shoes.children[0].children), ["aa-2-2-1"]);
    let audio = &roots[2].children[0];
    assert_eq!(node_ids(&audio.children), ["el-1-1"]);

    let (roots, _) = tree(0);
    assert!(roots.iter().all(|n| n.children.is_empty()));
}

#[test]
fn tree_top_nodes_follow_parent_search_and_pagination() {
    let taxonomy = fixture();
    let tree = |query: TreeQuery| {
        let (nodes, total) = taxonomy.tree(&query);
        (node_ids(&nodes), total)
    };
    assert_eq!(tree(TreeQuery { parent: ParentFilter::Id("aa".to_owned()), ..TreeQuery::default() }), (vec!["aa-1", "aa-2"], 2));
    // With a search and no parent, matches at every level are top nodes.
    let (nodes, total) = taxonomy.tree(&TreeQuery { search: Some("boots".to_owned()), ..TreeQuery::default() });
    assert_eq!((node_ids(&nodes), total), (vec!["aa-2-2", "aa-2-2-1"], 2));
    assert_eq!(node_ids(&nodes[0].children), ["aa-2-2-1"]);
    assert_eq!(
        tree(TreeQuery { search: Some("boots".to_owned()), parent: ParentFilter::Root, ..TreeQuery::default() }),
        (vec![], 0)
    );
    assert_eq!(tree(TreeQuery { page: 2, limit: 2, ..TreeQuery::default() }), (vec!["el"], 3));
}

#[test]
fn attributes_inherit_with_the_closest_definition_winning() {
    let taxonomy = fixture();
    let shoes = taxonomy.attributes("aa-2", true).expect("known id");
    let summary: Vec<(&str, &str, bool)> = shoes.iter().map(|a| (a.key, a.source_category_id, a.inherited)).collect();
    assert_eq!(
        summary,
        [
            ("color", "aa", true),
            ("material", "aa-2", false), // overridden, keeps the root's position
            ("target_gender", "aa", true),
            ("shoe_size", "aa-2", false),
        ]
    );
    assert_eq!(shoes[1].default_value, &json!(["Leather"]));
    assert_eq!(shoes[1].values, Some(&["Leather".to_owned(), "Canvas".to_owned()][..]));
    assert_eq!(shoes[2].default_value, &json!("Unisex"));

    let rain = taxonomy.attributes("aa-2-2-1", true).expect("known id");
    let waterproof = rain.iter().find(|a| a.key == "waterproof").expect("inherited key");
    assert_eq!((waterproof.source_category_id, waterproof.inherited), ("aa-2-2-1", false));
    assert_eq!(waterproof.default_value, &json!(true));
    assert_eq!(rain.len(), 5);

    let own = taxonomy.attributes("aa-2", false).expect("known id");
    let keys: Vec<&str> = own.iter().map(|a| a.key).collect();
    assert_eq!(keys, ["shoe_size", "material"]);
    assert!(own.iter().all(|a| !a.inherited && a.source_category_id == "aa-2"));

    assert_eq!(taxonomy.attributes("el-1", false), Some(vec![]));
    let audio = taxonomy.attributes("el-1-1", true).expect("known id");
    assert_eq!(audio.len(), 1);
    assert_eq!(audio[0].default_value, &json!(12));
    assert!(taxonomy.attributes("missing", true).is_none());
}

#[test]
fn output_serializes_in_camel_case_without_internals() {
    let taxonomy = fixture();
    let category = serde_json::to_value(taxonomy.get("aa-2").expect("shoes")).expect("json");
    assert_eq!(
        category,
        json!({"id": "aa-2", "name": "Shoes", "parentId": "aa", "level": 1,
               "path": "Apparel & Accessories > Shoes", "childrenCount": 2})
    );
    let (nodes, _) = taxonomy.tree(&TreeQuery { parent: ParentFilter::Id("aa-2-2".to_owned()), ..TreeQuery::default() });
    assert_eq!(
        serde_json::to_value(&nodes).expect("json"),
        json!([{"id": "aa-2-2-1", "name": "Rain Boots", "parentId": "aa-2-2", "level": 3,
                "path": "Apparel & Accessories > Shoes > Boots > Rain Boots",
                "childrenCount": 0, "children": []}])
    );
    let attributes = taxonomy.attributes("aa-2-1", true).expect("known id");
    assert_eq!(
        serde_json::to_value(&attributes[4]).expect("json"),
        json!({"key": "closure_type", "name": "Closure type", "type": "text",
               "defaultValue": null, "values": null, "sourceCategoryId": "aa-2-1",
               "inherited": false})
    );
}

#[test]
fn rejects_documents_of_the_wrong_shape() {
    assert!(matches!(Taxonomy::from_json("[1, 2"), Err(TaxonomyError::Syntax(_))));
    assert!(matches!(Taxonomy::from_json(r#"{"version": 1, "categories": [], "extra": 1}"#), Err(TaxonomyError::Syntax(_))));
    assert_eq!(Taxonomy::from_json(r#"{"version": 2, "categories": []}"#).err(), Some(TaxonomyError::UnsupportedVersion(2)));
    assert_eq!(parse_categories(json!([])).err(), Some(TaxonomyError::Empty));
    let error = parse_categories(json!([
        {"id": "a", "name": "A"},
        {"id": "b", "name": "B", "parent": "a"}
    ]))
    .expect_err("unknown member");
    assert!(matches!(
        &error,
        TaxonomyError::MalformedCategory { index: 1, id: Some(id), .. } if id == "b"
    ));
    assert!(error.to_string().starts_with("category \"b\" (entry 1): unknown field"));
    assert!(matches!(
        parse_categories(json!([{"name": "No id"}])),
        Err(TaxonomyError::MalformedCategory { index: 0, id: None, .. })
    ));
}

#[test]
fn rejects_bad_ids_and_names() {
    for id in ["", "a b", "a/b", "ü", &"x".repeat(65)] {
        assert!(
            matches!(
                parse_categories(json!([{"id": id, "name": "A"}])),
                Err(TaxonomyError::InvalidId { id: found, .. }) if found == id
            ),
            "{id:?} was accepted"
        );
    }
    for name in ["", "  ", " Padded", "Shoes > Boots", &"n".repeat(201)] {
        assert!(
            matches!(
                parse_categories(json!([{"id": "a", "name": name}])),
                Err(TaxonomyError::InvalidName { id, .. }) if id == "a"
            ),
            "{name:?} was accepted"
        );
    }
    assert!(parse_categories(json!([{"id": "A_1-b", "name": "Ünïcode & Co"}])).is_ok());
}

#[test]
fn rejects_duplicate_ids_and_unknown_parents() {
    let error = parse_categories(json!([
        {"id": "a", "name": "A"},
        {"id": "a", "name": "B"}
    ]))
    .expect_err("duplicate");
    assert_eq!(error, TaxonomyError::DuplicateId { id: "a".to_owned() });
    assert_eq!(error.to_string(), "category \"a\": duplicate id");

    let error = parse_categories(json!([{"id": "a", "name": "A", "parentId": "zz"}])).expect_err("unknown parent");
    assert_eq!(error, TaxonomyError::UnknownParent { id: "a".to_owned(), parent_id: "zz".to_owned() });
    assert_eq!(error.to_string(), "category \"a\": unknown parent \"zz\"");
}

#[test]
fn rejects_cycles() {
    let error = parse_categories(json!([
        {"id": "root", "name": "Root"},
        {"id": "a", "name": "A", "parentId": "c"},
        {"id": "b", "name": "B", "parentId": "a"},
        {"id": "c", "name": "C", "parentId": "b"}
    ]))
    .expect_err("cycle");
    assert_eq!(error, TaxonomyError::Cycle { ids: vec!["a".to_owned(), "c".to_owned(), "b".to_owned()] });
    assert_eq!(error.to_string(), "categories form a parent cycle: \"a\" -> \"c\" -> \"b\" -> \"a\"");
    assert_eq!(
        parse_categories(json!([{"id": "s", "name": "S", "parentId": "s"}])).err(),
        Some(TaxonomyError::Cycle { ids: vec!["s".to_owned()] })
    );
    // A chain that leads into a cycle reports the cycle only.
    assert_eq!(
        parse_categories(json!([
            {"id": "leaf", "name": "Leaf", "parentId": "x"},
            {"id": "x", "name": "X", "parentId": "y"},
            {"id": "y", "name": "Y", "parentId": "x"}
        ]))
        .err(),
        Some(TaxonomyError::Cycle { ids: vec!["x".to_owned(), "y".to_owned()] })
    );
}

#[test]
fn rejects_too_deep_chains() {
    let chain = |len: usize| {
        let categories: Vec<Value> = (0..len)
            .map(|i| {
                let parent = i.checked_sub(1).map(|p| format!("c{p}"));
                json!({"id": format!("c{i}"), "name": format!("Level {i}"), "parentId": parent})
            })
            .collect();
        parse_categories(Value::Array(categories))
    };
    let deepest = chain(MAX_LEVEL + 1).expect("MAX_LEVEL is allowed");
    assert_eq!(deepest.get(&format!("c{MAX_LEVEL}")).map(|c| c.level), Some(MAX_LEVEL));
    assert_eq!(chain(MAX_LEVEL + 2).err(), Some(TaxonomyError::TooDeep { id: format!("c{}", MAX_LEVEL + 1) }));
}

#[test]
fn rejects_sibling_names_that_differ_only_in_case() {
    let error = parse_categories(json!([
        {"id": "a", "name": "A"},
        {"id": "a-1", "name": "Boots", "parentId": "a"},
        {"id": "b", "name": "B"},
        {"id": "b-1", "name": "Boots", "parentId": "b"},
        {"id": "a-2", "name": "BOOTS", "parentId": "a"}
    ]))
    .expect_err("duplicate sibling name");
    assert_eq!(
        error,
        TaxonomyError::DuplicateName { id: "a-2".to_owned(), other_id: "a-1".to_owned(), name: "BOOTS".to_owned() }
    );
    assert!(matches!(
        parse_categories(json!([{"id": "a", "name": "A"}, {"id": "b", "name": "a"}])),
        Err(TaxonomyError::DuplicateName { .. })
    ));
}

#[test]
fn rejects_duplicate_attribute_keys_within_one_category() {
    let error = parse_categories(json!([{"id": "a", "name": "A", "attributes": [
        {"key": "color", "name": "Color", "type": "text"},
        {"key": "color", "name": "Colour", "type": "list"}
    ]}]))
    .expect_err("duplicate key");
    assert_eq!(error, TaxonomyError::DuplicateAttribute { category_id: "a".to_owned(), key: "color".to_owned() });
    assert_eq!(error.to_string(), "category \"a\": duplicate attribute key \"color\"");
}

#[test]
fn rejects_attributes_whose_type_default_or_values_do_not_fit() {
    let invalid = [
        json!({"key": "Color", "name": "Color", "type": "text"}),
        json!({"key": "2nd", "name": "Second", "type": "text"}),
        json!({"key": "color", "name": " ", "type": "text"}),
        json!({"key": "color", "name": "Color", "type": "colour"}),
        json!({"key": "weight", "name": "Weight", "type": "number", "defaultValue": "12"}),
        json!({"key": "weight", "name": "Weight", "type": "number", "values": ["1"]}),
        json!({"key": "flag", "name": "Flag", "type": "boolean", "defaultValue": 0}),
        json!({"key": "flag", "name": "Flag", "type": "boolean", "values": ["yes"]}),
        json!({"key": "tone", "name": "Tone", "type": "text", "defaultValue": ["a"]}),
        json!({"key": "tone", "name": "Tone", "type": "text", "defaultValue": "Teal",
               "values": ["Red", "Blue"]}),
        json!({"key": "tone", "name": "Tone", "type": "text", "values": []}),
        json!({"key": "tone", "name": "Tone", "type": "text", "values": ["Red", "Red"]}),
        json!({"key": "tone", "name": "Tone", "type": "text", "values": ["Red", ""]}),
        json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": "a"}),
        json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": [1]}),
        json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": ["a", "a"]}),
        json!({"key": "tags", "name": "Tags", "type": "list", "defaultValue": ["c"],
               "values": ["a", "b"]}),
    ];
    for attribute in invalid {
        let key = attribute["key"].as_str().unwrap_or_default().to_owned();
        match parse_attribute(attribute.clone()) {
            Err(TaxonomyError::InvalidAttribute { category_id, key: found, reason }) => {
                assert_eq!((category_id.as_str(), found), ("x", key));
                assert!(!reason.is_empty());
            }
            other => panic!("{attribute} gave {other:?}"),
        }
    }
    let error = parse_attribute(json!({"key": "weight", "name": "Weight",
                                       "type": "number", "defaultValue": true}))
    .expect_err("bad default");
    assert_eq!(
        error.to_string(),
        "category \"x\": attribute \"weight\": the default value of a number attribute \
         must be a number or null"
    );
    // A mistyped member is a shape error that still names the category.
    assert!(matches!(
        parse_attribute(json!({"key": "k", "name": "K", "type": "text", "values": [1]})),
        Err(TaxonomyError::MalformedCategory { id: Some(id), .. }) if id == "x"
    ));
}

#[test]
fn accepts_every_type_with_fitting_defaults() {
    let valid = [
        json!({"key": "a", "name": "A", "type": "text", "defaultValue": "Red",
               "values": ["Red", "Blue"]}),
        json!({"key": "b", "name": "B", "type": "text", "defaultValue": "anything"}),
        json!({"key": "c_2", "name": "C", "type": "number", "defaultValue": 12.5}),
        json!({"key": "d", "name": "D", "type": "boolean", "defaultValue": false}),
        json!({"key": "e", "name": "E", "type": "list", "defaultValue": ["b", "a"],
               "values": ["a", "b", "c"]}),
        json!({"key": "f", "name": "F", "type": "list", "defaultValue": []}),
        json!({"key": "g", "name": "G", "type": "list", "defaultValue": null}),
        json!({"key": "h", "name": "H", "type": "number"}),
    ];
    for attribute in valid {
        let taxonomy = parse_attribute(attribute.clone()).unwrap_or_else(|e| panic!("{attribute} rejected: {e}"));
        let views = taxonomy.attributes("x", false).expect("known id");
        let expected_default = attribute.get("defaultValue").unwrap_or(&Value::Null);
        assert_eq!(views[0].default_value, expected_default);
    }
}
