//! The documentation held to the code, so it cannot drift: `data-format/README.md` states the
//! format version this build writes and lists exactly the tables a fresh database of each kind
//! has, and every repository file that the docs or a source comment cites exists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use redb::TableHandle;
use shopcell::storage::tables::STORE_TABLES;
use shopcell::storage::{self, DbKind, FORMAT_VERSION};

/// The repository root: the tests read the files the repository ships, wherever it is checked out.
fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("reading {rel}: {e}"))
}

// ---- data-format/README.md against the storage code ----------------------------------------

/// `data-format/README.md` states the version written in exactly one sentence that starts with
/// this phrase, followed by the number and the closing `**`: "Format version written: **2**".
const VERSION_PHRASE: &str = "Format version written: **";

/// The sections listing every table of each kind. In them, a table is a markdown table row whose
/// first cell is its name in backticks (`` | `users` | … ``); other rows (headers, separators) and
/// the rest of the file are not read, so area sections may describe the same tables freely.
const ACCOUNT_SECTION: &str = "## account.redb tables";
const CELL_SECTION: &str = "## cell.redb tables";

#[test]
fn data_format_states_the_version_written() {
    let doc = read("data-format/README.md");
    let stated: Vec<&str> = doc
        .match_indices(VERSION_PHRASE)
        .map(|(at, _)| {
            let rest = &doc[at + VERSION_PHRASE.len()..];
            &rest[..rest.find("**").expect("the stated version ends with **")]
        })
        .collect();
    assert_eq!(
        stated,
        [FORMAT_VERSION.to_string()],
        "data-format/README.md must state the version written once, as \"{VERSION_PHRASE}{FORMAT_VERSION}**\""
    );
}

/// The rows of the markdown tables between `heading` and the next `## ` heading whose first cell
/// is one name in backticks: name → the row's other cells.
fn documented_tables(doc: &str, heading: &str) -> BTreeMap<String, Vec<String>> {
    let start = doc.find(&format!("\n{heading}\n")).unwrap_or_else(|| panic!("data-format/README.md has no section {heading:?}"));
    let body = &doc[start + heading.len() + 2..];
    let body = &body[..body.find("\n## ").unwrap_or(body.len())];
    let mut tables = BTreeMap::new();
    for line in body.lines() {
        let Some(row) = line.trim().strip_prefix('|').and_then(|r| r.strip_suffix('|')) else { continue };
        let mut cells = row.split('|').map(|c| c.trim().to_string());
        let first = cells.next().unwrap_or_default();
        let Some(name) = first.strip_prefix('`').and_then(|n| n.strip_suffix('`')) else { continue };
        if name.is_empty() || name.contains('`') {
            continue;
        }
        let previous = tables.insert(name.to_string(), cells.collect::<Vec<_>>());
        assert!(previous.is_none(), "{heading}: table `{name}` is listed twice");
    }
    tables
}

/// The tables a freshly opened database of `kind` holds.
fn tables_of_fresh(kind: DbKind) -> BTreeSet<String> {
    let dir = tempfile::tempdir().unwrap();
    let db = storage::open(&dir.path().join("fresh.redb"), kind, shopcell::storage::ONE_OFF_CACHE).unwrap();
    storage::table_names(&db).unwrap().into_iter().collect()
}

fn assert_same_tables(heading: &str, documented: &BTreeMap<String, Vec<String>>, actual: &BTreeSet<String>) {
    let documented: BTreeSet<String> = documented.keys().cloned().collect();
    let missing: Vec<_> = actual.difference(&documented).collect();
    let extra: Vec<_> = documented.difference(actual).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "data-format/README.md, {heading:?}: tables not documented {missing:?}; documented tables that do not exist {extra:?}"
    );
}

#[test]
fn data_format_lists_every_table_of_both_kinds() {
    let doc = read("data-format/README.md");

    let account = documented_tables(&doc, ACCOUNT_SECTION);
    assert_same_tables(ACCOUNT_SECTION, &account, &tables_of_fresh(shopcell::account::DATABASE));

    let cell = documented_tables(&doc, CELL_SECTION);
    assert_same_tables(CELL_SECTION, &cell, &tables_of_fresh(shopcell::cells::DATABASE));

    // A store table's number is part of the format (move-log entries record it), so the `#`
    // column must match `STORE_TABLES`; tables local to the cell have none.
    let numbers: BTreeMap<&str, String> = STORE_TABLES.iter().map(|t| (t.def.name(), t.index.to_string())).collect();
    for (name, cells) in &cell {
        let expected = numbers.get(name.as_str()).map_or("—", String::as_str);
        assert_eq!(
            cells.first().map(String::as_str),
            Some(expected),
            "data-format/README.md, {CELL_SECTION:?}: the # of `{name}` must be {expected}"
        );
    }
}

// ---- cited files exist ---------------------------------------------------------------------

/// Citations in `src/` comments of files that do not exist, still to be corrected in those
/// comments: (citing file, cited path). The check below fails on any other missing citation,
/// and on an entry here that no longer cites a missing file, so the list only ever shrinks:
/// delete an entry in the change that fixes its comment.
const SRC_CITATIONS_TO_FIX: &[(&str, &str)] = &[];

/// The design documents beside the repository (`../shared/design/`), which comments cite by bare
/// name (`API.md`: the route table every handler answers by). Not repository paths.
const DESIGN_DOCS: &[&str] = &["API.md", "ARCHITECTURE.md", "LIMITS.md"];

/// The extensions of the files a citation names.
const CITED_EXTENSIONS: &[&str] = &["md", "rs", "toml", "json"];

/// One cited path: where it is cited and what it names.
#[derive(Debug)]
struct Citation {
    file: String,
    line: usize,
    path: String,
}

/// The markdown files whose whole text is checked (code blocks included: the tour's file list is
/// one), relative to the repository root.
fn markdown_files() -> Vec<String> {
    let mut files = vec!["README.md".to_string(), "benches/README.md".to_string(), "data-format/README.md".to_string()];
    for dir in ["docs", "packaging"] {
        files.extend(files_under(dir, false).into_iter().filter(|f| f.ends_with(".md")));
    }
    files
}

/// Files under `dir` (relative to the root), sorted; `deep` descends into subdirectories.
fn files_under(dir: &str, deep: bool) -> Vec<String> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(repo().join(dir)) else { return out };
    for entry in entries {
        let path = entry.unwrap().path();
        let rel = format!("{dir}/{}", path.file_name().unwrap().to_string_lossy());
        if path.is_dir() {
            if deep {
                out.extend(files_under(&rel, true));
            }
        } else {
            out.push(rel);
        }
    }
    out.sort();
    out
}

/// The comments of a Rust file as (line, text): `//` (with `///`, `//!`) and `/* */`, skipping
/// string and character literals, whose contents (paths, URLs) are code, not citations.
fn rust_comments(source: &str) -> Vec<(usize, String)> {
    let chars: Vec<char> = source.chars().collect();
    let mut out: Vec<(usize, String)> = Vec::new();
    let (mut i, mut line) = (0, 1);
    let mut block_depth = 0;
    let push = |out: &mut Vec<(usize, String)>, line: usize, c: char| match out.last_mut() {
        Some((l, text)) if *l == line => text.push(c),
        _ => out.push((line, c.to_string())),
    };
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if c == '\n' {
            line += 1;
            i += 1;
            continue;
        }
        if block_depth > 0 {
            if c == '*' && next == Some('/') {
                block_depth -= 1;
                i += 2;
            } else {
                if c == '/' && next == Some('*') {
                    block_depth += 1;
                }
                push(&mut out, line, c);
                i += 1;
            }
            continue;
        }
        match c {
            '/' if next == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    push(&mut out, line, chars[i]);
                    i += 1;
                }
            }
            '/' if next == Some('*') => {
                block_depth = 1;
                i += 2;
            }
            '"' => i = skip_string(&chars, i + 1, 0, &mut line),
            'r' | 'b' if !chars.get(i.wrapping_sub(1)).is_some_and(|p| p.is_alphanumeric() || *p == '_') => {
                // r"…", r#"…"#, br"…", b"…": a raw string ends at `"` followed by its hashes.
                let mut j = i + 1;
                if c == 'b' && chars.get(j) == Some(&'r') {
                    j += 1;
                }
                let raw = c == 'r' || j > i + 1;
                let hashes = chars[j..].iter().take_while(|h| **h == '#').count();
                if chars.get(j + hashes) == Some(&'"') && (raw || hashes == 0) {
                    i = skip_string(&chars, j + hashes + 1, if raw { hashes + 1 } else { 0 }, &mut line);
                } else {
                    i += 1;
                }
            }
            '\'' => {
                // A character literal ('x', '\n', '\u{…}'), or else a lifetime.
                if next == Some('\\') {
                    // The escaped character itself may be a quote ('\''): the close comes after it.
                    let close = chars.iter().skip(i + 3).position(|c| *c == '\'').map_or(chars.len(), |p| i + 3 + p);
                    i = close + 1;
                } else if chars.get(i + 2) == Some(&'\'') {
                    i += 3;
                } else {
                    i += 1;
                }
            }
            _ => i += 1,
        }
    }
    out
}

/// Skips a string literal whose body starts at `i`; `raw` is 0 for an escaped string, else one
/// more than the raw string's hashes. Answers the index after its closing quote.
fn skip_string(chars: &[char], mut i: usize, raw: usize, line: &mut usize) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\n' => *line += 1,
            '\\' if raw == 0 => i += 1,
            '"' if raw == 0 => return i + 1,
            '"' if chars[i + 1..].iter().take(raw - 1).filter(|h| **h == '#').count() == raw - 1 => return i + raw,
            _ => {}
        }
        i += 1;
    }
    i
}

/// Blanks out URLs (`scheme://…` up to a space, quote, bracket or backtick): their paths are not
/// the repository's.
fn without_urls(text: &str) -> String {
    let mut out: Vec<char> = text.chars().collect();
    let mut from = 0;
    while let Some(at) = out[from..].windows(3).position(|w| w == [':', '/', '/']).map(|p| from + p) {
        let start = (0..at).rev().take_while(|&k| out[k].is_ascii_alphanumeric() || "+.-".contains(out[k])).last().unwrap_or(at);
        let mut end = at;
        while end < out.len() && !out[end].is_whitespace() && !"`'\"()<>[]".contains(out[end]) {
            end += 1;
        }
        out[start..end].iter_mut().for_each(|c| *c = ' ');
        from = end;
    }
    out.into_iter().collect()
}

/// The repository paths `text` cites. A candidate is a run of `A-Z a-z 0-9 _ . / -` naming a file
/// with one of [`CITED_EXTENSIONS`]. Skipped, as not repository paths: absolute paths (HTTP routes
/// such as `/api/v1/openapi.json` among them), anything under `../shared/` and the bare names of
/// [`DESIGN_DOCS`] (the design beside the repository), bare `.rs` and `.json` names (a module named next to its directory in prose, a
/// data file such as `taxonomy.json`), and `.json` paths whose first directory is not one of the
/// repository's (data-directory paths such as `DIR/taxonomy.json`). A placeholder is written in
/// angle brackets (`<data>/account/`, `src/storage/migrations/v<N>.rs`), which ends a candidate,
/// so a pattern is never taken for a citation.
fn citations_in(text: &str) -> Vec<String> {
    let text = without_urls(text);
    let is_path_char = |c: char| c.is_ascii_alphanumeric() || "_./-".contains(c);
    let mut found = Vec::new();
    for run in text.split(|c: char| !is_path_char(c)) {
        let path = run.trim_end_matches('.');
        let name = path.rsplit('/').next().unwrap_or(path);
        let Some((stem, ext)) = name.rsplit_once('.') else { continue };
        if !CITED_EXTENSIONS.contains(&ext) || !stem.starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_') {
            continue;
        }
        if path.starts_with('/') || path.contains("../shared/") || DESIGN_DOCS.contains(&path) {
            continue;
        }
        match path.split_once('/') {
            None if ext == "rs" || ext == "json" => continue,
            Some((first, _)) if ext == "json" && first != "." && first != ".." && !repo().join(first).is_dir() => continue,
            _ => {}
        }
        found.push(path.to_string());
    }
    found
}

/// Every citation of the checked files: the markdown files whole, `src/**/*.rs` in comments.
fn all_citations() -> Vec<Citation> {
    let mut out = Vec::new();
    for file in markdown_files() {
        for (n, text) in read(&file).lines().enumerate() {
            out.extend(citations_in(text).into_iter().map(|path| Citation { file: file.clone(), line: n + 1, path }));
        }
    }
    for file in files_under("src", true).into_iter().filter(|f| f.ends_with(".rs")) {
        for (line, text) in rust_comments(&read(&file)) {
            out.extend(citations_in(&text).into_iter().map(|path| Citation { file: file.clone(), line, path }));
        }
    }
    out
}

/// A cited path exists relative to the repository root or to the citing file's directory (a
/// markdown link such as `[auth.md](auth.md)` in `docs/README.md`).
fn exists(c: &Citation) -> bool {
    let beside: PathBuf = repo().join(&c.file).parent().unwrap().join(&c.path);
    repo().join(&c.path).exists() || beside.exists()
}

#[test]
fn every_cited_file_exists() {
    let missing: Vec<Citation> = all_citations().into_iter().filter(|c| !exists(c)).collect();

    let unexpected: Vec<String> = missing
        .iter()
        .filter(|c| !SRC_CITATIONS_TO_FIX.contains(&(c.file.as_str(), c.path.as_str())))
        .map(|c| format!("{}:{} cites {}", c.file, c.line, c.path))
        .collect();
    assert!(unexpected.is_empty(), "cited files that do not exist:\n{}", unexpected.join("\n"));

    let fixed: Vec<&(&str, &str)> =
        SRC_CITATIONS_TO_FIX.iter().filter(|(file, path)| !missing.iter().any(|c| c.file == *file && c.path == *path)).collect();
    assert!(
        fixed.is_empty(),
        "these citations are fixed (or gone): remove them from SRC_CITATIONS_TO_FIX in tests/api/docs.rs: {fixed:?}"
    );
    assert!(
        SRC_CITATIONS_TO_FIX.iter().all(|(file, _)| file.starts_with("src/")),
        "only src/ comments may wait on the allow-list"
    );
}

/// The checker itself: what counts as a citation and what does not.
#[test]
fn citations_are_found_and_urls_and_data_paths_are_not() {
    let found = citations_in(
        "see `docs-selling.md`, [auth](auth.md#tokens) and src/storage/tables.rs; not \
         https://example.com/x/README.md, /api/v1/openapi.json, ../shared/design/API.md, API.md, \
         DIR/taxonomy.json, completion.rs, meta.json, src/domain/*.rs, src/storage/migrations/v<N>.rs \
         or taxonomy.json.tmp.",
    );
    assert_eq!(found, ["docs-selling.md", "auth.md", "src/storage/tables.rs"]);

    let comments = rust_comments(
        "let url = \"http://x/a.md\"; // see b.md\n/// c.md\nlet r = r#\"d.md \"q\" \"#; let c = '\"';\n/* e.md */ let lt: &'static str = \"f.md\";\n",
    );
    let texts: Vec<(usize, &str)> = comments.iter().map(|(l, t)| (*l, t.trim())).collect();
    assert_eq!(texts, [(1, "// see b.md"), (2, "/// c.md"), (4, "e.md")]);
}
