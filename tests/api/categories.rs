//! The global category taxonomy: list, tree, one category, attributes, limits, and an imported
//! taxonomy served after a restart.

use serde_json::{Value, json};

use crate::support::*;

fn field(a: &Answer) -> &str {
    a.body["error"]["fields"][0]["field"].as_str().unwrap_or("")
}

fn names(b: &Value) -> Vec<&str> {
    b["data"].as_array().expect("data").iter().map(|c| c["name"].as_str().expect("name")).collect()
}

#[tokio::test]
async fn categories_are_listed_with_filters_and_limits() {
    let app = spawn_app().await;
    let c = &app.client;

    // Public: no token. Defaults: 50 per page, the starter taxonomy of several hundred.
    let all = c.get("/api/v1/categories", None).await.expect(200).body;
    let total = all["total"].as_u64().unwrap();
    assert!(total >= 300, "starter taxonomy has {total} categories");
    assert_eq!((all["page"].as_u64(), all["limit"].as_u64()), (Some(1), Some(50)));
    assert_eq!(all["totalPages"].as_u64(), Some(total.div_ceil(50)));
    assert_eq!(all["data"].as_array().unwrap().len(), 50);
    let first = &all["data"][0];
    for key in ["id", "name", "parentId", "level", "path", "childrenCount"] {
        assert!(first.get(key).is_some(), "category without {key}: {first}");
    }

    // Roots: level 0 and parentId=null agree.
    let level0 = c.get("/api/v1/categories?level=0&limit=100", None).await.expect(200).body;
    let roots = c.get("/api/v1/categories?parentId=null&limit=100", None).await.expect(200).body;
    assert_eq!(level0["data"], roots["data"]);
    assert!(level0["data"].as_array().unwrap().iter().all(|c| c["level"] == 0 && c["parentId"].is_null()));
    assert!(roots["total"].as_u64().unwrap() >= 10);

    // Children of one category.
    let apparel = c.get("/api/v1/categories/aa", None).await.expect(200).body;
    assert_eq!(apparel["name"], "Apparel & Accessories");
    assert_eq!(apparel["level"], 0);
    let kids = c.get("/api/v1/categories?parentId=aa&limit=100", None).await.expect(200).body;
    assert_eq!(kids["total"], apparel["childrenCount"]);
    assert!(kids["data"].as_array().unwrap().iter().all(|k| k["parentId"] == "aa" && k["level"] == 1));
    // An unknown parent matches nothing.
    assert_eq!(c.get("/api/v1/categories?parentId=zz-404", None).await.expect(200).body["total"], 0);

    // Search by name, any case, combined with level.
    let shoes = c.get("/api/v1/categories?search=SHOE", None).await.expect(200).body;
    assert!(shoes["total"].as_u64().unwrap() >= 1);
    assert!(names(&shoes).iter().all(|n| n.to_lowercase().contains("shoe")), "{shoes}");
    let deep = c.get("/api/v1/categories?level=2&limit=5&page=2", None).await.expect(200).body;
    assert!(deep["data"].as_array().unwrap().iter().all(|c| c["level"] == 2));
    assert_eq!((deep["page"].as_u64(), deep["limit"].as_u64()), (Some(2), Some(5)));

    for (query, name) in
        [("limit=101", "limit"), ("limit=0", "limit"), ("page=0", "page"), ("level=-1", "level"), ("level=x", "level")]
    {
        let a = c.get(&format!("/api/v1/categories?{query}"), None).await;
        assert_eq!((a.status.as_u16(), a.code(), field(&a)), (400, "VALIDATION_FAILED", name), "{query}: {}", a.body);
    }
    assert_eq!(c.get("/api/v1/categories?limit=100", None).await.expect(200).body["data"].as_array().unwrap().len(), 100);
    let missing = c.get("/api/v1/categories/no-such-category", None).await;
    assert_eq!((missing.status.as_u16(), missing.code()), (404, "NOT_FOUND"));
}

#[tokio::test]
async fn the_tree_nests_children_to_the_requested_depth() {
    let app = spawn_app().await;
    let c = &app.client;

    // Default: roots with their direct children, whose own children are left out.
    let tree = c.get("/api/v1/categories/tree", None).await.expect(200).body;
    let roots = c.get("/api/v1/categories?level=0&limit=100", None).await.expect(200).body;
    assert_eq!(tree["total"], roots["total"]);
    let aa = tree["data"].as_array().unwrap().iter().find(|n| n["id"] == "aa").expect("aa in the tree").clone();
    let children = aa["children"].as_array().unwrap();
    assert_eq!(children.len() as u64, aa["childrenCount"].as_u64().unwrap());
    assert!(children.iter().all(|k| k["children"] == json!([])));
    assert!(children.iter().any(|k| k["childrenCount"].as_u64().unwrap() > 0));

    // Two levels under one parent's children.
    let deeper = c.get("/api/v1/categories/tree?parentId=aa&childrenDepth=2&limit=100", None).await.expect(200).body;
    assert_eq!(deeper["total"], aa["childrenCount"]);
    let with_grandchildren = deeper["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["children"].as_array().unwrap().iter())
        .filter(|n| !n["children"].as_array().unwrap().is_empty())
        .count();
    let expected = deeper["data"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|n| n["children"].as_array().unwrap().iter())
        .filter(|n| n["childrenCount"].as_u64().unwrap() > 0)
        .count();
    assert_eq!(with_grandchildren, expected);
    // childrenDepth=0: the nodes alone; paging over top nodes.
    let flat = c.get("/api/v1/categories/tree?childrenDepth=0&limit=3&page=2", None).await.expect(200).body;
    assert_eq!(flat["data"].as_array().unwrap().len(), 3);
    assert!(flat["data"].as_array().unwrap().iter().all(|n| n["children"] == json!([])));
    assert_eq!((flat["page"].as_u64(), flat["limit"].as_u64()), (Some(2), Some(3)));
    assert_eq!(c.get("/api/v1/categories/tree?childrenDepth=5", None).await.status.as_u16(), 200);

    for (query, name) in [("childrenDepth=6", "childrenDepth"), ("limit=101", "limit"), ("childrenDepth=-1", "childrenDepth")] {
        let a = c.get(&format!("/api/v1/categories/tree?{query}"), None).await;
        assert_eq!((a.status.as_u16(), a.code(), field(&a)), (400, "VALIDATION_FAILED", name), "{query}: {}", a.body);
    }
}

#[tokio::test]
async fn attributes_include_those_inherited_from_ancestors() {
    let app = spawn_app().await;
    let c = &app.client;
    // aa-1-1 (Activewear) defines `activity`; its root `aa` defines color, size and more.
    let own = c.get("/api/v1/categories/aa-1-1/attributes?includeInherited=false", None).await.expect(200).body;
    let own = own.as_array().unwrap();
    assert!(own.iter().all(|a| a["inherited"] == false && a["sourceCategoryId"] == "aa-1-1"), "{own:?}");
    assert!(own.iter().any(|a| a["key"] == "activity"));

    let all = c.get("/api/v1/categories/aa-1-1/attributes", None).await.expect(200).body;
    let all = all.as_array().unwrap();
    let color = all.iter().find(|a| a["key"] == "color").expect("color is inherited");
    assert_eq!((color["inherited"].as_bool(), color["sourceCategoryId"].as_str()), (Some(true), Some("aa")));
    assert_eq!(color["type"], "list");
    assert!(color.get("defaultValue").is_some());
    assert!(all.len() > own.len());
    // Ancestors' attributes come first, the category's own last.
    assert_eq!(all.last().unwrap()["sourceCategoryId"], "aa-1-1");
    assert_eq!(
        c.get("/api/v1/categories/aa-1-1/attributes?includeInherited=true", None)
            .await
            .expect(200)
            .body
            .as_array()
            .unwrap()
            .len(),
        all.len()
    );

    let bad = c.get("/api/v1/categories/aa-1-1/attributes?includeInherited=maybe", None).await;
    assert_eq!((bad.status.as_u16(), field(&bad)), (400, "includeInherited"));
    assert_eq!(c.get("/api/v1/categories/nope/attributes", None).await.code(), "NOT_FOUND");
}

#[tokio::test]
async fn an_imported_taxonomy_is_served_from_the_next_start() {
    let mut app = spawn_app().await;
    let data = app.dir.path().to_path_buf();
    let file = data.join("upload.json");
    let taxonomy = json!({"version": 1, "categories": [
        {"id": "t", "name": "Tools", "parentId": null, "attributes": [
            {"key": "power", "name": "Power source", "type": "text", "defaultValue": "Battery", "values": ["Battery", "Corded"]}]},
        {"id": "t-1", "name": "Drills", "parentId": "t"}
    ]});
    std::fs::write(&file, taxonomy.to_string()).unwrap();

    // A file that does not validate is refused and nothing is written.
    let broken = data.join("broken.json");
    std::fs::write(&broken, r#"{"version": 1, "categories": [{"id": "x", "name": "X", "parentId": "missing"}]}"#).unwrap();
    assert!(shopcell::domain::taxonomy::files::import(&broken, &data).is_err());
    assert!(!data.join("taxonomy.json").exists());

    assert_eq!(shopcell::domain::taxonomy::files::import(&file, &data), Ok(2));
    // Still the starter until restarted.
    assert!(app.client.get("/api/v1/categories", None).await.expect(200).body["total"].as_u64().unwrap() > 2);
    app.stop().await;

    let app2 = spawn_app_in(&data).await;
    let c = &app2.client;
    let list = c.get("/api/v1/categories", None).await.expect(200).body;
    assert_eq!(list["total"], 2);
    assert_eq!(names(&list), ["Tools", "Drills"]);
    let attrs = c.get("/api/v1/categories/t-1/attributes", None).await.expect(200).body;
    assert_eq!(attrs[0]["key"], "power");
    assert_eq!(attrs[0]["defaultValue"], "Battery");
    assert_eq!(attrs[0]["inherited"], true);
}
